"""One-op regressions for disagreements between the cpu backend and the interpreter found by the
differential fuzzer (minixla.testing.fuzz) and by XLA's own test modules: HLO text in, the same
values out of both, bit for bit (NaN payloads aside, see docs/semantics.md)."""

import numpy as np

import minixla
from minixla.testing.compare import compare_values


def both(text: str, *args):
    module = minixla.parse_hlo_module(text)
    want = minixla.compile(module, backend="interpreter")(*args)
    got = minixla.compile(module, backend="cpu")(*args)
    problems = compare_values(
        got, want, rtol=0, atol=0, what="cpu vs interpreter", signed_zeros=True
    )
    assert not problems, problems
    return want


def bf16(values):
    import ml_dtypes

    return np.array(values, np.float32).astype(ml_dtypes.bfloat16)


def test_bf16_totalorder_sort():
    # the cpu comparator reinterpreted bf16 (held as f32) as a 16-bit integer: a Numba typing
    # error
    text = """HloModule m
less {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  x = bf16[6] parameter(0)
  ROOT s = bf16[6] sort(x), dimensions={0}, to_apply=less
}"""
    x = bf16([np.nan, -0.0, 1.0, -np.inf, 0.0, -np.nan])
    got = both(text, x).astype(np.float32)
    assert np.signbit(got[0]) and np.isnan(got[0]) and got[1] == -np.inf
    assert got[2] == 0 and np.signbit(got[2]) and got[4] == 1.0 and np.isnan(got[5])


def test_bitcast_that_changes_the_element_type():
    # a row-major bitcast is a view on cpu, which kept the operand's dtype
    text = """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  b = s32[3,2] bitcast(x)
  ROOT n = s32[3,2] negate(b)
}"""
    x = np.array([[1.0, -0.0, np.inf], [2.5, np.nan, -3.0]], np.float32)
    assert (both(text, x) == -x.view(np.int32).reshape(3, 2)).all()
    root_text = """HloModule m
ENTRY e {
  x = f32[2,3] parameter(0)
  ROOT b = s32[6] bitcast(x)
}"""
    assert both(root_text, x).dtype == np.int32


def test_bitcast_convert_to_and_from_pred():
    to_pred = """HloModule m
ENTRY e {
  p = s32[5] parameter(0)
  ROOT out = pred[5,4] bitcast-convert(p)
}"""
    x = np.array([0, 1, 256, -1, 0x7F00FF00], np.int32)
    assert (both(to_pred, x) == (x.view(np.uint8).reshape(5, 4) != 0)).all()
    from_pred = """HloModule m
ENTRY e {
  p = pred[5,4] parameter(0)
  ROOT out = s32[5] bitcast-convert(p)
}"""
    bits = np.arange(20).reshape(5, 4) % 3 == 0
    assert (both(from_pred, bits) == bits.astype(np.uint8).view(np.int32).reshape(5)).all()


def test_bitcast_of_a_transpose_in_a_column_major_layout():
    # layout assignment turned the transpose into a bitcast with a row-major result, and the
    # bitcast that read it then reinterpreted the wrong bytes
    text = """HloModule m
ENTRY e {
  p = f32[3,3]{0,1} parameter(0)
  t1 = f32[3,3]{0,1} transpose(p), dimensions={1,0}
  b1 = f32[3,3]{1,0} bitcast(t1)
  ROOT t2 = f32[3,3]{0,1} transpose(b1), dimensions={1,0}
}"""
    p = np.arange(9, dtype=np.float32).reshape(3, 3)
    assert (both(text, p) == p.T).all()


