"""What the CUDA backend runs on, found without importing numba.cuda.

numba-cuda decides once per process, when `numba.cuda` is first imported, whether it drives a
GPU or its simulator (`NUMBA_ENABLE_CUDASIM=1`, which runs kernels as Python threads on the
CPU). Importing it just to ask would fix that choice for the whole process, so `available()`
answers from `sys.modules`, the environment and the driver library (ctypes) instead.

`Geometry` holds the launch shapes kernels are generated for. They are baked into kernel source
(shared-memory sizes are compile-time constants); the simulator gets tiny ones because it
starts one Python thread per CUDA thread.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from dataclasses import dataclass


def simulating() -> bool:
    """True when numba.cuda is (or will be, once imported) the simulator."""
    if "numba.cuda" in sys.modules:
        return "numba.cuda.simulator_init" in sys.modules
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


def load_numba_cuda():
    """numba.cuda, as the simulator when NUMBA_ENABLE_CUDASIM is set now. numba-cuda reads the
    flag from numba's config, which numba read when it was first imported (the CPU backend may
    have imported it long before), so the config is refreshed first."""
    if "numba.cuda" not in sys.modules:
        from numba.core import config

        config.reload_config()
    from numba import cuda

    if simulating():
        _make_shared_allocation_atomic()
    return cuda


def _make_shared_allocation_atomic():
    """The simulator runs a block's threads concurrently, and each call of
    `cuda.shared.array` looks up the array for its source line, creating it when absent, in two
    steps. Two threads that both find it absent get arrays of their own, and the block's
    barrier then orders nothing between them: results go silently wrong, now and then. One
    `dict.setdefault` makes the lookup atomic (a thread's spare array is dropped)."""
    import numpy as np
    from numba.cuda.simulator import kernelapi

    shared = kernelapi.FakeCUDAShared
    if getattr(shared.array, "minixla_atomic", False):
        return
    original = shared.array

    def array(self, shape, dtype, alignment=None):
        if shape == 0 or alignment is not None:  # dynamic shared memory: one fixed buffer
            return original(self, shape, dtype, alignment)
        if isinstance(dtype, kernelapi.types.Type):
            dtype = kernelapi.numpy_support.as_dtype(dtype)
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        return self._allocations.setdefault(key, np.empty(shape, dtype))

    array.minixla_atomic = True  # type: ignore[attr-defined]
    shared.array = array


def numba_cuda_installed() -> bool:
    return importlib.util.find_spec("numba_cuda") is not None


def gpu_count() -> tuple[int, str]:
    """Number of CUDA devices the driver reports, or (0, why not)."""
    names = (
        ("nvcuda.dll",)
        if sys.platform == "win32"
        else ("libcuda.so.1", "libcuda.so", "libcuda.dylib")
    )
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0, "no NVIDIA driver library (libcuda) found"
    if lib.cuInit(0) != 0:
        return 0, "the CUDA driver failed to initialize (cuInit)"
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value == 0:
        return 0, "the CUDA driver reports no GPU"
    return count.value, ""


def status() -> tuple[bool, str]:
    if not numba_cuda_installed():
        return False, "numba-cuda is not installed (pip install 'minixla[cuda]')"
    if simulating():
        return True, ""
    if "numba.cuda" in sys.modules:
        from numba import cuda

        return (
            (True, "")
            if cuda.is_available()
            else (
                False,
                "numba.cuda finds no usable GPU (NUMBA_ENABLE_CUDASIM=1 runs the simulator)",
            )
        )
    count, why = gpu_count()
    if count == 0:
        return False, f"{why}; set NUMBA_ENABLE_CUDASIM=1 to run on numba's CUDA simulator"
    return True, ""


@dataclass(frozen=True)
class Geometry:
    threads: int  # threads per block (a power of two)
    max_blocks: int  # grid size cap: bigger problems loop (grid-stride)
    tile: int  # transposes: TILE x TILE tiles through shared memory
    tile_rows: int  # ... with TILE x tile_rows threads
    mm_threads: int  # matmul: mm_threads^2 threads per block
    mm_micro: int  # ... each computing mm_micro^2 outputs

    def __post_init__(self):
        for name in ("threads", "tile", "tile_rows", "mm_threads"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"cuda option {name}={value} must be a power of two")


DEVICE = Geometry(threads=256, max_blocks=1024, tile=32, tile_rows=8, mm_threads=16, mm_micro=4)
SIMULATOR = Geometry(threads=8, max_blocks=2, tile=4, tile_rows=2, mm_threads=2, mm_micro=2)


def geometry(options: dict) -> Geometry:
    """Launch shapes: option `geometry` (DEVICE, SIMULATOR or any Geometry), else the one for
    where kernels will run, with `threads_per_block` / `max_blocks` applied."""
    base = options.get("geometry") or (SIMULATOR if simulating() else DEVICE)
    return Geometry(
        threads=int(options.get("threads_per_block", base.threads)),
        max_blocks=int(options.get("max_blocks", base.max_blocks)),
        tile=base.tile,
        tile_rows=base.tile_rows,
        mm_threads=base.mm_threads,
        mm_micro=base.mm_micro,
    )
