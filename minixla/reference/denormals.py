"""Subnormal floats flushed to zero on request, the way XLA:CPU runs (FTZ and DAZ set).

By default minixla keeps subnormals (IEEE gradual underflow). With the compile option
`flush_denormals=True`, or `MINIXLA_FLAGS=--flush_denormals` (the option wins), the interpreter
and cpu treat every subnormal value of a real floating type (f16, bf16, f32, f64, the f8
types) as zero of the same sign: arguments and constants as they enter, and the result of
every instruction (on cpu also every operation inside a fused kernel). docs/semantics.md has
where this differs from the hardware's flags.
"""

from __future__ import annotations

import numpy as np
from ..ir.dtypes import finfo

OPTION = "flush_denormals"
_SMALLEST_NORMAL: dict[np.dtype, object] = {}


def smallest_normal(dtype) -> object | None:
    """The smallest positive normal value of a real floating dtype; None for other types."""
    dtype = np.dtype(dtype)
    if dtype not in _SMALLEST_NORMAL:
        real = dtype.kind == "f" or (dtype.kind == "V" and dtype.type.__module__ == "ml_dtypes")
        try:
            _SMALLEST_NORMAL[dtype] = finfo(dtype).smallest_normal if real else None
        except (TypeError, ValueError):
            _SMALLEST_NORMAL[dtype] = None  # an ml_dtypes integer type
    return _SMALLEST_NORMAL[dtype]


def _small(array: np.ndarray, tiny) -> np.ndarray:
    magnitude = np.abs(array)
    return (magnitude < tiny) & (magnitude != 0)


def flushed(value):
    """`value` (an array, a tuple of values, anything else) with subnormals replaced by zeros
    of their sign; the same object when there is nothing to flush."""
    if isinstance(value, tuple):
        parts = tuple(flushed(v) for v in value)
        return value if all(a is b for a, b in zip(parts, value)) else parts
    if not isinstance(value, (np.ndarray, np.generic)):
        return value
    tiny = smallest_normal(value.dtype)
    if tiny is None:
        return value
    small = _small(value, tiny)
    if not small.any():
        return value
    return np.where(small, value * value.dtype.type(0), value)


def flush_in_place(array: np.ndarray) -> None:
    """Flushes the subnormals of a writeable array where they are."""
    tiny = smallest_normal(array.dtype)
    if tiny is None or array.size == 0:
        return
    small = _small(array, tiny)
    if small.any():
        np.copyto(array, array * array.dtype.type(0), where=small)