def test_complex_divide_by_zero_and_infinities():
    # Numba's complex `/` raises ZeroDivisionError for a zero divisor; NumPy gives inf or NaN
    for ctype, ftype in (("c64", np.complex64), ("c128", np.complex128)):
        text = f"""HloModule m
ENTRY e {{
  a = {ctype}[8] parameter(0)
  b = {ctype}[8] parameter(1)
  ROOT d = {ctype}[8] divide(a, b)
}}"""
        inf, nan = np.inf, np.nan
        a = np.array(
            [1 + 1j, 1 + 1j, complex(1, inf), complex(nan, 1), 1 + 2j, 1 - 1j, 3 + 4j, -2.5 + 0.1j],
            ftype,
        )
        b = np.array(
            [
                0,
                complex(-0.0, 0),
                complex(inf, inf),
                1 + 1j,
                3 + 4j,
                complex(inf, 1),
                1e-30 + 1e30j,
                0.3 - 7j,
            ],
            ftype,
        )
        both(text, a, b)


def test_fft_lengths_that_differ_from_the_operand():
    # cpu transformed the whole operand (ignoring fft_length) and raised NumPy's ValueError for
    # an empty one; the interpreter cuts or pads to the lengths as XLA's evaluator does
    x = (np.arange(6) - 2.5 + 1j * np.arange(6)[::-1]).astype(np.complex64).reshape(1, 6)
    for length in (0, 1, 4):
        text = f"""HloModule m
ENTRY e {{
  x = c64[1,6] parameter(0)
  ROOT f = c64[1,6] fft(x), fft_type=FFT, fft_length={{{length}}}
}}"""
        both(text, x)
    empty = """HloModule m
ENTRY e {
  x = c64[1,0] parameter(0)
  ROOT f = c64[1,0] fft(x), fft_type=IFFT, fft_length={1}
}"""
    assert both(empty, np.zeros((1, 0), np.complex64)).shape == (1, 0)


def test_gather_of_an_empty_slice_gives_zeros():
    # a collapsed dim of slice size 0 left the window empty and NumPy's reshape raised
    # ValueError; XLA's gather simplifier makes such a gather a broadcast zero
    text = """HloModule m
ENTRY e {
  x = f32[0,2] parameter(0)
  i = s32[3] parameter(1)
  ROOT g = f32[3,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0},
      start_index_map={0}, index_vector_dim=1, slice_sizes={0,2}
}"""
    got = both(text, np.zeros((0, 2), np.float32), np.array([0, 5, -1], np.int32))
    assert got.shape == (3, 2) and not got.any()


def test_rng_normal_with_a_negative_sigma():
    # NumPy's normal() raised ValueError for scale < 0; XLA computes mu + sigma * N(0, 1)
    text = """HloModule m
ENTRY e {
  mu = f32[] parameter(0)
  sigma = f32[] parameter(1)
  ROOT r = f32[2,3] rng(mu, sigma), distribution=rng_normal
}"""
    negative = both(text, np.float32(1), np.float32(-2))
    positive = both(text, np.float32(1), np.float32(2))
    assert np.allclose(negative - 1, -(positive - 1))


def test_bitcast_of_a_scalar_stays_a_scalar():
    # the interpreter returned shape (1,) for a scalar bitcast
    text = """HloModule m
ENTRY e {
  x = f32[] parameter(0)
  ROOT b = s32[] bitcast(x)
}"""
    assert both(text, np.float32(-0.0)).shape == ()


def test_rng_uniform_with_high_below_low():
    # NumPy's uniform() raised ValueError for high < low
    text = """HloModule m
ENTRY e {
  low = f32[] parameter(0)
  high = f32[] parameter(1)
  ROOT r = f32[4] rng(low, high), distribution=rng_uniform
}"""
    got = both(text, np.float32(2), np.float32(1))
    assert ((got > 1) & (got <= 2)).all()


def test_bf16_reduce_window_sums_in_f32():
    # cpu rounded the running bf16 sum after every tap; XLA and the interpreter add in f32 and
    # round once per output element (the windowed loop and the running-scan kernel alike)
    values = bf16(1 + np.arange(64) / 128.0).reshape(2, 32)
    for window in ("size=1x63 pad=0_0x31_31", "size=1x32 pad=0_0x31_0", "size=1x32 pad=0_0x0_31"):
        text = f"""HloModule m
add {{
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}}
ENTRY e {{
  x = bf16[2,32] parameter(0)
  zero = bf16[] constant(0)
  ROOT r = bf16[2,32] reduce-window(x, zero), window={{{window}}}, to_apply=add
}}"""
        got = both(text, values).astype(np.float32)
        whole_row = {"31_31": 31, "31_0": 31, "0_31": 0}[window.rsplit("x", 1)[1][:5]]
        assert got[0, whole_row] == bf16([values.astype(np.float32)[0].sum()])[0]


