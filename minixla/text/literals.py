"""Constant literals: reading `{ {1, 2}, {3, 4} }`-style text into NumPy arrays and printing back.

Floats print the way XLA does: the shortest of `%.{n}g` (n = 6 for f32, 15 for f64, the type's
max_digits10 for narrow floats) and `%.{max_digits10}g` that reads back to the same value.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.shapes import Shape
from .lexer import FLOAT, IDENT, INT, PUNCT
from ..ir.dtypes import finfo

_SPECIAL = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan, "-nan": -math.nan}


class Elided:
    """What `{...}` reads as: XLA printed the constant without its values (it does so for
    tuples and arrays of more than ten elements unless asked to print large constants)."""


ELIDED = Elided()


def parse_literal(parser, shape: Shape):
    """Reads a literal of `shape` at the parser's position; arrays come back in logical order,
    `{...}` as ELIDED."""
    if (
        parser.peek().is_punct("{")
        and parser.lookahead(1).is_punct("...")
        and parser.lookahead(2).is_punct("}")
    ):
        parser.next(), parser.next(), parser.next()
        return ELIDED
    if shape.is_tuple:
        parser.expect("(")
        parts = []
        for i, sub in enumerate(shape.tuple_shapes):
            if i:
                parser.expect(",")
            parts.append(parse_literal(parser, sub))
        parser.expect(")")
        return tuple(parts)
    if shape.is_token:
        token = parser.next()
        if token.text != "token":
            raise parser.error("expected 'token'", token.start)
        return None
    if not shape.is_array:
        raise parser.error(f"constants of type {shape.dtype} are not supported")
    if shape.is_dynamic:
        raise parser.error("constants cannot have dynamic dimensions")
    dtype = shape.numpy_dtype
    if shape.rank == 0:
        return _to_array([_scalar(parser, shape)], dtype, parser).reshape(())
    token = parser.peek()
    if not token.is_punct("{"):  # `f32[3,3] constant(1)`: one value for every element
        return np.full(shape.dims, _to_array([_scalar(parser, shape)], dtype, parser)[0])
    values: list = []
    _nested(parser, shape, 0, values)
    return _to_array(values, dtype, parser).reshape(shape.dims)


def zeros_like_shape(shape: Shape):
    """A literal of zeros for `shape` (tuples element by element)."""
    if shape.is_tuple:
        return tuple(zeros_like_shape(s) for s in shape.tuple_shapes)
    return None if shape.is_token else np.zeros(shape.dims, shape.numpy_dtype)


def _nested(parser, shape: Shape, depth: int, out: list) -> None:
    parser.expect("{")
    count = 0
    last = depth == shape.rank - 1
    while not parser.peek().is_punct("}"):
        if count:
            parser.expect(",")
        if last:
            out.append(_scalar(parser, shape))
        else:
            _nested(parser, shape, depth + 1, out)
        count += 1
    if count != shape.dims[depth]:
        raise parser.error(
            f"literal has {count} elements in dimension {depth}, but the shape "
            f"{shape} needs {shape.dims[depth]}"
        )
    parser.expect("}")


def _scalar(parser, shape: Shape):
    token = parser.next()
    etype = shape.element_type
    if etype.is_complex and token.is_punct("("):
        real = _number(parser, parser.next(), shape)
        parser.expect(",")
        imag = _number(parser, parser.next(), shape)
        parser.expect(")")
        return complex(real, imag)
    return _number(parser, token, shape)


def _number(parser, token, shape: Shape):
    etype = shape.element_type
    text = token.text
    if token.kind == IDENT and text in ("true", "false"):
        if etype.kind != "pred":
            raise parser.error(f"'{text}' is not a valid {etype.name} value", token.start)
        return text == "true"
    if token.kind == INT and (etype.is_float or etype.is_complex):
        return _in_float_range(parser, token, float(text), shape)  # float() keeps `-0`
    if token.kind == INT:
        value = int(text)
        if etype.kind == "pred":
            if value not in (0, 1):
                raise parser.error(f"pred values must be 0 or 1, got {text}", token.start)
            return bool(value)
        if etype.is_integer:
            low, high = _int_range(etype)
            if etype.bits == 64 and etype.kind == "signed" and 2**63 <= value < 2**64:
                value -= 2**64  # XLA accepts u64 bit patterns for s64
            if etype.bits == 64 and etype.kind == "unsigned" and -(2**63) <= value < 0:
                value += 2**64  # and s64 ones for u64: constant(-1) is the largest u64
            if not low <= value <= high:
                raise parser.error(f"value {text} is out of range for {etype.name}", token.start)
        return value
    if token.kind in (FLOAT, IDENT) and (etype.is_float or etype.is_complex):
        if text.lstrip("-").startswith("nan("):
            return _nan_with_payload(text, shape, parser, token)
        if text in _SPECIAL:
            return _SPECIAL[text]
        if token.kind == FLOAT:
            return _in_float_range(parser, token, float(text), shape)
    if token.kind == FLOAT and etype.is_integer:
        raise parser.error(f"'{text}' is not an integer, as {etype.name} needs", token.start)
    raise parser.error(f"expected a {etype.name} value, found '{text}'", token.start)


def _in_float_range(parser, token, value: float, shape: Shape) -> float:
    """`value` if a number written out (not inf) stays finite in the element type, as XLA's
    parser demands: `f16[] constant(70000)` or `f32[] constant(1e39)` is an error, not inf.
    Types without an infinity (f8e4m3fn, f4e2m1fn, ...) reject anything past their largest
    finite value instead of turning it into NaN or saturating."""
    dtype = shape.numpy_dtype
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    info = finfo(dtype)
    has_inf = dtype.kind == "f" or bool(np.isinf(np.array(np.inf).astype(dtype)))
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = float(np.array(value, np.float64).astype(dtype))
    if (
        math.isinf(value)
        or not math.isfinite(rounded)
        or (not has_inf and abs(value) > float(info.max))
    ):
        raise parser.error(
            f"value {token.text} is out of range for {shape.element_type.name} "
            f"(largest finite value {float(info.max):g})",
            token.start,
        )
    return value


def _int_range(etype) -> tuple[int, int]:
    if etype.kind == "signed":
        return -(1 << (etype.bits - 1)), (1 << (etype.bits - 1)) - 1
    return 0, (1 << etype.bits) - 1


def _nan_with_payload(text: str, shape: Shape, parser, token):
    negative = text.startswith("-")
    payload = int(text.lstrip("-")[4:-1], 16)
    dtype = shape.numpy_dtype
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    if dtype.kind != "f" and not np.isinf(np.array(np.inf).astype(dtype)):
        # f8e4m3fn, f8e4m3b11fnuz, ...: one NaN (or none), no bits for a payload
        raise parser.error(f"{shape.dtype} has no NaN payloads: {text}", token.start)
    if dtype not in (np.float16, np.float32, np.float64) and dtype.name != "bfloat16":
        return -math.nan if negative else math.nan
    info = finfo(dtype)
    bits = dtype.itemsize * 8
    mantissa = info.nmant
    if payload == 0 or payload >= (1 << mantissa):
        raise parser.error(f"NaN payload {text} does not fit {shape.dtype}", token.start)
    pattern = ((1 << (bits - 1 - mantissa)) - 1) << mantissa | payload
    if negative:
        pattern |= 1 << (bits - 1)
    uint = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    return np.array(pattern, uint).view(dtype)[()]


def _to_array(values: list, dtype: np.dtype, parser) -> np.ndarray:
    if dtype.kind in "iub":
        return np.array(values, dtype=dtype)
    if dtype.kind == "c":
        return np.array(values, dtype=dtype)
    out = np.empty(len(values), dtype)
    for i, value in enumerate(values):  # keep exact bit patterns (NaN payloads, -0.0)
        out[i] = (
            value
            if isinstance(value, np.generic) and value.dtype == dtype
            else np.array(value, np.float64).astype(dtype)
        )
    return out


__all__ = ["parse_literal", "PUNCT"]
