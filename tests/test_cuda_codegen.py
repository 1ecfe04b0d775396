"""CUDA backend, emit stage only: kernel and driver source for the GPU shapes of work, checked as
text. Nothing here needs a GPU, the simulator or numba.cuda (one test checks that in a fresh
process), so these run wherever minixla does."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import minixla
from minixla.backends import cuda as cuda_backend
from minixla.backends.cuda import driver, target
from minixla.passes.base import run_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from workloads import WORKLOADS

DEVICE = {"geometry": target.DEVICE}  # the GPU's launch shapes, even when the simulator is on


def program(text: str, optimize: bool = True, **options):
    module = minixla.parse_hlo_module(text)
    if optimize:
        run_pipeline(cuda_backend.pipeline(), module)
    return driver.build_program(module, {**DEVICE, **options})


def kernels_of(prog, kind: str) -> list[str]:
    return [s.source for s in prog.kernels.values() if s.kind == kind]


def test_elementwise_fusion_is_one_grid_stride_kernel():
    prog = program(WORKLOADS["chain 4M"][0])
    (source,) = [s.source for s in prog.kernels.values()]
    assert re.search(
        r"for (lin\d+) in range\(cuda\.grid\(1\), o0\.shape\[0\], "
        r"cuda\.gridsize\(1\)\):",
        source,
    )
    assert "tanh_f32 = h.MATH_F32['tanh']" in source
    # 4M elements: 1024 blocks of 256 threads, each thread looping 16 times.
    assert re.search(r"k0\[1024, 256\]\((p\d, ){4}v\d+\)", prog.source)


def test_row_reductions_are_block_reductions_with_a_shared_memory_tree():
    prog = program(WORKLOADS["softmax 4096x1024"][0])
    assert len(prog.kernels) == 3 and not prog.fallbacks
    (source,) = [s for s in kernels_of(prog, "block") if "o1" in s]
    # A block per row: 256 threads stride over the row, then halve 8 times in shared memory.
    assert re.search(r"for ob\d+ in range\(cuda\.blockIdx\.x, 4096, cuda\.gridDim\.x\):", source)
    assert re.search(r"for r\d+ in range\(tid, 1024, 256\):", source)
    assert "cuda.shared.array(256, np.float32)" in source
    assert source.count("cuda.syncthreads()") == 10
    # exp(x - max), returned beside its sum, is written while reducing (inside the r loop),
    # not recomputed by a second loop.
    assert re.search(r"\n {12}o1\[i\d+, i\d+\] = v\d+\n", source)
    assert "cuda.grid(1)" not in source


def test_column_reductions_give_each_warp_32_adjacent_outputs():
    (source,) = kernels_of(program(WORKLOADS["sum axis0 4096^2"][0]), "block")
    assert "tid % 32" in source and "tid // 32" in source
    assert re.search(r"for r\d+ in range\(ty\d+, 4096, 8\):", source)


def test_transposes_go_through_a_padded_shared_memory_tile():
    prog = program(WORKLOADS["x + x.T 2048^2"][0])
    (source,) = kernels_of(prog, "tile")
    assert "cuda.shared.array((32, 33), np.float32)" in source
    assert source.count("cuda.syncthreads()") == 2
    assert re.search(r"\[k\d+, tx\d+\] = ", source) and re.search(
        r"= tile\d+\[tx\d+, k\d+\]", source
    )


def test_dot_is_a_tiled_matmul_kernel():
    prog = program(WORKLOADS["matmul 1024^2"][0])
    (spec,) = prog.kernels.values()
    assert spec.kind == "matmul" and spec.threads == 256
    assert "cuda.local.array((4, 4), np.float32)" in spec.source
    assert re.search(r"k0\[256, 256\]", prog.source)  # 16 x 16 tiles of 64 x 64


def test_gather_is_computed_on_the_device():
    text = """
    HloModule g
    ENTRY main {
      x = f32[5,3] parameter(0)
      i = s32[4,1] parameter(1)
      ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0},
          start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
    }"""
    prog = program(text)
    assert not prog.fallbacks and "min(max(np.int64(" in next(iter(prog.kernels.values())).source


SCATTER = """
HloModule s
combine {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] COMBINER
}
ENTRY main {
  x = f32[6] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[6] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
}"""


@pytest.mark.parametrize(
    "combiner, how",
    [
        ("add(a, b)", "cuda.atomic.add(o0, "),
        ("maximum(a, b)", "cuda.atomic.cas(o0, "),
        ("multiply(a, b)", None),
        ("add(b, b)", None),
        ("copy(b)", None),
    ],
)
def test_scatter_uses_atomics_only_where_order_does_not_matter(combiner, how):
    prog = program(SCATTER.replace("COMBINER", combiner), optimize=False)
    if how is None:  # float products round differently per order; assignment: last one wins
        assert prog.fallbacks["scatter"] == 1
    else:
        assert not prog.fallbacks and how in kernels_of(prog, "scatter")[0]


def test_ops_without_kernels_are_counted_host_fallbacks():
    text = """
    HloModule s
    lt {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT c = pred[] compare(a, b), direction=LT
    }
    ENTRY main {
      x = f32[5] parameter(0)
      h = f16[5] convert(x)
      m = f16[5] multiply(h, h)
      ROOT s = f32[5] sort(f32[5] convert(m)), dimensions={0}, to_apply=lt
    }"""
    prog = program(text, optimize=False)
    assert prog.fallbacks["sort"] == 1 and prog.fallbacks["multiply"] == 1
    # the shared dispatch says why, as it does for the CPU
    reasons = {instr.opcode: why for instr, why in prog.fallback_reasons}
    assert reasons["sort"] == "no native implementation"
    assert reasons["multiply"] == "element type f16 has no kernel representation"


def test_while_loops_read_their_predicate_on_the_host():
    text = """
    HloModule w
    cond {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
    }
    body {
      s = (s32[], f32[4]) parameter(0)
      i = s32[] get-tuple-element(s), index=0
      v = f32[4] get-tuple-element(s), index=1
      ROOT t = (s32[], f32[4]) tuple(add(i, s32[] constant(1)), add(v, v))
    }
    ENTRY main {
      x = f32[4] parameter(0)
      ROOT w = (s32[], f32[4]) while((s32[], f32[4]) tuple(s32[] constant(0), x)),
          condition=cond, body=body
    }"""
    assert re.search(r"while _truth\(f_\d+\(s\d+\)\):", program(text, optimize=False).source)


def test_emitting_imports_no_numba_cuda():
    code = (
        "import sys, minixla\n"
        "from minixla.backends.cuda import driver\n"
        "m = minixla.parse_hlo_module('HloModule m\\nENTRY e {\\n  x = f32[8] parameter(0)\\n"
        "  ROOT y = f32[8] exponential(x)\\n}')\n"
        "p = driver.build_program(m, {})\n"
        "assert p.kernels and 'numba.cuda' not in sys.modules, sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_unavailable_without_numba_cuda(monkeypatch):
    monkeypatch.setattr(target, "numba_cuda_installed", lambda: False)
    ok, reason = cuda_backend.available()
    assert not ok and "numba-cuda is not installed" in reason and "\n" not in reason


def test_unavailable_without_gpu_or_simulator(monkeypatch):
    monkeypatch.setattr(target, "numba_cuda_installed", lambda: True)
    monkeypatch.setattr(target, "simulating", lambda: False)
    monkeypatch.setattr(target, "gpu_count", lambda: (0, "no NVIDIA driver (libcuda) found"))
    monkeypatch.delitem(sys.modules, "numba.cuda", raising=False)
    ok, reason = cuda_backend.available()
    assert not ok and "NUMBA_ENABLE_CUDASIM=1" in reason and "\n" not in reason
    assert isinstance(minixla.backends.available()["cuda"], (bool, str))


def test_threads_per_block_must_be_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        target.geometry({"threads_per_block": 96})
