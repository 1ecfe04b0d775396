"""The cpu backend against the conformance corpus and against the interpreter (the oracle).

* every conformance case's module.hlo runs on cpu and matches data.npz (skipped when
  ../shared/conformance is absent);
* XLA's integer and float corner cases, one module per op family, against the interpreter;
* hypothesis-generated random graphs (elementwise, broadcast, reduce, transpose, slice, dot)
  against the interpreter;
* structural checks: custom calls, in-place updates, fallbacks reported in metrics.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.reference.custom_call import register_custom_call, unregister_custom_call

CASES = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "cases"
CASE_DIRS = (
    sorted(p for p in CASES.iterdir() if (p / "module.hlo").exists()) if CASES.exists() else []
)


def cpu(text, **options):
    return minixla.compile(text, backend="cpu", **options)


def interpret(text, *args):
    return minixla.compile(text, backend="interpreter")(*args)


def flatten(value):
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in flatten(v)]
    return [np.asarray(value)]


def assert_close(got, want, rtol=1e-5, atol=1e-6):
    got, want = flatten(got), flatten(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_array_equal(np.isnan(g64), np.isnan(w64))
            finite = ~np.isnan(w64)
            np.testing.assert_allclose(g64[finite], w64[finite], rtol=rtol, atol=atol)


# ---- conformance corpus --------------------------------------------------------------------------


def _load_case(path: Path):
    meta = json.loads((path / "meta.json").read_text())
    with np.load(path / "data.npz") as data:
        args = [data[f"arg{i}"] for i in range(meta["num_args"])]
        outs = [data[f"out{i}"] for i in range(meta["num_outputs"])]
    import ml_dtypes

    args = [
        a.view(ml_dtypes.bfloat16) if f"arg{i}" in meta.get("bf16_args", []) else a
        for i, a in enumerate(args)
    ]
    outs = [
        o.view(ml_dtypes.bfloat16) if f"out{i}" in meta.get("bf16_outs", []) else o
        for i, o in enumerate(outs)
    ]
    return meta, args, outs


@pytest.mark.skipif(not CASE_DIRS, reason="../shared/conformance is not present")
@pytest.mark.parametrize("case", CASE_DIRS, ids=lambda p: p.name)
def test_conformance_case_on_cpu(case: Path):
    meta, args, outs = _load_case(case)
    exe = cpu((case / "module.hlo").read_text())
    got = flatten(exe(*args))
    assert len(got) == len(outs)
    for g, w in zip(got, outs):
        if w.dtype.name == "bfloat16":
            g, w = g.astype(np.float32), w.astype(np.float32)
        assert_close(g, w, rtol=meta["rtol"], atol=meta["atol"])


# ---- XLA corner cases against the interpreter --------------------------------------------------

INT_CORNERS = """
HloModule ints
ENTRY main {
  a = s32[8] parameter(0)
  b = s32[8] parameter(1)
  div = s32[8] divide(a, b)
  rem = s32[8] remainder(a, b)
  shl = s32[8] shift-left(a, b)
  sra = s32[8] shift-right-arithmetic(a, b)
  srl = s32[8] shift-right-logical(a, b)
  abs = s32[8] abs(a)
  neg = s32[8] negate(a)
  pop = s32[8] popcnt(a)
  clz = s32[8] count-leading-zeros(a)
  ua = u32[8] convert(a)
  ub = u32[8] convert(b)
  udiv = u32[8] divide(ua, ub)
  urem = u32[8] remainder(ua, ub)
  c8 = s8[8] convert(a)
  m8 = s8[8] multiply(c8, c8)
  lt = pred[8] compare(ua, ub), direction=LT
  slt = pred[8] compare(a, b), direction=LT, type=SIGNED
  ROOT out = (s32[8], s32[8], s32[8], s32[8], s32[8], s32[8], s32[8], s32[8], s32[8],
              u32[8], u32[8], s8[8], pred[8], pred[8]) tuple(div, rem, shl, sra, srl, abs, neg,
              pop, clz, udiv, urem, m8, lt, slt)
}
"""


def test_integer_corner_cases_match_interpreter():
    int_min = np.iinfo(np.int32).min
    a = np.array([7, -7, int_min, int_min, 5, -1, 3, 0], np.int32)
    b = np.array([0, 2, -1, 0, 33, 31, -2, 32], np.int32)
    assert_close(cpu(INT_CORNERS)(a, b), interpret(INT_CORNERS, a, b))


FLOAT_CORNERS = """
HloModule floats
ENTRY main {
  a = f32[10] parameter(0)
  b = f32[10] parameter(1)
  max = f32[10] maximum(a, b)
  min = f32[10] minimum(a, b)
  afz = f32[10] round-nearest-afz(a)
  even = f32[10] round-nearest-even(a)
  sign = f32[10] sign(a)
  rem = f32[10] remainder(a, b)
  toi = s32[10] convert(a)
  tou = u8[10] convert(a)
  fin = pred[10] is-finite(a)
  ne = pred[10] compare(a, b), direction=NE
  tot = pred[10] compare(a, b), direction=LT, type=TOTALORDER
  bits = s32[10] bitcast-convert(a)
  cl = f32[10] clamp(b, a, b)
  ROOT out = (f32[10], f32[10], f32[10], f32[10], f32[10], f32[10], s32[10], u8[10], pred[10],
              pred[10], pred[10], s32[10], f32[10]) tuple(max, min, afz, even, sign, rem, toi, tou,
              fin, ne, tot, bits, cl)
}
"""


def test_float_corner_cases_match_interpreter():
    nan, inf = np.nan, np.inf
    a = np.array([nan, -0.0, 0.0, 2.5, -2.5, 3e9, -3e9, inf, 0.5, 1.5], np.float32)
    b = np.array([1.0, 0.0, -0.0, nan, 2.0, 1.0, -inf, 2.0, -0.5, 1.5], np.float32)
    assert_close(cpu(FLOAT_CORNERS)(a, b), interpret(FLOAT_CORNERS, a, b), rtol=0, atol=0)


TRANSCENDENTAL = """
HloModule math
ENTRY main {
  a = f32[64] parameter(0)
  e = f32[64] exponential(a)
  l = f32[64] log(a)
  t = f32[64] tanh(a)
  s = f32[64] logistic(a)
  q = f32[64] sqrt(a)
  p = f32[64] power(a, a)
  ROOT out = (f32[64], f32[64], f32[64], f32[64], f32[64], f32[64]) tuple(e, l, t, s, q, p)
}
"""


def test_transcendentals_match_interpreter():
    a = np.concatenate([np.linspace(-20, 20, 60), [np.nan, np.inf, -np.inf, 0.0]])
    a = a.astype(np.float32)
    assert_close(cpu(TRANSCENDENTAL)(a), interpret(TRANSCENDENTAL, a), rtol=2e-6, atol=1e-30)


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
  ROOT out = (f32[7,11], f32[2,3], f32[8,6], f32[2,3], f32[4,6], f32[6,4], f32[3,4,6])
      tuple(p, s, c, d, u, t, b)
}
"""