def test_cholesky_of_a_matrix_that_is_not_positive_definite():
    # LAPACK's potrf stops at the failing pivot and leaves the earlier columns below its block
    # unfinished; cpu copied that, where the interpreter finishes every column before the
    # failing one and gives NaN from there on
    for lower in ("true", "false"):
        text = f"""HloModule m
ENTRY e {{
  a = f32[1,8,8] parameter(0)
  ROOT c = f32[1,8,8] cholesky(a), lower={lower}
}}"""
        a = np.eye(8, dtype=np.float32) * 4 + 1
        a[0, 0] = 2
        a[5, 5] = -1  # fails at column 5
        got = both(text, a[None])[0]
        factor = got if lower == "true" else got.T
        assert (
            np.isfinite(factor[:, :5]).all() and np.isnan(factor[5:, 5:][np.tril_indices(3)]).all()
        )


def test_mixed_precision_identity_with_an_infinity():
    # algsimp's min(x, +inf) -> x returned the f16 operand for an f32 minimum and the rewrite
    # engine raised RuleError (a plain RuntimeError) out of the cpu compile
    for op, bound in (("minimum", "inf"), ("maximum", "-inf")):
        text = f"""HloModule m
ENTRY e {{
  x = f32[] constant({bound})
  y = f16[3] parameter(0)
  b = f32[3] broadcast(x), dimensions={{}}
  ROOT r = f32[3] {op}(b, y)
}}"""
        y = np.array([1.5, -np.inf, np.nan], np.float16)
        got = both(text, y)
        assert got.dtype == np.float32 and got[0] == 1.5 and np.isnan(got[2])


def test_f64_cbrt_at_the_ends_of_the_range():
    # the interpreter's Newton step cubed the root, which overflowed near the largest f64 and
    # gave -inf for cbrt(1.8e308)
    text = """HloModule m
ENTRY e {
  x = f64[6] parameter(0)
  ROOT c = f64[6] cbrt(x)
}"""
    top = np.finfo(np.float64).max
    x = np.array([top, -top, 1e300, -27.0, 8.0, 1e-300])
    module = minixla.parse_hlo_module(text)
    want = minixla.compile(module, backend="interpreter")(x)
    got = minixla.compile(module, backend="cpu")(x)
    assert np.allclose(want, np.cbrt(x), rtol=1e-15) and (want[3:5] == [-3.0, 2.0]).all()
    assert np.allclose(got, want, rtol=1e-15)


def test_mixed_precision_unary_ops_compute_in_the_wider_type():
    # f64 = tanh(f32 x) failed Numba's typing on cpu (a raw TypingError); f64 = cbrt(bf16 x)
    # was rounded to bf16 first on the interpreter but not on cpu, whose pipeline computes in
    # the wider type; cpu's f64 cbrt dropped the sign of a NaN, which a TOTALORDER sort sees
    import ml_dtypes

    x = np.array([-np.nan, np.nan, -1.3125, 4.6875, 0.3, -0.0, np.inf, 1e-30], np.float32)
    arrays = {
        "f16": x.astype(np.float16),
        "bf16": x.astype(ml_dtypes.bfloat16),
        "f32": x,
        "f64": x.astype(np.float64),
    }
    for op in ("tanh", "cbrt", "log", "sine"):
        for source, result in (
            ("f32", "f64"),
            ("bf16", "f64"),
            ("f32", "bf16"),
            ("f64", "f32"),
            ("f16", "bf16"),
            ("f64", "f64"),
        ):
            text = f"""HloModule m
ENTRY e {{
  x = {source}[8] parameter(0)
  ROOT r = {result}[8] {op}(x)
}}"""
            module = minixla.parse_hlo_module(text)
            want = minixla.compile(module, backend="interpreter")(arrays[source])
            got = minixla.compile(module, backend="cpu")(arrays[source])
            # the math functions are 1-2 ulp apart; a rounding to a narrow type is not
            rtol = 1e-15 if result == "f64" else 2e-7 if result == "f32" else 0
            assert not compare_values(got, want, rtol=rtol, atol=0, what=f"{op} {source}")
            signs = [np.signbit(np.asarray(v, np.float64)) for v in (got, want)]
            assert (signs[0] == signs[1]).all() and signs[0][0]  # -NaN in, -NaN out


