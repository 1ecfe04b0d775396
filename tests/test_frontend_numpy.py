"""minixla.numpy against NumPy: each case runs the same expression through `jit` (with
minixla.numpy) and through NumPy, on every available backend."""

import numpy as np
import pytest

import minixla
import minixla.backends
import minixla.numpy as mnp

BACKENDS = ["interpreter"] + (["cpu"] if minixla.backends.available().get("cpu") is True else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4)).astype(np.float32)
Y = rng.standard_normal((3, 4)).astype(np.float32)
ROW = rng.standard_normal((4,)).astype(np.float32)
COL = rng.standard_normal((3, 1)).astype(np.float32)
POS = (np.abs(X) + 0.5).astype(np.float32)
UNIT = np.clip(X / 3, -0.9, 0.9).astype(np.float32)
I = rng.integers(-7, 8, (3, 4)).astype(np.int32)
J = rng.integers(-5, 6, (3, 4)).astype(np.int32)
J[J == 0] = 3  # no division by zero: NumPy and HLO disagree there
U = rng.integers(0, 50, (3, 4)).astype(np.uint32)
B = X > 0
C = np.array([[1.5, -1.5, 2.5], [0.5, -0.5, -2.5]], np.float32)
A3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
M43 = rng.standard_normal((4, 3)).astype(np.float32)
B234 = rng.standard_normal((2, 4, 3)).astype(np.float32)
NANS = np.array([1.0, np.nan, -2.0, 3.0, np.nan], np.float32)


def case(name, make, *args, **kw):
    return pytest.param(make, args, kw, id=name)


