"""Element-type conversions with XLA's semantics: convert, bitcast-convert, reduce-precision.

NumPy's own casts differ from XLA's in the corners: float->int overflow and NaN, rounding from
f64 straight to bf16/f8 (ml_dtypes rounds twice, through f32), and sub-byte integers. Each corner
is handled explicitly here. `round_to_dtype` is the single place narrow floats get rounded.
"""

from __future__ import annotations

import sys

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..ir.dtypes import COMPLEX, FLOAT, PRED, ElementType, from_numpy

F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)

# Bit layout (unsigned storage, exponent bits, mantissa bits) of the IEEE-like types that
# reduce-precision works on directly; other floats go through f32.
_FLOAT_LAYOUTS = {
    np.dtype(np.float16): (np.uint16, 5, 10),
    F32: (np.uint32, 8, 23),
    F64: (np.uint64, 11, 52),
}


def element_type(dtype) -> ElementType:
    return from_numpy(np.dtype(dtype))


def is_narrow_float(dtype) -> bool:
    """True for float types XLA computes in f32 (f16, bf16, the f8/f6/f4 family)."""
    dtype = np.dtype(dtype)
    return element_type(dtype).kind == FLOAT and dtype not in (F32, F64)


def compute_dtype(dtype) -> np.dtype:
    """The dtype an op on `dtype` values is evaluated in: f32 for narrow floats, else itself."""
    return F32 if is_narrow_float(dtype) else np.dtype(dtype)


def round_to_dtype(values, dtype) -> np.ndarray:
    """Rounds float `values` (any float dtype) to `dtype` once, to nearest even."""
    values, dtype = np.asarray(values), np.dtype(dtype)
    if values.dtype == dtype:
        return values
    if is_narrow_float(values.dtype):
        values = values.astype(F32)  # exact widening
    with np.errstate(all="ignore"):
        if values.dtype == F64 and is_narrow_float(dtype):
            values = _f64_to_f32_round_to_odd(values)
        return values.astype(dtype)


def _f64_to_f32_round_to_odd(values: np.ndarray) -> np.ndarray:
    """f64 -> f32 rounding to odd. Rounding that to a type with <= 22 significand bits gives the
    correctly rounded result, which ml_dtypes' own f64 casts (through f32 to nearest) do not."""
    nearest = values.astype(F32)
    bits = nearest.view(np.uint32).astype(np.int64)
    back = nearest.astype(F64)
    inexact = (back != values) & ~np.isnan(values)
    even = (bits & 1) == 0
    # Adding 1 to the bits grows the magnitude for either sign, so step toward the exact value.
    step = np.where(np.abs(back) > np.abs(values), -1, 1)
    bits = np.where(inexact & even, bits + step, bits)
    return bits.astype(np.uint32).view(F32).reshape(values.shape)


def int_range(etype: ElementType) -> tuple[int, int]:
    if etype.is_signed:
        return -(1 << (etype.bits - 1)), (1 << (etype.bits - 1)) - 1
    return 0, (1 << etype.bits) - 1


def wrap_int(values: np.ndarray, dtype) -> np.ndarray:
    """Integer `values` cast to integer `dtype` keeping the low bits (two's complement wrap)."""
    dtype = np.dtype(dtype)
    etype = element_type(dtype)
    values = np.asarray(values)
    if etype.bits == dtype.itemsize * 8:
        return values.astype(dtype)
    # Sub-byte types: mask and sign-extend by hand, then the cast is exact.
    low = values.astype(np.int64) & ((1 << etype.bits) - 1)
    if etype.is_signed:
        low = np.where(low >= (1 << (etype.bits - 1)), low - (1 << etype.bits), low)
    return low.astype(dtype)


def convert(operand, to_dtype) -> np.ndarray:
    """XLA `convert`: float->int truncates and saturates (NaN -> 0), int->int wraps,
    number->pred is `!= 0`, complex->real keeps the real part, float->float rounds once."""
    operand, to = np.asarray(operand), np.dtype(to_dtype)
    src, dst = element_type(operand.dtype), element_type(to)
    with np.errstate(all="ignore"):
        if src.kind == COMPLEX:
            if dst.kind == COMPLEX:
                return operand.astype(to)
            if dst.kind == PRED:
                return np.asarray(operand != 0)
            operand = np.real(operand)
            src = element_type(operand.dtype)
        if src.kind == PRED:
            operand = operand.astype(np.uint8)
        elif src.is_integer and operand.dtype.itemsize * 8 != src.bits:
            operand = operand.astype(np.int8 if src.is_signed else np.uint8)
        elif src.kind == FLOAT and is_narrow_float(operand.dtype):
            operand = operand.astype(F32)
        if dst.kind == PRED:
            return np.asarray(operand != 0)  # NaN != 0, so NaN -> true as in XLA
        if dst.kind in (FLOAT, COMPLEX):
            return _to_float(operand, to)
        if src.kind == FLOAT:
            return _float_to_int(operand, to, dst)
        return wrap_int(operand, to)


def _to_float(operand: np.ndarray, to: np.dtype) -> np.ndarray:
    if operand.dtype.kind in "iu" and operand.dtype.itemsize <= 4:
        operand = operand.astype(F64)  # exact, so the only rounding is the final one
    if element_type(to).kind == COMPLEX:
        return operand.astype(to)
    return round_to_dtype(operand, to)


