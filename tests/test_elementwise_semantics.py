"""Reference semantics of elementwise ops, checked against values worked out by hand from XLA's
rules (not by re-running the code under test). Any RuntimeWarning fails a test."""

import math

import ml_dtypes
import numpy as np
import pytest

from minixla.reference.elementwise import (
    BINARY,
    UNARY,
    bitcast_convert,
    clamp,
    compare,
    convert,
    reduce_precision,
    select,
)
from minixla.errors import ShapeError, UnsupportedError

pytestmark = pytest.mark.filterwarnings("error")

BF16 = np.dtype(ml_dtypes.bfloat16)
S32_MIN, S32_MAX = -(2**31), 2**31 - 1
NEG_NAN = np.copysign(np.float32(np.nan), np.float32(-1))


def arr(values, dtype):
    return np.array(values, dtype=dtype)


def same(actual, expected):
    """Equal values, dtype and shape; NaN equals NaN and the sign of zero matters."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype.kind == "f" or expected.dtype == BF16:
        a, e = actual.astype(np.float64), expected.astype(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(e)), (actual, expected)
        ok = ~np.isnan(e)
        assert np.array_equal(a[ok], e[ok]), (actual, expected)
        assert np.array_equal(np.signbit(a[ok]), np.signbit(e[ok])), (actual, expected)
    else:
        assert np.array_equal(actual, expected), (actual, expected)


# ---- integer division and remainder ----

DIV_CASES = [  # lhs, rhs, quotient, remainder (truncating; x/0 = -1, x%0 = x)
    (7, 2, 3, 1),
    (-7, 2, -3, -1),
    (7, -2, -3, 1),
    (-7, -2, 3, -1),
    (6, 3, 2, 0),
    (-1, 2, 0, -1),
    (5, 0, -1, 5),
    (-5, 0, -1, -5),
    (0, 0, -1, 0),
]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_signed_divide_and_remainder(dtype):
    lhs, rhs, quot, rem = (arr(column, dtype) for column in zip(*DIV_CASES))
    same(BINARY["divide"](lhs, rhs), quot)
    same(BINARY["remainder"](lhs, rhs), rem)


@pytest.mark.parametrize("dtype, int_min", [(np.int8, -128), (np.int32, S32_MIN)])
def test_int_min_divided_by_minus_one(dtype, int_min):
    same(BINARY["divide"](arr([int_min], dtype), arr([-1], dtype)), arr([int_min], dtype))
    same(BINARY["remainder"](arr([int_min], dtype), arr([-1], dtype)), arr([0], dtype))


def test_unsigned_divide_and_remainder():
    lhs, rhs = arr([7, 7, 0xFFFFFFFF, 0], np.uint32), arr([2, 0, 2, 0], np.uint32)
    same(BINARY["divide"](lhs, rhs), arr([3, 0xFFFFFFFF, 0x7FFFFFFF, 0xFFFFFFFF], np.uint32))
    same(BINARY["remainder"](lhs, rhs), arr([1, 7, 1, 0], np.uint32))


def test_float_remainder_is_fmod():
    same(
        BINARY["remainder"](arr([-7.5, 7.5, 5.0], np.float32), arr([2, -2, np.inf], np.float32)),
        arr([-1.5, 1.5, 5.0], np.float32),
    )


def test_integer_arithmetic_wraps():
    same(BINARY["add"](arr([127], np.int8), arr([1], np.int8)), arr([-128], np.int8))
    same(BINARY["subtract"](arr([0], np.uint8), arr([1], np.uint8)), arr([255], np.uint8))
    same(BINARY["multiply"](arr([65536], np.int32), arr([65536], np.int32)), arr([0], np.int32))
    same(UNARY["negate"](arr([S32_MIN], np.int32)), arr([S32_MIN], np.int32))
    same(UNARY["abs"](arr([S32_MIN, -3], np.int32)), arr([S32_MIN, 3], np.int32))
    same(UNARY["abs"](arr([-128], np.int8)), arr([-128], np.int8))


def test_integer_power():
    # negative exponents as XLA's compiled kernels: base 1 -> 1, base -1 -> +-1 by parity
    base = arr([2, -2, 2, 1, -1, -1, -1, 3, 0], np.int32)
    exponent = arr([10, 3, -1, -3, -1, -2, 2, 0, 0], np.int32)
    same(BINARY["power"](base, exponent), arr([1024, -8, 0, 1, -1, 1, 1, 1, 1], np.int32))
    same(BINARY["power"](arr([2], np.int8), arr([7], np.int8)), arr([-128], np.int8))
    same(BINARY["power"](arr([2, 3], np.uint8), arr([8, 5], np.uint8)), arr([0, 243], np.uint8))
    # only the exponent's low 6 bits count, as in XLA's kernels: 3^64 = 3^0, 3^200 = 3^8
    same(BINARY["power"](arr([3, 3], np.uint8), arr([64, 200], np.uint8)), arr([1, 161], np.uint8))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float_power_of_scalars_follows_c_pow(dtype):
    # NumPy's scalar path computes x^0.5 as sqrt(x): NaN for -inf and -0 for -0
    power = BINARY["power"]
    got = power(np.array(-np.inf, dtype), np.array(0.5, dtype))
    assert got.shape == () and got == np.inf
    got = power(np.array(-0.0, dtype), np.array(0.5, dtype))
    assert got == 0 and not np.signbit(got)
    same(power(arr([-np.inf, -0.0], dtype), arr([0.5, 0.5], dtype)), arr([np.inf, 0.0], dtype))


# ---- shifts ----


def test_shifts_s32():
    lhs = arr([1, 1, 1, -8, -8, 8], np.int32)
    amount = arr([31, 32, -1, 1, 32, 40], np.int32)
    same(BINARY["shift-left"](lhs, amount), arr([S32_MIN, 0, 0, -16, 0, 0], np.int32))
    same(BINARY["shift-right-arithmetic"](lhs, amount), arr([0, 0, 0, -4, -1, 0], np.int32))
    same(
        BINARY["shift-right-logical"](arr([-8, -8, -8], np.int32), arr([28, 32, -1], np.int32)),
        arr([15, 0, 0], np.int32),
    )


def test_shifts_u8():
    lhs, amount = arr([200, 200, 200, 100], np.uint8), arr([1, 3, 8, 9], np.uint8)
    same(BINARY["shift-left"](lhs, amount), arr([144, 64, 0, 0], np.uint8))
    same(BINARY["shift-right-logical"](lhs, amount), arr([100, 25, 0, 0], np.uint8))
    # 200 is -56 as signed: -56 >> 1 = -28 (228), >> 3 = -7 (249); past the width: sign fill.
    same(BINARY["shift-right-arithmetic"](lhs, amount), arr([228, 249, 255, 0], np.uint8))


# ---- floats: NaN, -0.0, rounding ----


def test_maximum_minimum_propagate_nan_and_order_zeros():
    nan = np.nan
    lhs, rhs = arr([nan, 1, -0.0, 0.0, 2], np.float32), arr([1, nan, 0.0, -0.0, 3], np.float32)
    same(BINARY["maximum"](lhs, rhs), arr([nan, nan, 0.0, 0.0, 3], np.float32))
    same(BINARY["minimum"](lhs, rhs), arr([nan, nan, -0.0, -0.0, 2], np.float32))
    same(BINARY["maximum"](arr([-5, 3], np.int32), arr([2, -7], np.int32)), arr([2, 3], np.int32))


def test_sign_and_negate_of_zero_and_nan():
    values = arr([-0.0, 0.0, np.nan, -3.5, 2.0, -np.inf], np.float32)
    same(UNARY["sign"](values), arr([-0.0, 0.0, np.nan, -1, 1, -1], np.float32))
    same(UNARY["negate"](arr([0.0, -0.0], np.float32)), arr([-0.0, 0.0], np.float32))
    same(UNARY["sign"](arr([-5, 0, 7, S32_MIN], np.int32)), arr([-1, 0, 1, -1], np.int32))
    same(UNARY["sign"](arr([0, 9], np.uint8)), arr([0, 1], np.uint8))


def test_round_afz_versus_even():
    values = arr([-2.5, -1.5, -0.5, -0.3, 0.5, 1.5, 2.5, 0.49999997], np.float32)
    same(UNARY["round-nearest-afz"](values), arr([-3, -2, -1, -0.0, 1, 2, 3, 0], np.float32))
    same(UNARY["round-nearest-even"](values), arr([-2, -2, -0.0, -0.0, 0, 2, 2, 0], np.float32))


def test_compare_total_order():
    ordered = np.array([NEG_NAN, -np.inf, -0.0, 0.0, np.inf, np.nan], np.float32)
    assert np.signbit(ordered[0]) and np.isnan(ordered[0])
    for i in range(len(ordered)):
        for j in range(len(ordered)):
            lhs, rhs = ordered[i : i + 1], ordered[j : j + 1]
            assert compare(lhs, rhs, "LT", "TOTALORDER")[0] == (i < j), (i, j)
            assert compare(lhs, rhs, "EQ", "TOTALORDER")[0] == (i == j), (i, j)
    same(compare(arr([-0.0], np.float32), arr([0.0], np.float32), "EQ"), arr([True], bool))


def test_compare_float_nan_is_unordered():
    nan, one = arr([np.nan], np.float32), arr([1], np.float32)
    for direction, expected in [("EQ", False), ("NE", True), ("LT", False), ("GE", False)]:
        same(compare(nan, one, direction), arr([expected], bool))
        same(compare(nan, nan, direction), arr([expected], bool))


def test_compare_signed_and_unsigned_reading():
    same(compare(arr([-1], np.int32), arr([1], np.int32), "LT"), arr([True], bool))
    same(compare(arr([-1], np.int32), arr([1], np.int32), "LT", "UNSIGNED"), arr([False], bool))
    same(compare(arr([255], np.uint8), arr([1], np.uint8), "GT"), arr([True], bool))
    same(compare(arr([255], np.uint8), arr([1], np.uint8), "GT", "SIGNED"), arr([False], bool))


# ---- convert ----


def test_convert_f32_to_s32_truncates_saturates_and_zeroes_nan():
    values = arr([1.9, -1.9, 2.5, -0.5, np.nan, 3e9, -3e9, np.inf, -np.inf], np.float32)
    same(
        convert(values, np.int32),
        arr([1, -1, 2, 0, 0, S32_MAX, S32_MIN, S32_MAX, S32_MIN], np.int32),
    )
    same(convert(arr([-1.5, 300.0, 255.9], np.float32), np.uint8), arr([0, 255, 255], np.uint8))


def test_convert_s32_to_s8_wraps():
    same(
        convert(arr([300, -129, 128, 255, -128], np.int32), np.int8),
        arr([44, 127, -128, -1, -128], np.int8),
    )


def test_convert_f32_to_bf16_rounds_ties_to_even():
    # bf16 keeps 7 mantissa bits: 1+2^-8 ties down to 1.0 (0x3F80), 1+3*2^-8 ties up to
    # 1+2^-6 (0x3F82), anything above the tie rounds up to 1+2^-7 (0x3F81).
    values = arr([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20, -(1 + 2**-8)], np.float32)
    bits = convert(values, BF16).view(np.uint16)
    same(bits, arr([0x3F80, 0x3F82, 0x3F81, 0xBF80], np.uint16))


def test_convert_f64_to_bf16_rounds_once():
    # Through f32 this would round twice (to the tie 1+2^-8, then down to 1.0).
    same(
        convert(arr([1 + 2**-8 + 2**-30], np.float64), BF16).view(np.uint16),
        arr([0x3F81], np.uint16),
    )


def test_convert_pred():
    same(
        convert(arr([0.0, -0.0, 2.5, np.nan], np.float32), np.bool_),
        arr([False, False, True, True], bool),
    )
    same(convert(arr([0, -7], np.int32), np.bool_), arr([False, True], bool))
    same(convert(arr([True, False], bool), np.int32), arr([1, 0], np.int32))
    same(convert(arr([True, False], bool), np.float32), arr([1.0, 0.0], np.float32))
    same(convert(arr([True], bool), BF16).view(np.uint16), arr([0x3F80], np.uint16))


def test_convert_complex_to_real_keeps_real_part():
    same(convert(arr([3.7 - 4j], np.complex64), np.int32), arr([3], np.int32))
    same(convert(arr([3.5 - 4j], np.complex64), np.float32), arr([3.5], np.float32))


# ---- bitcast-convert ----


def test_bitcast_f32_to_u8_adds_minor_dim():
    same(
        bitcast_convert(arr([1.0, -2.0], np.float32), np.uint8),
        arr([[0, 0, 0x80, 0x3F], [0, 0, 0, 0xC0]], np.uint8),
    )
    assert bitcast_convert(np.zeros((2, 3), np.float32), np.uint8).shape == (2, 3, 4)
    assert bitcast_convert(np.float32(1.0), np.uint8).shape == (4,)


def test_bitcast_u8_to_f32_removes_minor_dim():
    same(
        bitcast_convert(arr([[0, 0, 0x80, 0x3F], [0, 0, 0, 0xC0]], np.uint8), np.float32),
        arr([1.0, -2.0], np.float32),
    )
    with pytest.raises(ShapeError):
        bitcast_convert(np.zeros((2, 3), np.uint8), np.float32)


def test_bitcast_bf16_u16_round_trip():
    same(bitcast_convert(arr([1.0, -2.0], BF16), np.uint16), arr([0x3F80, 0xC000], np.uint16))
    same(
        bitcast_convert(arr([0x4049], np.uint16), BF16).astype(np.float32),
        arr([3.140625], np.float32),
    )
    same(bitcast_convert(arr([-1], np.int32), np.uint32), arr([0xFFFFFFFF], np.uint32))


def test_bitcast_to_and_from_pred_reads_a_pred_as_a_byte():
    # XLA's BitcastDtypesExpander: the bytes of a wider type each converted to pred (not 0:
    # true), and preds converted to the bytes 0 and 1 of a wider one
    same(
        bitcast_convert(arr([0, 1, 256, -1], np.int32), np.bool_),
        arr([[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 1, 1]], np.bool_),
    )
    same(
        bitcast_convert(arr([[1, 0, 0, 1], [0, 0, 1, 0]], np.bool_), np.int32),
        arr([1 + (1 << 24), 1 << 16], np.int32),
    )
    same(bitcast_convert(arr([0, 2, 255], np.uint8), np.bool_), arr([0, 1, 1], np.bool_))
    same(bitcast_convert(arr([1, 0], np.bool_), np.int8), arr([1, 0], np.int8))


# ---- reduce-precision ----


def test_reduce_precision_to_bf16_format_equals_bf16_conversion():
    values = arr(
        [1 + 2**-8, 1 + 3 * 2**-8, -1 + 2**-10, 3.14159, 1e-38, 3e38, -7.0, 0.0, np.inf], np.float32
    )
    same(reduce_precision(values, 8, 7), values.astype(BF16).astype(np.float32))


def test_reduce_precision_to_f16_format():
    values = arr(
        [
            2**-15,
            -(2**-15),
            2**-14,
            65504,
            65519,
            65520,
            1e6,
            -1e6,
            np.nan,
            1 + 2**-11,
            1 + 3 * 2**-11,
        ],
        np.float32,
    )
    expected = arr(
        [0.0, -0.0, 2**-14, 65504, 65504, np.inf, np.inf, -np.inf, np.nan, 1.0, 1 + 2**-9],
        np.float32,
    )
    same(reduce_precision(values, 5, 10), expected)


def test_reduce_precision_keeps_type():
    same(reduce_precision(arr([1 + 2**-7], BF16), 8, 3), arr([1.0], BF16))
    same(reduce_precision(arr([1 + 2**-11], np.float64), 5, 10), arr([1.0], np.float64))


# ---- bit counts, logic ----


def test_popcnt_and_clz():
    s32 = arr([-1, 0, 1, S32_MIN, S32_MAX], np.int32)
    same(UNARY["popcnt"](s32), arr([32, 0, 1, 1, 31], np.int32))
    same(UNARY["count-leading-zeros"](s32), arr([0, 32, 31, 0, 1], np.int32))
    u8 = arr([0, 1, 128, 255, 15], np.uint8)
    same(UNARY["popcnt"](u8), arr([0, 1, 1, 8, 4], np.uint8))
    same(UNARY["count-leading-zeros"](u8), arr([8, 7, 0, 0, 4], np.uint8))
    same(UNARY["popcnt"](arr([-128, -1], np.int8)), arr([1, 8], np.int8))


def test_not_and_logic_on_pred_and_ints():
    same(UNARY["not"](arr([True, False], bool)), arr([False, True], bool))
    same(UNARY["not"](arr([0, 5], np.int32)), arr([-1, -6], np.int32))
    same(UNARY["not"](arr([0], np.uint8)), arr([255], np.uint8))
    t, f = arr([True, True, False], bool), arr([True, False, False], bool)
    same(BINARY["xor"](t, f), arr([False, True, False], bool))
    same(BINARY["and"](t, f), arr([True, False, False], bool))
    same(BINARY["xor"](arr([12], np.uint8), arr([10], np.uint8)), arr([6], np.uint8))


def test_mulhi():
    same(BINARY["mulhi"](arr([-1, 2**30], np.int32), arr([5, 8], np.int32)), arr([-1, 2], np.int32))
    same(
        BINARY["mulhi"](arr([0xFFFFFFFF], np.uint32), arr([0xFFFFFFFF], np.uint32)),
        arr([0xFFFFFFFE], np.uint32),
    )
    same(BINARY["mulhi"](arr([2**62, -5], np.int64), arr([8, 3], np.int64)), arr([2, -1], np.int64))
    same(
        BINARY["mulhi"](arr([2**64 - 1], np.uint64), arr([2**64 - 1], np.uint64)),
        arr([2**64 - 2], np.uint64),
    )


# ---- ternary ----


def test_select_and_clamp():
    same(
        select(np.array(True), arr([1, 2], np.int32), arr([3, 4], np.int32)), arr([1, 2], np.int32)
    )
    same(
        select(arr([True, False], bool), arr([1, 2], np.int32), arr([3, 4], np.int32)),
        arr([1, 4], np.int32),
    )
    same(
        clamp(np.float32(0), arr([-1, 0.5, 2, np.nan], np.float32), np.float32(1)),
        arr([0, 0.5, 1, np.nan], np.float32),
    )
    same(
        clamp(np.float32(np.nan), arr([0.5], np.float32), np.float32(1)), arr([np.nan], np.float32)
    )
    same(
        clamp(arr([0, 0], np.int32), arr([-5, 9], np.int32), arr([3, 3], np.int32)),
        arr([0, 3], np.int32),
    )


# ---- transcendental and narrow floats ----


def test_transcendentals_and_special_values():
    same(UNARY["logistic"](arr([-1000, 0, 1000], np.float32)), arr([0, 0.5, 1], np.float32))
    same(UNARY["cbrt"](arr([-27.0], np.float64)), arr([-3.0], np.float64))
    same(UNARY["rsqrt"](arr([4.0, 0.0], np.float32)), arr([0.5, np.inf], np.float32))
    assert UNARY["erf"](arr([0.5], np.float64))[0] == pytest.approx(math.erf(0.5), rel=1e-15)
    same(UNARY["erf"](arr([-np.inf, 0.0], np.float32)), arr([-1.0, 0.0], np.float32))
    same(UNARY["is-finite"](arr([1, np.inf, np.nan], np.float32)), arr([True, False, False], bool))
    same(
        BINARY["power"](arr([np.nan, 1.0], np.float32), arr([0.0, np.nan], np.float32)),
        arr([1.0, 1.0], np.float32),
    )


def test_narrow_float_results_are_rounded_each_op():
    # 1 + 2^-8 is a tie in bf16, so the f32 sum rounds back down to 1.0.
    result = BINARY["add"](arr([1.0], BF16), arr([2**-8], BF16))
    assert result.dtype == BF16 and result.view(np.uint16)[0] == 0x3F80
    assert UNARY["exponential"](arr([0.0], np.float16)).dtype == np.float16


def test_complex_ops():
    value = BINARY["complex"](arr([np.inf, 3.0], np.float32), arr([1.0, -4.0], np.float32))
    assert value.dtype == np.complex64
    same(UNARY["real"](value), arr([np.inf, 3.0], np.float32))
    same(UNARY["imag"](value), arr([1.0, -4.0], np.float32))
    same(UNARY["abs"](value[1:]), arr([5.0], np.float32))


def test_unsupported_combinations_name_op_and_type():
    with pytest.raises(UnsupportedError, match="floor.*s32"):
        UNARY["floor"](arr([1], np.int32))
    with pytest.raises(UnsupportedError, match="shift-left.*f32"):
        BINARY["shift-left"](arr([1], np.float32), arr([1], np.float32))
    with pytest.raises(UnsupportedError, match="subtract.*pred"):
        BINARY["subtract"](arr([True], bool), arr([True], bool))
    with pytest.raises(UnsupportedError):
        compare(arr([1j], np.complex64), arr([1j], np.complex64), "LT")


# ---- every op on empty arrays and 0-d scalars ----

SWEEP_DTYPES = [
    np.float32,
    np.float64,
    BF16,
    np.float16,
    np.int32,
    np.uint8,
    np.int64,
    np.bool_,
    np.complex64,
    np.dtype(ml_dtypes.int4),
]


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 3)])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_shapes(name, shape):
    supported = 0
    for dtype in SWEEP_DTYPES:
        try:
            result = UNARY[name](np.ones(shape, dtype))
        except UnsupportedError:
            continue
        supported += 1
        assert isinstance(result, np.ndarray) and result.shape == shape, (dtype, result)
    assert supported


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (2, 3)])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_shapes(name, shape):
    supported = 0
    for dtype in SWEEP_DTYPES:
        try:
            result = BINARY[name](np.ones(shape, dtype), np.ones(shape, dtype))
        except UnsupportedError:
            continue
        supported += 1
        assert isinstance(result, np.ndarray) and result.shape == shape, (dtype, result)
    assert supported


@pytest.mark.parametrize("shape", [(), (0,)])
def test_other_entry_points_shapes(shape):
    values = np.ones(shape, np.float32)
    assert compare(values, values, "GE", "TOTALORDER").shape == shape
    assert select(np.ones(shape, bool), values, values).shape == shape
    assert clamp(np.float32(0), values, np.float32(1)).shape == shape
    assert convert(values, np.int8).shape == shape
    assert reduce_precision(values, 5, 10).shape == shape
    assert bitcast_convert(values, np.uint16).shape == shape + (2,)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "op, value",
    [("log", -1.5), ("log-plus-one", -2.0), ("sqrt", -4.0), ("asin", 2.0), ("acos", -3.0)],
)
def test_a_nan_made_from_a_number_is_the_negative_default_nan(op, value, dtype):
    # x86's default NaN, which compiled code makes; NumPy's sign for these depends on the
    # SIMD path it takes on the machine (+NaN for f64 log and asin on AVX2-only CPUs)
    x = np.full(9, value, dtype)  # long enough for NumPy's vector loops
    result = UNARY[op](x)
    assert np.isnan(result).all() and np.signbit(result).all()
    kept = UNARY[op](np.array([np.nan, -np.nan], dtype))  # a NaN operand passes as it is
    assert np.signbit(kept).tolist() == [False, True]
