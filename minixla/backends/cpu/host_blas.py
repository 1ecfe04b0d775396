"""A GEMM that accumulates into its output, called from the driver's convolution thunk through
ctypes, from the OpenBLAS NumPy maps into the process (gemm.locate).

Shifted convolutions (convolution.py) add one GEMM per tap into the same output. They used
SciPy's wrapper of `?gemm`, whose import (0.2-0.4 s) every warm compile of a program with
such a convolution paid; NumPy's OpenBLAS exports the same routine through CBLAS.
"""

from __future__ import annotations

import ctypes

import numpy as np

ROW_MAJOR, NO_TRANS = 101, 111

_FOUND: list = []  # [{numpy dtype: cblas_?gemm} | None] once looked up


def accumulating_gemm() -> dict | None:
    """cblas sgemm and dgemm by NumPy dtype, or None where no OpenBLAS with CBLAS is mapped."""
    if not _FOUND:
        _FOUND.append(_find())
    return _FOUND[0]


def _find() -> dict | None:
    from .gemm import locate

    found = locate()
    if found is None:
        return None
    lib = ctypes.CDLL(found.path)
    blasint = ctypes.c_int64 if found.width == 64 else ctypes.c_int32
    enum, pointer = ctypes.c_int, ctypes.c_void_p
    routines = {}
    for dtype, key, scalar in (
        (np.float32, ("f32", "gemm"), ctypes.c_float),
        (np.float64, ("f64", "gemm"), ctypes.c_double),
    ):
        fn = getattr(lib, found.exports[found.names[key]])
        fn.restype = None
        fn.argtypes = [enum] * 3 + [blasint] * 3 + [scalar, pointer, blasint, pointer, blasint]
        fn.argtypes += [scalar, pointer, blasint]
        routines[np.dtype(dtype)] = fn
    return routines


def _rows(a: np.ndarray) -> int:
    """The leading dimension of a matrix whose rows are contiguous (the callers' arrays)."""
    return max(a.strides[0] // a.itemsize, a.shape[1], 1)


def accumulate_gemm(gemm: dict, c: np.ndarray, a: np.ndarray, b: np.ndarray, beta: float):
    """c = a @ b + beta * c, in place; a, b and c have contiguous rows, one float type."""
    m, k = a.shape
    n = b.shape[1]
    gemm[c.dtype](
        ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a.ctypes.data, _rows(a),
        b.ctypes.data, _rows(b), beta, c.ctypes.data, _rows(c),
    )  # fmt: skip
