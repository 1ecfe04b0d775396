"""Accuracy, special values and vectorization of minixla.backends.cpu.mathlib."""

import math
import re

import numpy as np
import pytest
from numba import njit, prange, typeof

from minixla.backends.cpu import mathlib as M

F32, F64 = np.float32, np.float64
# Reference precision: x86 long double when available (64-bit mantissa).
LD = np.longdouble if np.finfo(np.longdouble).nmant >= 63 else np.float64

# Max ulp error bounds (the documented guarantees).
BOUND_F32 = {
    "exponential": 1.0,
    "exponential-minus-one": 1.5,
    "log": 1.0,
    "log-plus-one": 1.0,
    "tanh": 0.55,
    "logistic": 2.0,
    "sine": 0.51,
    "cosine": 0.51,
    "tan": 0.51,
    "erf": 1.5,
    "power": 0.51,
    "atan2": 0.51,
    "cbrt": 0.51,
    "sqrt": 0.5,
    "rsqrt": 0.51,
}
BOUND_F64 = {
    "exponential": 1.0,
    "exponential-minus-one": 2.0,
    "log": 1.0,
    "log-plus-one": 1.0,
    "tanh": 1.5,
    "logistic": 2.0,
}
BOUND_F64_SLACK = 0.0 if LD is not np.float64 else 1.0  # numpy f64 reference error


def _logistic(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


_erf_vec = np.vectorize(math.erf, otypes=[F64])
REF = {
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "tanh": np.tanh,
    "logistic": _logistic,
    "sine": np.sin,
    "cosine": np.cos,
    "tan": np.tan,
    "erf": lambda x: _erf_vec(x.astype(F64)),
    "cbrt": np.cbrt,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "power": np.power,
    "atan2": np.arctan2,
    "atan": np.arctan,
}
UNARY = [op for op in BOUND_F32 if op not in ("power", "atan2")] + ["atan"]
BOUND_F32["atan"] = 0.51  # not an HLO opcode; mathlib.atan_f32


@njit
def _apply1(f, x, out):
    for i in range(x.size):
        out[i] = f(x[i])


@njit
def _apply2(f, x, y, out):
    for i in range(x.size):
        out[i] = f(x[i], y[i])


def _call(op, fn, args, dt):
    out = np.empty(args[0].shape, dt)
    (_apply1 if len(args) == 1 else _apply2)(fn, *args, out)
    return out


def _reference(op, args):
    with np.errstate(all="ignore"):
        return np.asarray(REF[op](*[a.astype(LD) for a in args]), LD)


def ulp_error(got, ref, dt):
    """Per-element error in ulps of dt; inf where the class (nan/inf) differs."""
    fi = np.finfo(dt)
    with np.errstate(over="ignore"):
        ref_r = ref.astype(dt)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.abs(ref_r).astype(F64))
        e = np.where(ref_r == 0, fi.minexp + 1, e)  # ulp of zero: smallest subnormal
        ulp = np.ldexp(1.0, np.maximum(e - 1, fi.minexp) - fi.nmant)
        err = (np.abs(got.astype(ref.dtype) - ref) / ulp).astype(F64)
    nan_ref, inf_ref = np.isnan(ref_r), np.isinf(ref_r)
    exact = nan_ref | inf_ref
    ok = np.where(nan_ref, np.isnan(got), got == ref_r)
    err = np.where(exact, np.where(ok, 0.0, np.inf), err)
    return np.where(np.isnan(err), np.inf, err)


def _worst(err, args):
    i = int(np.argmax(err))
    return f"max {err[i]:.3f} ulp at {[a[i] for a in args]}"


def _f32_sweep():
    bits = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32)
    return bits.view(F32)


