"""GEMMs called from the driver's convolution thunk through ctypes, from the OpenBLAS NumPy maps
into the process (gemm.locate), and for f32 products above the small-matrix path that run on
one thread from the second OpenBLAS where gemm.py loads one (gemm.large_library).

Shifted convolutions (convolution.py) add one GEMM per tap into the same output. They used
SciPy's wrapper of `?gemm`, whose import (0.2-0.4 s) every warm compile of a program with
such a convolution paid; NumPy's OpenBLAS exports the same routine through CBLAS. The im2col
strategy and grouped shifted ones multiply through `matmul`, which is np.matmul but for the
products the second library runs faster.
"""

from __future__ import annotations

import ctypes

import numpy as np

from .gemm import locate

ROW_MAJOR, NO_TRANS = 101, 111

_FOUND: list = []  # [{numpy dtype: cblas_?gemm} | None] once looked up


def accumulating_gemm() -> dict | None:
    """cblas sgemm and dgemm by NumPy dtype (and by (dtype, "large") the large-GEMM library's;
    "blas": gemm.Blas, which says which calls go there), or None where no OpenBLAS with CBLAS
    is mapped."""
    if not _FOUND:
        _FOUND.append(_find())
    return _FOUND[0]


def _find() -> dict | None:
    found = locate()
    if found is None:
        return None
    routines: dict = {}
    for dtype, key, scalar in (
        (np.float32, ("f32", "gemm"), ctypes.c_float),
        (np.float64, ("f64", "gemm"), ctypes.c_double),
    ):
        routines[np.dtype(dtype)] = _routine(found.path, found.exports[found.names[key]], scalar)
        name = found.large_gemm(key[0])
        if found.large is not None and name is not None:
            large = _routine(found.large.path, found.large.exports[name], scalar, ctypes.c_int32)
            routines[np.dtype(dtype), "large"] = large
    routines["blas"] = found
    return routines


def _routine(path: str, symbol: str, scalar, blasint=ctypes.c_int64):
    fn = getattr(ctypes.CDLL(path), symbol)
    fn.restype = None
    enum, pointer = ctypes.c_int, ctypes.c_void_p
    fn.argtypes = [enum] * 3 + [blasint] * 3 + [scalar, pointer, blasint, pointer, blasint]
    fn.argtypes += [scalar, pointer, blasint]
    return fn


def _pick(gemm: dict, dtype, one_thread: bool, m: int, n: int, k: int, *leading: int):
    """The routine for an m x k x n product: the large library's where the caller runs it on
    one thread (that library's only count), above the small path, every dim and leading
    dimension fitting its 32-bit integers."""
    large = gemm.get((dtype, "large"))  # f32's only
    if large is not None and one_thread and gemm["blas"].runs_large("f32", m, n, k, *leading):
        return large
    return gemm[dtype]


def matmul(
    a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, one_thread: bool = False
) -> np.ndarray:
    """np.matmul(a, b, out=out), through the large-GEMM library for f32 products it runs:
    on one thread (`one_thread`: the caller's BLAS thread count, decided by its size), 2-D
    or equally batched 3-D operands with contiguous rows, every matrix's product above the
    small path."""
    gemm = accumulating_gemm()
    if (
        gemm is None
        or not one_thread
        or a.dtype != np.float32
        or b.dtype != np.float32
        or a.ndim != b.ndim
        or a.ndim not in (2, 3)
        or a.shape[:-2] != b.shape[:-2]
        or a.shape[-1] != b.shape[-2]
        or not gemm["blas"].runs_large("f32", a.shape[-2], b.shape[-1], a.shape[-1])
        or not all(_plain_rows(x) for x in (a, b))
        or (out is not None and (out.dtype != np.float32 or not _plain_rows(out)))
    ):
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(a.shape[:-1] + b.shape[-1:], np.float32)
    if a.ndim == 2:
        accumulate_gemm(gemm, out, a, b, 0.0, True)
    else:
        for i in range(a.shape[0]):
            accumulate_gemm(gemm, out[i], a[i], b[i], 0.0, True)
    return out


def _plain_rows(a: np.ndarray) -> bool:
    """Rows contiguous, one row after another at a positive pitch (what cblas can read)."""
    if a.ndim < 2 or 0 in a.shape:
        return False
    item = a.itemsize
    return (
        a.strides[-1] == item
        and a.strides[-2] >= a.shape[-1] * item
        and (a.strides[-2] % item == 0)
    )


def _rows(a: np.ndarray) -> int:
    """The leading dimension of a matrix whose rows are contiguous (the callers' arrays)."""
    return max(a.strides[0] // a.itemsize, a.shape[1], 1)


def accumulate_gemm(
    gemm: dict, c: np.ndarray, a: np.ndarray, b: np.ndarray, beta: float, one_thread: bool
):
    """c = a @ b + beta * c, in place; a, b and c have contiguous rows, one float type;
    `one_thread`: the caller runs it on one BLAS thread (see `matmul`)."""
    m, k = a.shape
    n = b.shape[1]
    lda, ldb, ldc = _rows(a), _rows(b), _rows(c)
    _pick(gemm, c.dtype, one_thread, m, n, k, lda, ldb, ldc)(
        ROW_MAJOR, NO_TRANS, NO_TRANS, m, n, k, 1.0, a.ctypes.data, lda,
        b.ctypes.data, ldb, beta, c.ctypes.data, ldc,
    )  # fmt: skip
