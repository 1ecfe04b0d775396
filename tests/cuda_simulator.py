"""Selects numba's CUDA simulator for the cuda test modules.

numba-cuda picks the simulator once, when numba.cuda is first imported, from
NUMBA_ENABLE_CUDASIM; `use_simulator()` sets it for that import only (at collection, before any
test runs), so the rest of the suite and its subprocesses do not see it. A module calling it
skips when numba-cuda is missing or numba.cuda was already imported for a real GPU.
"""

from __future__ import annotations

import os
import sys

import pytest


def use_simulator() -> None:
    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")
    from minixla.backends.cuda.target import load_numba_cuda, simulating

    if "numba.cuda" not in sys.modules:
        saved = os.environ.get("NUMBA_ENABLE_CUDASIM")
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        try:
            load_numba_cuda()
        finally:
            if saved is None:
                del os.environ["NUMBA_ENABLE_CUDASIM"]
            else:
                os.environ["NUMBA_ENABLE_CUDASIM"] = saved
    if not simulating():
        pytest.skip(
            "numba.cuda was imported for a GPU before this module could enable the simulator",
            allow_module_level=True,
        )
