"""XLA:CPU's own custom-call targets, so modules XLA optimized (and JAX's linalg lowerings) run.

`TARGETS` maps a target (after dropping a `__cpu$` prefix) to a NumPy implementation with the
meaning XLA:CPU gives it: `TopK` and the LAPACK FFI family `lapack_{s,d,c,z}<routine>_ffi`.
Each implementation takes the operands, the (dims, dtype) of each result and the FFI attributes
parsed from the backend_config (`{uplo = 76 : ui8}`: characters as their ASCII codes), and
returns the results as LAPACK leaves them. Leading dimensions are batch dimensions.
minixla.reference.custom_call falls back on this table for every backend, with each backend's
calling convention; a registration by the user wins.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

_FLAG = {"L": 76, "U": 85, "N": 78, "T": 84, "C": 67, "V": 86, "A": 65, "S": 83, "R": 82}


def ffi_attributes(config: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(-?\d+)", config or "")}


def _batched(fn, *arrays):
    """Applies `fn` to each matrix of the leading batch dims; returns a tuple of stacked results."""
    batch = arrays[0].shape[:-2]
    results = [fn(*(a[index] for a in arrays)) for index in np.ndindex(*batch)]
    if not results:
        raise ValueError("empty batch")
    return tuple(
        np.stack([r[i] for r in results]).reshape(batch + np.shape(results[0][i]))
        for i in range(len(results[0]))
    )


def _potrf(operands, outs, attrs):
    (a,) = operands
    lower = attrs.get("uplo", _FLAG["L"]) == _FLAG["L"]

    def one(m):
        try:
            factor = np.linalg.cholesky(
                m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)
            )
        except np.linalg.LinAlgError:
            return m, np.int32(1)
        if not lower:
            factor = factor.conj().T
        keep = np.tril(np.ones(m.shape, bool)) if lower else np.triu(np.ones(m.shape, bool))
        return np.where(keep, factor, m).astype(m.dtype), np.int32(0)

    return _batched(one, a)


def _getrf(operands, outs, attrs):
    (a,) = operands

    def one(m):
        work = m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)
        rows, cols = work.shape
        pivots = np.zeros(min(rows, cols), np.int32)
        info = 0
        for j in range(min(rows, cols)):
            p = j + int(np.argmax(np.abs(work[j:, j])))
            pivots[j] = p + 1  # LAPACK's pivots are 1-based
            if work[p, j] == 0:
                info = info or j + 1
                continue
            work[[j, p]] = work[[p, j]]
            work[j + 1 :, j] /= work[j, j]
            work[j + 1 :, j + 1 :] -= np.outer(work[j + 1 :, j], work[j, j + 1 :])
        return work.astype(m.dtype), pivots, np.int32(info)

    return _batched(one, a)


def _triangle(a, lower: bool, unit: bool):
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri - np.diag(np.diag(tri)) + np.eye(a.shape[0], dtype=a.dtype)
    return tri


def _trsm(operands, outs, attrs):
    a, b = operands[:2]
    lower = attrs.get("uplo", _FLAG["L"]) == _FLAG["L"]
    unit = attrs.get("diag", _FLAG["N"]) == _FLAG["U"]
    trans = attrs.get("trans_x", _FLAG["N"])
    left = attrs.get("side", _FLAG["L"]) == _FLAG["L"]

    def one(m, rhs):
        work = np.complex128 if m.dtype.kind == "c" else np.float64
        op = _triangle(m.astype(work), lower, unit)
        if trans == _FLAG["T"]:
            op = op.T
        elif trans == _FLAG["C"]:
            op = op.conj().T
        rhs = rhs.astype(work)
        x = np.linalg.solve(op, rhs) if left else np.linalg.solve(op.T, rhs.T).T
        return (x.astype(b.dtype),)

    return _batched(one, a, b)[0]


def _geqrf(operands, outs, attrs):
    (a,) = operands

    def one(m):
        h, tau = np.linalg.qr(
            m.astype(np.complex128 if m.dtype.kind == "c" else np.float64), mode="raw"
        )
        return h.T.astype(m.dtype), tau.astype(m.dtype)

    return _batched(one, a)


def _orgqr(operands, outs, attrs):
    a, tau = operands

    def one(m, t):
        rows, cols = m.shape
        q = np.eye(rows, cols, dtype=np.complex128 if m.dtype.kind == "c" else np.float64)
        for i in reversed(range(len(t))):  # Q = H(0) H(1) ... H(k-1)
            v = np.zeros(rows, q.dtype)
            v[i] = 1
            v[i + 1 :] = m[i + 1 :, i]
            q -= t[i] * np.outer(v, v.conj() @ q)
        return (q.astype(m.dtype),)

    batch = a.shape[:-2]
    results = [one(a[i], tau[i])[0] for i in np.ndindex(*batch)]
    return np.stack(results).reshape(a.shape[:-1] + (results[0].shape[-1],))


def _syevd(operands, outs, attrs):
    (a,) = operands
    uplo = "L" if attrs.get("uplo", _FLAG["L"]) == _FLAG["L"] else "U"

    def one(m):
        w, v = np.linalg.eigh(
            m.astype(np.complex128 if m.dtype.kind == "c" else np.float64), UPLO=uplo
        )
        return v.astype(m.dtype), w.astype(outs[1][1]), np.int32(0)

    return _batched(one, a)


def _gesdd(operands, outs, attrs):
    (a,) = operands
    (_, _), (_, s_dtype), (u_dims, _), (vt_dims, _) = outs[:4]
    rows, cols = a.shape[-2:]
    full = tuple(u_dims[-2:]) == (rows, rows) and rows != min(rows, cols)
    full = full or tuple(vt_dims[-2:]) == (cols, cols) and cols != min(rows, cols)

    def one(m):
        work = m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)
        u, s, vt = np.linalg.svd(work, full_matrices=full)
        u = u if u.shape == tuple(u_dims[-2:]) else np.zeros(u_dims[-2:])
        vt = vt if vt.shape == tuple(vt_dims[-2:]) else np.zeros(vt_dims[-2:])
        return m, s.astype(s_dtype), u.astype(m.dtype), vt.astype(m.dtype), np.int32(0)

    return _batched(one, a)


def _top_k(operands, outs, attrs):
    from .ops_sort import total_order_key

    (x,) = operands
    k = outs[0][0][-1]
    key = total_order_key(x).astype(np.int64)
    order = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(outs[1][1])


_LAPACK = {
    "potrf": _potrf,
    "getrf": _getrf,
    "trsm": _trsm,
    "geqrf": _geqrf,
    "orgqr": _orgqr,
    "ungqr": _orgqr,
    "syevd": _syevd,
    "heevd": _syevd,
    "gesdd": _gesdd,
}

TARGETS: dict[str, Callable] = {
    "TopK": _top_k,
    **{f"lapack_{t}{routine}_ffi": fn for routine, fn in _LAPACK.items() for t in "sdcz"},
}


def builtin_target(target: str) -> Callable | None:
    return TARGETS.get(target.removeprefix("__cpu$").removeprefix("xla.cpu."))


def _specs(shape) -> list[tuple[tuple[int, ...], np.dtype]]:
    leaves = shape.tuple_shapes if shape.is_tuple else (shape,)
    return [(leaf.dims, leaf.numpy_dtype) for leaf in leaves]


def adapt(fn: Callable, backend: str) -> Callable:
    """`fn` with the calling convention of `backend` (see minixla.reference.custom_call)."""
    if backend == "interpreter":

        def interpreter(*operands, result_shape, backend_config=""):
            return fn(operands, _specs(result_shape), ffi_attributes(backend_config))

        return interpreter

    def buffers(out, *operands, backend_config=""):
        leaves = out if isinstance(out, tuple) else (out,)
        host = [np.asarray(o.copy_to_host() if hasattr(o, "copy_to_host") else o) for o in operands]
        specs = [(tuple(leaf.shape), np.dtype(leaf.dtype)) for leaf in leaves]
        result = fn(tuple(host), specs, ffi_attributes(backend_config))
        return result

    return buffers


__all__ = ["TARGETS", "adapt", "builtin_target", "ffi_attributes"]
