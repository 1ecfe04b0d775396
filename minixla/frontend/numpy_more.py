"""More of NumPy's API for traced arrays: take_along_axis, tril/triu, isclose, logaddexp and
the nan-ignoring reductions."""

from __future__ import annotations

import numpy as np

from . import numpy_api as mnp
from . import numpy_reduce as red
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import _builder, asarray, cast, where
from .numpy_shape import normalize_axis, reshape
from .tracer import Tracer


@api
def take_along_axis(arr, indices, axis):
    """arr's elements picked along `axis` by `indices` (NumPy's rule; negative indices wrap,
    out-of-range ones are clamped as HLO gather does)."""
    x, index = asarray(arr), asarray(indices)
    if not np.issubdtype(index.dtype, np.integer):
        raise FrontendTypeError(f"take_along_axis needs integer indices, got {index.dtype}")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if index.ndim != x.ndim:
        raise FrontendShapeError(
            f"take_along_axis: indices of rank {index.ndim} for an array of rank {x.ndim}"
        )
    axis = normalize_axis(axis, x.ndim)
    shape = list(
        mnp.broadcast_shapes(
            *[tuple(s if d != axis else 1 for d, s in enumerate(v)) for v in (x.shape, index.shape)]
        )
    )
    x = mnp.broadcast_to(x, tuple(shape[:axis] + [x.shape[axis]] + shape[axis + 1 :]))
    out_shape = tuple(shape[:axis] + [index.shape[axis]] + shape[axis + 1 :])
    index = mnp.broadcast_to(index, out_shape)
    index = where(index < 0, index + x.shape[axis], index)
    return Tracer(take_along_gather(x.op, index.op, axis), x.weak)


def take_along_gather(value, index, axis: int):
    """HLO gather: out[..i..] = value[..index[..i..]..] along `axis`; `index` (an XlaOp)
    has value's shape except along `axis`."""
    from ..ir import Shape

    builder = _builder()
    rank = value.rank
    index_shape = Shape.array("s32", index.dims)
    if index.dtype != "s32":
        index = builder.emit("convert", [index], shape=index_shape)
    columns = []
    for d in range(rank):
        column = (
            index
            if d == axis
            else builder.emit("iota", [], {"iota_dimension": d}, shape=index_shape)
        )
        columns.append(
            builder.emit("reshape", [column], shape=Shape.array("s32", index.dims + (1,)))
        )
    indices = (
        columns[0] if rank == 1 else builder.emit("concatenate", columns, {"dimensions": (rank,)})
    )
    attrs = {
        "offset_dims": (),
        "collapsed_slice_dims": tuple(range(rank)),
        "start_index_map": tuple(range(rank)),
        "operand_batching_dims": (),
        "start_indices_batching_dims": (),
        "index_vector_dim": rank,
        "slice_sizes": (1,) * rank,
        "indices_are_sorted": False,
    }
    return builder.emit("gather", [value, indices], attrs)


def _tri_mask(shape, k: int, lower: bool) -> Tracer:
    rows = _iota(shape, 0)
    cols = _iota(shape, 1)
    return (cols - rows <= k) if lower else (cols - rows >= k)


def _iota(shape, dim: int) -> Tracer:
    from ..ir import Shape

    return Tracer(
        _builder().emit("iota", [], {"iota_dimension": dim}, shape=Shape.array("s32", shape))
    )


@api
def tril(m, k: int = 0):
    x = asarray(m)
    if x.ndim < 2:
        raise FrontendShapeError(f"tril needs at least 2 dimensions, got shape {x.shape}")
    mask = _tri_mask(x.shape[-2:], k, lower=True)
    return where(mask, x, cast(0, x.dtype))


@api
def triu(m, k: int = 0):
    x = asarray(m)
    if x.ndim < 2:
        raise FrontendShapeError(f"triu needs at least 2 dimensions, got shape {x.shape}")
    mask = _tri_mask(x.shape[-2:], k, lower=False)
    return where(mask, x, cast(0, x.dtype))


@api
def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    a, b = asarray(a), asarray(b)
    close = mnp.less_equal(mnp.abs(a - b), atol + rtol * mnp.abs(b))
    both_inf = mnp.logical_and(mnp.isinf(a), mnp.equal(a, b))
    close = (
        mnp.logical_or(mnp.logical_and(close, mnp.isfinite(b)), both_inf)
        if np.issubdtype(a.dtype, np.inexact)
        else close
    )
    if equal_nan:
        close = mnp.logical_or(close, mnp.logical_and(mnp.isnan(a), mnp.isnan(b)))
    return close


@api
def logaddexp(x, y):
    """log(exp(x) + exp(y)) without overflow."""
    x, y = asarray(x), asarray(y)
    peak = mnp.maximum(x, y)
    delta = x - y
    safe = mnp.where(mnp.isnan(delta), 0.0, delta)
    out = peak + mnp.log1p(mnp.exp(-mnp.abs(safe)))
    return mnp.where(mnp.isnan(delta), x + y, out)


def _without_nan(x, fill) -> Tracer:
    x = asarray(x)
    if not np.issubdtype(x.dtype, np.inexact):
        return x
    return where(mnp.isnan(x), cast(fill, x.dtype), x)


@api
def nansum(a, axis=None, dtype=None, keepdims: bool = False):
    return red.sum(_without_nan(a, 0), axis, dtype=dtype, keepdims=keepdims)


@api
def nanprod(a, axis=None, dtype=None, keepdims: bool = False):
    return red.prod(_without_nan(a, 1), axis, dtype=dtype, keepdims=keepdims)


@api
def nanmax(a, axis=None, keepdims: bool = False):
    return red.max(_without_nan(a, -np.inf), axis, keepdims=keepdims)


@api
def nanmin(a, axis=None, keepdims: bool = False):
    return red.min(_without_nan(a, np.inf), axis, keepdims=keepdims)


def _nan_count(x, axis, keepdims):
    return red.sum(mnp.astype(mnp.logical_not(mnp.isnan(x)), x.dtype), axis, keepdims=keepdims)


@api
def nanmean(a, axis=None, keepdims: bool = False):
    x = asarray(a)
    return nansum(x, axis, keepdims=keepdims) / _nan_count(x, axis, keepdims)


@api
def nanvar(a, axis=None, ddof: int = 0, keepdims: bool = False):
    x = asarray(a)
    centered = _without_nan(x - nanmean(x, axis, keepdims=True), 0)
    total = red.sum(centered * centered, axis, keepdims=keepdims)
    return total / (_nan_count(x, axis, keepdims) - ddof)


@api
def nanstd(a, axis=None, ddof: int = 0, keepdims: bool = False):
    return mnp.sqrt(nanvar(a, axis, ddof=ddof, keepdims=keepdims))