def _specials_f32():
    base = [
        0.0,
        1e-45,
        1.1754942e-38,
        1.1754944e-38,
        3.4028235e38,
        1.0,
        0.5,
        2.0,
        3.0,
        1e-8,
        1e-4,
        0.5625,
        0.6,
        0.75,
        1.5,
        3.9,
        4.0,
        9.0,
        9.01,
        9.02,
        10.0,
        17.0,
        20.0,
        25.0,
        87.33654,
        88.0,
        88.72283,
        88.72284,
        88.7229,
        89.0,
        100.0,
        103.27893,
        103.97208,
        104.0,
        1e6,
        1e10,
        1e30,
        math.pi,
        math.pi / 2,
        math.pi / 4,
        0.41421357,
        2.4142137,
        12867.963,
        16777216.0,
        1e5 * math.pi,
        2.0**100,
        7.0e37,
    ]
    xs = np.array(base, F32)
    with np.errstate(over="ignore"):
        xs = np.concatenate([xs, np.nextafter(xs, F32(np.inf)), np.nextafter(xs, F32(0))])
    xs = np.concatenate([xs, -xs, np.array([np.inf, -np.inf, np.nan, -1.0, -0.999999], F32)])
    return np.unique(xs.view(np.uint32)).view(F32)


@pytest.fixture(scope="module")
def sweep32():
    return np.concatenate([_f32_sweep(), _specials_f32()])


@pytest.mark.parametrize("op", UNARY)
def test_f32_unary_accuracy(op, sweep32):
    fn = M.atan_f32 if op == "atan" else M.MATH_F32[op]
    got = _call(op, fn, (sweep32,), F32)
    err = ulp_error(got, _reference(op, (sweep32,)), F32)
    assert err.max() <= BOUND_F32[op], f"{op}: {_worst(err, (sweep32,))}"


def _binary_inputs32(op):
    rng = np.random.default_rng(1)
    n = 300_000

    def rand():
        return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(F32)

    sp = _specials_f32()
    sx, sy = np.meshgrid(sp, sp)
    xs = [rand(), sx.ravel()]
    ys = [rand(), sy.ravel()]
    if op == "power":  # in-range results, negative bases with integral exponents
        xs += [
            np.exp(rng.uniform(-12, 12, n)).astype(F32),
            -np.exp(rng.uniform(-5, 5, n)).astype(F32),
        ]
        ys += [rng.uniform(-10, 10, n).astype(F32), np.round(rng.uniform(-30, 30, n)).astype(F32)]
    else:
        xs.append(rng.standard_normal(n).astype(F32))
        ys.append(rng.standard_normal(n).astype(F32))
    return np.concatenate(xs), np.concatenate(ys)


@pytest.mark.parametrize("op", ["power", "atan2"])
def test_f32_binary_accuracy(op):
    x, y = _binary_inputs32(op)
    args = (x, y) if op == "power" else (y, x)
    got = _call(op, M.MATH_F32[op], args, F32)
    err = ulp_error(got, _reference(op, args), F32)
    assert err.max() <= BOUND_F32[op], f"{op}: {_worst(err, args)}"


def _inputs64(op):
    rng = np.random.default_rng(2)
    n = 200_000
    parts = [
        rng.integers(0, 2**64, n, dtype=np.uint64).view(F64),
        rng.uniform(-750, 750, n),
        rng.uniform(-40, 40, n),
        rng.uniform(-1, 1, n),
        np.exp(rng.uniform(-700, 700, n)),
        rng.uniform(-1e-3, 1e-3, n),
        np.array(
            [
                0.0,
                -0.0,
                np.inf,
                -np.inf,
                np.nan,
                5e-324,
                2.2250738585072014e-308,
                1.7976931348623157e308,
                709.782712893384,
                709.7827128933841,
                -745.1332191019411,
                -745.2,
                -1.0,
                -0.9999999999999999,
                1e-300,
                0.5,
                19.1,
                -19.1,
                20.0,
                36.0,
                0.2,
                -0.5,
            ]
        ),
    ]
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


@pytest.mark.parametrize("op", sorted(BOUND_F64))
def test_f64_accuracy(op):
    x = _inputs64(op)
    got = _call(op, M.MATH_F64[op], (x,), F64)
    err = ulp_error(got, _reference(op, (x,)), F64)
    assert err.max() <= BOUND_F64[op] + BOUND_F64_SLACK, f"{op}: {_worst(err, (x,))}"


