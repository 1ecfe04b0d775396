"""Native cpu code for the ops that used to run the interpreter's NumPy code, each against the
interpreter (the oracle): reduce-window (generic windows and the cumulative scan), variadic
reduce, select-and-scatter, gather, scatter, sort, topk, convolution, dots outside BLAS's
types, f16 converts, bitcast-convert, reduce-precision, fft, cholesky, triangular-solve.

Shapes include zero-size and odd sizes and non-default layouts; every case asserts that the
executable has no fallback. Each case costs a Numba compile, so they are few and small.
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

import minixla
from minixla.backends.cpu import FallbackWarning

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
"""


def _inputs(module, seed=0):
    from minixla.testing.compare import random_inputs

    return random_inputs(module, seed=seed)


def check(text, args=None, *, rtol=1e-5, atol=1e-5, passes=()):
    """cpu == interpreter on `args` (random when None), with no fallback."""
    module = minixla.parse_hlo_module(text)
    args = _inputs(module) if args is None else args
    options = {} if passes is None else {"passes": list(passes)}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        exe = minixla.compile(text, backend="cpu", **options)
    want = minixla.compile(text, backend="interpreter")(*args)
    got = exe(*args)
    from minixla.testing.compare import compare_values

    problems = compare_values(got, want, rtol=rtol, atol=atol)
    assert not problems, "\n".join(problems)
    assert not exe.program.fallbacks
    return exe


def module(body: str, computations: str = ADD) -> str:
    return f"HloModule m\n{computations}\nENTRY main {{\n{body}\n}}\n"


# ---- reduce-window ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape,window,out,to_apply,init",
    [
        ("f32[7,9]", "size=3x2 stride=2x1 pad=1_1x0_1", "f32[4,9]", "add", "0"),
        ("f32[9]", "size=3 pad=2_2 lhs_dilate=2 rhs_dilate=2", "f32[17]", "add", "0"),
        ("f32[2,5,5,3]", "size=1x2x2x1 stride=1x2x2x1", "f32[2,2,2,3]", "max", "-inf"),
        ("f32[0,4]", "size=1x2 pad=0_0x1_0", "f32[0,4]", "add", "0"),
        ("f32[6,11]", "size=1x11 pad=0_0x10_0", "f32[6,11]", "add", "0"),  # cumsum: a scan
        ("f32[10,3]{0,1}", "size=10x1 pad=0_9x0_0", "f32[10,3]", "max", "-inf"),  # reversed cummax
        # channels innermost (an identity window): the taps loop outside the channel row
        (
            "f32[2,6,7,5]",
            "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0",
            "f32[2,3,4,5]",
            "max",
            "-inf",
        ),
        (
            "f32[3,9,4]",
            "size=2x3x1 pad=1_0x2_2x0_0 lhs_dilate=1x2x1 rhs_dilate=1x2x1",
            "f32[3,17,4]",
            "add",
            "0",
        ),
        ("f32[4,0]", "size=2x1", "f32[3,0]", "add", "0"),
    ],
)
def test_reduce_window_matches_the_interpreter(shape, window, out, to_apply, init):
    check(
        module(f"""
  x = {shape} parameter(0)
  ROOT r = {out} reduce-window(x, f32[] constant({init})), window={{{window}}}, to_apply={to_apply}
"""),
        passes=[],
    )


@pytest.mark.parametrize("to_apply,init", [("add", "0"), ("max", "-inf")])
def test_channels_last_pooling_accumulates_a_row_on_the_stack_in_thread_parts(to_apply, init):
    # a 3x3 pool over 16x64x64x32: each output row of channels accumulates in a stack array
    # (accumulating in the output loads and stores it per tap, unvectorized) and threads take
    # parts of the batch; the taps still combine in row-major order (bitwise the interpreter)
    text = module(f"""
  x = f32[16,64,64,32] parameter(0)
  ROOT r = f32[16,64,64,32] reduce-window(x, f32[] constant({init})), window={{size=1x3x3x1 pad=0_0x1_1x1_1x0_0}}, to_apply={to_apply}
""")
    exe = check(text, passes=[], rtol=0, atol=0)
    (spec,) = exe.program.kernels.values()
    assert spec.parallel and ("split", None) in spec.args
    assert "acc = h.stack_array(32, np.float32)" in spec.source


@pytest.mark.parametrize("dtype,op,init", [("pred", "or", "false"), ("c64", "add", "(0, 0)")])
def test_channels_last_pooling_of_pred_and_complex(dtype, op, init):
    # the stack row takes any kernel type (a pred row crashed Numba's typing)
    text = f"""HloModule m
combine {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT s = {dtype}[] {op}(a, b)
}}
ENTRY main {{
  x = {dtype}[2,6,7,5] parameter(0)
  ROOT r = {dtype}[2,6,7,5] reduce-window(x, {dtype}[] constant({init})), window={{size=1x3x3x1 pad=0_0x1_1x1_1x0_0}}, to_apply=combine
}}"""
    exe = check(text, passes=[])
    (spec,) = exe.program.kernels.values()
    assert "acc = h.stack_array(5, " in spec.source


def test_cumulative_reduce_window_is_one_pass_over_the_axis():
    text = module("""
  x = f32[4,1000] parameter(0)
  ROOT r = f32[4,1000] reduce-window(x, f32[] constant(0)), window={size=1x1000 pad=0_0x999_0}, to_apply=add
""")
    exe = check(text, passes=[], rtol=1e-4, atol=1e-3)
    (source,) = [spec.source for spec in exe.program.kernels.values()]
    assert "range(1000)" in source and "w1" not in source  # no loop over window taps


