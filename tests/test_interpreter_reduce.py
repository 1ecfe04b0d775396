"""Interpreter reductions, windows, sort, topk and RNG, checked against hand-worked values and
naive loop references written here."""

import itertools
import math

import numpy as np
import pytest

import minixla
from minixla.reference import ops_reduce
from minixla.reference.evaluator import Evaluator


def run(text, *args):
    module = minixla.parse_hlo_module(text, verify=False)
    return Evaluator(module).evaluate(module.entry, [np.asarray(a) for a in args])


def binary_comp(name, dtype, op):
    return f"""{name} {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT r = {dtype}[] {op}(a, b)
}}
"""


def reduce_module(in_shape, out_shape, dims, op, init, dtype="f32"):
    return (
        binary_comp("comb", dtype, op)
        + f"""
ENTRY e {{
  x = {dtype}[{in_shape}] parameter(0)
  i = {dtype}[] constant({init})
  ROOT r = {dtype}[{out_shape}] reduce(x, i), dimensions={{{dims}}}, to_apply=comb
}}
"""
    )


def naive_reduce(x, dims, fn, init):
    kept = [d for d in range(x.ndim) if d not in dims]
    out = np.full([x.shape[d] for d in kept], init, x.dtype)
    for index in itertools.product(*map(range, x.shape)):  # row-major, so in index order
        at = tuple(index[d] for d in kept)
        out[at] = fn(out[at], x[index])
    return out


# ---- reduce ----------------------------------------------------------------------------------

X34 = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.5 - 2


@pytest.mark.parametrize(
    "op,fn,init",
    [
        ("add", lambda a, b: a + b, 0),
        ("multiply", lambda a, b: a * b, 1),
        ("maximum", max, "-inf"),
        ("minimum", min, "inf"),
    ],
)
@pytest.mark.parametrize("dims,out_shape", [("0", "4"), ("1", "3"), ("0,1", "")])
def test_reduce_ops_over_axes(op, fn, init, dims, out_shape):
    got = run(reduce_module("3,4", out_shape, dims, op, init), X34)
    axes = [int(d) for d in dims.split(",")]
    want = naive_reduce(X34.astype(np.float64), axes, fn, float(init))
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_reduce_init_is_combined_and_int_sums_wrap():
    got = run(reduce_module("4", "", "0", "add", 10), np.array([1, 2, 3, 4], np.float32))
    assert got == 20
    x = np.array([100, 100, 100], np.int8)
    assert run(reduce_module("3", "", "0", "add", 0, "s8"), x) == np.int8(44)  # 300 - 256


def test_reduce_over_empty_dimension_gives_init():
    x = np.zeros((0, 3), np.float32)
    assert np.array_equal(run(reduce_module("0,3", "3", "0", "add", 5), x), [5, 5, 5])
    assert np.all(run(reduce_module("0,3", "3", "0", "maximum", "-inf"), x) == -np.inf)
    assert run(reduce_module("0,3", "0", "1", "add", 5), x).shape == (0,)


def test_reduce_max_min_propagate_nan_and_order_signed_zeros():
    x = np.array([1, np.nan, 3], np.float32)
    assert np.isnan(run(reduce_module("3", "", "0", "maximum", "-inf"), x))
    assert np.isnan(run(reduce_module("3", "", "0", "minimum", "inf"), x))
    zeros = np.array([-0.0, 0.0, -0.0], np.float32)
    assert not np.signbit(run(reduce_module("3", "", "0", "maximum", "-inf"), zeros))
    assert np.signbit(run(reduce_module("3", "", "0", "minimum", "inf"), zeros))


def test_reduce_f16_sum_rounds_once():
    x = np.full(4096, 1, np.float16)
    got = run(reduce_module("4096", "", "0", "add", 0, "f16"), x)
    assert got.dtype == np.float16 and got == 4096  # f16 step-by-step would stall at 2048


ARGMIN = """
argmin_comp {
  v0 = s32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = s32[] parameter(2)
  i1 = s32[] parameter(3)
  lt = pred[] compare(v0, v1), direction=LT
  eq = pred[] compare(v0, v1), direction=EQ
  ilt = pred[] compare(i0, i1), direction=LT
  tie = pred[] and(eq, ilt)
  pick = pred[] or(lt, tie)
  v = s32[] select(lt, v0, v1)
  i = s32[] select(pick, i0, i1)
  ROOT t = (s32[], s32[]) tuple(v, i)
}

ENTRY e {
  x = s32[NROWS,NCOLS] parameter(0)
  io = s32[NROWS,NCOLS] iota(), iota_dimension=0
  big = s32[] constant(2147483647)
  zero = s32[] constant(0)
  ROOT r = (s32[NCOLS], s32[NCOLS]) reduce(x, io, big, zero), dimensions={0}, to_apply=argmin_comp
}
"""