def test_f64_libm_fallbacks_are_correct():
    x = np.array([0.0, -0.0, 0.5, -2.0, 1e300, np.inf, -np.inf, np.nan])
    y = np.array([2.0, 3.0, -1.5, 3.0, 0.5, 0.0, np.inf, 1.0])
    for op in ("sine", "cosine", "tan", "erf", "cbrt", "sqrt", "rsqrt"):
        got = _call(op, M.MATH_F64[op], (x,), F64)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got, _reference(op, (x,)).astype(F64), rtol=1e-15)
    for op in ("power", "atan2"):
        got = _call(op, M.MATH_F64[op], (x, y), F64)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(got, REF[op](x, y), rtol=1e-15)


NAN, INF = float("nan"), float("inf")
EXACT = [  # (op, args, expected), checked bit-exactly (sign of zero included)
    ("exponential", (-INF,), 0.0),
    ("exponential", (INF,), INF),
    ("exponential", (-0.0,), 1.0),
    ("exponential", (1000.0,), INF),
    ("exponential", (-1000.0,), 0.0),
    ("exponential", (NAN,), NAN),
    ("exponential-minus-one", (-0.0,), -0.0),
    ("exponential-minus-one", (-INF,), -1.0),
    ("exponential-minus-one", (INF,), INF),
    ("log", (0.0,), -INF),
    ("log", (-0.0,), -INF),
    ("log", (-1.0,), NAN),
    ("log", (INF,), INF),
    ("log", (-INF,), NAN),
    ("log", (1.0,), 0.0),
    ("log-plus-one", (-1.0,), -INF),
    ("log-plus-one", (-0.0,), -0.0),
    ("log-plus-one", (-2.0,), NAN),
    ("log-plus-one", (INF,), INF),
    ("tanh", (-0.0,), -0.0),
    ("tanh", (INF,), 1.0),
    ("tanh", (-INF,), -1.0),
    ("tanh", (NAN,), NAN),
    ("logistic", (-INF,), 0.0),
    ("logistic", (INF,), 1.0),
    ("logistic", (0.0,), 0.5),
    ("sine", (INF,), NAN),
    ("sine", (-0.0,), -0.0),
    ("cosine", (-INF,), NAN),
    ("tan", (-0.0,), -0.0),
    ("erf", (-0.0,), -0.0),
    ("erf", (INF,), 1.0),
    ("erf", (-INF,), -1.0),
    ("cbrt", (-0.0,), -0.0),
    ("cbrt", (-8.0,), -2.0),
    ("rsqrt", (0.0,), INF),
    ("power", (NAN, 0.0), 1.0),
    ("power", (1.0, NAN), 1.0),
    ("power", (-2.0, 3.0), -8.0),
    ("power", (-2.0, 0.5), NAN),
    ("power", (-0.0, -1.0), -INF),
    ("power", (-0.0, 2.0), 0.0),
    ("power", (-1.0, INF), 1.0),
    ("power", (-INF, 3.0), -INF),
    ("power", (-INF, -3.0), -0.0),
    ("power", (0.5, INF), 0.0),
    ("power", (2.0, -INF), 0.0),
    ("power", (2.0, 1024.0), INF),
    ("atan2", (0.0, -0.0), math.pi),
    ("atan2", (-0.0, 0.0), -0.0),
    ("atan2", (INF, -INF), 3 * math.pi / 4),
    ("atan2", (-1.0, INF), -0.0),
    ("atan2", (1.0, -INF), math.pi),
    ("atan2", (NAN, 1.0), NAN),
]


@pytest.mark.parametrize("dt", [F32, F64])
@pytest.mark.parametrize("op,args,expected", EXACT)
def test_exact_special_values(op, args, expected, dt):
    table = M.MATH_F32 if dt is F32 else M.MATH_F64
    got = _call(op, table[op], tuple(np.array([a], dt) for a in args), dt)[0]
    want = dt(expected)
    if np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == want and np.signbit(got) == np.signbit(want), (op, args, got, want)


def test_tables_cover_opcodes():
    assert set(M.MATH_F32) == set(M.MATH_F64) == set(BOUND_F32) - {"atan"}
    assert M.VECTORIZED_F64 <= set(M.MATH_F64)


_tanh, _exp = M.MATH_F32["tanh"], M.MATH_F32["exponential"]
_HALF = F32(0.5)