@pytest.mark.parametrize("start", [0, 2, 7, -3])
def test_data_movement_matches_interpreter(start):
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    i = np.int32(start)
    assert_close(cpu(MOVEMENT)(x, i), interpret(MOVEMENT, x, i))


FUSED = """
HloModule fused
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
fused_softmax {
  x = f32[4,5] parameter(0)
  m = f32[] constant(-inf)
  max = f32[4] reduce(x, m), dimensions={1}, to_apply=max_c
  mb = f32[4,5] broadcast(max), dimensions={0}
  d = f32[4,5] subtract(x, mb)
  e = f32[4,5] exponential(d)
  z = f32[] constant(0)
  s = f32[4] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[4,5] broadcast(s), dimensions={0}
  t = f32[5,4] transpose(e), dimensions={1,0}
  ROOT o = (f32[4,5], f32[5,4], f32[4]) tuple(divide(e, sb), t, s)
}
ENTRY main {
  x = f32[4,5] parameter(0)
  f = (f32[4,5], f32[5,4], f32[4]) fusion(x), kind=kLoop, calls=fused_softmax
  g0 = f32[4,5] get-tuple-element(f), index=0
  g1 = f32[5,4] get-tuple-element(f), index=1
  g2 = f32[4] get-tuple-element(f), index=2
  ROOT r = (f32[4,5], f32[5,4], f32[4]) tuple(g0, g1, g2)
}
"""


