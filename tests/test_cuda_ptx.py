"""Generated CUDA kernels compile to PTX for a real GPU (sm_90), checked without one.

The simulator runs kernel source as Python, so it cannot tell whether Numba can compile that
source for a GPU: the device helpers (libdevice calls, overloads) and typing only exist there.
NVVM, CUDA's compiler library, does not need a GPU, so when it is installed (the `nvidia-nvvm`
wheel, or a CUDA toolkit) a fresh process without the simulator compiles the kernels of the
benchmark workloads and of corpus cases chosen to cover every kernel kind and helper. Skipped
when NVVM or NVRTC (the CUDA toolkit's compiler libraries) are missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    "mix_float_b",
    "mix_int_b",
    "convert_int_widths",
    "bitcast_f32_to_s32",
    "rounding_round_afz_f32",
    "special_lgamma",
    "gather_take_rows",
    "reduce_argmin_s32_ties",
    "reduce_variadic_sum_max",
    "dot_s8_to_s32",
    "control_scan_rnn",
    "shape_transpose_3d",
    "shape_pad_reflect",
    "nn_cross_entropy_labels",
    "intdiv_u32",
    "unary_int_popcnt_u8",
    "scatter_max_min",
    "scatter_s32_add",
    "scatter_segment_sum",
    "nn_mlp_loss_grad",
    "window_dilated_sum",
    "window_cummax_reverse",
]

SCRIPT = r"""
import sys
from numba.cuda.cudadrv import nvvm
if not nvvm.is_available():
    sys.exit(77)
import numba.cuda.dispatcher as dispatcher

class Target:
    compute_capability = (9, 0)

# Device functions are compiled for "the current device"; without a GPU, name one.
dispatcher.get_current_device = lambda: Target()
import types
from pathlib import Path
from numba import cuda
try:  # NVVM alone is not enough: Numba also loads NVRTC to compile for a device
    cuda.compile_ptx(lambda a: None, "void(float32[:])", cc=(9, 0))
except Exception as exc:
    if "Failure finding" in str(exc) or "nvrtc" in str(exc).lower():
        sys.exit(77)
    raise
import minixla
from minixla.backends.cuda import driver
from minixla.passes.base import run_pipeline
from minixla.backends.cuda import pipeline as cuda_pipeline
sys.path[:0] = [sys.argv[1] + "/bench", sys.argv[1] + "/tests"]
from workloads import WORKLOADS
from conformance_paths import CASES
texts = [text for text, _, _ in WORKLOADS.values()]
texts += [(CASES / name / "module.hlo").read_text() for name in sys.argv[2:]
          if (CASES / name).is_dir()]
seen, failures = set(), []
for text in texts:
    module = minixla.parse_hlo_module(text)
    run_pipeline(cuda_pipeline(), module)
    for spec in driver.build_program(module, {}).kernels.values():
        if spec.kid in seen:
            continue
        seen.add(spec.kid)
        namespace = types.ModuleType("kernel_" + spec.kid)
        sys.modules[namespace.__name__] = namespace
        exec(compile(spec.source, "<kernel>", "exec"), namespace.__dict__)
        try:
            cuda.compile_ptx(namespace.__dict__[spec.name], spec.numba_signature(), cc=(9, 0))
        except Exception as exc:
            failures.append(f"{spec.kind} kernel: {str(exc).splitlines()[0]}\n{spec.source}")
print(len(seen), "kernels")
if failures:
    sys.exit("\n\n".join(failures))
"""


def test_generated_kernels_compile_to_ptx():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT), *CASES],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode == 77:
        pytest.skip("NVVM/NVRTC (CUDA's compiler libraries) are not installed")
    assert done.returncode == 0, done.stderr[-6000:]
    assert int(done.stdout.split()[0]) >= 30
