"""XLA:CPU's LAPACK FFI targets (`lapack_{s,d,c,z}<routine>_ffi`) in NumPy, as jaxlib's kernels
leave their results: the factors in LAPACK's compact forms (Householder vectors below the
diagonal with their `tau`), 1-based pivots, `info`, untouched triangles. Each routine takes the
operands, the (dims, dtype) of each result and the FFI attributes (characters as their ASCII
codes, `uplo = 76` for 'L'), works in double precision and returns the results in the declared
types. Leading dimensions are batch dimensions. `LAPACK` maps a routine name to its function.

Schur's decomposition (gees) is LAPACK's own through SciPy when SciPy is installed; NumPy has
none, so without SciPy it is an error.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .custom_call import CustomCallError

FLAG = {"L": 76, "U": 85, "N": 78, "T": 84, "C": 67, "V": 86, "A": 65, "S": 83, "R": 82}


def _work(m: np.ndarray) -> np.ndarray:
    return m.astype(np.complex128 if m.dtype.kind == "c" else np.float64)


def _batched(outs, fn, *arrays):
    """Applies `fn` to each matrix of the leading batch dims; returns a tuple of stacked results
    (of the declared `outs`, each empty, where the batch has no matrix)."""
    batch = arrays[0].shape[:-2]
    return _stacked(outs, [fn(*(a[index] for a in arrays)) for index in np.ndindex(*batch)], batch)


def _stacked(outs, results: list, batch: tuple) -> tuple:
    """Each matrix's results stacked over the batch (the declared `outs`, each empty, where
    the batch has no matrix)."""
    if not results:
        return tuple(np.zeros(dims, dtype) for dims, dtype in outs)
    return tuple(
        np.stack([r[i] for r in results]).reshape(batch + np.shape(results[0][i]))
        for i in range(len(results[0]))
    )


def _potrf(operands, outs, attrs):
    (a,) = operands
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]

    def one(m):
        # potrf reads only the `uplo` triangle: the matrix is that triangle's Hermitian one
        work = _work(m)
        part = np.tril(work, -1) if lower else np.triu(work, 1)
        hermitian = part + part.conj().T + np.diag(np.diag(work).real)
        try:
            factor = np.linalg.cholesky(hermitian)
        except np.linalg.LinAlgError:
            return m, np.int32(1)
        if not lower:
            factor = factor.conj().T
        keep = np.tril(np.ones(m.shape, bool)) if lower else np.triu(np.ones(m.shape, bool))
        return np.where(keep, factor, m).astype(m.dtype), np.int32(0)

    return _batched(outs, one, a)


def _getrf(operands, outs, attrs):
    (a,) = operands

    def one(m):
        work = _work(m)
        rows, cols = work.shape
        pivots = np.zeros(min(rows, cols), np.int32)
        info = 0
        for j in range(min(rows, cols)):
            column = work[j:, j]
            # LAPACK's i?amax: |re| + |im| for complex entries, not the modulus
            p = j + int(np.argmax(np.abs(column.real) + np.abs(column.imag)))
            pivots[j] = p + 1  # LAPACK's pivots are 1-based
            if work[p, j] == 0:
                info = info or j + 1
                continue
            work[[j, p]] = work[[p, j]]
            work[j + 1 :, j] /= work[j, j]
            work[j + 1 :, j + 1 :] -= np.outer(work[j + 1 :, j], work[j, j + 1 :])
        return work.astype(m.dtype), pivots, np.int32(info)

    return _batched(outs, one, a)


def _triangle(a, lower: bool, unit: bool):
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri - np.diag(np.diag(tri)) + np.eye(a.shape[0], dtype=a.dtype)
    return tri


def _trsm(operands, outs, attrs):
    a, b = operands[:2]
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]
    unit = attrs.get("diag", FLAG["N"]) == FLAG["U"]
    trans = attrs.get("trans_x", FLAG["N"])
    left = attrs.get("side", FLAG["L"]) == FLAG["L"]

    def one(m, rhs):
        work = np.complex128 if m.dtype.kind == "c" else np.float64
        op = _triangle(m.astype(work), lower, unit)
        if trans == FLAG["T"]:
            op = op.T
        elif trans == FLAG["C"]:
            op = op.conj().T
        rhs = rhs.astype(work)
        x = np.linalg.solve(op, rhs) if left else np.linalg.solve(op.T, rhs.T).T
        return (x.astype(b.dtype),)

    return _batched(outs, one, a, b)[0]


def _geqrf(operands, outs, attrs):
    (a,) = operands

    def one(m):
        h, tau = np.linalg.qr(_work(m), mode="raw")
        return h.T.astype(m.dtype), tau.astype(m.dtype)

    return _batched(outs, one, a)


def _householder_q(m: np.ndarray, tau: np.ndarray, cols: int) -> np.ndarray:
    """The first `cols` columns of Q = H(0) H(1) ... H(k-1), H(i) = I - tau[i] v v^H with
    v[i] = 1 and v below it in column i of `m` (geqrf's compact form)."""
    rows = m.shape[0]
    q = np.eye(rows, cols, dtype=np.complex128 if m.dtype.kind == "c" else np.float64)
    for i in reversed(range(len(tau))):
        v = np.zeros(rows, q.dtype)
        v[i] = 1
        v[i + 1 :] = m[i + 1 :, i]
        q -= tau[i] * np.outer(v, v.conj() @ q)
    return q


def _orgqr(operands, outs, attrs):
    a, tau = operands
    batch = a.shape[:-2]
    cols = a.shape[-1]
    results = [(_householder_q(a[i], tau[i], cols).astype(a.dtype),) for i in np.ndindex(*batch)]
    return _stacked(outs, results, batch)[0]


def _syevd(operands, outs, attrs):
    (a,) = operands
    uplo = "L" if attrs.get("uplo", FLAG["L"]) == FLAG["L"] else "U"

    def one(m):
        w, v = np.linalg.eigh(_work(m), UPLO=uplo)
        return v.astype(m.dtype), w.astype(outs[1][1]), np.int32(0)

    return _batched(outs, one, a)


def full_matrices(rows: int, cols: int, u_dims, vt_dims) -> bool:
    """Whether gesdd's declared u [rows, rows] or vt [cols, cols] asks for the full
    matrices, not the reduced ones (the same where the matrix is square)."""
    short = min(rows, cols)
    return (tuple(u_dims[-2:]) == (rows, rows) and rows != short) or (
        tuple(vt_dims[-2:]) == (cols, cols) and cols != short
    )


def _gesdd(operands, outs, attrs):
    (a,) = operands
    (_, _), (_, s_dtype), (u_dims, _), (vt_dims, _) = outs[:4]
    full = full_matrices(*a.shape[-2:], u_dims, vt_dims)

    values_only = attrs.get("mode") == FLAG["N"]  # jnp.linalg.svd(compute_uv=False)

    def one(m):
        work = _work(m)
        if values_only:  # u and vt are not computed (LAPACK leaves them unset): zeros here
            s = np.linalg.svd(work, compute_uv=False)
            zeros = np.zeros(u_dims[-2:], m.dtype), np.zeros(vt_dims[-2:], m.dtype)
            return m, s.astype(s_dtype), *zeros, np.int32(0)
        u, s, vt = np.linalg.svd(work, full_matrices=full)
        u = u if u.shape == tuple(u_dims[-2:]) else np.zeros(u_dims[-2:])
        vt = vt if vt.shape == tuple(vt_dims[-2:]) else np.zeros(vt_dims[-2:])
        return m, s.astype(s_dtype), u.astype(m.dtype), vt.astype(m.dtype), np.int32(0)

    return _batched(outs, one, a)


def _gesvd(operands, outs, attrs):
    return _gesdd(operands, outs, attrs)  # the same factors; only LAPACK's algorithm differs


def _geev(operands, outs, attrs):
    """Eigenvalues (real and imaginary parts for real input) and, when asked for, the right and
    left eigenvectors as complex matrices with unit columns, as jaxlib unpacks them."""
    (a,) = operands
    left = attrs.get("compute_left", FLAG["N"]) == FLAG["V"]
    right = attrs.get("compute_right", FLAG["N"]) == FLAG["V"]
    vector_dtype = outs[-2][1]

    def one(m):
        values, vr = np.linalg.eig(_work(m))
        vl = np.zeros_like(vr)
        if left:  # rows of inv(vr) are the left eigenvectors, conjugated
            vl = np.linalg.inv(vr).conj().T
            vl /= np.linalg.norm(vl, axis=0)
            largest = vl[np.argmax(np.abs(vl), axis=0), np.arange(vl.shape[1])]
            vl *= np.abs(largest) / largest  # LAPACK makes the largest component real
        vl = vl.astype(vector_dtype)
        vr = (vr if right else np.zeros_like(vr)).astype(vector_dtype)
        if m.dtype.kind == "c":
            return values.astype(m.dtype), vl, vr, np.int32(0)
        return values.real.astype(m.dtype), values.imag.astype(m.dtype), vl, vr, np.int32(0)

    return _batched(outs, one, a)


def _gees(operands, outs, attrs):
    """Schur's decomposition A = Z T Z^H: T, Z, the eigenvalues on T's diagonal, sdim, info."""
    (a,) = operands
    try:
        from scipy.linalg import schur
    except ImportError:
        raise CustomCallError(
            "a Schur decomposition (LAPACK gees) needs SciPy: pip install scipy"
        ) from None
    if attrs.get("sort", FLAG["N"]) != FLAG["N"]:
        raise CustomCallError("gees with sorted eigenvalues is not supported")
    vectors = attrs.get("mode", FLAG["V"]) == FLAG["V"]

    def one(m):
        complex_input = m.dtype.kind == "c"
        t, z = schur(_work(m), output="complex" if complex_input else "real")
        z = z if vectors else np.zeros_like(z)
        if complex_input:
            values = np.diag(t).astype(m.dtype)
            return t.astype(m.dtype), z.astype(m.dtype), values, np.int32(0), np.int32(0)
        values = _real_schur_eigenvalues(t)
        return (
            t.astype(m.dtype),
            z.astype(m.dtype),
            values.real.astype(m.dtype),
            values.imag.astype(m.dtype),
            np.int32(0),
            np.int32(0),
        )

    return _batched(outs, one, a)


def _real_schur_eigenvalues(t: np.ndarray) -> np.ndarray:
    """The eigenvalues of a real Schur form: its 1x1 and 2x2 diagonal blocks."""
    values = np.diag(t).astype(np.complex128)
    i = 0
    while i < len(t) - 1:
        if t[i + 1, i] != 0:
            values[i : i + 2] = np.linalg.eigvals(t[i : i + 2, i : i + 2])
            i += 2
        else:
            i += 1
    return values


def _reflector(x: np.ndarray):
    """LAPACK's larfg: (beta, tau, v) with (I - tau v v^H)^H x = beta e1, v[0] = 1, beta real."""
    alpha, rest = x[0], np.linalg.norm(x[1:])
    v = np.zeros_like(x)
    v[0] = 1
    if rest == 0 and np.imag(alpha) == 0:
        return np.real(alpha), 0.0, v
    beta = -np.copysign(np.sqrt(np.abs(alpha) ** 2 + rest**2), np.real(alpha))
    v[1:] = x[1:] / (alpha - beta)
    return beta, (beta - alpha) / beta, v


def _gehrd(operands, outs, attrs):
    """Hessenberg form A = Q H Q^H (LAPACK's gehd2): H on and above the subdiagonal, the
    reflectors of Q below it, their tau."""
    (a,) = operands

    def one(m):
        h = _work(m)
        n = len(h)
        low, high = attrs.get("low", 1) - 1, attrs.get("high", n)
        tau = np.zeros(max(n - 1, 0), h.dtype)
        for i in range(low, high - 1):
            beta, tau[i], v = _reflector(h[i + 1 : high, i].copy())
            h[:high, i + 1 : high] -= tau[i] * np.outer(h[:high, i + 1 : high] @ v, v.conj())
            h[i + 1 : high, i + 1 :] -= np.conj(tau[i]) * np.outer(
                v, v.conj() @ h[i + 1 : high, i + 1 :]
            )
            h[i + 1, i] = beta
            h[i + 2 : high, i] = v[1:]
        return h.astype(m.dtype), tau.astype(m.dtype), np.int32(0)

    return _batched(outs, one, a)


def _sytrd(operands, outs, attrs):
    """Symmetric/Hermitian tridiagonal form A = Q T Q^H (LAPACK's sytd2/hetd2): the reflectors
    in the triangle `uplo` names, T's diagonal d and off-diagonal e, the reflectors' tau."""
    (a,) = operands
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]

    def one(m):
        t = _work(m)
        n = len(t)
        d, e = np.zeros(n), np.zeros(max(n - 1, 0))
        tau = np.zeros(max(n - 1, 0), t.dtype)
        full = (
            np.tril(t) + np.tril(t, -1).conj().T if lower else np.triu(t) + np.triu(t, 1).conj().T
        )
        for i in range(n - 1) if lower else range(n - 2, -1, -1):
            rows = slice(i + 1, n) if lower else slice(0, i + 1)
            column = full[rows, i] if lower else full[rows, i + 1]
            x = column if lower else column[::-1]
            beta, tau[i], v = _reflector(x.copy())
            v = v if lower else v[::-1]
            block = full[rows, rows]
            w = tau[i] * (block @ v)
            w -= 0.5 * tau[i] * (w.conj() @ v) * v
            full[rows, rows] = block - np.outer(v, w.conj()) - np.outer(w, v.conj())
            e[i] = np.real(beta)
            if lower:
                full[i + 1, i], full[i, i + 1] = beta, beta
                t[i + 2 :, i] = v[1:]
                t[i + 1, i] = beta
            else:
                full[i, i + 1], full[i + 1, i] = beta, beta
                t[:i, i + 1] = v[:-1]
                t[i, i + 1] = beta
        d[:] = np.real(np.diag(full))
        for i in range(n):
            t[i, i] = d[i]
        return (
            t.astype(m.dtype),
            d.astype(outs[1][1]),
            e.astype(outs[2][1]),
            tau.astype(m.dtype),
            np.int32(0),
        )

    return _batched(outs, one, a)