def test_s64_products_that_wrap():
    # Numba marks int64 multiply `nsw`, and LLVM folded (p * c) / p to c although the product
    # wraps (INT64_MIN * -75 is INT64_MIN); negate and abs of INT64_MIN wrap too
    text = """HloModule m
ENTRY e {
  p = s64[4] parameter(0)
  c = s64[4] constant({-75, 3, -1, 2})
  m = s64[4] multiply(p, c)
  d = s64[4] divide(m, p)
  s = s64[4] add(p, d)
  n = s64[4] negate(p)
  a = s64[4] abs(p)
  ROOT t = (s64[4], s64[4], s64[4]) tuple(s, n, a)
}"""
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    p = np.array([low, high, low, 1 << 62], np.int64)
    got = both(text, p)
    assert got[0][0] == low + 1 and got[1][0] == low and got[2][0] == low


def test_ill_conditioned_triangular_solve_in_f64():
    # cpu solved f32 systems with strsm while the interpreter solves in f64; a unit lower
    # triangle of random entries grows errors exponentially, so f32 results drifted apart
    text = """HloModule m
ENTRY e {
  a = f32[64,64] parameter(0)
  b = f32[64,8] parameter(1)
  ROOT x = f32[64,8] triangular-solve(a, b), left_side=true, unit_diagonal=true, lower=true,
      transpose_a=NO_TRANSPOSE
}"""
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
    b = rng.uniform(-1, 1, (64, 8)).astype(np.float32)
    module = minixla.parse_hlo_module(text)
    want = minixla.compile(module, backend="interpreter")(a, b)
    got = minixla.compile(module, backend="cpu")(a, b)
    assert not compare_values(got, want, rtol=1e-6, atol=0, what="triangular-solve")


def test_bf16_scatter_with_an_f32_combiner_rounds_its_stores():
    # cpu stored the f32 sum of a bf16 scatter by keeping its upper half (truncation); the
    # interpreter rounds to nearest even
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = bf16[2] parameter(0)
  i = s32[1,1] parameter(1)
  u = bf16[1] parameter(2)
  ROOT r = bf16[2] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
    got = both(text, bf16([2.0, 0.0]), np.array([[0]], np.int32), bf16([0.0234375]))
    assert got.astype(np.float32)[0] == 2.03125  # 2.0234375 rounds up, truncation gave 2.015625


def test_asin_and_acos_outside_their_domain_give_a_negative_nan():
    # libm's NaN had no sign on cpu; a TOTALORDER sort then put it last, not first
    # (fuzz seed 3694)
    for opcode in ("asin", "acos"):
        for dtype in ("f32", "f64", "bf16"):
            text = f"""HloModule m
less {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}}
ENTRY e {{
  x = {dtype}[6] parameter(0)
  y = {dtype}[6] {opcode}(x)
  ROOT s = {dtype}[6] sort(y), dimensions={{0}}, to_apply=less
}}"""
            x = np.array([2.0, 0.0, -np.inf, np.nan, -1.5, 1.0], np.float32)
            x = bf16(x) if dtype == "bf16" else x.astype(np.float32 if dtype == "f32" else "f8")
            got = both(text, x).astype(np.float32)
            assert np.isnan(got[:3]).all() and np.signbit(got[:3]).all(), (opcode, dtype)
            assert np.isnan(got[5]) and not np.signbit(got[5])