def test_multi_output_fusion_with_reductions_is_one_kernel():
    x = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    exe = cpu(FUSED, passes=[])
    assert len(exe.program.kernels) == 1
    assert_close(exe(x), interpret(FUSED, x))


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
  one = f32[1] broadcast(f32[] constant(1)), dimensions={}
  u = f32[8] dynamic-update-slice(add(v, v), one, i)
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
    assert_close(cpu(WHILE, passes=[])(x), interpret(WHILE, x))  # a native loop
    exe = cpu(WHILE, passes=[], native_loops=False)
    assert_close(exe(x), interpret(WHILE, x))
    assert_close(exe(x), interpret(WHILE, x))  # the arena is reused by the second call
    # The Python loop's update writes into add(v, v)'s buffer: out and operand 0 are the same array.
    assert re.search(r"t\d+\((v\d+), \1, ", exe.program.source)


def test_results_never_alias_the_arena_or_arguments():
    text = """
    HloModule m
    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] add(x, x)
      ROOT t = (f32[4], f32[4], f32[4]) tuple(x, y, negate(y))
    }"""
    exe = cpu(text, passes=[])
    x = np.ones(4, np.float32)
    first = exe(x)
    second = exe(x + 1)
    assert first[0] is not x and not np.shares_memory(first[1], second[1])
    np.testing.assert_array_equal(first[1], [2, 2, 2, 2])


# ---- custom calls and fallbacks ------------------------------------------------------------------

CUSTOM = """
HloModule custom
ENTRY main {
  x = f32[3] parameter(0)
  ROOT c = f32[3] custom-call(x), custom_call_target="twice"
}
"""


def test_custom_call_registered_for_cpu_writes_into_the_result_buffer():
    def twice(out, x, backend_config=""):
        np.multiply(x, 2, out=out)

    register_custom_call("twice", "cpu", twice)
    try:
        np.testing.assert_array_equal(cpu(CUSTOM)(np.arange(3, dtype=np.float32)), [0, 2, 4])
    finally:
        unregister_custom_call("twice", "cpu")


def test_custom_call_registered_only_for_interpreter_is_a_compile_error():
    register_custom_call("twice", "interpreter", lambda x, **_: x * 2)
    try:
        with pytest.raises(minixla.MinixlaError, match="not registered for backend 'cpu'"):
            cpu(CUSTOM)
    finally:
        unregister_custom_call("twice", "interpreter")


def test_fallbacks_are_reported_in_metrics():
    text = """
    HloModule s
    ENTRY main {
      x = f16[4] parameter(0)
      ROOT s = f16[4] multiply(x, x)
    }"""
    before = minixla.metrics().get("fallback.multiply", {"count": 0})["count"]
    with pytest.warns(UserWarning, match="multiply %s"):
        exe = cpu(text, passes=[])
    np.testing.assert_array_equal(exe(np.array([3, 1, 2, 5], np.float16)), [9, 1, 4, 25])
    assert minixla.metrics()["fallback.multiply"]["count"] == before + 1


# ---- layouts and the module's buffer assignment -----------------------------------------------


@pytest.mark.parametrize(
    "src,dst",
    [
        ("f32[3,4]{1,0}", "f32[4,3]{0,1}"),
        ("f32[3,4]{0,1}", "f32[4,3]{1,0}"),
        ("f32[2,3,4]{1,2,0}", "f32[2,4,3]{2,1,0}"),
        ("f32[6,4]{0,1}", "f32[4,2,3]{2,1,0}"),
    ],
)
def test_bitcasts_between_layouts_move_elements_like_the_interpreter(src, dst):
    text = f"""
    HloModule b
    ENTRY main {{
      x = {src} parameter(0)
      b = {dst} bitcast(x)
      ROOT t = ({dst}, {dst}) tuple(b, negate(b))
    }}"""
    dims = minixla.parse_hlo_module(text).entry.parameters[0].shape.dims
    x = np.arange(np.prod(dims), dtype=np.float32).reshape(dims)
    assert_close(cpu(text, passes=[])(x), interpret(text, x), rtol=0, atol=0)