def test_scan_with_a_generic_reducer_in_reverse_falls_back_to_windows():
    # subtract is not commutative: the reversed scan would reorder it, so taps are looped
    text = module(
        """
  x = f32[3,5] parameter(0)
  ROOT r = f32[3,5] reduce-window(x, f32[] constant(0)), window={size=1x5 pad=0_0x0_4}, to_apply=sub
""",
        ADD
        + """
sub {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] subtract(a, b)
}
""",
    )
    exe = check(text, passes=[])
    assert any("w1" in spec.source for spec in exe.program.kernels.values())


VARIADIC = """
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  first = pred[] and(eq, lt)
  pick = pred[] or(gt, first)
  v = f32[] select(pick, a, b)
  k = s32[] select(pick, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
"""


@pytest.mark.parametrize("dims,reduced", [((5, 7), 1), ((9, 3), 0), ((0, 4), 0)])
def test_variadic_reduce_argmax(dims, reduced):
    out = [d for k, d in enumerate(dims) if k != reduced]
    shape = f"[{','.join(map(str, dims))}]"
    text = module(
        f"""
  x = f32{shape} parameter(0)
  i = s32{shape} iota(), iota_dimension={reduced}
  ROOT r = (f32[{",".join(map(str, out))}], s32[{",".join(map(str, out))}]) reduce(x, i, f32[] constant(-inf), s32[] constant(0)), dimensions={{{reduced}}}, to_apply=argmax
""",
        VARIADIC,
    )
    check(text, passes=[])


def test_reduce_window_variadic_argmax_pool():
    text = module(
        """
  x = f32[6,6] parameter(0)
  i = s32[6,6] iota(), iota_dimension=1
  ROOT r = (f32[3,3], s32[3,3]) reduce-window(x, i, f32[] constant(-inf), s32[] constant(0)), window={size=2x2 stride=2x2}, to_apply=argmax
""",
        VARIADIC,
    )
    check(text, passes=[])


# ---- select-and-scatter ------------------------------------------------------------------------

SELECT = (
    ADD
    + """
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
"""
)


@pytest.mark.parametrize(
    "operand,source,window",
    [
        ("f32[4,6]", "f32[2,3]", "size=2x2 stride=2x2"),
        ("f32[5,7]", "f32[3,4]", "size=3x3 stride=2x2 pad=1_1x1_1"),  # overlapping windows
        ("f32[1,0]", "f32[1,0]", "size=1x1"),
        # channels innermost: each row of channels picks its taps together
        ("f32[2,7,7,3]", "f32[2,4,4,3]", "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0"),
        ("f32[6,2]", "f32[8,2]", "size=3x1 pad=2_2x0_0"),  # windows past both edges
    ],
)
def test_select_and_scatter(operand, source, window):
    text = module(
        f"""
  x = {operand} parameter(0)
  s = {source} parameter(1)
  ROOT r = {operand} select-and-scatter(x, s, f32[] constant(0)), window={{{window}}}, select=ge, scatter=add
""",
        SELECT,
    )
    check(text, passes=[])


# ---- gather and scatter ------------------------------------------------------------------------


def test_gather_rows_with_out_of_range_indices_clamps():
    text = module("""
  x = f32[5,3] parameter(0)
  i = s32[4,1] parameter(1)
  ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
""")
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    check(text, [x, np.array([[0], [4], [-3], [9]], np.int32)], passes=[])


def test_gather_points_with_batch_dims_first_and_an_implicit_index_vector():
    text = module("""
  x = f32[4,5,6] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = f32[2,3] gather(x, i), offset_dims={0}, collapsed_slice_dims={0,1}, start_index_map={1,0}, index_vector_dim=1, slice_sizes={1,1,2}
""")
    check(text, passes=[])


def test_gather_with_operand_batching_dims():
    text = module("""
  x = f32[3,7,2] parameter(0)
  i = s32[3,4] parameter(1)
  ROOT g = f32[3,4,2] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,2}
""")
    check(text, passes=[])


SCATTERS = (
    ADD
    + """
assign {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
mul_then_add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, f32[] constant(0.5))
  ROOT s = f32[] add(m, b)
}
"""
)


SCATTER_COMBINERS = [("f32", "add"), ("f32", "mul_then_add"), ("s32", "assign")]


@pytest.mark.parametrize("dtype,combiner", SCATTER_COMBINERS)
def test_scatter_combines_duplicates_in_order_and_drops_windows_out_of_range(dtype, combiner):
    text = module(
        f"""
  x = {dtype}[6,3] parameter(0)
  i = s32[5] parameter(1)
  u = {dtype}[5,3] parameter(2)
  ROOT s = {dtype}[6,3] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply={combiner}
""",
        SCATTERS,
    )
    rng = np.random.default_rng(0)
    np_dtype = np.float32 if dtype == "f32" else np.int32
    args = [
        rng.standard_normal((6, 3)).astype(np_dtype),
        np.array([2, 2, -1, 6, 5], np.int32),
        (rng.standard_normal((5, 3)) * 10).astype(np_dtype),
    ]
    check(text, args, passes=[])