@pytest.mark.parametrize("rows", [7, 100])  # 100 rows take the pairwise fold
def test_variadic_argmin_lowest_index_wins_ties(rows):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, size=(rows, 5)).astype(np.int32)
    values, indices = run(ARGMIN.replace("NROWS", str(rows)).replace("NCOLS", "5"), x)
    for c in range(5):
        column = list(x[:, c])
        assert values[c] == min(column)
        assert indices[c] == column.index(min(column))


NOT_ASSOCIATIVE = """
HloModule m
plus_twice_abs {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  abs_b = f32[] abs(b)
  twice = f32[] add(abs_b, abs_b)
  ROOT sum = f32[] add(a, twice)
}
ENTRY e {
  x = f32[COUNT] parameter(0)
  init = f32[] constant(0)
  ROOT r = f32[] reduce(x, init), dimensions={0}, to_apply=plus_twice_abs
}
"""


@pytest.mark.parametrize("count", [10, 128, 1000])
def test_reducer_that_is_not_associative_folds_in_order(count):
    # a + 2|b| applied to a running total: pairing neighbours would double the totals again
    x = np.random.default_rng(1).standard_normal(count).astype(np.float32)
    total = np.float32(0)
    for b in x:
        total = np.float32(total + np.float32(abs(b) + abs(b)))
    assert run(NOT_ASSOCIATIVE.replace("COUNT", str(count)), x) == total


# ---- reduce-window ---------------------------------------------------------------------------