def _gtsv(operands, outs, attrs):
    """Solves a tridiagonal system (sub-diagonal dl[1:], diagonal d, super-diagonal du[:-1],
    as JAX passes them) for each column of b; the diagonals come back as given."""
    dl, d, du, b = operands

    def one(lower, diagonal, upper, rhs):
        n = len(diagonal)
        matrix = (
            np.diag(_work(diagonal)) + np.diag(_work(lower)[1:], -1) + np.diag(_work(upper)[:-1], 1)
        )
        try:
            x = np.linalg.solve(matrix, _work(rhs))
        except np.linalg.LinAlgError:
            return lower, diagonal, upper, rhs, np.int32(n)
        return lower, diagonal, upper, x.astype(rhs.dtype), np.int32(0)

    batch = d.shape[:-1]
    return _stacked(outs, [one(dl[i], d[i], du[i], b[i]) for i in np.ndindex(*batch)], batch)


def _geqp3(operands, outs, attrs):
    """QR with column pivoting (LAPACK's geqp3): at each step the remaining column of largest
    norm moves in front; columns jpvt marks nonzero are taken first. Returns the factors in
    geqrf's form, the 1-based column permutation and tau."""
    a, jpvt = operands

    def one(m, fixed):
        r = _work(m)
        rows, cols = r.shape
        order = np.array(sorted(range(cols), key=lambda c: fixed[c] == 0))
        r = r[:, order]
        tau = np.zeros(min(rows, cols), r.dtype)
        leading = int(np.count_nonzero(fixed))
        for j in range(min(rows, cols)):
            if j >= leading:
                pivot = j + int(np.argmax(np.linalg.norm(r[j:, j:], axis=0)))
                r[:, [j, pivot]] = r[:, [pivot, j]]
                order[[j, pivot]] = order[[pivot, j]]
            beta, tau[j], v = _reflector(r[j:, j].copy())
            r[j:, j + 1 :] -= np.conj(tau[j]) * np.outer(v, v.conj() @ r[j:, j + 1 :])
            r[j, j] = beta
            r[j + 1 :, j] = v[1:]
        return r.astype(m.dtype), (order + 1).astype(jpvt.dtype), tau.astype(m.dtype)

    batch = a.shape[:-2]
    return _stacked(outs, [one(a[i], jpvt[i]) for i in np.ndindex(*batch)], batch)


