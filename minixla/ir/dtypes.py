"""XLA element types: one row per type, mapping its HLO spelling to bits, kind and NumPy dtype.

Narrow floats (bf16, f8*, f4) and sub-byte ints come from `ml_dtypes`; a type that the installed
ml_dtypes lacks is still known to the parser (so its text round-trips) but has `numpy` set to None.

ml_dtypes is imported lazily (importlib's LazyLoader, registered here, the lowest floor that
names it): loading it registers hundreds of NumPy casts and ufunc loops, most of `import
minixla` (0.6 s of 0.9 s on the two-core machine of docs/performance.md), so a program that
never touches a narrow type never pays it. Modules keep writing `import ml_dtypes`; the first
attribute read loads it.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

import numpy as np


def _lazy(name: str):
    """`name` imported on first attribute access (the module itself when already loaded)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return importlib.import_module(name)  # raises the usual ImportError
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ml_dtypes = _lazy("ml_dtypes")

PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX, TOKEN, OPAQUE, TUPLE = (
    "pred",
    "signed",
    "unsigned",
    "float",
    "complex",
    "token",
    "opaque",
    "tuple",
)


_NARROW: dict[str, np.dtype | None] = {}  # ml_dtypes type name -> its dtype, once loaded


@dataclass(frozen=True)
class ElementType:
    name: str
    bits: int
    kind: str
    standard: np.dtype | None  # NumPy's own dtype, else None
    narrow: str | None = None  # the ml_dtypes type's name, loaded when first asked for

    @property
    def numpy(self) -> np.dtype | None:
        """The NumPy dtype that holds this type (None: none does)."""
        if self.narrow is None:
            return self.standard
        if self.narrow not in _NARROW:
            kind = getattr(ml_dtypes, self.narrow, None)
            _NARROW[self.narrow] = np.dtype(kind) if kind is not None else None
        return _NARROW[self.narrow]

    @property
    def is_float(self) -> bool:
        return self.kind == FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind == COMPLEX

    @property
    def is_integer(self) -> bool:
        return self.kind in (SIGNED, UNSIGNED)

    @property
    def is_signed(self) -> bool:
        return self.kind == SIGNED

    @property
    def is_array_type(self) -> bool:
        return self.kind not in (TOKEN, OPAQUE, TUPLE)

    @property
    def byte_size(self) -> int:
        """Bytes one element occupies unpacked (sub-byte types take a whole byte)."""
        return max(1, (self.bits + 7) // 8) if self.bits else 0

    def __str__(self) -> str:
        return self.name


def _ml(name: str) -> tuple[None, str]:
    return None, name


_ROWS = [
    ("pred", 8, PRED, np.dtype(np.bool_)),
    ("s1", 1, SIGNED, None),
    ("u1", 1, UNSIGNED, None),
    ("s2", 2, SIGNED, _ml("int2")),
    ("u2", 2, UNSIGNED, _ml("uint2")),
    ("s4", 4, SIGNED, _ml("int4")),
    ("u4", 4, UNSIGNED, _ml("uint4")),
    ("s8", 8, SIGNED, np.dtype(np.int8)),
    ("s16", 16, SIGNED, np.dtype(np.int16)),
    ("s32", 32, SIGNED, np.dtype(np.int32)),
    ("s64", 64, SIGNED, np.dtype(np.int64)),
    ("u8", 8, UNSIGNED, np.dtype(np.uint8)),
    ("u16", 16, UNSIGNED, np.dtype(np.uint16)),
    ("u32", 32, UNSIGNED, np.dtype(np.uint32)),
    ("u64", 64, UNSIGNED, np.dtype(np.uint64)),
    ("f16", 16, FLOAT, np.dtype(np.float16)),
    ("bf16", 16, FLOAT, _ml("bfloat16")),
    ("f32", 32, FLOAT, np.dtype(np.float32)),
    ("f64", 64, FLOAT, np.dtype(np.float64)),
    ("f8e5m2", 8, FLOAT, _ml("float8_e5m2")),
    ("f8e4m3fn", 8, FLOAT, _ml("float8_e4m3fn")),
    ("f8e4m3b11fnuz", 8, FLOAT, _ml("float8_e4m3b11fnuz")),
    ("f8e5m2fnuz", 8, FLOAT, _ml("float8_e5m2fnuz")),
    ("f8e4m3fnuz", 8, FLOAT, _ml("float8_e4m3fnuz")),
    ("f8e4m3", 8, FLOAT, _ml("float8_e4m3")),
    ("f8e3m4", 8, FLOAT, _ml("float8_e3m4")),
    ("f8e8m0fnu", 8, FLOAT, _ml("float8_e8m0fnu")),
    ("f4e2m1fn", 4, FLOAT, _ml("float4_e2m1fn")),
    ("f6e2m3fn", 6, FLOAT, _ml("float6_e2m3fn")),
    ("f6e3m2fn", 6, FLOAT, _ml("float6_e3m2fn")),
    ("c64", 64, COMPLEX, np.dtype(np.complex64)),
    ("c128", 128, COMPLEX, np.dtype(np.complex128)),
    ("token", 0, TOKEN, None),
    ("opaque", 0, OPAQUE, None),
]

ELEMENT_TYPES: dict[str, ElementType] = {
    row[0]: ElementType(*row[:3], *(row[3] if isinstance(row[3], tuple) else (row[3],)))
    for row in _ROWS
}
TUPLE_TYPE = ElementType("tuple", 0, TUPLE, None)

_BY_NUMPY: dict[np.dtype, ElementType] = {}
for _etype in ELEMENT_TYPES.values():
    if _etype.standard is not None:
        _BY_NUMPY.setdefault(_etype.standard, _etype)


def _add_narrow_types() -> None:
    for etype in ELEMENT_TYPES.values():
        if etype.narrow is not None and etype.numpy is not None:
            _BY_NUMPY.setdefault(etype.numpy, etype)


def finfo(dtype):
    """NumPy's finfo for its own float (and complex) types, ml_dtypes' for the narrow ones
    (which loads ml_dtypes only then)."""
    dtype = np.dtype(dtype)
    return np.finfo(dtype) if dtype.kind in "fc" else ml_dtypes.finfo(dtype)


def iinfo(dtype):
    """NumPy's iinfo for its own integer types, ml_dtypes' for int2/int4/uint4..."""
    dtype = np.dtype(dtype)
    return np.iinfo(dtype) if dtype.kind in "iu" else ml_dtypes.iinfo(dtype)


def element_type(name: str) -> ElementType:
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise KeyError(f"unknown element type {name!r}") from None


def from_numpy(dtype) -> ElementType:
    """The HLO element type of a NumPy dtype (bool -> pred, ml_dtypes.bfloat16 -> bf16, ...)."""
    try:
        dtype = np.dtype(dtype)
    except TypeError:  # a narrow type's name ("bfloat16"): known once ml_dtypes is loaded
        _add_narrow_types()
        dtype = np.dtype(dtype)
    found = _BY_NUMPY.get(dtype)
    if found is None and dtype.kind == "V":  # a narrow type, seen before ml_dtypes was asked
        _add_narrow_types()
        found = _BY_NUMPY.get(dtype)
    if found is None:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"NumPy dtype {dtype} has no HLO element type")
    return found


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype that holds HLO element type `name`; raises for types without one."""
    etype = element_type(name)
    if etype.numpy is None:
        from ..errors import UnsupportedError

        raise UnsupportedError(f"element type {name} has no NumPy representation")
    return etype.numpy
