"""Constants as XLA writes them: floats short where they round-trip, NaN payloads, nested
braces, and large constants of one value as that value (a splat)."""

from __future__ import annotations

import math

import numpy as np

from .shapes import Shape
from .dtypes import finfo


def _digits(dtype: np.dtype) -> tuple[int, int]:
    """(short, max) significant digits for a float type: XLA tries the short one first."""
    if dtype == np.float32:
        return 6, 9
    if dtype == np.float64:
        return 15, 17
    info = finfo(dtype)
    max_digits = math.ceil(1 + (info.nmant + 1) * math.log10(2))
    return max_digits, max_digits


def format_float(value, dtype: np.dtype) -> str:
    value = np.array(value, dtype)[()]
    as_f64 = float(value)
    if math.isnan(as_f64):
        return _format_nan(value, dtype)
    if math.isinf(as_f64):
        return "inf" if as_f64 > 0 else "-inf"
    short, longest = _digits(dtype)
    text = f"{as_f64:.{short}g}"
    if np.array(float(text), np.float64).astype(dtype) != value:
        text = f"{as_f64:.{longest}g}"
    return text


def _format_nan(value, dtype: np.dtype) -> str:
    sign = "-" if np.signbit(np.array(value, dtype).astype(np.float32)) else ""
    if dtype.itemsize not in (2, 4, 8) or dtype.kind != "f" and dtype.name != "bfloat16":
        return sign + "nan"
    info = finfo(dtype)
    uint = {2: np.uint16, 4: np.uint32, 8: np.uint64}[dtype.itemsize]
    bits = int(np.array(value, dtype).view(uint))
    payload = bits & ((1 << info.nmant) - 1)
    if payload == 1 << (info.nmant - 1):  # the default quiet NaN
        return sign + "nan"
    return f"{sign}nan(0x{payload:x})"


def _is_integer(dtype: np.dtype) -> bool:
    return dtype.kind in "iu" or dtype.name in ("int2", "int4", "uint2", "uint4")


def format_scalar(value, dtype: np.dtype) -> str:
    if dtype == np.bool_:
        return "true" if value else "false"
    if _is_integer(dtype):
        return str(int(value))
    if dtype.kind == "c":
        part = np.float32 if dtype == np.complex64 else np.float64
        return (
            f"({format_float(value.real, np.dtype(part))}, "
            f"{format_float(value.imag, np.dtype(part))})"
        )
    return format_float(value, dtype)


def format_literal(value, shape: Shape) -> str:
    if shape.is_tuple:
        return (
            "( " + ", ".join(format_literal(v, s) for v, s in zip(value, shape.tuple_shapes)) + " )"
        )
    if shape.is_token:
        return "token"
    array = np.asarray(value)
    dtype = array.dtype
    if array.ndim == 0:
        return format_scalar(array[()], dtype)
    if array.size >= _SPLAT_FROM:
        bits = np.ascontiguousarray(array).reshape(-1).view(np.uint8).reshape(array.size, -1)
        if (bits == bits[0]).all():  # one value: the splat `constant(0.5)` XLA's parser reads
            return format_scalar(array.reshape(-1)[0], dtype)
    texts = _element_texts(array)
    if array.ndim == 1:
        return "{" + ", ".join(texts) + "}"
    return _format_nested(texts, array.shape)


_SPLAT_FROM = 1 << 16  # elements from which a constant of one value prints short


def _element_texts(array: np.ndarray) -> list[str]:
    """The text of every element in row-major order, vectorized where it matters (large
    constants): floats are written short first, and long only where short does not round-trip."""
    flat = array.reshape(-1)
    dtype = array.dtype
    if dtype == np.bool_:
        return ["1" if v else "0" for v in flat.tolist()]
    if _is_integer(dtype):
        wide = np.uint64 if dtype.kind == "u" and dtype.itemsize == 8 else np.int64
        return [str(v) for v in flat.astype(wide).tolist()]
    if dtype.kind == "c" or flat.size < 64:
        return [format_scalar(v, dtype) for v in flat]
    values = flat.astype(np.float64)
    short, longest = _digits(dtype)
    texts = [f"{v:.{short}g}" for v in values.tolist()]
    back = np.array([float(t) for t in texts]).astype(dtype)
    finite = np.isfinite(values)
    for i in np.flatnonzero(finite & (back.astype(np.float64) != values)).tolist():
        texts[i] = f"{values[i]:.{longest}g}"
    for i in np.flatnonzero(~finite).tolist():
        texts[i] = format_float(flat[i], dtype)
    return texts


def _format_nested(texts: list[str], dims: tuple[int, ...]) -> str:
    if len(dims) == 1:
        return "{ " + ", ".join(texts) + " }" if len(texts) > 1 else "{" + "".join(texts) + "}"
    step = len(texts) // dims[0] if dims[0] else 0
    return (
        "{ "
        + ", ".join(
            _format_nested(texts[i * step : (i + 1) * step], dims[1:]) for i in range(dims[0])
        )
        + " }"
    )