@pytest.mark.parametrize("to_apply", ["add", "mul_then_add"])
@pytest.mark.parametrize("is_sorted", [False, True])
def test_a_scatter_row_along_the_minor_dims_is_staged_on_the_stack(to_apply, is_sorted):
    # a segment sum: each update row is copied to a stack row before it is combined; with
    # indices_are_sorted the stack row holds the output row of the current segment while the
    # next update targets it too; repeated segments combine in update order either way
    text = module(
        f"""
  x = f32[50,16] parameter(0)
  i = s32[400,1] parameter(1)
  u = f32[400,16] parameter(2)
  ROOT s = f32[50,16] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, indices_are_sorted={str(is_sorted).lower()}, to_apply={to_apply}
""",
        SCATTERS,
    )
    rng = np.random.default_rng(0)
    segments = np.sort(rng.integers(-2, 53, (400, 1)), axis=0).astype(np.int32)
    args = [np.zeros((50, 16), np.float32), segments, rng.standard_normal((400, 16), np.float32)]
    exe = check(text, args, passes=[], rtol=0, atol=0)
    (spec,) = exe.program.kernels.values()
    assert "row = h.stack_array(16, np.float32)" in spec.source
    assert ("row_held" in spec.source) == is_sorted


@pytest.mark.parametrize("dtype,combiner", SCATTER_COMBINERS)
def test_a_held_scatter_row_is_stored_before_an_overlapping_row_is_read(dtype, combiner):
    # rows of 16 at minor offsets 0 and 8 of one output row overlap; each change of row
    # stores the held one first, so the next row reads its combined values; an update whose
    # window does not fit (-1, or 17 + 16 > 32) is skipped without disturbing the held row.
    # The kernel stays exact on indices that are not sorted after all.
    text = module(
        f"""
  x = {dtype}[6,32] parameter(0)
  i = s32[9,2] parameter(1)
  u = {dtype}[9,16] parameter(2)
  ROOT s = {dtype}[6,32] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0,1}}, index_vector_dim=1, indices_are_sorted=true, to_apply={combiner}
""",
        SCATTERS,
    )
    rng = np.random.default_rng(1)
    np_dtype = np.float32 if dtype == "f32" else np.int32
    starts = [[3, 0], [3, 8], [3, 0], [3, 0], [-1, 0], [3, 8], [5, 16], [5, 17], [3, 0]]
    args = [
        (rng.standard_normal((6, 32)) * 10).astype(np_dtype),
        np.array(starts, np.int32),
        (rng.standard_normal((9, 16)) * 10).astype(np_dtype),
    ]
    exe = check(text, args, passes=[], rtol=0, atol=0)
    (spec,) = exe.program.kernels.values()
    assert "row_held" in spec.source


def test_scatter_window_into_the_middle_dims_and_a_zero_size_update():
    text = module("""
  x = f32[4,5,6] parameter(0)
  i = s32[2,2] parameter(1)
  u = f32[2,5,2] parameter(2)
  ROOT s = f32[4,5,6] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0,2}, index_vector_dim=1, to_apply=add
""")
    check(text, passes=[])
    empty = module("""
  x = f32[4,3] parameter(0)
  i = s32[0,1] parameter(1)
  u = f32[0,3] parameter(2)
  ROOT s = f32[4,3] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
""")
    check(empty, passes=[])


# ---- sort and topk -------------------------------------------------------------------------------

SORTS = """
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
two_keys {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  lt2 = pred[] compare(c, d), direction=GT, type=TOTALORDER
  tie = pred[] and(eq, lt2)
  ROOT r = pred[] or(lt, tie)
}
"""


@pytest.mark.parametrize("dims,axis", [((13,), 0), ((4, 9), 1), ((7, 3), 0), ((0, 5), 1)])
def test_sort_one_operand(dims, axis):
    shape = f"f32[{','.join(map(str, dims))}]"
    text = module(
        f"""
  x = {shape} parameter(0)
  ROOT s = {shape} sort(x), dimensions={{{axis}}}, to_apply=lt
""",
        SORTS,
    )
    check(text, passes=[])


def test_sort_two_operands_is_stable_under_a_lexicographic_comparator():
    text = module(
        """
  k = s32[3,17] parameter(0)
  v = f32[3,17] parameter(1)
  ROOT s = (s32[3,17], f32[3,17]) sort(k, v), dimensions={1}, to_apply=two_keys
""",
        SORTS,
    )
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 3, (3, 17)).astype(np.int32)
    values = rng.standard_normal((3, 17)).astype(np.float32)
    values[0, :4] = [np.nan, -0.0, 0.0, np.inf]
    check(text, [keys, values], passes=[])


@pytest.mark.parametrize(
    "dims,k,largest",
    [
        ((4, 10), 3, "true"),
        ((2, 50), 40, "true"),
        ((6,), 6, "false"),
        # a heap of the k best: rows over 8k long, many ties (the values are -3..2)
        ((3, 1000), 50, "true"),
        ((2, 900), 100, "false"),
    ],
)
def test_topk_with_ties_and_nan(dims, k, largest):
    shape = ",".join(map(str, dims))
    out = ",".join(map(str, dims[:-1] + (k,)))
    text = module(f"""
  x = f32[{shape}] parameter(0)
  ROOT t = (f32[{out}], s32[{out}]) topk(x), k={k}, largest={largest}
""")
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 3, dims).astype(np.float32)
    x.reshape(-1)[:3] = [np.nan, -0.0, np.inf]
    check(text, [x], passes=[])
    # every element better than the last: each one replaces the heap's root
    ordered = np.sort(rng.standard_normal(dims).astype(np.float32), axis=-1)
    check(text, [ordered if largest == "true" else ordered[..., ::-1].copy()], passes=[])


