"""Frontend element types: the 64-bit switch, canonical dtypes and type promotion.

Values are typed with NumPy dtypes on this side; the builder speaks HLO names (`f32`). Rules
(documented in docs/frontend.md):

* 64-bit types exist only with `config.enable_x64`; otherwise int64/uint64/float64/complex128
  inputs, constants and requested dtypes are canonicalized to their 32-bit counterparts, and an
  integer that does not fit is an error (never a silent wrap).
* Python scalars are weakly typed: they take the type of the array they meet when their kind
  (bool < int < float < complex) is not higher; otherwise the default type of their kind.
* Two strongly typed arrays promote like JAX: bool joins anything, int + float gives the float,
  ints of mixed signedness widen, bf16 + f16 gives f32.
"""

from __future__ import annotations

import contextlib
from functools import reduce

import numpy as np

from ..ir.dtypes import from_numpy, numpy_dtype
from .errors import FrontendTypeError

BOOL, INT, FLOAT, COMPLEX = 0, 1, 2, 3  # kind order of the promotion lattice
_NARROW = {
    np.dtype(np.int64): np.dtype(np.int32),
    np.dtype(np.uint64): np.dtype(np.uint32),
    np.dtype(np.float64): np.dtype(np.float32),
    np.dtype(np.complex128): np.dtype(np.complex64),
}


class Config:
    """Frontend switches: `minixla.config.enable_x64 = True` or `config.update(...)`."""

    def __init__(self):
        self.enable_x64 = False

    def update(self, name: str, value) -> None:
        if not hasattr(self, name):
            raise AttributeError(f"unknown config option {name!r}")
        setattr(self, name, value)

    @contextlib.contextmanager
    def x64(self, enabled: bool = True):
        old, self.enable_x64 = self.enable_x64, enabled
        try:
            yield
        finally:
            self.enable_x64 = old


config = Config()


def kind(dtype) -> int:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return BOOL
    if dtype.kind in "iu":
        return INT
    if dtype.kind == "c":
        return COMPLEX
    return FLOAT  # f, and ml_dtypes' narrow floats (kind 'V')


def canonicalize(dtype) -> np.dtype:
    """The dtype arrays of `dtype` get: 64-bit types narrow to 32 bits unless x64 is on."""
    dtype = np.dtype(dtype)
    if not config.enable_x64:
        dtype = _NARROW.get(dtype, dtype)
    from_numpy(dtype)  # raises for dtypes HLO has no type for
    return dtype


def default_dtype(k: int) -> np.dtype:
    wide = config.enable_x64
    return np.dtype(
        {
            BOOL: np.bool_,
            INT: np.int64 if wide else np.int32,
            FLOAT: np.float64 if wide else np.float32,
            COMPLEX: np.complex128 if wide else np.complex64,
        }[k]
    )


def hlo_name(dtype) -> str:
    return from_numpy(np.dtype(dtype)).name


def from_hlo(name: str) -> np.dtype:
    return numpy_dtype(name)


def python_scalar_type(value) -> tuple[np.dtype, bool]:
    """(dtype, weak) of a Python scalar; bools are strong, numbers weak."""
    if isinstance(value, (bool, np.bool_)):
        return np.dtype(np.bool_), False
    if isinstance(value, int):
        return default_dtype(INT), True
    if isinstance(value, float):
        return default_dtype(FLOAT), True
    if isinstance(value, complex):
        return default_dtype(COMPLEX), True
    raise FrontendTypeError(f"{type(value).__name__} is not an array type")


def _promote_strong(a: np.dtype, b: np.dtype) -> np.dtype:
    if a == b:
        return a
    ka, kb = kind(a), kind(b)
    if ka != kb:
        low, high = (a, b) if ka < kb else (b, a)
        if kind(high) == COMPLEX and kind(low) == FLOAT and low.itemsize == 8:
            return np.dtype(np.complex128)
        return high  # bool joins anything; int + float is the float (JAX, not NumPy)
    if ka == FLOAT:
        if {a.name, b.name} == {"bfloat16", "float16"}:
            return np.dtype(np.float32)
        return a if a.itemsize >= b.itemsize else b
    if ka == INT:
        joined = np.promote_types(a, b)
        return joined if joined.kind in "iu" else np.dtype(np.int64)  # u64 + s64
    return a if a.itemsize >= b.itemsize else b  # complex


def result_type(*types: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """The promoted (dtype, weak) of operands given as (dtype, weak) pairs."""
    strong = [d for d, weak in types if not weak]
    weak_kind = max((kind(d) for d, weak in types if weak), default=BOOL)
    if not strong:
        return canonicalize(default_dtype(weak_kind)), True
    dtype = canonicalize(reduce(_promote_strong, strong))
    if weak_kind <= kind(dtype):
        return dtype, False
    if weak_kind == COMPLEX and kind(dtype) == FLOAT and dtype.itemsize == 8:
        return np.dtype(np.complex128), True
    return default_dtype(weak_kind), True


def host_array(value, dtype=None) -> np.ndarray:
    """A host value as a canonical NumPy array; integers that the narrowed type cannot hold
    are an error rather than a silent wrap."""
    array = np.asarray(value)
    if array.dtype == object:
        raise FrontendTypeError(f"cannot make an array out of {type(value).__name__} {value!r:.60}")
    target = canonicalize(dtype if dtype is not None else array.dtype)
    if target == array.dtype:
        return array
    if kind(target) == INT and kind(array.dtype) == INT and array.size:
        info = np.iinfo(target)
        if array.min() < info.min or array.max() > info.max:
            hint = "" if config.enable_x64 else " (set minixla.config.enable_x64 = True)"
            raise FrontendTypeError(
                f"integer values in [{array.min()}, {array.max()}] do not fit in {target}{hint}"
            )
    return array.astype(target)


def scalar_constant(value, dtype: np.dtype) -> np.ndarray:
    """A Python scalar as a 0-d array of `dtype`, checking that an int fits."""
    if kind(dtype) == INT and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise FrontendTypeError(f"Python int {value} is out of range for {dtype}")
    if kind(dtype) != COMPLEX and isinstance(value, complex):
        raise FrontendTypeError(f"cannot use complex {value} as {dtype}")
    return np.asarray(value, dtype=dtype)