def naive_reduce_window(x, init, fn, size, stride, pad, lhs, rhs):
    """Loops over output positions and window offsets in padded-and-dilated coordinates."""
    out_dims = []
    for n, s, st, (lo, hi), ld, rd in zip(x.shape, size, stride, pad, lhs, rhs):
        padded = lo + hi + ((n - 1) * ld + 1 if n else 0)
        extent = (s - 1) * rd + 1
        out_dims.append(max(0, (padded - extent) // st + 1) if padded >= extent else 0)
    out = np.empty(out_dims, x.dtype)
    for o in itertools.product(*map(range, out_dims)):
        acc = init
        for w in itertools.product(*map(range, size)):
            index = []
            for d in range(x.ndim):
                p = o[d] * stride[d] + w[d] * rhs[d] - pad[d][0]
                if p < 0 or p % lhs[d] or p // lhs[d] >= x.shape[d]:
                    break
                index.append(p // lhs[d])
            else:
                acc = fn(acc, x[tuple(index)])
        out[o] = acc
    return out


def window_text(size, stride, pad, lhs, rhs):
    join = lambda v: "x".join(map(str, v))  # noqa: E731
    return (
        f"size={join(size)} stride={join(stride)} pad={join(f'{a}_{b}' for a, b in pad)} "
        f"lhs_dilate={join(lhs)} rhs_dilate={join(rhs)}"
    )


def window_module(dtype, shape, out_shape, window, op, init=0):
    return (
        binary_comp("comb", dtype, op)
        + f"""
ENTRY e {{
  x = {dtype}[{shape}] parameter(0)
  i = {dtype}[] constant({init})
  ROOT r = {dtype}[{out_shape}] reduce-window(x, i),
    window={{{window}}}, to_apply=comb
}}
"""
    )


@pytest.mark.parametrize(
    "op,fn,init", [("add", lambda a, b: a + b, 0.0), ("maximum", max, -math.inf)]
)
@pytest.mark.parametrize(
    "size,stride,pad,lhs,rhs",
    [
        ((2, 2), (2, 2), ((0, 0), (0, 0)), (1, 1), (1, 1)),
        ((3, 2), (2, 1), ((1, 1), (0, 2)), (1, 1), (1, 1)),
        ((2, 3), (1, 2), ((1, 0), (2, 1)), (2, 1), (1, 2)),
        ((3, 1), (1, 1), ((-1, 2), (0, 0)), (1, 3), (2, 1)),
    ],
)
def test_reduce_window_against_naive(op, fn, init, size, stride, pad, lhs, rhs):
    x = np.random.default_rng(1).normal(size=(5, 6)).astype(np.float32)
    want = naive_reduce_window(x.astype(np.float64), init, fn, size, stride, pad, lhs, rhs)
    window = window_text(size, stride, pad, lhs, rhs)
    got = run(window_module("f32", "5,6", ",".join(map(str, want.shape)), window, op, init), x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_cumsum_via_reduce_window():
    text = window_module("s32", "2,5", "2,5", "size=1x5 pad=0_0x4_0", "add")
    x = np.array([[1, 2, 3, 4, 5], [5, -1, 0, 2, 7]], np.int32)
    np.testing.assert_array_equal(run(text, x), [[1, 3, 6, 10, 15], [5, 4, 4, 6, 13]])


def test_a_whole_axis_window_takes_memory_linear_in_its_size():
    # each tap's indices are made when used: all 4096 at once were 4096^2 indices (150 MB),
    # and XLA's 46592-wide cumulative product (reduce_window_rewriter_test) was killed. A
    # suffix window: prefix ones take one accumulate instead of the taps
    import tracemalloc

    n = 4096
    text = window_module("f32", n, n, f"size={n} pad=0_{n - 1}", "multiply", init=1)
    x = np.random.default_rng(0).uniform(0.999, 1.001, n).astype(np.float32)
    tracemalloc.start()
    try:
        got = run(text, x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_allclose(got, np.cumprod(x[::-1].astype(np.float64))[::-1], rtol=1e-4)
    assert peak < 16 * 2**20, peak


@pytest.mark.parametrize("op", ["add", "multiply"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_a_prefix_window_accumulates_bit_for_bit_as_its_taps_do(monkeypatch, op, dtype):
    # JAX's cumsum: one sequential accumulate from init, the taps' own order and rounding
    text = window_module(dtype, "3,9", "3,9", "size=1x9 pad=0_0x8_0", op, init=0.5)
    x = np.random.default_rng(1).standard_normal((3, 9)).astype(np.float32)
    x[1, 2] = np.nan
    if dtype == "bf16":
        import ml_dtypes

        x = x.astype(ml_dtypes.bfloat16)
    window = minixla.parse_hlo_module(text, verify=False).entry.root.attrs["window"]
    assert ops_reduce.scan_axis((3, 9), window) == (1, False)  # the accumulate runs
    fast = run(text, x)
    monkeypatch.setattr(ops_reduce, "scan_axis", lambda dims, window: None)
    taps = run(text, x)
    assert fast.tobytes() == taps.tobytes()


def test_reduce_window_hand_worked_dilations():
    text = window_module("f32", "3", "5", "size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2", "add")
    # dilated+padded base: [_, 1, _, 2, _, 3, _]; windows take positions (k, k+2).
    np.testing.assert_array_equal(run(text, np.array([1, 2, 3], np.float32)), [0, 3, 0, 5, 0])


def test_variadic_reduce_window_general_path():
    text = (
        ARGMIN.split("ENTRY")[0]
        + """
ENTRY e {
  x = s32[6] parameter(0)
  io = s32[6] iota(), iota_dimension=0
  big = s32[] constant(2147483647)
  zero = s32[] constant(0)
  ROOT r = (s32[3], s32[3]) reduce-window(x, io, big, zero),
    window={size=3 stride=2 pad=0_1}, to_apply=argmin_comp
}
"""
    )
    values, indices = run(text, np.array([4, 2, 2, 7, 1, 1], np.int32))
    np.testing.assert_array_equal(values, [2, 1, 1])
    np.testing.assert_array_equal(indices, [1, 4, 4])


# ---- select-and-scatter ------------------------------------------------------------------------


def sas_module(shape, src_shape, window):
    return (
        binary_comp("add", "f32", "add")
        + """
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
"""
        + f"""
ENTRY e {{
  x = f32[{shape}] parameter(0)
  s = f32[{src_shape}] parameter(1)
  z = f32[] constant(0)
  ROOT r = f32[{shape}] select-and-scatter(x, s, z), window={{{window}}}, select=ge, scatter=add
}}
"""
    )


def test_select_and_scatter_maxpool_gradient():
    x = np.array([[1, 5, 2, 2], [3, 4, 2, 0], [0, 0, 9, 1], [8, 0, 1, 9]], np.float32)
    src = np.array([[10, 20], [30, 40]], np.float32)
    got = run(sas_module("4,4", "2,2", "size=2x2 stride=2x2"), x, src)
    want = np.zeros((4, 4), np.float32)
    want[0, 1], want[0, 2], want[3, 0], want[2, 2] = 10, 20, 30, 40  # ties pick the first
    np.testing.assert_array_equal(got, want)


def test_select_and_scatter_overlapping_padded_windows():
    x = np.random.default_rng(2).integers(0, 3, size=(5, 4)).astype(np.float32)
    src = np.arange(1, 4 * 2 + 1, dtype=np.float32).reshape(4, 2)
    got = run(sas_module("5,4", "4,2", "size=3x2 stride=1x2 pad=0_1x0_0"), x, src)
    want = np.zeros_like(x)
    for i, j in itertools.product(range(4), range(2)):
        cells = [(r, c) for r in range(i, i + 3) for c in range(2 * j, 2 * j + 2) if r < 5]
        best = cells[0]
        for cell in cells[1:]:
            if not x[best] >= x[cell]:
                best = cell
        want[best] += src[i, j]
    np.testing.assert_array_equal(got, want)


# ---- sort ------------------------------------------------------------------------------------


def cmp_comp(dtype, direction, ctype=""):
    type_attr = f", type={ctype}" if ctype else ""
    return f"""less {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT r = pred[] compare(a, b), direction={direction}{type_attr}
}}
"""


def sort1(dtype, shape, dim, direction, ctype=""):
    return (
        cmp_comp(dtype, direction, ctype)
        + f"""
ENTRY e {{
  x = {dtype}[{shape}] parameter(0)
  ROOT r = {dtype}[{shape}] sort(x), dimensions={{{dim}}}, is_stable=true, to_apply=less
}}
"""
    )


def test_sort_ascending_descending_along_each_axis():
    x = np.array([[3, -1, 2], [0, 5, -7], [3, 3, 1]], np.int32)
    got = run(sort1("s32", "3,3", 1, "LT"), x)
    np.testing.assert_array_equal(got, [sorted(r) for r in x.tolist()])
    got = run(sort1("s32", "3,3", 0, "GT"), x)
    np.testing.assert_array_equal(got.T, [sorted(c, reverse=True) for c in x.T.tolist()])
    u = np.array([3, 0xFFFFFFFF, 1], np.uint32)
    np.testing.assert_array_equal(run(sort1("u32", "3", 0, "LT"), u), [1, 3, 0xFFFFFFFF])


def test_sort_total_order_places_nan_and_signed_zeros():
    x = np.array([np.nan, 1.0, -0.0, -np.inf, 0.0, -np.nan, -0.0, np.inf], np.float32)
    got = run(sort1("f32", "8", 0, "LT", "TOTALORDER"), x)
    assert np.isnan(got[0]) and np.signbit(got[0])
    np.testing.assert_array_equal(got[1:4], [-np.inf, 0, 0])
    assert list(np.signbit(got[2:5])) == [True, True, False]
    np.testing.assert_array_equal(got[5:7], [1, np.inf])
    assert np.isnan(got[7]) and not np.signbit(got[7])


ARGSORT = """
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ia = s32[] parameter(2)
  ib = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=DIR
}

ENTRY e {
  x = f32[2,7] parameter(0)
  io = s32[2,7] iota(), iota_dimension=1
  ROOT r = (f32[2,7], s32[2,7]) sort(x, io), dimensions={1}, is_stable=true, to_apply=less
}
"""


@pytest.mark.parametrize("direction", ["LT", "GT"])
def test_multi_operand_argsort_is_stable(direction):
    x = np.array([[2, 1, 2, 0, 1, 2, 0], [5, 5, 5, 5, 4, 4, 6]], np.float32)
    values, perm = run(ARGSORT.replace("DIR", direction), x)
    for row in range(2):
        items = x[row].tolist()
        sign = -1 if direction == "GT" else 1
        want = sorted(range(7), key=lambda i: sign * items[i])  # Python's sort is stable
        np.testing.assert_array_equal(perm[row], want)
        np.testing.assert_array_equal(values[row], [items[i] for i in want])


TWO_KEYS = """
less {
  k1a = s32[] parameter(0)
  k1b = s32[] parameter(1)
  k2a = f32[] parameter(2)
  k2b = f32[] parameter(3)
  va = f32[] parameter(4)
  vb = f32[] parameter(5)
  lt1 = pred[] compare(k1a, k1b), direction=LT
  eq1 = pred[] compare(k1a, k1b), direction=EQ
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  isnan_a = pred[] compare(k2a, k2a), direction=NE
  iszero_a = pred[] compare(k2a, zero), direction=EQ
  z_a = f32[] select(iszero_a, zero, k2a)
  c_a = f32[] select(isnan_a, nan, z_a)
  isnan_b = pred[] compare(k2b, k2b), direction=NE
  iszero_b = pred[] compare(k2b, zero), direction=EQ
  z_b = f32[] select(iszero_b, zero, k2b)
  c_b = f32[] select(isnan_b, nan, z_b)
  lt2 = pred[] compare(c_a, c_b), direction=LT, type=TOTALORDER
  tie = pred[] and(eq1, lt2)
  ROOT r = pred[] or(lt1, tie)
}

ENTRY e {
  k1 = s32[9] parameter(0)
  k2 = f32[9] parameter(1)
  v = f32[9] parameter(2)
  ROOT r = (s32[9], f32[9], f32[9]) sort(k1, k2, v), dimensions={0}, is_stable=true, to_apply=less
}
"""


def two_key_reference(k1, k2):
    # JAX's comparator: -0 equals +0, every NaN equals every NaN and sorts last.
    def key(i):
        f = k2[i]
        return (k1[i], (1, 0.0) if math.isnan(f) else (0, f + 0.0))

    return sorted(range(len(k1)), key=key)


def test_two_key_sort_with_jax_canonicalised_float_key():
    k1 = np.array([1, 0, 1, 0, 1, 1, 0, 1, 1], np.int32)
    k2 = np.array([2, np.nan, -0.0, 3, 0.0, -np.nan, -1, 2, np.nan], np.float32)
    v = np.arange(9, dtype=np.float32)
    got = run(TWO_KEYS, k1, k2, v)
    want = two_key_reference(k1.tolist(), k2.tolist())
    np.testing.assert_array_equal(got[2], want)
    np.testing.assert_array_equal(got[0], k1[want])


def test_general_merge_sort_for_unrecognised_comparator():
    # Orders by a + b, which no single operand decides: the merge-sort path.
    text = """
less {
  a0 = s32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  s0 = s32[] add(a0, b0)
  s1 = s32[] add(a1, b1)
  ROOT r = pred[] compare(s0, s1), direction=LT
}

ENTRY e {
  a = s32[4,37] parameter(0)
  b = s32[4,37] parameter(1)
  ROOT r = (s32[4,37], s32[4,37]) sort(a, b), dimensions={1}, to_apply=less
}
"""
    rng = np.random.default_rng(3)
    a = rng.integers(-5, 5, size=(4, 37)).astype(np.int32)
    b = rng.integers(-5, 5, size=(4, 37)).astype(np.int32)
    got_a, got_b = run(text, a, b)
    for row in range(4):
        want = sorted(range(37), key=lambda i: a[row, i] + b[row, i])
        np.testing.assert_array_equal(got_a[row], a[row, want])
        np.testing.assert_array_equal(got_b[row], b[row, want])


def test_float_compare_with_nan_still_permutes():
    x = np.array([3, np.nan, 1, 2, np.nan, 0], np.float32)
    got = run(sort1("f32", "6", 0, "LT"), x)
    assert sorted(got[~np.isnan(got)].tolist()) == [0, 1, 2, 3] and np.isnan(got).sum() == 2


# ---- topk ------------------------------------------------------------------------------------


def topk_module(n, k, largest):
    return f"""
ENTRY e {{
  x = f32[2,{n}] parameter(0)
  ROOT r = (f32[2,{k}], s32[2,{k}]) topk(x), k={k}, largest={str(largest).lower()}
}}
"""


@pytest.mark.parametrize("largest", [True, False])
def test_topk_ties_take_lower_index(largest):
    x = np.array([[1, 3, 3, 0, 3, 1], [-1, -1, 2, -1, 5, 2]], np.float32)
    values, indices = run(topk_module(6, 4, largest), x)
    for row in range(2):
        items = x[row].tolist()
        sign = -1 if largest else 1
        want = sorted(range(6), key=lambda i: sign * items[i])[:4]
        np.testing.assert_array_equal(indices[row], want)
        np.testing.assert_array_equal(values[row], [items[i] for i in want])
    assert indices.dtype == np.int32


def test_topk_nan_is_largest():
    x = np.array([[1, np.nan, 7, 2], [0, -0.0, -1, np.nan]], np.float32)
    values, indices = run(topk_module(4, 2, True), x)
    np.testing.assert_array_equal(indices, [[1, 2], [3, 0]])
    assert np.isnan(values[:, 0]).all()


# ---- random numbers --------------------------------------------------------------------------


def rbg_module(algorithm, state_n, out):
    return f"""
ENTRY e {{
  s = u64[{state_n}] parameter(0)
  ROOT r = (u64[{state_n}], {out}) rng-bit-generator(s), algorithm={algorithm}
}}
"""


def test_random123_known_answers():
    words = lambda *v: [np.array([w], np.uint32) for w in v]  # noqa: E731
    out = ops_reduce._philox4x32(
        words(0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0)
    )
    assert [int(w[0]) for w in out] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]
    out = ops_reduce._threefry2x32(words(0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344))
    assert [int(w[0]) for w in out] == [0xC4923A9C, 0x483DF7A0]
    out = ops_reduce._threefry2x32(words(0, 0), (0, 0))
    assert [int(w[0]) for w in out] == [0x6B200159, 0x99BA4EFE]


def test_philox_state_layout():
    # u64[3] state = (key, counter low, counter high); one 128-bit block gives four u32 words.
    state = np.array([0x299F31D0A4093822, 0x85A308D3243F6A88, 0x0370734413198A2E], np.uint64)
    new_state, bits = run(rbg_module("rng_philox", 3, "u32[4]"), state)
    np.testing.assert_array_equal(bits, [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1])
    np.testing.assert_array_equal(new_state, [state[0], state[1] + np.uint64(1), state[2]])


@pytest.mark.parametrize("algorithm", ["rng_default", "rng_philox", "rng_three_fry"])
@pytest.mark.parametrize("out", ["u32[3,5]", "u64[7]", "u8[3]", "u32[]", "u32[3,3]"])
def test_rng_bit_generator_shapes_and_determinism(algorithm, out):
    text = rbg_module(algorithm, 2, out)
    state = np.array([42, 7], np.uint64)
    s1, b1 = run(text, state)
    s2, b2 = run(text, state)
    np.testing.assert_array_equal(b1, b2)
    np.testing.assert_array_equal(s1, s2)
    assert s1.dtype == np.uint64 and s1.shape == (2,) and s1[0] == 42 and s1[1] != 7
    dtype = {"u32": np.uint32, "u64": np.uint64, "u8": np.uint8}[out[: out.index("[")]]
    assert b1.dtype == dtype
    assert b1.shape == tuple(int(d) for d in out[out.index("[") + 1 : -1].split(",") if d)
    _, b3 = run(text, s1)
    if b1.size > 2:
        assert not np.array_equal(b1, b3) and len(set(b1.ravel().tolist())) > 1


def test_rng_uniform_and_normal_shapes_and_range():
    text = """
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(3)
  lo = s32[] constant(-4)
  hi = s32[] constant(4)
  u = f32[50] rng(a, b), distribution=rng_uniform
  i = s32[50] rng(lo, hi), distribution=rng_uniform
  n = f32[50] rng(a, b), distribution=rng_normal
  ROOT t = (f32[50], s32[50], f32[50]) tuple(u, i, n)
}
"""
    u, i, n = run(text)
    assert u.dtype == np.float32 and ((u >= 2) & (u < 3)).all()
    assert i.dtype == np.int32 and ((i >= -4) & (i < 4)).all()
    assert n.dtype == np.float32 and n.shape == (50,) and np.isfinite(n).all()


def test_a_sum_of_negative_zeros_keeps_its_sign():
    """-0.0 is addition's identity: XLA sums [-0.0]*4 from init -0.0 to -0.0."""
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4] parameter(0)
  ROOT r = f32[] reduce(x, f32[] constant(-0)), dimensions={0}, to_apply=add
}"""
    for backend in ("interpreter", "cpu"):
        exe = minixla.compile(text, backend=backend)
        assert np.signbit(exe(np.full(4, -0.0, np.float32)))
        assert not np.signbit(exe(np.array([-0.0, 0.0, -0.0, -0.0], np.float32)))


def test_rng_draws_the_same_sequence_on_every_backend():
    text = (
        "HloModule m\nENTRY e {\n lo = f32[] constant(0)\n hi = f32[] constant(1)\n"
        " ROOT r = f32[64] rng(lo, hi), distribution=rng_uniform\n}\n"
    )
    interpreter = minixla.compile(text, backend="interpreter")
    cpu = minixla.compile(text, backend="cpu")
    first = interpreter()
    assert ((0 <= first) & (first < 1)).all() and len(set(first.tolist())) > 1
    np.testing.assert_array_equal(cpu(), first)
    second = interpreter()
    assert not np.array_equal(second, first)  # rng is stateful: each run draws anew
    np.testing.assert_array_equal(cpu(), second)