# ---- convolution ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "lhs,rhs,out,attrs",
    [
        (
            "f32[2,3,7,6]",
            "f32[4,3,3,2]",
            "f32[2,4,4,6]",
            "window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=bf01_oi01->bf01",
        ),
        (
            "f32[1,5,5,4]",
            "f32[3,3,4,8]",
            "f32[1,11,11,8]",
            "window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
        ),
        (
            "f32[2,9,4]",
            "f32[3,2,4]",
            "f32[2,5,4]",
            "window={size=3 rhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=2",
        ),
        ("f32[4,6,3]", "f32[4,3,2]", "f32[2,6,1]", "window={size=3}, dim_labels=fb0_i0o->fb0"),
    ],
)
def test_convolution_matches_the_interpreter(lhs, rhs, out, attrs):
    text = module(f"""
  x = {lhs} parameter(0)
  w = {rhs} parameter(1)
  ROOT c = {out} convolution(x, w), {attrs}
""")
    check(text, passes=[], rtol=1e-4, atol=1e-4)


def test_convolution_batch_groups_as_in_a_weight_gradient():
    text = module("""
  x = f32[3,5,4] parameter(0)
  w = f32[3,5,6] parameter(1)
  ROOT c = f32[2,1,6] convolution(x, w), window={size=5}, dim_labels=f0b_i0o->b0f, batch_group_count=2
""")
    check(text, passes=[], rtol=1e-4, atol=1e-4)


# ---- thunks: dots, converts, bitcasts, reduce-precision, fft, linear algebra -------------------


def test_integer_and_bf16_dots():
    check(
        module("""
  a = s8[6,20] parameter(0)
  b = s8[20,5] parameter(1)
  ROOT d = s32[6,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
"""),
        passes=[],
    )
    check(
        module("""
  a = bf16[2,3,8] parameter(0)
  b = bf16[2,8,4] parameter(1)
  ROOT d = bf16[2,3,4] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
"""),
        passes=[],
        rtol=1e-2,
        atol=1e-2,
    )


def test_f16_converts_and_bitcasts():
    check(
        module("""
  x = f32[3,5] parameter(0)
  h = f16[3,5] convert(x)
  b = bf16[3,5] convert(h)
  u = u8[3,5,4] bitcast-convert(x)
  ROOT t = (f16[3,5], bf16[3,5], f32[3,5], u8[3,5,4], u16[3,5]) tuple(h, b, f32[3,5] convert(h), u, u16[3,5] bitcast-convert(b))
"""),
        passes=[],
    )


@pytest.mark.parametrize(
    "dtype,e,m", [("f32", 5, 10), ("f32", 8, 7), ("f64", 8, 23), ("bf16", 5, 2)]
)
def test_reduce_precision(dtype, e, m):
    text = module(f"""
  x = {dtype}[64] parameter(0)
  ROOT r = {dtype}[64] reduce-precision(x), exponent_bits={e}, mantissa_bits={m}
""")
    import ml_dtypes

    rng = np.random.default_rng(0)
    np_dtype = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[dtype]
    x = (rng.standard_normal(64) * np.exp2(rng.integers(-40, 40, 64))).astype(np_dtype)
    x[:4] = [np.nan, np.inf, -0.0, 65520]
    check(text, [x], rtol=0, atol=0, passes=[])


def test_fft_round_trip_kinds():
    check(
        module("""
  x = f32[3,16] parameter(0)
  f = c64[3,9] fft(x), fft_type=RFFT, fft_length={16}
  g = f32[3,16] fft(f), fft_type=IRFFT, fft_length={16}
  ROOT t = (c64[3,9], f32[3,16]) tuple(f, g)
"""),
        passes=[],
        rtol=1e-4,
        atol=1e-4,
    )


@pytest.mark.parametrize("real, complex_", [("f32", "c64"), ("f64", "c128")])
def test_two_dimensional_ffts_of_each_kind_and_an_odd_inverse_length(real, complex_):
    check(
        module(f"""
  x = {real}[2,6,10] parameter(0)
  f = {complex_}[2,6,6] fft(x), fft_type=RFFT, fft_length={{6,10}}
  g = {real}[2,6,10] fft(f), fft_type=IRFFT, fft_length={{6,10}}
  o = {real}[2,6,11] fft(f), fft_type=IRFFT, fft_length={{6,11}}
  c = {complex_}[2,6,6] fft(f), fft_type=FFT, fft_length={{6,6}}
  d = {complex_}[2,6,6] fft(c), fft_type=IFFT, fft_length={{6,6}}
  ROOT t = ({complex_}[2,6,6], {real}[2,6,10], {real}[2,6,11], {complex_}[2,6,6], {complex_}[2,6,6]) tuple(f, g, o, c, d)
"""),
        passes=[],
        rtol=1e-4,
        atol=1e-4,
    )


def test_cholesky_and_triangular_solve():
    pytest.importorskip("scipy")
    text = module("""
  a = f32[2,4,4] parameter(0)
  b = f32[2,4,3] parameter(1)
  l = f32[2,4,4] cholesky(a), lower=true
  x = f32[2,4,3] triangular-solve(l, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  bt = f32[2,3,4] transpose(b), dimensions={0,2,1}
  y = f32[2,3,4] triangular-solve(l, bt), left_side=false, lower=true, transpose_a=TRANSPOSE
  ROOT t = (f32[2,4,4], f32[2,4,3], f32[2,3,4]) tuple(l, x, y)
""")
    rng = np.random.default_rng(0)
    m = rng.standard_normal((2, 4, 4))
    a = (m @ m.transpose(0, 2, 1) + 4 * np.eye(4)).astype(np.float32)
    check(
        text,
        [a, rng.standard_normal((2, 4, 3)).astype(np.float32)],
        passes=[],
        rtol=1e-4,
        atol=1e-4,
    )


