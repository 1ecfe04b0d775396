"""Reference semantics of HLO's elementwise ops in NumPy: the tables the interpreter calls.

XLA's rules win where NumPy's differ: integer division by zero and INT_MIN/-1, shifts past the
bit width, NaN-propagating maximum/minimum that order -0 below +0, sign(-0) = -0, ties away from
zero in round-nearest-afz. f16/bf16/f8 values are computed in f32 and rounded back at every op,
as XLA's CPU backend does. Sub-byte integers are computed in 8-bit integers and wrapped back.
An op applied to an element type it does not accept raises UnsupportedError.
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..ir.dtypes import COMPLEX, FLOAT, PRED, SIGNED, UNSIGNED
from .convert import (
    bitcast_convert,
    compute_dtype,
    convert,
    element_type,
    reduce_precision,
    round_to_dtype,
    wrap_int,
)

__all__ = [
    "UNARY",
    "BINARY",
    "compare",
    "select",
    "clamp",
    "convert",
    "bitcast_convert",
    "reduce_precision",
    "round_to_dtype",
    "compute_dtype",
]

Unary = Callable[[np.ndarray], np.ndarray]
Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


# ---- integer helpers: ops get (work array, bit width, signed?) --------------------------------


def _int_work(array: np.ndarray) -> np.ndarray:
    """The array in a NumPy integer type; sub-byte ints widen to 8 bits (value-preserving)."""
    etype = element_type(array.dtype)
    if array.dtype.itemsize * 8 == etype.bits:
        return array
    return array.astype(np.int8 if etype.is_signed else np.uint8)


def _unsigned(work: np.ndarray, bits: int) -> np.ndarray:
    """The low `bits` bits of each element, as an unsigned integer of the work width."""
    raw = work.view(np.dtype(f"u{work.dtype.itemsize}"))
    return raw if bits == raw.dtype.itemsize * 8 else raw & raw.dtype.type((1 << bits) - 1)


def _signed(work: np.ndarray, bits: int) -> np.ndarray:
    """The low `bits` bits of each element, sign-extended, as a signed integer of the work width."""
    raw = _unsigned(work, bits).view(np.dtype(f"i{work.dtype.itemsize}"))
    spare = raw.dtype.itemsize * 8 - bits
    return raw if spare == 0 else (raw << spare) >> spare


def _all_ones(dtype) -> np.ndarray:
    return np.array(-1, np.int64).astype(dtype)


# ---- dispatch -----------------------------------------------------------------------------------


def _unsupported(op: str, dtype) -> UnsupportedError:
    try:
        name = element_type(dtype).name
    except UnsupportedError:
        name = str(dtype)
    return UnsupportedError(f"{op} does not support element type {name}")


def _float_result(values: np.ndarray, dtype: np.dtype, wide: np.dtype) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == wide and wide != dtype:
        return round_to_dtype(values, dtype)
    return values


_DEFAULT_NAN = -np.nan


def _unary(op, fp=None, cx=None, ints=None, pred=None, sign_op: bool = False) -> Unary:
    """fp/cx take an f32/f64/complex array; ints takes (work, bits, signed) and its result is
    wrapped to the operand type; pred takes the bool array. A NaN operand comes back as it is
    (NumPy's libm may drop its sign; hardware and XLA keep it), except from the sign-bit ops
    (`sign_op`: abs, negate); a NaN made from a number is -NaN."""

    def apply(operand):
        operand = np.asarray(operand)
        kind = element_type(operand.dtype).kind
        with np.errstate(all="ignore"):
            if kind == FLOAT and fp is not None:
                wide = compute_dtype(operand.dtype)
                values = operand.astype(wide)
                result = np.asarray(fp(values))
                if result.dtype == wide and not sign_op:
                    # a NaN made from a number is -NaN, x86's default NaN, which compiled
                    # code (XLA's, minixla's) makes; NumPy's sign depends on its SIMD path
                    made = np.where(np.isnan(result), _DEFAULT_NAN, result)
                    result = np.where(np.isnan(values), values, made)
                return _float_result(result, operand.dtype, wide)
            if kind == COMPLEX and cx is not None:
                return np.asarray(cx(operand))
            if kind in (SIGNED, UNSIGNED) and ints is not None:
                bits = element_type(operand.dtype).bits
                return wrap_int(ints(_int_work(operand), bits, kind == SIGNED), operand.dtype)
            if kind == PRED and pred is not None:
                return np.asarray(pred(operand))
        raise _unsupported(op, operand.dtype)

    apply.__name__ = apply.__qualname__ = op.replace("-", "_")
    return apply


def _binary(op, fp=None, cx=None, ints=None, pred=None) -> Binary:
    """As `_unary`; both operands must have the same element type."""

    def apply(lhs, rhs):
        lhs, rhs = np.asarray(lhs), np.asarray(rhs)
        if lhs.dtype != rhs.dtype:
            raise ShapeError(f"{op} operands differ in element type: {lhs.dtype} vs {rhs.dtype}")
        kind = element_type(lhs.dtype).kind
        with np.errstate(all="ignore"):
            if kind == FLOAT and fp is not None:
                wide = compute_dtype(lhs.dtype)
                result = fp(lhs.astype(wide), rhs.astype(wide))
                return _float_result(result, lhs.dtype, wide)
            if kind == COMPLEX and cx is not None:
                return np.asarray(cx(lhs, rhs))
            if kind in (SIGNED, UNSIGNED) and ints is not None:
                bits = element_type(lhs.dtype).bits
                result = ints(_int_work(lhs), _int_work(rhs), bits, kind == SIGNED)
                return wrap_int(result, lhs.dtype)
            if kind == PRED and pred is not None:
                return np.asarray(pred(lhs, rhs))
        raise _unsupported(op, lhs.dtype)

    apply.__name__ = apply.__qualname__ = op.replace("-", "_")
    return apply


def _int(fn) -> Callable:
    """Adapts a NumPy ufunc that ignores bit width and signedness to the ints signature."""
    return lambda *args: fn(*args[:-2])


# ---- float and complex semantics ----------------------------------------------------------------


def _float_sign(values):
    # copysign keeps -0.0; NaN passes through (XLA: select(isnan(x), x, copysign(x != 0, x))).
    magnitude = (values != 0).astype(values.dtype)
    return np.where(np.isnan(values), values, np.copysign(magnitude, values))


def _complex_sign(values):
    magnitude = np.abs(values)
    return np.where(magnitude == 0, 0, values / np.where(magnitude == 0, 1, magnitude))


def _round_afz(values):
    whole = np.trunc(values)
    bump = np.where(np.abs(values - whole) >= 0.5, np.copysign(1, values), 0).astype(values.dtype)
    # Adding a zero bump would turn -0.0 into +0.0, so only add where it is nonzero.
    return np.where(bump != 0, whole + bump, whole)


def _logistic(values):
    # Two forms so that neither exp overflows for large |x|.
    positive = 1 / (1 + np.exp(-values))
    exp = np.exp(values)
    return np.where(values >= 0, positive, exp / (1 + exp))


_vector_erf = np.vectorize(math.erf, otypes=[np.float64])


def _erf(values):
    return _vector_erf(values.astype(np.float64)).astype(values.dtype)


def _real(values):
    return np.real(values).copy()


def _imag(values):
    return np.imag(values).copy() if np.iscomplexobj(values) else np.zeros_like(values)


def _float_max(lhs, rhs):
    # llvm.maximum semantics: NaN wins, and +0 beats -0 in either order.
    both_zero = (lhs == 0) & (rhs == 0)
    return np.where(both_zero, np.where(np.signbit(lhs), rhs, lhs), np.maximum(lhs, rhs))


def _float_min(lhs, rhs):
    both_zero = (lhs == 0) & (rhs == 0)
    return np.where(both_zero, np.where(np.signbit(lhs), lhs, rhs), np.minimum(lhs, rhs))


def _float_power(base, exponent):
    # 1^x = 1 and x^0 = 1 even for NaN (C pow, XLA's evaluator). NumPy gets 1-d arrays: with a
    # 0-d exponent it computes power(x, 0.5) as sqrt(x), which is NaN for -inf and -0 for -0,
    # where C's pow gives inf and +0.
    base, exponent = np.broadcast_arrays(base, exponent)
    raw = np.power(base.reshape(-1), exponent.reshape(-1)).reshape(base.shape)
    return np.where((base == 1) | (exponent == 0), np.ones_like(base), raw)


def _complex_power(base, exponent):
    result = np.power(base, exponent)
    # XLA's evaluator: inf^(a+0i) is inf for a > 0 and 0 for a < 0 (NumPy gives NaN parts).
    inf_base = np.isposinf(base.real) & (base.imag == 0) & (exponent.imag == 0)
    result = np.where(inf_base & (exponent.real > 0), base, result)
    result = np.where(inf_base & (exponent.real < 0), 0, result)
    return np.where((base == 1) | (exponent == 0), 1, result).astype(base.dtype)


def _complex_op(real, imag):
    real, imag = np.asarray(real), np.asarray(imag)
    if real.dtype != imag.dtype:
        raise ShapeError(f"complex operands differ in element type: {real.dtype} vs {imag.dtype}")
    if real.dtype not in (np.float32, np.float64):
        raise _unsupported("complex", real.dtype)
    result = np.empty(
        np.broadcast_shapes(real.shape, imag.shape),
        np.complex64 if real.dtype == np.float32 else np.complex128,
    )
    result.real, result.imag = real, imag  # not re + 1j*im: inf*1j would make a NaN real part
    return result


def _copy(operand):
    if isinstance(operand, tuple):  # a tuple copy copies each element; it is not one array
        return tuple(_copy(element) for element in operand)
    return None if operand is None else np.array(operand, copy=True)


# ---- integer semantics --------------------------------------------------------------------------


def _int_divide(lhs, rhs, bits, signed):
    zero = rhs == 0
    # INT_MIN / -1 overflows; dividing by 1 instead gives XLA's answer, INT_MIN.
    overflow = (lhs == np.iinfo(lhs.dtype).min) & (rhs == -1) if signed else False
    safe = np.where(zero | overflow, 1, rhs).astype(rhs.dtype)
    if signed:
        quotient = (lhs - np.fmod(lhs, safe)) // safe  # exact, so floor == trunc
    else:
        quotient = lhs // safe
    return np.where(zero, _all_ones(lhs.dtype), quotient)


def _int_remainder(lhs, rhs, bits, signed):
    zero = rhs == 0
    overflow = (lhs == np.iinfo(lhs.dtype).min) & (rhs == -1) if signed else False
    safe = np.where(zero | overflow, 1, rhs).astype(rhs.dtype)
    return np.where(zero, lhs, np.fmod(lhs, safe))  # fmod: sign of the dividend, like C %


def _int_power(base, exponent, bits, signed):
    # Square-and-multiply in u64; wrapping mod 2^64 keeps the low bits right for any width.
    # Only the exponent's low 6 bits are read, as XLA's kernels do (a larger exponent
    # overflows any base but 0 and +-1): 3^64 is 1, 3^66 is 9.
    accumulator = np.ones(np.broadcast_shapes(base.shape, exponent.shape), np.uint64)
    factor = base.astype(np.int64).astype(np.uint64)
    remaining = _unsigned(exponent, bits).astype(np.uint64) & np.uint64(63)
    while np.any(remaining):
        accumulator = np.where(remaining & np.uint64(1), accumulator * factor, accumulator)
        factor = factor * factor
        remaining = remaining >> np.uint64(1)
    result = accumulator.astype(base.dtype)
    if signed:
        # A negative exponent, as XLA's compiled kernels give it: 1 for base 1, +-1 by the
        # exponent's parity for base -1, 0 otherwise.
        signed_exponent = _signed(exponent, bits)
        odd = (signed_exponent % 2) != 0
        inverse = np.where(base == 1, 1, np.where(base == -1, np.where(odd, -1, 1), 0))
        result = np.where(signed_exponent < 0, inverse.astype(base.dtype), result)
    return result


def _shift(direction: str):
    def shift(lhs, rhs, bits, signed):
        amount = _unsigned(rhs, bits)
        out_of_range = amount >= bits  # the amount is read as unsigned
        safe = np.where(out_of_range, 0, amount).astype(amount.dtype)
        if direction == "left":
            return np.where(out_of_range, 0, _unsigned(lhs, bits) << safe)
        if direction == "logical":
            return np.where(out_of_range, 0, _unsigned(lhs, bits) >> safe)
        value = _signed(lhs, bits)
        fill = np.where(value < 0, -1, 0).astype(value.dtype)
        return np.where(out_of_range, fill, value >> safe.astype(value.dtype))

    return shift


def _mulhi(lhs, rhs, bits, signed):
    """High half of the double-width product."""
    if bits <= 32:
        wide = np.int64 if signed else np.uint64
        low_l = _signed(lhs, bits) if signed else _unsigned(lhs, bits)
        low_r = _signed(rhs, bits) if signed else _unsigned(rhs, bits)
        return (low_l.astype(wide) * low_r.astype(wide)) >> wide(bits)
    ulhs, urhs = lhs.view(np.uint64), rhs.view(np.uint64)
    mask, half = np.uint64(0xFFFFFFFF), np.uint64(32)
    lhs_lo, lhs_hi, rhs_lo, rhs_hi = ulhs & mask, ulhs >> half, urhs & mask, urhs >> half
    cross_hl, cross_lh = lhs_hi * rhs_lo, lhs_lo * rhs_hi
    middle = ((lhs_lo * rhs_lo) >> half) + (cross_hl & mask) + cross_lh  # < 2^64, no carry lost
    high = lhs_hi * rhs_hi + (cross_hl >> half) + (middle >> half)
    if signed:
        # Signed high word = unsigned high word - (lhs<0 ? rhs : 0) - (rhs<0 ? lhs : 0), mod 2^64.
        high = high - np.where(lhs < 0, urhs, 0).astype(np.uint64)
        high = high - np.where(rhs < 0, ulhs, 0).astype(np.uint64)
    return high


def _popcnt(work, bits, signed):
    unsigned = _unsigned(work, bits)
    return sum(((unsigned >> position) & 1).astype(np.int64) for position in range(bits))


def _clz(work, bits, signed):
    unsigned = _unsigned(work, bits)
    count = np.full(unsigned.shape, bits, np.int64)
    for position in range(bits):  # ascending, so the highest set bit decides
        count = np.where((unsigned >> position) & 1, bits - 1 - position, count)
    return count


# ---- the tables ---------------------------------------------------------------------------------


def _cbrt(values: np.ndarray) -> np.ndarray:
    """np.cbrt with one Newton step in f64: some NumPy builds are 1 ulp off even on exact
    cubes (cbrt(-27) = -3.0000000000000004), where libm and XLA give the cube root."""
    root = np.cbrt(values)
    if values.dtype != np.float64:
        return root
    # only where root**3 is a normal f64: it overflows to inf near the largest values
    polish = (np.abs(root) > 2.0**-340) & (np.abs(root) < 2.0**340)
    step = np.where(polish, (root * root * root - values) / (3 * root * root), 0)
    return np.where(polish, root - step, root)


def _math(op, fn, complex_too=True) -> Unary:
    return _unary(op, fp=fn, cx=fn if complex_too else None)


UNARY: dict[str, Unary] = {
    "abs": _unary("abs", fp=np.abs, cx=np.abs, ints=_int(np.abs), sign_op=True),
    "negate": _unary(
        "negate", fp=np.negative, cx=np.negative, ints=_int(np.negative), sign_op=True
    ),
    "sign": _unary("sign", fp=_float_sign, cx=_complex_sign, ints=_int(np.sign)),
    "floor": _math("floor", np.floor, complex_too=False),
    "ceil": _math("ceil", np.ceil, complex_too=False),
    "round-nearest-afz": _math("round-nearest-afz", _round_afz, complex_too=False),
    "round-nearest-even": _math("round-nearest-even", np.rint, complex_too=False),
    "exponential": _math("exponential", np.exp),
    "exponential-minus-one": _math("exponential-minus-one", np.expm1),
    "log": _math("log", np.log),
    "log-plus-one": _math("log-plus-one", np.log1p),
    "logistic": _unary("logistic", fp=_logistic, cx=lambda z: 1 / (1 + np.exp(-z))),
    "sqrt": _math("sqrt", np.sqrt),
    "rsqrt": _math("rsqrt", lambda values: 1 / np.sqrt(values)),
    "cbrt": _math("cbrt", _cbrt, complex_too=False),
    "sine": _math("sine", np.sin),
    "cosine": _math("cosine", np.cos),
    "tan": _math("tan", np.tan),
    "tanh": _math("tanh", np.tanh),
    "sinh": _math("sinh", np.sinh),
    "cosh": _math("cosh", np.cosh),
    "asin": _math("asin", np.arcsin),
    "acos": _math("acos", np.arccos),
    "atan": _math("atan", np.arctan),
    "asinh": _math("asinh", np.arcsinh),
    "acosh": _math("acosh", np.arccosh),
    "atanh": _math("atanh", np.arctanh),
    "erf": _math("erf", _erf, complex_too=False),
    "not": _unary("not", ints=_int(np.invert), pred=np.logical_not),
    "popcnt": _unary("popcnt", ints=_popcnt),
    "count-leading-zeros": _unary("count-leading-zeros", ints=_clz),
    "is-finite": _math("is-finite", np.isfinite, complex_too=False),
    "real": _unary("real", fp=_real, cx=_real),
    "imag": _unary("imag", fp=_imag, cx=_imag),
    "copy": _copy,
}

BINARY: dict[str, Binary] = {
    # pred arithmetic follows XLA's emitter: add/maximum are `or`, multiply/minimum are `and`.
    "add": _binary("add", fp=np.add, cx=np.add, ints=_int(np.add), pred=np.logical_or),
    "subtract": _binary("subtract", fp=np.subtract, cx=np.subtract, ints=_int(np.subtract)),
    "multiply": _binary(
        "multiply", fp=np.multiply, cx=np.multiply, ints=_int(np.multiply), pred=np.logical_and
    ),
    "divide": _binary("divide", fp=np.true_divide, cx=np.true_divide, ints=_int_divide),
    "remainder": _binary("remainder", fp=np.fmod, ints=_int_remainder),
    "maximum": _binary("maximum", fp=_float_max, ints=_int(np.maximum), pred=np.logical_or),
    "minimum": _binary("minimum", fp=_float_min, ints=_int(np.minimum), pred=np.logical_and),
    "power": _binary("power", fp=_float_power, cx=_complex_power, ints=_int_power),
    "atan2": _binary("atan2", fp=np.arctan2),
    "complex": _complex_op,
    "and": _binary("and", ints=_int(np.bitwise_and), pred=np.logical_and),
    "or": _binary("or", ints=_int(np.bitwise_or), pred=np.logical_or),
    "xor": _binary("xor", ints=_int(np.bitwise_xor), pred=np.logical_xor),
    "shift-left": _binary("shift-left", ints=_shift("left")),
    "shift-right-arithmetic": _binary("shift-right-arithmetic", ints=_shift("arithmetic")),
    "shift-right-logical": _binary("shift-right-logical", ints=_shift("logical")),
    "mulhi": _binary("mulhi", ints=_mulhi),
}


# ---- compare, select, clamp ---------------------------------------------------------------------

_DIRECTIONS = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}
_DEFAULT_COMPARE_TYPE = {
    FLOAT: "FLOAT",
    COMPLEX: "FLOAT",
    SIGNED: "SIGNED",
    UNSIGNED: "UNSIGNED",
    PRED: "UNSIGNED",
}


def _total_order_key(values: np.ndarray) -> np.ndarray:
    """Signed integers ordered like -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN."""
    if values.dtype.itemsize * 8 != element_type(values.dtype).bits:
        values = values.astype(np.float32)  # f4/f6 sit in a byte; f32 keeps their order and -0
    signed = np.array(values, order="C").view(np.dtype(f"i{values.dtype.itemsize}"))
    # Negative floats sort backwards by magnitude; flipping the magnitude bits fixes that.
    return np.where(signed < 0, signed ^ np.iinfo(signed.dtype).max, signed)


def compare(lhs, rhs, direction: str, compare_type: str | None = None) -> np.ndarray:
    """XLA `compare`: FLOAT treats NaN as unordered (only NE holds), TOTALORDER orders bit
    patterns, SIGNED/UNSIGNED read the integer bits that way."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"compare operands differ in element type: {lhs.dtype} vs {rhs.dtype}")
    compare_fn = _DIRECTIONS.get(direction.upper())
    if compare_fn is None:
        raise ShapeError(f"unknown comparison direction {direction!r}")
    etype = element_type(lhs.dtype)
    kind = etype.kind
    compare_type = (compare_type or _DEFAULT_COMPARE_TYPE.get(kind, "")).upper()
    if kind == FLOAT and compare_type == "TOTALORDER":
        lhs, rhs = _total_order_key(lhs), _total_order_key(rhs)
    elif kind == FLOAT and compare_type == "FLOAT":
        lhs, rhs = lhs.astype(compute_dtype(lhs.dtype)), rhs.astype(compute_dtype(rhs.dtype))
    elif kind == COMPLEX and compare_type == "FLOAT" and compare_fn in (np.equal, np.not_equal):
        pass
    elif kind in (SIGNED, UNSIGNED) and compare_type in ("SIGNED", "UNSIGNED"):
        reinterpret = _signed if compare_type == "SIGNED" else _unsigned
        lhs = reinterpret(_int_work(lhs), etype.bits)
        rhs = reinterpret(_int_work(rhs), etype.bits)
    elif kind != PRED or compare_type not in ("SIGNED", "UNSIGNED"):
        raise UnsupportedError(
            f"compare direction={direction} type={compare_type} does not support element "
            f"type {etype.name}"
        )
    with np.errstate(all="ignore"):
        return np.asarray(compare_fn(lhs, rhs))


def select(pred, on_true, on_false) -> np.ndarray:
    """XLA `select`; `pred` may be a 0-d array that picks a whole operand."""
    pred, on_true, on_false = np.asarray(pred), np.asarray(on_true), np.asarray(on_false)
    if pred.dtype != np.bool_:
        raise ShapeError(f"select predicate must be pred, got {pred.dtype}")
    if on_true.dtype != on_false.dtype:
        raise ShapeError(f"select operands differ: {on_true.dtype} vs {on_false.dtype}")
    return np.where(pred, on_true, on_false).astype(on_true.dtype, copy=False)


def clamp(low, operand, high) -> np.ndarray:
    """XLA `clamp` = min(max(operand, low), high) with the NaN-propagating max/min;
    `low` and `high` may be 0-d."""
    operand = np.asarray(operand)
    kind = element_type(operand.dtype).kind
    if kind not in (FLOAT, SIGNED, UNSIGNED):
        raise _unsupported("clamp", operand.dtype)
    low = np.broadcast_to(np.asarray(low), operand.shape)
    high = np.broadcast_to(np.asarray(high), operand.shape)
    return BINARY["minimum"](BINARY["maximum"](operand, low), high)