def test_a_negative_nan_constant_keeps_its_sign_in_a_fused_kernel():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(-nan)
  b = f32[4] broadcast(c), dimensions={}
  ROOT a = f32[4] add(p, b)
}"""
    got = both(text, np.ones(4, np.float32))
    assert np.isnan(got).all() and np.signbit(got).all()


def test_mulhi_of_every_integer_width_is_native_and_exact():
    """cpu had no kernel code for mulhi; 64-bit products need 128 bits, checked against
    Python's integers."""
    for dtype, np_type in (
        ("s64", np.int64),
        ("u64", np.uint64),
        ("s32", np.int32),
        ("u8", np.uint8),
    ):
        info = np.iinfo(np_type)
        values = np.array([info.min, info.max, -1 % (info.max + 1), 0, 1, 3, info.max // 3], object)
        values = np.array([int(v) for v in values if info.min <= int(v) <= info.max], np_type)
        a, b = np.meshgrid(values, values)
        text = f"""HloModule m
ENTRY e {{
  a = {dtype}[{a.size}] parameter(0)
  b = {dtype}[{a.size}] parameter(1)
  ROOT h = {dtype}[{a.size}] mulhi(a, b)
}}"""
        got = minixla.compile(text, backend="cpu", strict=True)(a.ravel(), b.ravel())
        bits = np.iinfo(np_type).bits
        want = [(int(x) * int(y)) >> bits for x, y in zip(a.ravel(), b.ravel())]
        want = np.array([w % (1 << bits) for w in want], object).astype(np.uint64)
        assert got.view(f"u{got.itemsize}").astype(np.uint64).tolist() == want.tolist(), dtype
        np.testing.assert_array_equal(got, both(text, a.ravel(), b.ravel()))


def test_integer_power_reads_the_exponents_low_six_bits_as_xla_does():
    # XLA:CPU gives 3^64 = 1 and 3^66 = 9 (any exponent past 63 overflows a base other than
    # 0 and +-1); minixla computed the full wrapped power (found against XLA:CPU, fuzz seed 265)
    text = """HloModule m
ENTRY e {
  x = s64[6] parameter(0)
  y = s64[6] parameter(1)
  ROOT p = s64[6] power(x, y)
}"""
    base = np.array([3, 3, 2, 2, -1, 5], np.int64)
    exponent = np.array([64, 66, 63, 64, -3, 100], np.int64)
    got = both(text, base, exponent)
    assert got.tolist() == [1, 9, -(2**63), 1, -1, pow(5, 36, 2**64) - 2**64]


def test_a_mixed_precision_select_run_through_the_interpreters_handler():
    # f16 has no cpu kernel, so the select runs through the interpreter's handler, which was
    # called without the widening the interpreter applies to mixed float operands: a
    # ShapeError on cpu for a module the interpreter runs (and, in a fusion, an f16 array
    # where the next kernel wanted f64: a raw Numba TypeError; fuzz mutant seed 19)
    text = """HloModule m
ENTRY e {
  p = f16[2] parameter(0)
  q = f64[2] parameter(1)
  c = pred[2] parameter(2)
  ROOT s = f16[2] select(c, q, p)
}"""
    p, q = np.array([1.5, -2], np.float16), np.array([0.1, 7.0])
    got = both(text, p, q, np.array([True, False]))
    assert got.dtype == np.float16 and got.tolist() == [np.float16(0.1), -2]


def test_a_mixed_precision_clamp_computes_in_the_widest_type():
    # f16 (computed as f32 in kernels) clamped by an f64 bound: Numba found no f32/f64 fmax
    text = """HloModule m
ENTRY e {
  x = f16[5] parameter(0)
  y = f32[5] parameter(1)
  a = f16[5] clamp(f16[] constant(-40.2), x, f64[] constant(2.1602))
  b = f32[5] clamp(f64[] constant(-0.3), y, f64[] constant(0.30000000000000004))
  ROOT t = (f16[5], f32[5]) tuple(a, b)
}"""
    x = np.array([-np.inf, -50, 2.16, 3.0, np.nan], np.float16)
    y = np.array([-1.0, -0.29999998, 0.2, 0.30000001, np.nan], np.float32)
    a, b = both(text, x, y)
    assert a[0] == np.float16(-40.2) and a[3] == np.float16(2.1602) and np.isnan(a[4])
    assert b[3] == np.float32(0.30000000000000004) and np.isnan(b[4])


def test_mixed_precision_binary_ops_compute_in_the_widest_operand_type():
    # maximum(f64, f16) -> f16: Numba found no fmax of float64 and float32 (the f16 value)
    text = """HloModule m
ENTRY e {
  x = f16[4] parameter(0)
  y = f64[4] parameter(1)
  m = f16[4] maximum(y, x)
  r = f16[4] remainder(x, y)
  a = f32[4] add(y, f32[4] convert(x))
  c = pred[4] compare(y, x), direction=LT
  ROOT t = (f16[4], f16[4], f32[4], pred[4]) tuple(m, r, a, c)
}"""
    x = np.array([1.5, -np.inf, np.nan, 3.0], np.float16)
    y = np.array([1.5000001, 2.0, 0.5, np.nan], np.float64)
    m, r, a, c = both(text, x, y)
    assert m[0] == np.float16(1.5000001) and np.isnan(m[2]) and np.isnan(m[3])
    assert a[0] == np.float32(1.5000001 + 1.5) and not c[0] and not c[3]


def test_mixed_precision_scatter_updates_meet_the_combiner_as_the_operands_type():
    # f64 updates into an f32 operand with an f32 combiner: a Numba typing error on cpu
    text = """HloModule m
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[2,2] parameter(0)
  i = s32[3,1] constant({ {1}, {1}, {0} })
  u = f64[3,2] parameter(1)
  m = f32[2,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=max
  s = f32[2,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT t = (f32[2,2], f32[2,2]) tuple(m, s)
}"""
    x = np.array([[1.0, -2.0], [0.5, np.nan]], np.float32)
    u = np.array([[np.inf, 1e-9], [1.0000000001, -3.0], [0.1, 0.2]], np.float64)
    m, s = both(text, x, u)
    assert m[0, 0] == np.float32(1.0) and m[1, 0] == np.inf and np.isnan(m[1, 1])
    assert s[0, 1] == np.float32(-2.0) + np.float32(0.2) and s[1, 0] == np.inf


def test_a_map_whose_computation_mixes_f16_into_f32():
    # the widest-type lookup knew only the kernel types: a KeyError for f16 (a raw exception)
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f16[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f16[3] parameter(1)
  ROOT m = f32[3] map(x, y), dimensions={0}, to_apply=add
}"""
    x = np.array([1.0, -0.116277635, np.inf], np.float32)
    y = np.array([0.5, 2.0, -1.0], np.float16)
    got = both(text, x, y)
    assert got[0] == 1.5 and got[2] == np.inf


def test_a_map_passes_its_operands_as_its_computations_parameter_types():
    # an f32 operand mapped by a computation of an f64 parameter reached maximum as f32:
    # Numba found no fmax of float32 and float64
    text = """HloModule m
mx {
  a = f64[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT r = f32[3] map(x, y), dimensions={0}, to_apply=mx
}"""
    x = np.array([1.0, -np.inf, np.nan], np.float32)
    y = np.array([0.5, 2.0, -1.0], np.float32)
    got = both(text, x, y)
    assert got[0] == 1.0 and got[1] == 2.0 and np.isnan(got[2])


def test_a_clamp_of_its_widest_type_with_a_narrower_bound():
    # f64 operand, bf16 upper bound: the bound reached fmin as f32 (a Numba typing error)
    text = """HloModule m
ENTRY e {
  x = f64[4] parameter(0)
  ROOT c = f64[4] clamp(f64[] constant(-11.16), x, bf16[] constant(2.5))
}"""
    got = both(text, np.array([-20.0, 0.25, 3.0, np.nan]))
    assert list(got[:3]) == [-11.16, 0.25, 2.5] and np.isnan(got[3])
