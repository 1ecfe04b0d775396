"""`minixla.numpy.linalg`: cholesky lowers to HLO `cholesky` (triangular solves, HLO
`triangular-solve`, are in lax_linalg.py); the factorizations HLO has no op for (solve, inv, det,
slogdet, qr, eigh, svd) lower to the typed `minixla_linalg_*` custom calls of
runtime/linalg_calls.py. All are batched over leading dims, as NumPy's are."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..ir import Raw, Shape
from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import abs as _abs, broadcast_shapes, broadcast_to, cast, sqrt, typeof
from .numpy_more import tril
from .numpy_reduce import max as _max, min as _min, sum as _sum
from .numpy_shape import expand_dims, squeeze, swapaxes
from .ops_core import Op
from .tracer import Tracer


def _inexact(name: str, *values) -> list[Tracer]:
    """Operands promoted to one float or complex dtype (integers become the default float)."""
    dtype, _ = dt.result_type(*(typeof(v) for v in values))
    if dtype == np.bool_:
        raise FrontendTypeError(f"linalg.{name} does not accept bool operands")
    if dt.kind(dtype) < dt.FLOAT:
        dtype = dt.default_dtype(dt.FLOAT)
    if dtype not in (np.float32, np.float64, np.complex64, np.complex128):
        raise FrontendTypeError(f"linalg.{name} supports float32/64 and complex64/128, got {dtype}")
    return [cast(v, dtype) for v in values]


def _real_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(
        {np.dtype(np.complex64): np.float32, np.dtype(np.complex128): np.float64}.get(
            np.dtype(dtype), dtype
        )
    )


def _matrix(name: str, a: Tracer, square: bool = True) -> None:
    if a.ndim < 2:
        raise FrontendShapeError(
            f"linalg.{name} needs an array of at least 2 dimensions, got shape {a.shape}"
        )
    if square and a.shape[-1] != a.shape[-2]:
        raise FrontendShapeError(
            f"linalg.{name} needs square matrices in the last two dimensions, got shape {a.shape}"
        )


def _call(
    op: str, operands: list[Tracer], results: list[tuple[np.dtype, tuple]], **options
) -> list[Tracer]:
    """One `minixla_linalg_<op>` custom call; results are (dtype, dims) pairs."""
    from ..reference.linalg_calls import target_name

    shapes = [Shape.array(dt.hlo_name(d), dims) for d, dims in results]
    shape = shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)
    attrs = {"custom_call_target": target_name(op)}
    if options:
        config = ",".join(f"{k}={int(v)}" for k, v in options.items())
        attrs["backend_config"] = Raw(f'"{config}"')
    call = Op("custom-call", [t.op for t in operands], attrs, shape)
    if len(shapes) == 1:
        return [Tracer(call)]
    return [Tracer(Op("get-tuple-element", [call], {"index": i})) for i in range(len(shapes))]


def _conj(x: Tracer) -> Tracer:
    if dt.kind(x.dtype) != dt.COMPLEX:
        return x
    real, imag = Op("real", [x.op]), Op("imag", [x.op])
    return Tracer(Op("complex", [real, Op("negate", [imag])]))


# -- HLO ops ----------------------------------------------------------------------------------
@api
def cholesky(a, upper: bool = False) -> Tracer:
    """numpy.linalg.cholesky: the lower factor L with L @ L^H = a (reads a's lower triangle);
    NaN where a is not positive definite."""
    (x,) = _inexact("cholesky", a)
    _matrix("cholesky", x)
    factor = tril(Tracer(Op("cholesky", [x.op], {"lower": True})))
    return _conj(swapaxes(factor, -1, -2)) if upper else factor


# -- custom calls -----------------------------------------------------------------------------
@api
def solve(a, b) -> Tracer:
    """numpy.linalg.solve (NumPy 2 rule: b is a vector only when it is 1-D)."""
    x, y = _inexact("solve", a, b)
    _matrix("solve", x)
    vector = y.ndim == 1
    if vector:
        y = expand_dims(y, -1)
    if y.shape[-2] != x.shape[-1]:
        raise FrontendShapeError(
            f"linalg.solve: a of shape {x.shape} does not fit b of "
            f"shape {tuple(b.shape) if hasattr(b, 'shape') else ()}"
        )
    batch = broadcast_shapes(x.shape[:-2], y.shape[:-2])
    x, y = broadcast_to(x, batch + x.shape[-2:]), broadcast_to(y, batch + y.shape[-2:])
    (out,) = _call("solve", [x, y], [(y.dtype, y.shape)])
    return squeeze(out, -1) if vector else out


@api
def inv(a) -> Tracer:
    (x,) = _inexact("inv", a)
    _matrix("inv", x)
    return _call("inv", [x], [(x.dtype, x.shape)])[0]


@api
def det(a) -> Tracer:
    (x,) = _inexact("det", a)
    _matrix("det", x)
    return _call("det", [x], [(x.dtype, x.shape[:-2])])[0]


class SlogdetResult(NamedTuple):
    sign: Tracer
    logabsdet: Tracer


@api
def slogdet(a) -> SlogdetResult:
    (x,) = _inexact("slogdet", a)
    _matrix("slogdet", x)
    batch = x.shape[:-2]
    sign, logabsdet = _call("slogdet", [x], [(x.dtype, batch), (_real_dtype(x.dtype), batch)])
    return SlogdetResult(sign, logabsdet)


class QRResult(NamedTuple):
    Q: Tracer
    R: Tracer


@api
def qr(a, mode: str = "reduced"):
    """numpy.linalg.qr with mode 'reduced', 'complete' or 'r'."""
    if mode not in ("reduced", "complete", "r"):
        raise FrontendTypeError(
            f"linalg.qr: unknown mode {mode!r} (use 'reduced', 'complete' or 'r')"
        )
    (x,) = _inexact("qr", a)
    _matrix("qr", x, square=False)
    *batch, m, n = x.shape
    batch, k = tuple(batch), min(m, n)
    q_cols, r_rows = (m, m) if mode == "complete" else (k, k)
    q, r = _call(
        "qr",
        [x],
        [(x.dtype, batch + (m, q_cols)), (x.dtype, batch + (r_rows, n))],
        full_matrices=mode == "complete",
    )
    return r if mode == "r" else QRResult(q, r)


class EighResult(NamedTuple):
    eigenvalues: Tracer
    eigenvectors: Tracer


@api
def eigh(a, UPLO: str = "L") -> EighResult:  # noqa: N803 (NumPy's name)
    """numpy.linalg.eigh: ascending eigenvalues and column eigenvectors of a Hermitian a,
    read from its UPLO ('L' or 'U') triangle."""
    if UPLO not in ("L", "U"):
        raise FrontendTypeError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
    (x,) = _inexact("eigh", a)
    _matrix("eigh", x)
    w, v = _call(
        "eigh", [x], [(_real_dtype(x.dtype), x.shape[:-1]), (x.dtype, x.shape)], lower=UPLO == "L"
    )
    return EighResult(w, v)


@api
def eigvalsh(a, UPLO: str = "L") -> Tracer:  # noqa: N803
    return eigh(a, UPLO).eigenvalues


class SVDResult(NamedTuple):
    U: Tracer
    S: Tracer
    Vh: Tracer


@api
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False):
    """numpy.linalg.svd: (U, S, Vh) with a = U @ diag(S) @ Vh, S descending; S alone when
    compute_uv is False. `hermitian` is accepted and uses the general routine."""
    (x,) = _inexact("svd", a)
    _matrix("svd", x, square=False)
    *batch, m, n = x.shape
    batch, k = tuple(batch), min(m, n)
    s_type = (_real_dtype(x.dtype), batch + (k,))
    if not compute_uv:
        return _call("svd", [x], [s_type], compute_uv=False, full_matrices=False)[0]
    u_cols, v_rows = (m, n) if full_matrices else (k, k)
    u, s, vh = _call(
        "svd",
        [x],
        [(x.dtype, batch + (m, u_cols)), s_type, (x.dtype, batch + (v_rows, n))],
        full_matrices=full_matrices,
        compute_uv=True,
    )
    return SVDResult(u, s, vh)


@api
def svdvals(a) -> Tracer:
    return svd(a, compute_uv=False)


# -- norms ------------------------------------------------------------------------------------
@api
def norm(x, ord=None, axis=None, keepdims: bool = False) -> Tracer:  # noqa: A002
    """numpy.linalg.norm: vector norms over one axis, matrix norms ('fro', 'nuc', 1, -1, 2,
    -2, inf, -inf) over two."""
    (t,) = _inexact("norm", x)
    if axis is None:
        if ord is not None and t.ndim > 2:
            raise FrontendShapeError(
                f"linalg.norm: ord={ord!r} needs axis for an array of {t.ndim} dimensions"
            )
        axis = tuple(range(t.ndim)) if ord is None or t.ndim == 1 else (0, 1)
        if ord is None:
            t_abs = _abs(t)
            return sqrt(_sum(t_abs * t_abs, axis=axis, keepdims=keepdims))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % t.ndim for a in axes)
    mag = _abs(t)
    if len(axes) == 1:
        (ax,) = axes
        if ord is None or ord == 2:
            return sqrt(_sum(mag * mag, axis=ax, keepdims=keepdims))
        if ord == np.inf:
            return _max(mag, axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            return _min(mag, axis=ax, keepdims=keepdims)
        if ord == 0:
            return _sum(cast(mag != 0, mag.dtype), axis=ax, keepdims=keepdims)
        if ord == 1:
            return _sum(mag, axis=ax, keepdims=keepdims)
        if isinstance(ord, str):
            raise FrontendTypeError(
                f"linalg.norm: ord={ord!r} is a matrix norm; vector norms take a number"
            )
        p = cast(ord, mag.dtype)
        return _sum(mag**p, axis=ax, keepdims=keepdims) ** (cast(1, mag.dtype) / p)
    if len(axes) != 2 or axes[0] == axes[1]:
        raise FrontendShapeError(
            f"linalg.norm: axis must name one or two distinct dimensions, got {axis!r}"
        )
    row, col = axes
    if ord is None or ord == "fro":
        out = sqrt(_sum(mag * mag, axis=axes))
    elif ord in (1, -1):
        sums = _sum(mag, axis=row)
        out = (_max if ord == 1 else _min)(sums, axis=col - (col > row))
    elif ord in (np.inf, -np.inf):
        sums = _sum(mag, axis=col)
        out = (_max if ord == np.inf else _min)(sums, axis=row - (row > col))
    elif ord in (2, -2, "nuc"):
        rest = [d for d in range(t.ndim) if d not in axes]
        from .numpy_shape import transpose

        s = svd(transpose(t, rest + [row, col]), compute_uv=False)
        out = _sum(s, axis=-1) if ord == "nuc" else (_max if ord == 2 else _min)(s, axis=-1)
    else:
        raise FrontendTypeError(f"linalg.norm: unknown matrix norm ord={ord!r}")
    if keepdims:
        for d in sorted(axes):
            out = expand_dims(out, d)
    return out


__all__ = [
    "cholesky",
    "det",
    "eigh",
    "eigvalsh",
    "inv",
    "norm",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
]