@njit(parallel=True, fastmath=True)
def _fused_tanh(x, a, b, c, out):
    for i in prange(x.size):
        out[i] = _tanh(x[i] * a[i] + b[i]) * _HALF + c[i] * c[i]


@njit(fastmath=M.FASTMATH)
def _fused_exp(x, a, out):
    for i in range(x.size):
        out[i] = _exp(x[i] * a[i]) + _exp(-x[i])


def _assert_vectorized(ir_text, libm_names, vector_ops):
    for op in vector_ops:
        assert re.search(rf"{op}[^\n]*<(4|8|16) x float>", ir_text), f"{op} not vectorized"
    for name in libm_names:
        assert not re.search(rf"call[^\n]*@{name}\b", ir_text), f"scalar libm call {name}"
    # mangled minixla...mathlib symbols: the helpers must be inlined, not called
    assert not re.search(r"call[^\n]*@_ZN[^\s(]*7mathlib", ir_text), "mathlib call not inlined"


@njit(fastmath=True)
def _fast_kernel(x, out):
    for i in range(x.size):
        out[i] = _tanh(x[i]) + _exp(x[i])


def test_special_values_survive_fastmath_true_caller():
    # the helpers keep their own flags when inlined into a fastmath=True kernel
    x = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0], F32)
    out = np.empty_like(x)
    _fast_kernel(x, out)
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -1.0
    assert out[3] == 1.0 and abs(out[4] - (np.tanh(1.0) + np.e)) < 1e-6


def _loop_ir(fn, dt, nargs):
    args = tuple(np.ones(16, dt) for _ in range(nargs))
    _call(None, fn, args, dt)
    loop = _apply1 if nargs == 1 else _apply2
    sig = next(s for s in loop.signatures if s[0] == typeof(fn) and s[1].dtype == typeof(dt(0)))
    return loop.inspect_llvm(sig)


@pytest.mark.parametrize("dt", [F32, F64])
def test_every_op_loop_is_inlined_and_vectorized(dt):
    table = M.MATH_F32 if dt is F32 else {k: M.MATH_F64[k] for k in M.VECTORIZED_F64}
    for op, fn in table.items():
        text = _loop_ir(fn, dt, 2 if op in ("power", "atan2") else 1)
        assert "llvm.loop.isvectorized" in text, op
        assert re.search(r"<(2|4|8|16) x (float|double)>", text), op
        assert not re.search(r"call[^\n]*@_ZN[^\s(]*7mathlib", text), f"{op}: call not inlined"
        assert not re.search(
            r"call[^\n]*@(exp|log|tanh|sin|cos|tan|erf|pow|atan2|cbrt)f?\(", text
        ), f"{op}: libm call"


def test_fused_loops_vectorize_and_stay_correct():
    rng = np.random.default_rng(3)
    x, a, b, c = (rng.standard_normal(1003).astype(F32) for _ in range(4))
    x[:3] = [np.nan, np.inf, -np.inf]
    a[:3] = 1
    b[:3] = 0
    out = np.empty_like(x)
    _fused_tanh(x, a, b, c, out)
    want = np.tanh((x * a + b).astype(F64)) * 0.5 + c.astype(F64) ** 2
    np.testing.assert_allclose(out[3:], want[3:], rtol=3e-7, atol=1e-7)
    e = np.empty_like(x)
    _fused_exp(x, a, e)
    assert np.isnan(e[0]) and np.isinf(e[1]) and np.isinf(e[2])
    ir_tanh = "\n".join(_fused_tanh.inspect_llvm().values())
    _assert_vectorized(
        ir_tanh,
        ["tanhf", "expf", "tanh", "exp", "llvm.exp.f32"],
        ["fmul", "fcmp"],
    )
    # tanh clamps in float32 and runs its rational in float64
    for op, element in (("select", "float"), ("fdiv", "double")):
        vector = rf"{op}[^\n]*<(2|4|8) x {element}>"
        assert re.search(vector, ir_tanh), f"{op} not vectorized"
    ir_exp = "\n".join(_fused_exp.inspect_llvm().values())
    _assert_vectorized(ir_exp, ["expf", "exp", "llvm.exp.f32"], ["fmul", "fcmp", "select"])
