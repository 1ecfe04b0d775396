"""The CUDA backend run on numba's CUDA simulator, against the interpreter and the corpus.

numba-cuda picks the simulator once, when numba.cuda is first imported, from
NUMBA_ENABLE_CUDASIM; `cuda_simulator.use_simulator` sets it for that import only (at collection, before any test
runs), so the rest of the suite and its subprocesses do not see it. If numba.cuda was already
imported for a real GPU, these tests skip.

The simulator runs every CUDA thread as a Python thread, so cases are chosen by size:
* the whole conformance corpus (every case is at most a few thousand elements; the largest,
  nn_mlp_loss_grad, takes ~5 s);
* the benchmark workloads (bench/workloads.py) with their dims shrunk to 5..20 and odd sizes,
  so every tile, team and grid-stride loop has a ragged edge;
* one module per dtype holding every elementwise opcode the opcode table allows for it, on
  special values (NaN, +-0, +-inf, integer extremes);
* 60 random graphs from the CPU differential test's generator;
* launch shapes from options (two threads per block, one block) on a few of the above;
* hand-written modules: reductions along any dims, data movement with clamped starts, an
  in-place update in a while loop, device results, custom calls and host fallbacks.
Together about 25 s on two cores. Kernels are generated with the simulator's small geometry
(8 threads per block, 4x4 tiles, 4x4 matmul tiles), which exercises the same code paths as the
GPU's.
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest
from conformance_paths import case_dirs, requires_corpus
from cuda_simulator import use_simulator

import minixla
from minixla.ir.opcodes import OPCODES
from minixla.reference.custom_call import register_custom_call, unregister_custom_call

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))
from workloads import WORKLOADS

use_simulator()

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy scalar overflow


@pytest.fixture(autouse=True, scope="module")
def fast_thread_switches():
    # The simulator polls its threads at every syncthreads; with Python's default 5 ms switch
    # interval each barrier costs milliseconds.
    old = sys.getswitchinterval()
    sys.setswitchinterval(5e-5)
    yield
    sys.setswitchinterval(old)


def run_both(text, *args, **options):
    want = minixla.compile(text, backend="interpreter")(*args)
    exe = minixla.compile(text, backend="cuda", **options)
    return exe(*args), want, exe


def assert_same(got, want, rtol=0.0, atol=0.0):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, rtol, atol)
        return
    assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
        if rtol == 0 and atol == 0:
            np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    else:
        np.testing.assert_array_equal(got, want)


# ---- the conformance corpus ---------------------------------------------------------------------


# Wrong values in about one run of five under the simulator, on main and before: a race in one
# of this program's generated kernels, not yet found. It still runs; a pass is reported.
@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda c: c.name)
def test_conformance_case(case):
    from test_conformance import run_case

    run_case(case, "cuda")


# ---- benchmark workloads, shrunk ----------------------------------------------------------------

SHRINK = {4194304: 300, 1048576: 70, 4096: 20, 2048: 14, 1024: 12, 256: 9, 64: 5, 8: 2}


def shrink(text: str) -> str:
    """The same program on small odd dims (`f32[4096,1024]` -> `f32[20,12]`)."""

    def dims(match):
        return "[" + ",".join(str(SHRINK.get(int(d), d)) for d in match.group(1).split(",")) + "]"

    return re.sub(r"\[(\d+(?:,\d+)*)\]", dims, text)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_benchmark_workload_matches_interpreter(name):
    text = shrink(WORKLOADS[name][0])
    module = minixla.parse_hlo_module(text)
    rng = np.random.default_rng(0)
    args = [
        rng.standard_normal(s.dims).astype(np.float32) for s in module.program_shape().parameters
    ]
    got, want, exe = run_both(text, *args)
    assert_same(got, want, rtol=2e-5, atol=2e-5)
    assert not exe.program.fallbacks


@pytest.mark.parametrize(
    "name", ["softmax 4096x1024", "sum axis0 4096^2", "x + x.T 2048^2", "matmul 1024^2"]
)
def test_any_launch_shape_gives_the_same_results(name):
    text = shrink(WORKLOADS[name][0])
    x = np.random.default_rng(1).standard_normal((20, 20)).astype(np.float32)
    args = [
        x[: s.dims[0], : s.dims[1]].copy()
        for s in minixla.parse_hlo_module(text).program_shape().parameters
    ]
    got, want, _ = run_both(text, *args, threads_per_block=2, max_blocks=1)
    assert_same(got, want, rtol=2e-5, atol=2e-5)


# ---- every elementwise opcode on special values -------------------------------------------------

FLOATS = [np.nan, -0.0, 0.0, 1.5, -2.5, 0.5, -1.0, 3e9, -3e9, np.inf, -np.inf, 1e-30, 2.0, 7.25]
VALUES = {
    "f32": np.array(FLOATS, np.float32),
    "f64": np.array(FLOATS, np.float64),
    "s32": np.array([0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 31, 32, 33, -3, 5, 100, -100], np.int32),
    "u8": np.array([0, 1, 255, 7, 128, 127, 8, 9, 3, 200, 2, 5, 100, 64], np.uint8),
    "pred": np.array([0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0], bool),
}
SKIP = {
    "copy",
    "convert",
    "bitcast-convert",
    "reduce-precision",
    "stochastic-convert",
    "map",
    "real",
    "imag",
    "complex",
    "select",
    "clamp",
    "compare",
}
ELEMENTWISE = sorted(n for n, d in OPCODES.items() if d.kind == "elementwise" and n not in SKIP)
TRANSCENDENTAL = {
    "exponential",
    "exponential-minus-one",
    "log",
    "log-plus-one",
    "logistic",
    "sqrt",
    "rsqrt",
    "cbrt",
    "sine",
    "cosine",
    "tan",
    "tanh",
    "sinh",
    "cosh",
    "asin",
    "acos",
    "atan",
    "asinh",
    "acosh",
    "atanh",
    "erf",
    "power",
    "atan2",
}


def _sweep_module(dtype: str, ops) -> str:
    n = len(VALUES[dtype])
    lines = [f"  a = {dtype}[{n}] parameter(0)", f"  b = {dtype}[{n}] parameter(1)"]
    lines += [
        f"  r{k} = {op}({'a, b' if OPCODES[op].arity == 2 else 'a'})" for k, op in enumerate(ops)
    ]
    roots = ", ".join(f"r{k}" for k in range(len(ops)))
    return "HloModule sweep\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT t = tuple({roots})\n}}"


def _valid_ops(dtype: str) -> list[str]:
    """The opcodes that the shape rules and the interpreter accept for `dtype`."""
    ok = []
    for op in ELEMENTWISE:
        try:
            exe = minixla.compile(_sweep_module(dtype, [op]), backend="interpreter")
            exe(VALUES[dtype], VALUES[dtype])
        except minixla.MinixlaError:
            continue
        ok.append(op)
    return ok


@pytest.mark.parametrize("dtype", list(VALUES))
def test_every_elementwise_opcode_matches_interpreter(dtype):
    ops = _valid_ops(dtype)
    assert len(ops) >= 8
    a = VALUES[dtype]
    got, want, exe = run_both(_sweep_module(dtype, ops), a, np.roll(a, 3), passes=[])
    assert set(exe.program.fallbacks) <= {"mulhi"}  # every other op ran as a kernel
    for op, g, w in zip(ops, got, want):
        tolerance = {"f32": 2e-6, "f64": 1e-14}.get(dtype, 0.0) if op in TRANSCENDENTAL else 0.0
        try:
            assert_same(g, w, rtol=tolerance, atol=1e-30 if tolerance else 0.0)
        except AssertionError as exc:
            raise AssertionError(f"{op} on {dtype}: {exc}") from None


# ---- random graphs ------------------------------------------------------------------------------


def test_random_graphs_match_interpreter():
    hypothesis = pytest.importorskip("hypothesis")
    from test_cpu_differential import graphs

    st = hypothesis.strategies

    @hypothesis.settings(
        max_examples=60,
        deadline=None,
        derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
    )
    @hypothesis.given(graphs(), st.integers(0, 2**16))
    def check(graph, seed):
        text, params = graph
        rng = np.random.default_rng(seed)
        args = [rng.standard_normal(dims).astype(np.float32) for dims in params]
        got, want, _ = run_both(text, *args)
        assert_same(got, want, rtol=1e-4, atol=1e-5)

    check()


# ---- reductions, movement, control flow ---------------------------------------------------------

REDUCTIONS = """
HloModule reductions
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[3,5,7] parameter(0)
  z = f32[] constant(0)
  rows = f32[3,5] reduce(x, z), dimensions={2}, to_apply=add
  columns = f32[3,7] reduce(x, z), dimensions={1}, to_apply=add
  outer = f32[5] reduce(x, z), dimensions={0,2}, to_apply=add
  all = f32[] reduce(x, z), dimensions={0,1,2}, to_apply=add
  spread = f32[3,5] broadcast(all), dimensions={}
  scaled = f32[3,5] multiply(rows, spread)
  ROOT t = (f32[3,5], f32[3,7], f32[5], f32[], f32[3,5]) tuple(rows, columns, outer, all, scaled)
}
"""


@pytest.mark.parametrize("passes", [[], None], ids=["lone-ops", "cpu-pipeline"])
def test_reductions_along_any_dims_match_interpreter(passes):
    x = np.random.default_rng(2).standard_normal((3, 5, 7)).astype(np.float32)
    got, want, _ = run_both(REDUCTIONS, x, passes=passes)
    assert_same(got, want, rtol=1e-5, atol=1e-5)


MOVEMENT = """
HloModule movement
ENTRY main {
  x = f32[4,6] parameter(0)
  i = s32[] parameter(1)
  z = f32[] constant(-1)
  p = f32[7,11] pad(x, z), padding=1_2_0x-1_1_1
  s = f32[2,3] slice(x), slice={[1:3], [0:6:2]}
  r = f32[4,6] reverse(x), dimensions={0,1}
  c = f32[8,6] concatenate(x, r), dimensions={0}
  d = f32[2,3] dynamic-slice(x, i, i), dynamic_slice_sizes={2,3}
  u = f32[4,6] dynamic-update-slice(x, s, i, i)
  t = f32[6,4] transpose(x), dimensions={1,0}
  b = f32[3,4,6] broadcast(x), dimensions={1,2}
  e = f32[0,6] slice(x), slice={[2:2], [0:6]}
  ROOT out = (f32[7,11], f32[2,3], f32[8,6], f32[2,3], f32[4,6], f32[6,4], f32[3,4,6], f32[0,6])
      tuple(p, s, c, d, u, t, b, e)
}
"""


@pytest.mark.parametrize("start", [0, 2, -3, 9])
def test_data_movement_matches_interpreter(start):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    got, want, _ = run_both(MOVEMENT, x, start, passes=[])
    assert_same(got, want)


WHILE = """
HloModule loop
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  w = f32[8] add(v, v)
  one = f32[1] broadcast(f32[] convert(i)), dimensions={}
  u = f32[8] dynamic-update-slice(w, one, i)
  ROOT t = (s32[], f32[8]) tuple(add(i, s32[] constant(1)), u)
}
ENTRY main {
  x = f32[8] parameter(0)
  ROOT w = (s32[], f32[8]) while((s32[], f32[8]) tuple(s32[] constant(0), x)),
      condition=cond, body=body
}
"""


def test_while_with_in_place_update_matches_interpreter():
    x = np.linspace(0, 1, 8).astype(np.float32)
    got, want, exe = run_both(WHILE, x, passes=[])
    assert_same(got, want)
    assert_same(exe(x), want)  # the arena is reused by the second call
    assert any(spec.kind == "window" for spec in exe.program.kernels.values())


SPIN = """
HloModule spin
cond {
  p = s32[] parameter(0)
  ROOT c = pred[] compare(p, s32[] constant(-1)), direction=NE
}
body {
  p = s32[] parameter(0)
  ROOT n = s32[] add(p, s32[] constant(1))
}
ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=body
}
"""


def test_max_while_iterations_stops_a_runaway_loop():
    exe = minixla.compile(SPIN, backend="cuda", max_while_iterations=20)
    with pytest.raises(minixla.ExecutionError, match=r"while %w ran more than 20 iterations"):
        exe(np.int32(0))
    assert exe(np.int32(-15)) == -1  # 14 iterations are within the bound


def test_results_never_alias_each_other_or_the_arena():
    text = """
    HloModule m
    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] add(x, x)
      ROOT t = (f32[4], f32[4], f32[4]) tuple(x, y, negate(y))
    }"""
    exe = minixla.compile(text, backend="cuda", passes=[])
    x = np.ones(4, np.float32)
    first, second = exe(x), exe(x + 1)
    assert first[0] is not x
    np.testing.assert_array_equal(first[1], [2, 2, 2, 2])
    np.testing.assert_array_equal(second[2], [-4, -4, -4, -4])


def test_threads_of_a_block_share_one_shared_array(monkeypatch):
    """Every thread of a block gets the same `cuda.shared.array`, even when the threads all
    reach the declaration together and allocating is slow enough to switch threads."""
    import threading
    import time

    from numba.cuda.simulator.kernelapi import FakeCUDAShared

    real_empty = np.empty

    def slow_empty(*args, **kwargs):
        time.sleep(0.002)
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    shared, start, got = FakeCUDAShared(0), threading.Barrier(8), []

    def thread():
        start.wait()
        got.append(shared.array((4,), np.float32))

    threads = [threading.Thread(target=thread) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len({id(a) for a in got}) == 1


# ---- device arrays, custom calls, fallbacks -----------------------------------------------------


def test_device_results_chain_without_copies():
    from numba import cuda

    text = """
    HloModule m
    ENTRY main {
      x = f32[6] parameter(0)
      ROOT y = f32[6] multiply(x, x)
    }"""
    exe = minixla.compile(text, backend="cuda", device_results=True)
    x = np.arange(6, dtype=np.float32)
    once = exe(x)
    assert hasattr(once, "copy_to_host") and not isinstance(once, np.ndarray)
    twice = exe(once)
    np.testing.assert_array_equal(twice.copy_to_host(), x**4)
    np.testing.assert_array_equal(once.copy_to_host(), x**2)  # inputs are not overwritten
    host = minixla.compile(text, backend="cuda")(cuda.to_device(x))
    assert isinstance(host, np.ndarray)
    with pytest.raises(minixla.MinixlaError, match="does not match"):
        exe(cuda.to_device(np.zeros(5, np.float32)))


def test_custom_call_registered_for_cuda_fills_the_result():
    text = """
    HloModule custom
    ENTRY main {
      x = f32[3] parameter(0)
      ROOT c = f32[3] custom-call(x), custom_call_target="twice"
    }"""
    register_custom_call("twice", "cuda", lambda out, x, backend_config="": x.copy_to_host() * 2)
    try:
        got = minixla.compile(text, backend="cuda")(np.arange(3, dtype=np.float32))
        np.testing.assert_array_equal(got, [0, 2, 4])
    finally:
        unregister_custom_call("twice", "cuda")
    register_custom_call("twice", "cpu", lambda out, x, backend_config="": None)
    try:
        with pytest.raises(minixla.MinixlaError, match="not registered for backend 'cuda'"):
            minixla.compile(text, backend="cuda")
    finally:
        unregister_custom_call("twice", "cpu")


def test_linalg_custom_calls_and_fft_match_interpreter():
    import minixla.numpy as mnp

    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 3)).astype(np.float32)
    b = rng.standard_normal((2, 3, 1)).astype(np.float32)
    spd = a @ a.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)

    def f(a, b, spd):  # tuple-shaped custom calls with backend_config options, HLO cholesky/fft
        return (
            mnp.linalg.solve(a, b),
            *mnp.linalg.svd(a, full_matrices=False),
            *mnp.linalg.slogdet(a),
            mnp.linalg.cholesky(spd),
            mnp.fft.rfft(a),
        )

    want = minixla.jit(f, backend="interpreter")(a, b, spd)
    got = minixla.jit(f, backend="cuda")(a, b, spd)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-5, atol=1e-5)


def test_host_fallbacks_are_reported_in_metrics():
    text = """
    HloModule s
    lt {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT c = pred[] compare(a, b), direction=LT
    }
    ENTRY main {
      x = f32[5] parameter(0)
      ROOT s = f32[5] sort(negate(x)), dimensions={0}, to_apply=lt
    }"""
    before = minixla.metrics().get("fallback.sort", {"count": 0})["count"]
    exe = minixla.compile(text, backend="cuda")
    np.testing.assert_array_equal(exe(np.array([3, 1, 2, 5, 4], np.float32)), [-5, -4, -3, -2, -1])
    assert minixla.metrics()["fallback.sort"]["count"] == before + 1


def test_kernels_only_call_helpers_that_exist():
    """Every `h.<name>` the shared code generator and the CUDA kernel builders can write is
    defined for CUDA kernels, and the math tables cover the emitter's list."""
    from pathlib import Path

    from minixla.backends import codegen, cuda
    from minixla.backends.cuda import helpers, kernels

    names = set()
    for package in (codegen, cuda):
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            names |= set(re.findall(r"\bh\.([a-z_0-9]+)\(", path.read_text()))
    assert names and not [n for n in sorted(names) if not hasattr(helpers, n)]
    assert set(helpers.MATH_F32) == set(helpers.MATH_F64) == kernels.MATH_OPCODES