SCHEDULED = [
    "float-normalization",
    "algsimp",
    "dce",
    "cse",
    "layout-assignment",
    "fusion",
    "dce",
    "copy-insertion",
    "scheduling",
]


@pytest.mark.parametrize("text", [FUSED, WHILE, MOVEMENT], ids=["fused", "while", "movement"])
def test_buffer_assignment_of_a_scheduled_module_gives_the_same_results(text):
    module = minixla.parse_hlo_module(text)
    rng = np.random.default_rng(1)
    args = [
        rng.standard_normal(p.shape.dims).astype(p.shape.numpy_dtype)
        if p.shape.dtype == "f32"
        else np.asarray(1, p.shape.numpy_dtype)
        for p in module.entry.parameters
    ]
    exe = cpu(text, passes=SCHEDULED)
    assert exe.module.is_scheduled
    assert_close(exe(*args), interpret(text, *args))
    assert_close(exe(*args), interpret(text, *args))


BF16 = """
HloModule b
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY main {
  x = bf16[8,16] parameter(0)
  y = bf16[8,16] parameter(1)
  m = bf16[8,16] multiply(x, y)
  d = bf16[8,16] divide(exponential(m), add(x, y))
  r = bf16[8] reduce(d, bf16[] constant(0)), dimensions={1}, to_apply=add
  ROOT t = (bf16[8,16], bf16[8], f32[8,16], s32[8,16], bf16[8,16])
      tuple(d, r, f32[8,16] convert(d), s32[8,16] convert(m), maximum(x, y))
}
"""


@pytest.mark.parametrize("passes", [[], None], ids=["unoptimized", "cpu-pipeline"])
def test_bf16_kernels_round_like_the_interpreter(passes):
    import ml_dtypes

    rng = np.random.default_rng(0)
    x, y = ((rng.standard_normal((8, 16)) * 3).astype(ml_dtypes.bfloat16) for _ in range(2))
    exe = cpu(BF16, **({} if passes is None else {"passes": passes}))
    got, want = exe(x, y), interpret(BF16, x, y)
    assert not exe.program.fallbacks
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype
        if k == 1:  # a reduction: any order is right, and bf16 rounds at every step
            np.testing.assert_allclose(g.astype(np.float32), w.astype(np.float32), rtol=2e-2)
        else:
            assert_close(g.astype(np.float64), w.astype(np.float64), rtol=0, atol=0)


PARALLEL = """
HloModule parallel
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused_rows {
  x = f32[6,70] parameter(0)
  e = f32[6,70] exponential(x)
  s = f32[6] reduce(e, f32[] constant(0)), dimensions={1}, to_apply=add
  ROOT t = (f32[6], f32[6,70]) tuple(s, e)
}
ENTRY main {
  x = f32[6,70] parameter(0)
  y = f32[70,6] transpose(x), dimensions={1,0}
  c0 = f32[70] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add
  c1 = f32[6] reduce(y, f32[] constant(0)), dimensions={0}, to_apply=add
  rows = (f32[6], f32[6,70]) fusion(x), kind=kInput, calls=fused_rows
  r0 = f32[6] get-tuple-element(rows), index=0
  r1 = f32[6,70] get-tuple-element(rows), index=1
  ROOT t = (f32[70,6], f32[70], f32[6], f32[6], f32[6,70], f32[6,70])
      tuple(y, c0, c1, r0, r1, tanh(x))
}
"""