def test_lapack_and_fft_thunks_load_scipys_extensions_without_their_packages():
    """Importing `scipy.linalg` or `scipy.fft` costs a warm compile 0.2-0.6 s; the thunks need
    only their extension modules. In a new process, as a warm compile runs."""
    pytest.importorskip("scipy")
    code = f"""
import sys, numpy as np, minixla
exe = minixla.compile({CHOLESKY_SOLVE!r}, backend="cpu", cache=False)
a = np.array([[4.0, 2.0], [2.0, 3.0]])
l, x = exe(a, np.array([[2.0], [1.0]]))
np.testing.assert_allclose(l, np.linalg.cholesky(a))
np.testing.assert_allclose(x, np.linalg.solve(np.linalg.cholesky(a), [[2.0], [1.0]]))
print(sorted(m for m in sys.modules if m.startswith("scipy.linalg")))
fft = minixla.compile({RFFT!r}, backend="cpu", cache=False)
signal = np.arange(8, dtype=np.float32)
np.testing.assert_allclose(fft(signal), np.fft.rfft(signal), rtol=1e-5, atol=1e-5)
print(sorted(m for m in sys.modules if m.startswith("scipy.fft")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    linalg, fft = done.stdout.split("\n")[:2]
    assert linalg == "['scipy.linalg._fblas', 'scipy.linalg._flapack']"
    assert fft == "['scipy.fft._pocketfft.pypocketfft']"


RFFT = """HloModule rfft
ENTRY e {
  x = f32[8] parameter(0)
  ROOT f = c64[5] fft(x), fft_type=RFFT, fft_length={8}
}
"""


CHOLESKY_SOLVE = """HloModule chol
ENTRY e {
  a = f64[2,2] parameter(0)
  b = f64[2,1] parameter(1)
  l = f64[2,2] cholesky(a), lower=true
  x = f64[2,1] triangular-solve(l, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  ROOT t = (f64[2,2], f64[2,1]) tuple(l, x)
}
"""

# ---- fallbacks that remain ----------------------------------------------------------------------

FALLBACK = module("""
  x = f16[4] parameter(0)
  ROOT y = f16[4] add(x, x)
""")


def test_a_remaining_fallback_warns_once_naming_the_instruction():
    with pytest.warns(FallbackWarning, match=r"add %y") as record:
        exe = minixla.compile(FALLBACK, backend="cpu", passes=[])
    assert len([w for w in record if issubclass(w.category, FallbackWarning)]) == 1
    np.testing.assert_array_equal(exe(np.arange(4, dtype=np.float16)), [0, 2, 4, 6])


def test_strict_makes_a_fallback_a_compile_error():
    with pytest.raises(minixla.MinixlaError, match=r"no native code for: add %y"):
        minixla.compile(FALLBACK, backend="cpu", passes=[], strict=True)


# ---- batched dots and BLAS threads -----------------------------------------------------------


def test_batched_dot_with_interleaved_batch_dims_matches_the_interpreter():
    check(
        module("""
  q = f32[2,5,3,4] parameter(0)
  k = f32[2,6,3,4] parameter(1)
  ROOT d = f32[2,3,5,6] dot(q, k), lhs_batch_dims={0,2}, rhs_batch_dims={0,2}, lhs_contracting_dims={3}, rhs_contracting_dims={3}
"""),
        passes=[],
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "dtype,batch,m,k,n,routine",
    [
        ("f32", 1, 32, 256, 1024, 3),  # few rows times a weight stored [n, k]: C^T = B A^T
        ("f64", 1, 8, 64, 512, 3),
        ("f32", 3, 16, 128, 256, 3),
        ("f32", 1, 128, 64, 512, 0),  # many rows: the GEMM as written
        ("f32", 1, 32, 64, 64, 0),  # too few columns
    ],
)
def test_dots_with_few_rows_and_a_transposed_weight(dtype, batch, m, k, n, routine):
    from minixla.backends.cpu import gemm

    if not gemm.available(dtype):
        pytest.skip("no cblas in this NumPy")
    b = "" if batch == 1 else f"{batch},"
    batch_dims = "" if batch == 1 else "lhs_batch_dims={0}, rhs_batch_dims={0}, "
    contracting = 1 if batch == 1 else 2
    text = module(f"""
  a = {dtype}[{b}{m},{k}] parameter(0)
  w = {dtype}[{b}{n},{k}] parameter(1)
  ROOT d = {dtype}[{b}{m},{n}] dot(a, w), {batch_dims}lhs_contracting_dims={{{contracting}}}, rhs_contracting_dims={{{contracting}}}
""")
    assert gemm.plan(minixla.parse_hlo_module(text).entry.root).dims[11] == routine
    exe = minixla.compile(text, backend="cpu", passes=[])
    rng = np.random.default_rng(3)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    x = rng.standard_normal((batch, m, k)).astype(np_dtype)
    w = rng.standard_normal((batch, n, k)).astype(np_dtype)
    want = np.matmul(x.astype(np.float64), w.astype(np.float64).transpose(0, 2, 1))
    if batch == 1:
        x, w, want = x[0], w[0], want[0]
    tolerance = 1e-4 if dtype == "f32" else 1e-12
    np.testing.assert_allclose(exe(x, w), want, rtol=tolerance, atol=tolerance * k)


@pytest.mark.parametrize(
    "m,k,columns",
    [
        (8, 256, 480),  # few rows: blocks of columns under the small-matrix path's limit
        (16, 128, 480),
        (32, 128, 240),
        (32, 256, 1024),  # blocks of 112 columns were slower than one call
        (64, 128, 1024),
        (128, 512, 1024),  # blocks of 15 columns
    ],
)
def test_gemms_with_few_rows_run_in_blocks_of_at_least_128_columns(monkeypatch, m, k, columns):
    import dataclasses

    from minixla.backends.cpu import gemm

    if gemm.library() is None:
        pytest.skip("no cblas in this NumPy")
    monkeypatch.setattr(gemm, "_FOUND", [dataclasses.replace(gemm.library(), small_path=True)])
    text = module(f"""
  a = f32[{m},{k}] parameter(0)
  b = f32[{k},1024] parameter(1)
  ROOT d = f32[{m},1024] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
""")
    assert gemm.plan(minixla.parse_hlo_module(text).entry.root).dims[10] == columns
    exe = minixla.compile(text, backend="cpu", passes=[], cache=False)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, 1024))
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(exe(a, b.astype(np.float32)), want, rtol=1e-4, atol=1e-4 * k)


def test_blas_threads_follow_the_gemm_size_and_the_cores_never_the_load(monkeypatch):
    # Haswell's kernels round differently for each thread count: a count that followed the
    # load gave a program other bits from run to run
    from minixla.backends.cpu import blas_threads

    assert blas_threads.threads_for(1000) == 1
    big = blas_threads.threads_for(1e15)
    assert big == blas_threads.cores()
    monkeypatch.setattr(blas_threads, "idle_cores", lambda: 1)  # a loaded machine
    assert blas_threads.threads_for(1e15) == big
    blas_threads.use_threads(1)
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(a @ a, np.full((64, 64), 64, np.float32))


def test_an_executable_gives_numpys_blas_its_own_thread_count_back():
    # a small GEMM runs on one thread; the user's NumPy products after the call must not
    import ctypes

    from minixla.backends.cpu import blas_threads

    blas_threads.restore_threads()  # after tests that set a count themselves
    libraries = [ctypes.CDLL(path) for path in blas_threads.openblas_paths()]

    def counts() -> list:
        return [blas_threads.thread_count(library) for library in libraries]

    before = counts()
    if not any(count is not None and count > 1 for count in before):
        pytest.skip("no OpenBLAS running several threads")
    text = module("""
  a = f32[128,128] parameter(0)
  ROOT d = f32[128,128] dot(a, a), lhs_contracting_dims={1}, rhs_contracting_dims={0}
""")
    exe = minixla.compile(text, backend="cpu", passes=[], cache=False)
    a = np.ones((128, 128), np.float32)
    np.testing.assert_array_equal(exe(a), np.full((128, 128), 128, np.float32))
    assert counts() == before
    blas_threads.use_threads(1)  # as the dot did, inside the call
    assert counts() != before
    blas_threads.restore_threads()
    assert counts() == before
    blas_threads.use_threads(1)
    blas_threads.libraries_loaded()  # the setters are looked for again: none is missed
    assert counts() == before


def test_dots_that_openblas_runs_on_one_thread_anyway_set_no_thread_count(monkeypatch):
    from minixla.backends.cpu import blas_threads

    cases = []
    for m, k, n, sets in (
        (32, 64, 128, False),
        (1, 64, 96, False),
        (1, 96, 96, True),
        (33, 64, 128, True),
    ):
        text = module(f"""
  a = f32[{m},{k}] parameter(0)
  b = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
""")
        cases.append((m, k, n, sets, minixla.compile(text, backend="cpu", passes=[], cache=False)))
    told: list = []  # what the library is told, its own count being 2
    monkeypatch.setattr(blas_threads, "_setters", [(told.append, 2)])
    monkeypatch.setattr(blas_threads, "_current", None)
    for m, k, n, sets, exe in cases:
        a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
        np.testing.assert_array_equal(exe(a, b), np.full((m, n), k, np.float32))
        # one thread for the call, then the library's own count back; or nothing at all
        assert told == ([1, 2] if sets else []), (m, k, n)
        told.clear()


def test_dots_use_np_matmul_where_no_cblas_can_be_called(monkeypatch):
    from minixla.backends.cpu import gemm

    monkeypatch.setattr(gemm, "_FOUND", [None])
    text = module("""
  a = f64[24,40] parameter(0)
  b = f64[24,56] parameter(1)
  ROOT d = f64[40,56] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
""")
    exe = minixla.compile(text, backend="cpu", passes=[], cache=False)
    assert not any("NumPy's BLAS" in spec.source for spec in exe.program.kernels.values())
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((24, 40)), rng.standard_normal((24, 56))
    np.testing.assert_allclose(exe(a, b), a.T @ b, rtol=1e-12)


def test_kernel_threads_follow_the_work_the_idle_cores_and_recent_threaded_gemms(monkeypatch):
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "_last_threaded_gemm", -1e9)
    monkeypatch.setattr(blas_threads, "idle_cores", lambda: 4)
    unit = blas_threads.KERNEL_WORK
    assert blas_threads.kernel_threads(unit) == 1
    assert blas_threads.kernel_threads(3 * unit) == 1  # its parts would not repay the handoff
    assert blas_threads.kernel_threads(blas_threads.SPLIT_WORK - 1) == 1
    assert blas_threads.kernel_threads(blas_threads.SPLIT_WORK) == 4
    assert blas_threads.kernel_threads(100 * unit) == 4
    # the program library's pool hands parts over in microseconds: smaller kernels split
    part = blas_threads.POOL_PART_WORK
    assert blas_threads.kernel_threads(part, pooled=True) == 1
    assert blas_threads.kernel_threads(2 * part, pooled=True) == 2
    assert blas_threads.kernel_threads(3 * unit, pooled=True) == 4
    monkeypatch.setattr(blas_threads, "idle_cores", lambda: 1)  # a loaded machine
    assert blas_threads.kernel_threads(100 * unit, pooled=True) == 1
    assert blas_threads.kernel_threads(100 * unit) == 1
    monkeypatch.setattr(blas_threads, "idle_cores", lambda: 4)
    monkeypatch.setattr(blas_threads, "_current", None)
    blas_threads.use_threads(2)  # a GEMM's idle BLAS workers now spin for a while
    assert blas_threads.kernel_threads(100 * unit) == 1
    blas_threads.use_threads(1)


PARALLEL_WORK = module("""
  x = f32[512,1024] parameter(0)
  ROOT y = f32[512,1024] tanh(x)
""")


def test_a_kernel_with_enough_work_is_split_and_its_parts_are_chosen_per_call(monkeypatch):
    from minixla.backends.cpu import blas_threads

    exe = minixla.compile(PARALLEL_WORK, backend="cpu", passes=[], parallel_threshold=1 << 20)
    (spec,) = exe.program.kernels.values()
    assert spec.parallel and spec.work >= 1 << 20 and spec.args[-1] == ("split", None)
    assert "part[0] * n_i0 // part[1]" in spec.source and "parallel=True" not in spec.source
    assert re.search(rf"run_split\d+\(k0, {spec.work}, ", exe.program.source)
    x = np.linspace(-3, 3, 512 * 1024, dtype=np.float32).reshape(512, 1024)
    asked = []
    monkeypatch.setattr(
        blas_threads, "kernel_threads", lambda work, pooled=False: asked.append(work) or 2
    )
    np.testing.assert_allclose(exe(x), np.tanh(x), rtol=1e-6, atol=1e-6)
    assert asked == [spec.work]  # decided when it runs
    small = minixla.compile(PARALLEL_WORK, backend="cpu", passes=[], parallel_threshold=1 << 62)
    (serial,) = small.program.kernels.values()
    assert not serial.parallel and "run_split" not in small.program.source


# ---- complex numbers ------------------------------------------------------------------------


def test_complex_arithmetic_in_kernels():
    check(
        module("""
  x = f32[4,6] parameter(0)
  y = f32[4,6] parameter(1)
  z = c64[4,6] complex(x, y)
  w = c64[4,6] convert(y)
  p = c64[4,6] multiply(z, w)
  q = c64[4,6] divide(add(p, z), subtract(w, c64[4,6] broadcast(c64[] constant((1, -2))), dimensions={}))
  e = c64[4,6] exponential(negate(q))
  eq = pred[4,6] compare(z, w), direction=NE
  ROOT t = (f32[4,6], f32[4,6], f32[4,6], c64[4,6], pred[4,6]) tuple(f32[4,6] real(e), f32[4,6] imag(q), f32[4,6] abs(p), select(eq, e, z), eq)
"""),
        passes=[],
        rtol=1e-4,
        atol=1e-5,
    )
    check(
        module("""
  x = c128[5] parameter(0)
  ROOT y = c128[5] multiply(x, x)
"""),
        [np.array([1 + 2j, -3j, 0.5, np.inf, 2 - 1j])],
        passes=[],
    )


def test_integer_dots_on_float_blas_are_exact_and_wrap():
    # |a| * |b| * k = 128 * 128 * 4096 = 2^26: f64 BLAS, exact; the s16 -> s32 sums wrap
    check(
        module("""
  a = s8[3,4096] parameter(0)
  b = s8[4096,2] parameter(1)
  ROOT d = s32[3,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
"""),
        [np.full((3, 4096), -128, np.int8), np.full((4096, 2), -128, np.int8)],
        passes=[],
    )
    check(
        module("""
  a = s16[2,64] parameter(0)
  b = s16[64,2] parameter(1)
  ROOT d = s32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
"""),
        [np.full((2, 64), 32767, np.int16), np.full((64, 2), 32767, np.int16)],
        passes=[],
    )


# ---- rng-bit-generator ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "state,data",
    [("u64[2]", "u32[5,3]"), ("u64[3]", "u64[7]"), ("u64[3]", "f32[9]"), ("u64[3]", "u8[6]")],
)
def test_philox_rng_bit_generator_matches_the_interpreter(state, data):
    text = module(f"""
  s = {state} parameter(0)
  ROOT r = ({state}, {data}) rng-bit-generator(s), algorithm=rng_philox
""")
    n = int(state[4])
    seed = np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE, 7][:n], np.uint64)
    check(text, [seed], passes=[], rtol=0, atol=0)


@pytest.mark.parametrize("data", ["u32[5,4]", "u32[3,5]", "u32[]", "u64[3,2]", "s32[7]", "u16[3]"])
def test_threefry_rng_bit_generator_matches_the_interpreter(data):
    text = module(f"""
  s = u64[2] parameter(0)
  ROOT r = (u64[2], {data}) rng-bit-generator(s), algorithm=rng_three_fry
""")
    check(
        text,
        [np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFF0], np.uint64)],
        passes=[],
        rtol=0,
        atol=0,
    )


# ---- variadic scatter, non-default layouts ------------------------------------------------------


def test_variadic_scatter_keeps_the_larger_value_and_its_index():
    text = module(
        """
  v = f32[5] parameter(0)
  k = s32[5] parameter(1)
  i = s32[6,1] parameter(2)
  uv = f32[6] parameter(3)
  uk = s32[6] parameter(4)
  ROOT s = (f32[5], s32[5]) scatter(v, k, i, uv, uk), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=argmax
""",
        VARIADIC,
    )
    rng = np.random.default_rng(2)
    args = [
        np.full(5, -np.inf, np.float32),
        np.zeros(5, np.int32),
        np.array([[0], [3], [3], [1], [0], [4]], np.int32),
        rng.integers(0, 3, 6).astype(np.float32),
        np.arange(6, dtype=np.int32),
    ]
    check(text, args, passes=[])


@pytest.mark.parametrize("layout", ["{0,1}", "{1,0}"])
def test_sort_and_gather_read_operands_with_any_layout(layout):
    check(
        module(
            f"""
  x = f32[7,3]{layout} parameter(0)
  s = f32[7,3]{layout} sort(x), dimensions={{0}}, to_apply=lt
  i = s32[2,1] parameter(1)
  g = f32[2,3] gather(s, i), offset_dims={{1}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, slice_sizes={{1,3}}
  ROOT t = (f32[7,3]{layout}, f32[2,3]) tuple(s, g)
""",
            SORTS,
        ),
        passes=[],
    )
    check(
        module(
            f"""
  x = f32[7,3]{layout} parameter(0)
  ROOT s = f32[7,3]{layout} sort(x), dimensions={{0}}, to_apply=lt
""",
            SORTS,
        )
    )  # with the cpu pipeline (layout assignment, copies)


@pytest.mark.parametrize("left", ["true", "false"])
@pytest.mark.parametrize("lower", ["true", "false"])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE"])
@pytest.mark.parametrize("unit", ["true", "false"])
def test_triangular_solve_every_side_triangle_transpose_and_diagonal(left, lower, transpose, unit):
    pytest.importorskip("scipy")
    b_shape = "f32[2,5,3]" if left == "true" else "f32[2,3,5]"
    text = module(f"""
  a = f32[2,5,5] parameter(0)
  b = {b_shape} parameter(1)
  ROOT x = {b_shape} triangular-solve(a, b), left_side={left}, lower={lower}, transpose_a={transpose}, unit_diagonal={unit}
""")
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((2, 5, 5)) + 6 * np.eye(5)).astype(np.float32)
    b = rng.standard_normal((2, 5, 3) if left == "true" else (2, 3, 5)).astype(np.float32)
    check(text, [a, b], passes=[], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lower", ["true", "false"])
def test_cholesky_of_both_triangles_and_of_a_matrix_that_is_not_positive_definite(lower):
    pytest.importorskip("scipy")
    text = module(f"""
  a = f64[3,6,6] parameter(0)
  ROOT l = f64[3,6,6] cholesky(a), lower={lower}
""")
    rng = np.random.default_rng(4)
    m = rng.standard_normal((3, 6, 6))
    a = m @ m.transpose(0, 2, 1) + 6 * np.eye(6)
    a[1, 3, 3] = -50.0  # fails at column 3: NaN from there on
    a[2] += np.triu(rng.standard_normal((6, 6)), 1) * (lower == "true")  # the unread triangle
    a[2] += np.tril(rng.standard_normal((6, 6)), -1) * (lower == "false")
    check(text, [a], passes=[], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("select", ["GE", "GT", "LT"])
def test_select_and_scatter_by_channel_rows_keeps_the_interpreters_ties(select):
    # integers with many ties: which tap wins a tie is the select's rule, row by row
    text = module(
        """
  x = s32[2,5,6,4] parameter(0)
  s = s32[2,3,3,4] parameter(1)
  ROOT r = s32[2,5,6,4] select-and-scatter(x, s, s32[] constant(0)), window={size=1x2x3x1 stride=1x2x2x1 pad=0_0x1_0x1_1x0_0}, select=pick, scatter=add
""",
        f"""
pick {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction={select}
}}
add {{
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}}
""",
    )
    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, (2, 5, 6, 4)).astype(np.int32)
    exe = check(text, [x, rng.integers(-5, 5, (2, 3, 3, 4)).astype(np.int32)], passes=[])
    (source,) = [spec.source for spec in exe.program.kernels.values()]
    assert re.search(r"for w2 in .*\n(.*\n)*? +for i3 in range\(4\)", source), source


@pytest.mark.parametrize("n, k, heap", [(32000, 50, True), (1000, 100, True), (300, 50, False)])
def test_topk_of_a_long_row_keeps_a_heap_instead_of_sorting_it(n, k, heap):
    # top-50 of [64, 32000] logits sorted every whole row: 192 ms, against XLA's 5 (4.4 now)
    from minixla.backends.cpu import sort_kernels

    text = f"""HloModule m
ENTRY e {{
  x = f32[2,{n}] parameter(0)
  ROOT t = (f32[2,{k}], s32[2,{k}]) topk(x), k={k}, largest=true
}}"""
    source = sort_kernels.topk(minixla.parse_hlo_module(text).entry.root).source
    assert ("chosen = np.sort" in source) == heap
    assert ("np.argsort(keys, kind='mergesort')" in source) != heap