def _float_to_int(operand: np.ndarray, to: np.dtype, dst: ElementType) -> np.ndarray:
    whole = np.trunc(operand.astype(F64))
    low, high = int_range(dst)
    # Bounds are powers of two, so these float comparisons are exact.
    too_low = whole < low
    too_high = whole >= high + 1
    unsafe = too_low | too_high | np.isnan(whole)
    work = np.dtype(np.int64 if dst.is_signed else np.uint64)
    safe = np.where(unsafe, 0.0, whole).astype(work)
    result = np.where(too_high, np.array(high, work), safe)
    result = np.where(too_low, np.array(low, work), result)
    return wrap_int(result, to)


_LITTLE_ENDIAN_HOST = sys.byteorder == "little"


def bitcast_convert(operand, to_dtype) -> np.ndarray:
    """XLA `bitcast-convert`: reinterpret the bits. A narrower target adds a minor dimension of
    size width-ratio, a wider one consumes it; pieces are in little-endian order. A pred is
    the byte 0 or 1, and a byte read as a pred is true where it is not 0 (XLA's
    BitcastDtypesExpander: `convert` between pred and u8 at either end)."""
    operand, to = np.array(operand, order="C"), np.dtype(to_dtype)
    if operand.dtype == np.bool_:
        operand = operand.view(np.uint8)
    if to == np.bool_:
        return bitcast_convert(operand, np.uint8) != 0
    src, dst = element_type(operand.dtype), element_type(to)
    if src.bits == dst.bits:
        if src.bits % 8 == 0:
            return operand.view(to)
        # Sub-byte types sit one per byte (low bits); move just those bits across.
        raw = operand.view(np.uint8) & np.uint8((1 << src.bits) - 1)
        return raw.view(to)
    if src.bits % 8 or dst.bits % 8:
        raise UnsupportedError(f"bitcast-convert of packed sub-byte type {src.name} -> {dst.name}")
    if dst.bits < src.bits:
        ratio = src.bits // dst.bits
        pieces = operand.reshape(-1).view(to).reshape(operand.shape + (ratio,))
        return pieces if _LITTLE_ENDIAN_HOST else np.ascontiguousarray(pieces[..., ::-1])
    ratio = dst.bits // src.bits
    if operand.ndim == 0 or operand.shape[-1] != ratio:
        raise ShapeError(
            f"bitcast-convert {src.name}{list(operand.shape)} -> {dst.name} needs a minor "
            f"dimension of size {ratio}"
        )
    if not _LITTLE_ENDIAN_HOST:
        operand = np.ascontiguousarray(operand[..., ::-1])
    return operand.reshape(-1).view(to).reshape(operand.shape[:-1])


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA `reduce-precision`: round the mantissa to nearest even, then send exponents above the
    reduced range to inf and those at or below its smallest normal to a signed zero (reduced
    subnormals are not kept). NaN stays the input NaN (becomes +inf with 0 mantissa bits)."""
    operand = np.asarray(operand)
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ShapeError(
            f"reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0, got "
            f"{exponent_bits} and {mantissa_bits}"
        )
    if element_type(operand.dtype).kind != FLOAT:
        raise UnsupportedError(f"reduce-precision does not support {operand.dtype}")
    if operand.dtype.name == "bfloat16":  # ml_dtypes' (a name test: no need to load it)
        _FLOAT_LAYOUTS.setdefault(operand.dtype, (np.uint16, 8, 7))
    if operand.dtype not in _FLOAT_LAYOUTS:
        # f8/f6/f4 have no IEEE layout to edit; their values are exact in f32.
        reduced = reduce_precision(operand.astype(F32), exponent_bits, mantissa_bits)
        return round_to_dtype(reduced, operand.dtype)
    storage, src_exponent, src_mantissa = _FLOAT_LAYOUTS[operand.dtype]
    with np.errstate(all="ignore"):
        bits = _reduce_bits(
            np.array(operand, order="C").view(storage),
            storage,
            src_exponent,
            src_mantissa,
            exponent_bits,
            mantissa_bits,
        )
        result = bits.view(operand.dtype)
        is_nan = np.isnan(operand.astype(F64))
        nan_result = operand if mantissa_bits > 0 else np.full_like(operand, np.inf)
        return np.where(is_nan, nan_result, result)


def _reduce_bits(bits, storage, src_exponent, src_mantissa, exponent_bits, mantissa_bits):
    nbits = 1 + src_exponent + src_mantissa
    ones = (1 << nbits) - 1
    sign_mask = 1 << (nbits - 1)
    exponent_mask = ((1 << src_exponent) - 1) << src_mantissa
    if mantissa_bits < src_mantissa:
        shift = src_mantissa - mantissa_bits
        last_kept = 1 << shift
        # Ties to even: bias 0111.. plus the last kept bit; a carry into the exponent is right.
        bias = ((bits & storage(last_kept)) >> storage(shift)) + storage((last_kept >> 1) - 1)
        bits = (bits + bias) & storage(ones ^ (last_kept - 1))
    if exponent_bits < src_exponent:
        src_bias = (1 << (src_exponent - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & storage(exponent_mask)
        overflows = exponent > storage((src_bias + reduced_bias) << src_mantissa)
        underflows = exponent <= storage((src_bias - reduced_bias) << src_mantissa)
        signed_zero = bits & storage(sign_mask)
        bits = np.where(overflows, signed_zero | storage(exponent_mask), bits)
        bits = np.where(underflows, signed_zero, bits)
    return np.asarray(bits, dtype=storage)