def _ormqr(operands, outs, attrs):
    """Multiplies c by Q (or Q^T / Q^H) of geqrf's reflectors, from the left or the right."""
    a, tau, c = operands
    left = attrs.get("side", FLAG["L"]) == FLAG["L"]
    trans = attrs.get("trans", FLAG["N"])

    def one(m, t, other):
        q = _householder_q(m, t, m.shape[0])
        q = q.T if trans == FLAG["T"] else q.conj().T if trans == FLAG["C"] else q
        product = q @ _work(other) if left else _work(other) @ q
        return product.astype(other.dtype)

    batch = c.shape[:-2]
    return _stacked(outs, [(one(a[i], tau[i], c[i]),) for i in np.ndindex(*batch)], batch)[0]


LAPACK: dict[str, Callable] = {
    "potrf": _potrf,
    "getrf": _getrf,
    "trsm": _trsm,
    "geqrf": _geqrf,
    "orgqr": _orgqr,
    "ungqr": _orgqr,
    "syevd": _syevd,
    "heevd": _syevd,
    "gesdd": _gesdd,
    "gesvd": _gesvd,
    "geev": _geev,
    "gees": _gees,
    "gehrd": _gehrd,
    "sytrd": _sytrd,
    "hetrd": _sytrd,
    "gtsv": _gtsv,
    "geqp3": _geqp3,
    "ormqr": _ormqr,
    "unmqr": _ormqr,
}


__all__ = ["FLAG", "LAPACK", "full_matrices"]