@pytest.mark.parametrize("parts", [1, 2, 7])
def test_a_large_copy_runs_in_row_blocks_on_the_kernel_threads(parts, monkeypatch):
    from minixla.backends.cpu import blas_threads, thunks

    monkeypatch.setattr(blas_threads, "kernel_threads", lambda work, pooled=False: parts)
    split = []
    monkeypatch.setattr(
        thunks, "run_split", lambda *a: split.append(a[1]) or blas_threads.run_split(*a)
    )
    x = np.arange(2048 * 2049, dtype=np.float32).reshape(2048, 2049)  # 4M elements: SPLIT_WORK
    out = np.empty_like(x)
    module = minixla.parse_hlo_module(
        "HloModule c\nENTRY e {\n  x = f32[2048,2049] parameter(0)\n"
        "  ROOT c = f32[2048,2049] copy(x)\n}"
    )
    thunks.copy(module.entry.root)(out, x)
    assert split == [2.0 * x.size]  # parts of unequal sizes, some rows each
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_threaded_kernels_match_interpreter(parts, monkeypatch):
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "kernel_threads", lambda work, pooled=False: parts)
    x = np.random.default_rng(2).standard_normal((6, 70)).astype(np.float32)
    exe = cpu(PARALLEL, passes=[], parallel_threshold=1)
    # kernels carry no instruction names; the driver's comments say which kernel runs c0, c1
    called = dict(re.findall(r"# (\w+) = .*\n(?:.*\n)*?.*\b(k\d+)[(,]", exe.program.source))
    columns = {called["c0"], called["c1"]}
    for name, spec in exe.program.kernels.items():
        # a column reduction over the outermost dim has no dim worth splitting (loops.py)
        assert spec.parallel != (name in columns), spec.source
    # parts of unequal sizes, some empty (7 parts of 6 rows), each on its own thread
    assert_close(exe(x), interpret(PARALLEL, x), rtol=1e-5)


