"""Subnormal floats flushed to zero on request, the way XLA:CPU runs (FTZ and DAZ set).

By default minixla keeps subnormals (IEEE gradual underflow). With the compile option
`flush_denormals=True`, or `MINIXLA_FLAGS=--flush_denormals` (the option wins), the interpreter
and cpu treat every subnormal value of f32, f64 and bf16 as zero of the same sign: arguments
and constants as they enter, and the result of every instruction (on cpu also every operation
inside a fused kernel). Those are the types whose subnormals reach XLA:CPU's arithmetic as
subnormals (bf16 widens to an f32 subnormal); f16 and the f8 types compute in f32, where their
subnormals are normal numbers, so XLA keeps them and so does minixla. docs/semantics.md has
where this differs from the hardware's flags.
"""

from __future__ import annotations

import numpy as np
from ..ir.dtypes import finfo

OPTION = "flush_denormals"
_SMALLEST_NORMAL: dict[np.dtype, object] = {
    np.dtype(t): np.finfo(t).smallest_normal for t in (np.float32, np.float64)
}


def smallest_normal(dtype) -> object | None:
    """The smallest positive normal value of a flushed dtype (f32, f64, bf16); None for the
    others."""
    dtype = np.dtype(dtype)
    if dtype.name == "bfloat16" and dtype not in _SMALLEST_NORMAL:  # ml_dtypes', loaded by now
        _SMALLEST_NORMAL[dtype] = finfo(dtype).smallest_normal
    return _SMALLEST_NORMAL.get(dtype)


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
    out = np.array(value)  # multiplied only where small: inf * 0 elsewhere would warn
    np.multiply(out, out.dtype.type(0), out=out, where=small)
    return out


def flush_in_place(array: np.ndarray) -> None:
    """Flushes the subnormals of a writeable array where they are."""
    tiny = smallest_normal(array.dtype)
    if tiny is None or array.size == 0:
        return
    small = _small(array, tiny)
    if small.any():
        np.multiply(array, array.dtype.type(0), out=array, where=small)