ELEMENTWISE = [
    case("add", lambda m: lambda a, b: a + b, X, Y),
    case("add_broadcast_row", lambda m: lambda a, b: a + b, X, ROW),
    case("add_broadcast_col_row", lambda m: lambda a, b: a + b, COL, ROW),
    case("sub", lambda m: lambda a, b: a - b, X, Y),
    case("rsub_scalar", lambda m: lambda a: 2.5 - a, X),
    case("mul", lambda m: lambda a, b: a * b, X, COL),
    case("truediv", lambda m: lambda a, b: a / b, X, POS),
    case("int_truediv", lambda m: lambda a, b: a / b, I, J),
    case("floordiv_float", lambda m: lambda a, b: a // b, X * 5, POS),
    case("floordiv_int", lambda m: lambda a, b: a // b, I, J),
    case("mod_float", lambda m: lambda a, b: a % b, X * 5, -POS),
    case("mod_int", lambda m: lambda a, b: a % b, I, J),
    case("pow", lambda m: lambda a, b: a**b, POS, Y),
    case("pow_scalar", lambda m: lambda a: a**2, X),
    case("int_pow", lambda m: lambda a: (a**3, a**0, m.power(a, 1)), I),
    case("int_pow_array", lambda m: lambda a, b: a**b, I, np.abs(J)),
    case("negative_static_pow", lambda m: lambda a: a**-2, POS),
    case("matmul_op", lambda m: lambda a, b: a @ b, X, M43),
    case("neg", lambda m: lambda a: -a, X),
    case("abs", lambda m: lambda a, b: (abs(a), m.abs(b), m.absolute(b), +b, m.positive(a)), I, X),
    case("invert_int", lambda m: lambda a: ~a, I),
    case("invert_bool", lambda m: lambda a: ~a, B),
    case("and_or_xor", lambda m: lambda a, b: (a & b) | (a ^ 3), I, J),
    case("bool_ops", lambda m: lambda a, b: (a & b, a | b, a ^ b), B, Y > 0),
    case("shifts", lambda m: lambda a: (a << 2, a >> 1), I),
    case("unsigned_shift", lambda m: lambda a: a >> 2, U),
    case("compare", lambda m: lambda a, b: (a < b, a <= b, a > b, a >= b, a == b, a != b), I, J),
    case("maximum_minimum", lambda m: lambda a, b: (m.maximum(a, b), m.minimum(a, b)), X, Y),
    case("where", lambda m: lambda c, a, b: m.where(c, a, b), B, X, ROW),
    case("where_scalar", lambda m: lambda a: m.where(a > 0, a, 0.0), X),
    case("clip", lambda m: lambda a: m.clip(a, -0.5, 0.5), X),
    case("sign", lambda m: lambda a, b: (m.sign(a), m.sign(b)), X, I),
    case("floor_ceil", lambda m: lambda a: (m.floor(a * 3), m.ceil(a * 3)), X),
    case("round_rint", lambda m: lambda a: (m.round(a), m.rint(a)), C),
    case("trunc", lambda m: lambda a: m.trunc(a), C),
    case("exp_log", lambda m: lambda a, b: (m.exp(a), m.log(b)), X, POS),
    case("log1p_expm1", lambda m: lambda a, b: (m.log1p(b), m.expm1(a)), X, POS),
    case("log2_log10_exp2", lambda m: lambda a: (m.log2(a), m.log10(a), m.exp2(a)), POS),
    case("sqrt_cbrt", lambda m: lambda a, b: (m.sqrt(b), m.cbrt(a)), X, POS),
    case("square_reciprocal", lambda m: lambda a: (m.square(a), m.reciprocal(a)), POS),
    case("trig", lambda m: lambda a: (m.sin(a), m.cos(a), m.tan(a)), X),
    case("hyperbolic", lambda m: lambda a: (m.tanh(a), m.sinh(a), m.cosh(a)), X),
    case("inverse_trig", lambda m: lambda a: (m.arcsin(a), m.arccos(a), m.arctan(a)), UNIT),
    case(
        "inverse_hyperbolic",
        lambda m: lambda a, b: (m.arcsinh(a), m.arccosh(b + 1), m.arctanh(a / 2)),
        UNIT,
        POS,
    ),
    case("arctan2", lambda m: lambda a, b: m.arctan2(a, b), X, Y),
    case("exp_of_int", lambda m: lambda a: m.exp(a), I),
    case("nan_predicates", lambda m: lambda a: (m.isnan(a), m.isfinite(a), m.isinf(a / 0.0)), NANS),
    case(
        "logical",
        lambda m: (
            lambda a, b: (
                m.logical_and(a, b),
                m.logical_or(a, b),
                m.logical_xor(a, b),
                m.logical_not(a),
            )
        ),
        X,
        I,
    ),
    case(
        "astype",
        lambda m: lambda a: (a.astype(m.int32), a.astype(bool), a.astype(m.float16)),
        X * 3,
    ),
    case("astype_from_bool", lambda m: lambda a: a.astype(m.float32) * 2, B),
]

REDUCTIONS = [
    case("sum_all", lambda m: lambda a: m.sum(a), X),
    case("sum_axis", lambda m: lambda a: (a.sum(0), a.sum(axis=-1, keepdims=True)), X),
    case("sum_axes", lambda m: lambda a: m.sum(a, axis=(0, 2)), A3),
    case("sum_int", lambda m: lambda a: m.sum(a, axis=1), I),
    case("sum_bool", lambda m: lambda a: m.sum(a), B),
    case("mean", lambda m: lambda a: (m.mean(a), m.mean(a, axis=1, keepdims=True)), A3),
    case("mean_int", lambda m: lambda a: m.mean(a, axis=0), I),
    case("max_min", lambda m: lambda a: (m.max(a, axis=0), m.min(a), a.max(1, keepdims=True)), X),
    case("max_int", lambda m: lambda a: (m.max(a), m.min(a, axis=1)), I),
    case("max_nan", lambda m: lambda a: m.max(a), NANS),
    case("prod", lambda m: lambda a: (m.prod(a, axis=1), m.prod(a)), POS),
    case(
        "argmax_argmin",
        lambda m: lambda a: (m.argmax(a), m.argmin(a, axis=1), m.argmax(a, axis=0)),
        X,
    ),
    case(
        "argmax_ties",
        lambda m: lambda a: (m.argmax(a, axis=1), m.argmin(a, axis=0)),
        np.array([[1, 3, 3], [2, 2, 0]], np.int32),
    ),
    case("argmax_nan", lambda m: lambda a: (m.argmax(a), m.argmin(a)), NANS),
    case("any_all", lambda m: lambda a: (m.any(a, axis=0), m.all(a, axis=1), m.any(a)), B),
    case("var_std", lambda m: lambda a: (m.var(a), m.std(a, axis=0), m.var(a, axis=1, ddof=1)), X),
    case("count_nonzero", lambda m: lambda a: m.count_nonzero(a, axis=0), I),
    case("cumsum", lambda m: lambda a: (m.cumsum(a, axis=1), m.cumsum(a)), X),
    case("cumsum_int", lambda m: lambda a: m.cumsum(a, axis=0), I),
    case("cumprod", lambda m: lambda a: m.cumprod(a, axis=1), POS),
    case(
        "cummax_cummin",
        lambda m: (
            lambda a: (
                (m.maximum.accumulate(a, axis=1), m.minimum.accumulate(a, axis=0))
                if m is np
                else (m.cummax(a, axis=1), m.cummin(a, axis=0))
            )
        ),
        X,
    ),
    case(
        "amax_amin_dtype",
        lambda m: lambda a: (m.amax(a, axis=1), m.amin(a, axis=(0, 1)), m.sum(a, dtype=m.float32)),
        I,
    ),
    case("sort", lambda m: lambda a: (m.sort(a), m.sort(a, axis=0)), X),
    case("sort_nan", lambda m: lambda a: m.sort(a), NANS),
    case("argsort", lambda m: lambda a: (m.argsort(a), m.argsort(a, axis=0)), I),
    case(
        "argsort_stable", lambda m: lambda a: m.argsort(a), np.array([3, 1, 3, 1, 2, 3], np.int32)
    ),
]

PRODUCTS = [
    case("matmul_2d", lambda m: lambda a, b: m.matmul(a, b), X, M43),
    case("matmul_vec", lambda m: lambda a, b: (m.matmul(a, b), m.matmul(b, a.T)), X, ROW),
    case("matmul_batched", lambda m: lambda a, b: a @ b, A3, B234),
    case("matmul_broadcast", lambda m: lambda a, b: a @ b, A3, M43),
    case("dot", lambda m: lambda a, b: (m.dot(a, b), m.dot(ROW, ROW), m.dot(a, 2.0)), X, M43),
    case("dot_nd", lambda m: lambda a, b: m.dot(a, b), A3, B234),
    case("matmul_int", lambda m: lambda a, b: a @ b.T, I, J),
    case("outer_inner", lambda m: lambda a, b: (m.outer(a, b), m.inner(a, b)), ROW, ROW),
    case("vdot", lambda m: lambda a, b: m.vdot(a, b), X, Y),
    case(
        "tensordot",
        lambda m: lambda a, b: (m.tensordot(a, M43, 1), m.tensordot(a, b, ([1, 2], [2, 1]))),
        A3,
        B234,
    ),
    case("einsum_matmul", lambda m: lambda a, b: m.einsum("ij,jk->ik", a, b), X, M43),
    case("einsum_batch", lambda m: lambda a, b: m.einsum("bij,bjk->bik", a, b), A3, B234),
    case("einsum_implicit", lambda m: lambda a, b: m.einsum("ij,kj", a, b), X, Y),
    case(
        "einsum_reduce_transpose",
        lambda m: lambda a: (m.einsum("ijk->kj", a), m.einsum("ijk", a)),
        A3,
    ),
    case(
        "einsum_trace_diag",
        lambda m: lambda a: (m.einsum("ii", a), m.einsum("ii->i", a)),
        X[:, :3].copy(),
    ),
    case(
        "einsum_three",
        lambda m: lambda a, b, c: m.einsum("ij,jk,k->i", a, b, c),
        X,
        M43,
        ROW[:3].copy(),
    ),
    case("einsum_ellipsis", lambda m: lambda a, b: m.einsum("...ij,...jk->...ik", a, b), A3, B234),
]

SHAPES = [
    case(
        "reshape",
        lambda m: lambda a: (a.reshape(4, 3), m.reshape(a, (-1,)), a.reshape((2, -1, 2))),
        X,
    ),
    case(
        "transpose", lambda m: lambda a: (a.T, m.transpose(a, (1, 2, 0)), a.transpose(2, 0, 1)), A3
    ),
    case("swapaxes_moveaxis", lambda m: lambda a: (m.swapaxes(a, 0, 2), m.moveaxis(a, 0, -1)), A3),
    case(
        "expand_squeeze",
        lambda m: (
            lambda a: (
                m.expand_dims(a, 1),
                m.expand_dims(a, (0, -1)),
                m.squeeze(m.expand_dims(a, 0)),
                m.squeeze(COL, axis=1),
            )
        ),
        X,
    ),
    case("broadcast_to", lambda m: lambda a: m.broadcast_to(a, (2, 3, 4)), COL),
    case("broadcast_arrays", lambda m: lambda a, b: tuple(m.broadcast_arrays(a, b)), COL, ROW),
    case("atleast_1d", lambda m: lambda a: (m.atleast_1d(a[0, 0]), m.atleast_1d(a)), X),
    case(
        "concatenate",
        lambda m: (
            lambda a, b: (
                m.concatenate([a, b]),
                m.concatenate([a, b, a], axis=1),
                m.concatenate([a, b], axis=None),
            )
        ),
        X,
        Y,
    ),
    case("stack", lambda m: lambda a, b: (m.stack([a, b]), m.stack([a, b], axis=-1)), X, Y),
    case(
        "hstack_vstack",
        lambda m: lambda a, b: (m.hstack([a, b]), m.vstack([a, b]), m.vstack([ROW, ROW])),
        X,
        Y,
    ),
    case(
        "pad",
        lambda m: (
            lambda a: (
                m.pad(a, 1),
                m.pad(a, ((0, 1), (2, 0)), constant_values=7),
                m.pad(a, ((1, 2), (2, 1)), mode="edge"),
                m.pad(a, ((2, 2), (3, 1)), mode="reflect"),
            )
        ),
        X,
    ),
    case("flip", lambda m: lambda a: (m.flip(a), m.flip(a, 1), m.fliplr(a[0]), m.flipud(a)), A3),
    case(
        "roll",
        lambda m: lambda a: (m.roll(a, 1), m.roll(a, -2, axis=1), m.roll(a, (1, 5), axis=(0, 1))),
        X,
    ),
    case("split", lambda m: lambda a: (m.split(a, 2, axis=1), m.split(a, [1, 2])), X),
    case(
        "tile_repeat",
        lambda m: (
            lambda a: (m.tile(a, 2), m.tile(a, (2, 1, 2)), m.repeat(a, 2, axis=0), m.repeat(a, 3))
        ),
        X,
    ),
    case("ravel", lambda m: lambda a: (m.ravel(a), a.flatten()), A3),
    case(
        "take",
        lambda m: lambda a: (m.take(a, np.array([2, 0, 2])), m.take(a, np.array([3, 1]), axis=1)),
        X,
    ),
]

CREATION = [
    case(
        "zeros_ones_full",
        lambda m: (
            lambda: (
                m.zeros((2, 3)),
                m.ones(4, m.int32),
                m.full((2, 2), 7.5),
                m.full(3, 2, m.uint8),
            )
        ),
    ),
    case(
        "like",
        lambda m: lambda a: (m.zeros_like(a), m.ones_like(a, dtype=m.int32), m.full_like(a, 3)),
        I,
    ),
    case(
        "arange",
        lambda m: (
            lambda: (
                m.arange(5),
                m.arange(2, 11, 3),
                m.arange(0.0, 1.0, 0.25),
                m.arange(5, dtype=m.float32),
                m.arange(10, 0, -3),
            )
        ),
    ),
    case(
        "linspace",
        lambda m: (
            lambda: (m.linspace(0, 1, 5), m.linspace(-1, 1, 4, endpoint=False).astype(m.float32))
        ),
    ),
    case(
        "eye",
        lambda m: lambda: (m.eye(3), m.eye(2, 4, k=1), m.eye(3, dtype=m.int32), m.identity(2)),
    ),
]


def _close(got, want, rtol, atol):
    got_leaves = got if isinstance(got, (tuple, list)) else [got]
    want_leaves = want if isinstance(want, (tuple, list)) else [want]
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype.kind == w.dtype.kind or (g.dtype.kind in "iu" and w.dtype.kind in "iu"), (
            g.dtype,
            w.dtype,
        )
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w.astype(g.dtype), rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("make,args,kw", ELEMENTWISE + REDUCTIONS + PRODUCTS + SHAPES + CREATION)
def test_matches_numpy(make, args, kw, backend):
    got = minixla.jit(make(mnp), backend=backend)(*args)
    with np.errstate(all="ignore"):
        want = make(np)(*args)
    _close(got, want, kw.get("rtol", 2e-5), kw.get("atol", 2e-5))


def test_eager_calls_outside_jit_return_numpy_arrays():
    out = mnp.exp(X)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32
    np.testing.assert_allclose(out, np.exp(X), rtol=1e-6)
    np.testing.assert_array_equal(mnp.arange(4), np.arange(4))
    assert mnp.zeros((2, 2)).dtype == np.float32


# -- promotion (docs/frontend.md) ------------------------------------------------------------
def _dtype(fn, *args):
    return minixla.jit(fn).lower(*args).module.entry.root.shape.dtype


@pytest.mark.parametrize(
    "fn,args,want",
    [
        (lambda a: a + 1, (X,), "f32"),
        (lambda a: a * 2.5, (X.astype(np.float16),), "f16"),
        (lambda a: a + 1, (I.astype(np.int8),), "s8"),
        (lambda a: a + 1.5, (I,), "f32"),
        (lambda a, b: a + b, (I.astype(np.int8), U.astype(np.uint8)), "s16"),
        (lambda a, b: a + b, (I, X.astype(np.float16)), "f16"),
        (lambda a, b: a + b, (X.astype(np.float16), X.astype(minixla.numpy.bfloat16)), "f32"),
        (lambda a, b: a + b, (B, I.astype(np.int16)), "s16"),
        (lambda a: a / 2, (I,), "f32"),
        (lambda a, b: a + b, (2, 3.5), "f32"),
        (lambda a: mnp.sum(a), (I.astype(np.int8),), "s32"),
        (lambda a: a + 1, (X.astype(np.float64),), "f32"),
    ],
)
def test_promotion_rules(fn, args, want):
    assert _dtype(fn, *args) == want


def test_python_scalars_are_weak_and_results_stay_weak():
    def f(a, s):
        return a * (s + 1)

    assert _dtype(f, X.astype(np.float16), 2) == "f16"
    assert _dtype(f, I.astype(np.int8), 2) == "s8"


def test_x64_switch_keeps_64_bit_types():
    x = np.arange(3, dtype=np.int64)
    assert _dtype(lambda a: a * 2, x) == "s32"
    with minixla.config.x64():
        assert _dtype(lambda a: a * 2, x) == "s64"
        assert _dtype(lambda a: a + 0.5, x) == "f64"
        got = minixla.jit(lambda a: a * 2)(np.array([2**40], np.int64))
        assert got.dtype == np.int64 and got[0] == 2**41
    assert not minixla.config.enable_x64