@pytest.mark.parametrize("dtype", ["u8", "u16", "u32", "u64", "s8", "s16", "s32", "s64"])
@pytest.mark.parametrize("op", ["shift-left", "shift-right-logical", "shift-right-arithmetic"])
def test_shifts_of_every_integer_kind_match_the_interpreter(op, dtype):
    # cpu shifts in the operand's own width; amounts of the width or more (a negative
    # amount is a huge unsigned one) give 0 or the sign fill
    text = (
        f"HloModule m\nENTRY e {{\n  a = {dtype}[7] parameter(0)\n  b = {dtype}[7] parameter(1)\n"
        f"  ROOT s = {dtype}[7] {op}(a, b)\n}}\n"
    )
    np_dtype = minixla.parse_shape(f"{dtype}[]").numpy_dtype
    info = np.iinfo(np_dtype)
    a = np.array([info.max, info.min, 1, 7, info.max // 2 + 1, 0, info.min + 5], np_dtype)
    bits = info.bits
    b = np.array([1, bits - 1, bits, bits + 3, 3, 0, info.max if info.min == 0 else -1], np_dtype)
    want = minixla.compile(text, backend="interpreter")(a, b)
    np.testing.assert_array_equal(minixla.compile(text, backend="cpu")(a, b), want)


# The window starts at row 1, column 3 (the start 4 is clamped so that it fits).
@pytest.mark.parametrize(
    "root, at, value",
    [
        ("ROOT d = f32[4,5] dynamic-update-slice(a, u, i)", (1, 3), -1),
        (
            "d = f32[2,2] dynamic-slice(a, i), dynamic_slice_sizes={2,2}\n"
            "ROOT n = f32[2,2] negate(d)",
            (0, 0),
            -8,
        ),
        ("d = f32[4,5] dynamic-update-slice(a, u, i)\nROOT n = f32[4,5] negate(d)", (2, 4), 1),
    ],
)
def test_legacy_vector_of_dynamic_starts_matches_interpreter(root, at, value):
    text = (
        "HloModule m\nENTRY e {\na = f32[4,5] parameter(0)\nu = f32[2,2] parameter(1)\n"
        f"i = s32[2] parameter(2)\n{root}\n}}\n"
    )
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    u = -np.ones((2, 2), np.float32)
    starts = np.array([1, 4], np.int32)
    want = interpret(text, a, u, starts)
    assert want[at] == value
    assert_close(cpu(text)(a, u, starts), want)


_BF16_ADD = (
    "add {\n a = bf16[] parameter(0)\n b = bf16[] parameter(1)\n ROOT s = bf16[] add(a, b)\n}\n"
)


@pytest.mark.parametrize(
    "root",
    [
        "ROOT r = bf16[] reduce(p, z), dimensions={0,1}, to_apply=add",
        "ROOT r = bf16[4] reduce(p, z), dimensions={1}, to_apply=add",
        "n = bf16[4,300] negate(p)\nROOT r = bf16[4] reduce(n, z), dimensions={1}, to_apply=add",
        "r = bf16[4] reduce(p, z), dimensions={1}, to_apply=add\nROOT n = bf16[4] negate(r)",
    ],
)
def test_bf16_sums_accumulate_in_f32_and_round_once(root):
    import ml_dtypes

    text = (
        f"HloModule m\n{_BF16_ADD}ENTRY e {{\n p = bf16[4,300] parameter(0)\n"
        f" z = bf16[] constant(0)\n {root}\n}}\n"
    )
    x = np.ones((4, 300), ml_dtypes.bfloat16)  # a bf16 running sum would stop at 256
    want = interpret(text, x)
    assert abs(float(np.asarray(want).astype(np.float32).ravel()[0])) in (300, 1200)
    assert_close(cpu(text)(x), want)


IN_PLACE = """HloModule m
ENTRY main {{
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  d = f32[64,64] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  t = f32[64,64] tanh(d)
  m = f32[64,64] multiply(t, {other})
  ROOT e = f32[64,64] dot(m, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


ROW = (
    "f32[64,64] broadcast(f32[64] reshape(f32[1,64] slice(a), slice={[0:1], [0:64]})), "
    "dimensions={1}"
)


@pytest.mark.parametrize("other,arguments", [("d", 1), ("a", 2), (ROW, 2)])
def test_an_in_place_elementwise_kernel_reads_its_output_buffer(other, arguments):
    # buffer assignment gives the fusion d's bytes; the kernel then takes one pointer for
    # both (two pointers to the same bytes make LLVM's overlap check fail: a scalar loop)
    text = IN_PLACE.format(other=other)
    exe = minixla.compile(text, backend="cpu")
    calls = [
        line.strip() for line in exe.program.source.splitlines() if re.match(r"\s*k\d+\(", line)
    ]
    assert len(calls) == 1 and len(ast.parse(calls[0]).body[0].value.args) == arguments, calls
    kernel = next(spec for spec in exe.program.kernels.values() if spec.args[-1][0] == "out")
    assert len(kernel.args) == arguments and kernel.flat == (other != ROW)
    assert re.search(r"def kernel\((p\d+, )?o0\):", kernel.source), kernel.source
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2)]
    want = minixla.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(np.asarray(exe(*args)), np.asarray(want), rtol=1e-4, atol=1e-4)


SPLIT_NESTS = """
HloModule split
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[9,40,5] parameter(0)
  m = f32[9,5] reduce(exponential(x), f32[] constant(0)), dimensions={1}, to_apply=add
  t = f32[9,5,40] transpose(x), dimensions={0,2,1}
  r = f32[9,40] reduce(x, f32[] constant(1)), dimensions={2}, to_apply=add
  ROOT out = (f32[9,5], f32[9,5,40], f32[9,40], f32[9,40,5]) tuple(m, t, r, tanh(x))
}
"""


@pytest.mark.parametrize("parts", [1, 2, 4])
def test_split_kernels_of_every_nest_kind(parts, monkeypatch):
    # a column reduction (its initial values split with it), a tiled transpose, a row
    # reduction and a flat loop, each run in parts on threads
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "kernel_threads", lambda work, pooled=False: parts)
    x = np.random.default_rng(5).standard_normal((9, 40, 5)).astype(np.float32)
    exe = cpu(SPLIT_NESTS, parallel_threshold=1)
    assert sum(spec.parallel for spec in exe.program.kernels.values()) >= 3
    for _ in range(3):  # the worker threads are reused
        assert_close(exe(x), interpret(SPLIT_NESTS, x), rtol=1e-5)
