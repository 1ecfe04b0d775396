"""BLAS and LAPACK routines the driver's thunks call through ctypes, from the OpenBLAS that
NumPy maps into the process (gemm.locate): a GEMM that accumulates into its output, a
triangular solve and a Cholesky factorization, all on row-major arrays.

They used to come from SciPy's wrappers, whose import (0.2-0.4 s) a warm compile paid for
every program with a convolution or a factorization; NumPy's OpenBLAS exports the same
routines through its CBLAS and LAPACKE interfaces, so SciPy is not needed for them at all.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np


ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
UPPER, LOWER = 121, 122
NON_UNIT, UNIT = 131, 132
LEFT, RIGHT = 141, 142


@dataclass(frozen=True)
class HostBlas:
    gemm: dict  # numpy dtype -> cblas_?gemm
    dtrsm: object
    dpotrf: object  # LAPACKE_dpotrf
    int_type: type


_FOUND: list = []  # [HostBlas | None] once looked up


def host_blas() -> HostBlas | None:
    """The routines, or None where NumPy's OpenBLAS (with CBLAS and LAPACKE) is not mapped."""
    if not _FOUND:
        _FOUND.append(_find())
    return _FOUND[0]


def _find() -> HostBlas | None:
    from .gemm import locate

    found = locate()
    if found is None:
        return None
    lib = ctypes.CDLL(found.path)
    sgemm = found.exports[found.names[("f32", "gemm")]]  # e.g. scipy_cblas_sgemm64_
    prefix, suffix = sgemm.split("sgemm")
    lapacke = prefix.replace("cblas_", "") + "LAPACKE_dpotrf" + suffix
    names = {"sgemm": sgemm, "dgemm": f"{prefix}dgemm{suffix}", "dtrsm": f"{prefix}dtrsm{suffix}"}
    if not all(hasattr(lib, n) for n in [*names.values(), lapacke]):
        return None
    blasint = ctypes.c_int64 if found.width == 64 else ctypes.c_int32
    enum, pointer = ctypes.c_int, ctypes.c_void_p
    gemm = {}
    for dtype, name, scalar in (
        (np.float32, "sgemm", ctypes.c_float),
        (np.float64, "dgemm", ctypes.c_double),
    ):
        fn = getattr(lib, names[name])
        fn.restype = None
        fn.argtypes = [enum] * 3 + [blasint] * 3 + [scalar, pointer, blasint, pointer, blasint]
        fn.argtypes += [scalar, pointer, blasint]
        gemm[np.dtype(dtype)] = fn
    dtrsm = getattr(lib, names["dtrsm"])
    dtrsm.restype = None
    dtrsm.argtypes = [enum] * 5 + [blasint] * 2 + [ctypes.c_double, pointer, blasint]
    dtrsm.argtypes += [pointer, blasint]
    dpotrf = getattr(lib, lapacke)
    dpotrf.restype = blasint
    dpotrf.argtypes = [enum, ctypes.c_char, blasint, pointer, blasint]
    return HostBlas(gemm, dtrsm, dpotrf, blasint)


def _rows(a: np.ndarray) -> int:
    """The leading dimension of a matrix whose rows are contiguous."""
    assert a.ndim == 2 and (a.shape[1] <= 1 or a.strides[1] == a.itemsize), a.strides
    return max(a.strides[0] // a.itemsize, a.shape[1], 1)


def accumulate_gemm(blas: HostBlas, c: np.ndarray, a: np.ndarray, b: np.ndarray, beta: float):
    """c = a @ b + beta * c, in place; a, b and c have contiguous rows, one float type."""
    m, k = a.shape
    n = b.shape[1]
    blas.gemm[c.dtype](
        ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a.ctypes.data, _rows(a),
        b.ctypes.data, _rows(b), beta, c.ctypes.data, _rows(c),
    )  # fmt: skip


def triangular_solve(blas: HostBlas, a: np.ndarray, b: np.ndarray, *, left, lower, trans, unit):
    """Solves op(a) x = b (left) or x op(a) = b in place of b (C-order float64 matrices)."""
    rows, cols = b.shape
    blas.dtrsm(
        ROW_MAJOR, LEFT if left else RIGHT, LOWER if lower else UPPER,
        TRANS if trans else NO_TRANS, UNIT if unit else NON_UNIT, rows, cols, 1.0,
        a.ctypes.data, _rows(a), b.ctypes.data, _rows(b),
    )  # fmt: skip


def cholesky(blas: HostBlas, a: np.ndarray, *, lower: bool) -> int:
    """Factors the C-order float64 matrix `a` in place (its `lower` or upper triangle; the
    other is zeroed); LAPACK's info: 0, or the order of the first failing leading minor."""
    n = a.shape[0]
    info = int(blas.dpotrf(ROW_MAJOR, b"L" if lower else b"U", n, a.ctypes.data, max(n, 1)))
    a[...] = np.tril(a) if lower else np.triu(a)
    return info
