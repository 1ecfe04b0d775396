"""Lowering rules for ATen's diagonal and window views, scans, order statistics, bucketing
and the reducing scatters (the table is `minixla.torch.aten.LOWERINGS`; conventions in
aten_rules.py)."""

from __future__ import annotations

import math

import numpy as np

from ..frontend import ops as xo
from ..frontend.builder import XlaOp
from ..ir import Shape
from .aten_nn import gather, index, index_put, scatter_along, sort
from .aten_rules import (
    FLOATS,
    broadcast_to,
    const,
    convert,
    dims_arg,
    highest,
    keep_dims,
    lowest,
    reduce,
    tensor,
)


# -- statistics -------------------------------------------------------------------------------
def var_mean(ctx, x, dims=None, *, correction=None, keepdim=False):
    """(variance, mean) over `dims`, the variance divided by count - correction."""
    dims = dims_arg(dims, x.rank)
    dtype = ctx.out_dtype(0)
    x = convert(x, dtype)
    count = math.prod(x.dims[d] for d in dims)
    mean = xo.Div(reduce(ctx, x, "add", 0, dims, dtype), const(ctx, count, dtype), ())
    centred = xo.Sub(x, broadcast_to(keep_dims(mean, dims, True, x.dims), x.dims))
    squares = reduce(ctx, xo.Mul(centred, centred), "add", 0, dims, dtype)
    correction = 1 if correction is None else correction
    variance = xo.Div(squares, const(ctx, max(count - correction, 0), dtype), ())
    return keep_dims(variance, dims, keepdim, x.dims), keep_dims(mean, dims, keepdim, x.dims)


# -- diagonals and windows --------------------------------------------------------------------
def _matrix_last(x: XlaOp, dim1: int, dim2: int):
    """x with dim1, dim2 moved to the end, and the permutation that did it."""
    dim1, dim2 = dim1 % x.rank, dim2 % x.rank
    order = [d for d in range(x.rank) if d not in (dim1, dim2)] + [dim1, dim2]
    return xo.Transpose(x, order), order


def _diagonal_length(rows: int, cols: int, offset: int) -> int:
    return max(min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols), 0)


def diagonal(ctx, x, offset=0, dim1=0, dim2=1):
    """The diagonal as a strided slice of the matrix dims flattened: element k of the
    diagonal sits at k * (cols + 1) from its first element."""
    moved, _ = _matrix_last(x, dim1, dim2)
    *lead, rows, cols = moved.dims
    length = _diagonal_length(rows, cols, offset)
    if length == 0:
        return tensor(ctx, 0, x.dtype, ctx.out_dims())
    flat = xo.Reshape(moved, (*lead, rows * cols))
    start = offset if offset >= 0 else -offset * cols
    picked = xo.Slice(
        flat,
        [0] * len(lead) + [start],
        [*lead, start + (length - 1) * (cols + 1) + 1],
        [1] * len(lead) + [cols + 1],
    )
    return xo.Reshape(picked, ctx.out_dims())


def diagonal_scatter(ctx, x, src, offset=0, dim1=0, dim2=1):
    """x with its diagonal replaced by src: src broadcast along the matrix dim that does not
    index the diagonal, selected where col - row == offset."""
    moved, order = _matrix_last(x, dim1, dim2)
    *lead, rows, cols = moved.dims
    lead_dims = tuple(range(len(lead)))
    src = convert(src, x.dtype)
    length = src.dims[-1]
    zero = const(ctx, 0, x.dtype)
    if offset >= 0:  # diagonal element k at (k, k + offset): indexed by the row
        spread = xo.Pad(src, zero, [(0, 0, 0)] * len(lead) + [(0, rows - length, 0)])
        spread = xo.Broadcast(spread, (*lead_dims, len(lead)), moved.dims)
    else:  # at (k - offset, k): indexed by the column
        spread = xo.Pad(src, zero, [(0, 0, 0)] * len(lead) + [(0, cols - length, 0)])
        spread = xo.Broadcast(spread, (*lead_dims, len(lead) + 1), moved.dims)
    row = xo.Iota(ctx.builder, Shape.array("s64", moved.dims), len(lead))
    col = xo.Iota(ctx.builder, Shape.array("s64", moved.dims), len(lead) + 1)
    on_diagonal = xo.Eq(xo.Sub(col, row), const(ctx, offset, "s64"), ())
    out = xo.Select(on_diagonal, spread, moved)
    return xo.Transpose(out, list(np.argsort(order)))


def unfold(ctx, x, dim, size, step):
    """Tensor.unfold: windows of `size` every `step` along `dim`, the window last; one gather
    with the (window, tap) positions as indices."""
    if x.rank == 0:
        return xo.Reshape(x, (1,))
    dim %= x.rank
    count = (x.dims[dim] - size) // step + 1
    positions = np.arange(count)[:, None] * step + np.arange(size)[None, :]
    picked = index(ctx, x, [None] * dim + [const(ctx, positions, "s64")])
    # picked: (..., count, size, rest...): move the window's taps to the end
    order = [d for d in range(picked.rank) if d != dim + 1] + [dim + 1]
    return xo.Transpose(picked, order)


# -- scans ------------------------------------------------------------------------------------
def _scan(ctx, x, dim, init, computation) -> XlaOp:
    """Inclusive scan along `dim`: a reduce-window over the `size` elements up to each one."""
    dim %= max(x.rank, 1)
    if x.rank == 0:
        return x
    size = x.dims[dim]
    window = [1] * x.rank
    window[dim] = size
    pads = [(0, 0)] * x.rank
    pads[dim] = (size - 1, 0)
    return xo.ReduceWindow(ctx.builder, x, init, computation, window, None, pads)


def cumprod(ctx, x, dim, dtype=None):
    out = ctx.out_dtype()
    return _scan(
        ctx, convert(x, out), dim, const(ctx, 1, out), ctx.builder.reducer("multiply", out)
    )


def logcumsumexp(ctx, x, dim):
    """log(cumsum(exp(x))) without overflow: a scan whose step is log(exp(a) + exp(b)) =
    max + log1p(exp(min - max)) (equal operands, infinities included, give max + log 2)."""
    dtype = ctx.out_dtype()

    def log_add_exp(a, b):
        high, low = xo.Max(a, b), xo.Min(a, b)
        zero = high.builder.constant(np.zeros((), Shape.array(dtype).numpy_dtype))
        gap = xo.Select(xo.Eq(low, high), zero, xo.Sub(low, high))
        return xo.Add(high, xo.Log1p(xo.Exp(gap)))

    return _scan(ctx, convert(x, dtype), dim, const(ctx, -math.inf, dtype), log_add_exp)


# -- order statistics -------------------------------------------------------------------------
def _pick(ctx, values, order, dim, position, keepdim):
    """(values, indices) at `position` along `dim` of a sort's outputs; `position` is an int
    or an s64 op with `dim` kept as 1."""
    if isinstance(position, int):
        limits = list(values.dims)
        starts = [0] * values.rank
        starts[dim], limits[dim] = position, position + 1
        value, where = xo.Slice(values, starts, limits), xo.Slice(order, starts, limits)
    else:
        value, where = gather(ctx, values, dim, position), gather(ctx, order, dim, position)
    if not keepdim:
        dims = tuple(d for i, d in enumerate(values.dims) if i != dim)
        value, where = xo.Reshape(value, dims), xo.Reshape(where, dims)
    return value, where


def kthvalue(ctx, x, k, dim=-1, keepdim=False):
    """The k-th smallest (1-based) along `dim` and its index, from a stable sort (NaN is the
    largest)."""
    if x.rank == 0:
        return x, tensor(ctx, 0, "s64")
    dim %= x.rank
    values, order = sort(ctx, x, dim)
    return _pick(ctx, values, order, dim, k - 1, keepdim)


def median_dim(ctx, x, dim=0, keepdim=False):
    """The lower median along `dim` and its index; a NaN in the slice makes it NaN (the
    first NaN's index), as torch."""
    if x.rank == 0:
        return x, tensor(ctx, 0, "s64")
    dim %= x.rank
    values, order = sort(ctx, x, dim)
    size = x.dims[dim]
    if x.dtype not in FLOATS:
        return _pick(ctx, values, order, dim, (size - 1) // 2, keepdim)
    numbers = _count_numbers(ctx, x, dim)
    middle = const(ctx, (size - 1) // 2, "s64")
    position = xo.Select(
        xo.Lt(numbers, const(ctx, size, "s64"), ()), numbers, broadcast_to(middle, numbers.dims)
    )
    return _pick(ctx, values, order, dim, position, keepdim)


def nanmedian_dim(ctx, x, dim=0, keepdim=False):
    """The lower median of the numbers along `dim` (NaNs ignored; all NaN gives NaN)."""
    if x.rank == 0:
        return x, tensor(ctx, 0, "s64")
    dim %= x.rank
    values, order = sort(ctx, x, dim)
    if x.dtype not in FLOATS:
        return _pick(ctx, values, order, dim, (x.dims[dim] - 1) // 2, keepdim)
    numbers = _count_numbers(ctx, x, dim)
    half = xo.Div(xo.Sub(numbers, const(ctx, 1, "s64"), ()), const(ctx, 2, "s64"), ())
    position = xo.Max(half, const(ctx, 0, "s64"), ())
    return _pick(ctx, values, order, dim, position, keepdim)


def _count_numbers(ctx, x, dim) -> XlaOp:
    """s64 count of the non-NaN elements along `dim`, the dim kept as 1."""
    numbers = xo.Convert(xo.Eq(x, x), "s64")
    return keep_dims(reduce(ctx, numbers, "add", 0, (dim,), "s64"), (dim,), True, x.dims)


def median_all(ctx, x):
    flat = xo.Reshape(x, (math.prod(x.dims),))
    value, _ = median_dim(ctx, flat, 0, False)
    return value


def nanmedian_all(ctx, x):
    flat = xo.Reshape(x, (math.prod(x.dims),))
    value, _ = nanmedian_dim(ctx, flat, 0, False)
    return value


# -- bucketing --------------------------------------------------------------------------------
def searchsorted(ctx, boundaries, values, *, out_int32=False, right=False, side=None, sorter=None):
    """For each value, the count of boundaries below it (<= it with right=True or
    side="right"): the insertion point into the sorted boundaries (its last dim; leading
    dims, if any, pair each row of values with a row of boundaries)."""
    right = right or side == "right"
    if sorter is not None:
        boundaries = gather(ctx, boundaries, boundaries.rank - 1, sorter)
    if not isinstance(values, XlaOp):
        values = const(ctx, values, boundaries.dtype)
    dtype = ctx.out_dtype()
    return _count_below(ctx, boundaries, values, right, dtype)


def bucketize(ctx, values, boundaries, *, out_int32=False, right=False):
    if not isinstance(values, XlaOp):
        values = const(ctx, values, boundaries.dtype)
    return _count_below(ctx, boundaries, values, right, ctx.out_dtype())


def _count_below(ctx, boundaries, values, right, dtype):
    compare = "s64" if boundaries.dtype[0] in "su" and values.dtype[0] in "su" else "f64"
    boundaries, values = convert(boundaries, compare), convert(values, compare)
    count = boundaries.dims[-1]
    if boundaries.rank == 1:  # every value against all boundaries
        dims = (*values.dims, count)
        edges = xo.Broadcast(boundaries, (values.rank,), dims)
    else:  # row by row
        dims = (*values.dims, count)
        edges = xo.Broadcast(boundaries, (*range(values.rank - 1), values.rank), dims)
    points = xo.Broadcast(values, tuple(range(values.rank)), dims)
    below = xo.Le(edges, points) if right else xo.Lt(edges, points)
    return reduce(ctx, xo.Convert(below, dtype), "add", 0, (values.rank,), dtype)


# -- reducing scatters ------------------------------------------------------------------------
_SCATTER_COMBINE = {"sum": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def scatter_reduce(ctx, x, dim, idx, src, reduce_kind, *, include_self=True):
    """torch.scatter_reduce: each position gets its own value (unless include_self=False and
    some src element lands there) combined with every src element scattered onto it; "mean"
    divides the sum by that count (flooring for integers)."""
    dim %= x.rank
    dtype = x.dtype
    src = convert(src, dtype)
    if src.dims != idx.dims:
        src = xo.Slice(src, [0] * src.rank, idx.dims)
    hits = scatter_along(ctx, tensor(ctx, 0, "s64", x.dims), dim, idx, 1, "add")
    hit = xo.Gt(hits, const(ctx, 0, "s64"), ())
    if reduce_kind == "mean":
        base = x if include_self else xo.Select(hit, tensor(ctx, 0, dtype, x.dims), x)
        total = scatter_along(ctx, base, dim, idx, src, "add")
        count = hits if not include_self else xo.Add(hits, const(ctx, 1, "s64"), ())
        count = convert(xo.Max(count, const(ctx, 1, "s64"), ()), dtype)
        if dtype in FLOATS:
            return xo.Div(total, count)
        quotient = xo.Floor(xo.Div(convert(total, "f64"), convert(count, "f64")))
        return convert(quotient, dtype)
    combine = _SCATTER_COMBINE.get(reduce_kind)
    if combine is None:
        raise ctx.fail(f"scatter_reduce reduce={reduce_kind!r} is not supported")
    identity = {"add": 0, "multiply": 1, "maximum": lowest(dtype), "minimum": highest(dtype)}
    base = x
    if not include_self:
        base = xo.Select(hit, tensor(ctx, identity[combine], dtype, x.dims), x)
    return scatter_along(ctx, base, dim, idx, src, combine)


def _flat_positions(ctx, mask: XlaOp) -> XlaOp:
    """For a flat pred mask: the number of set elements before each one (s64)."""
    counts = xo.Convert(mask, "s64")
    running = _scan(ctx, counts, 0, const(ctx, 0, "s64"), ctx.builder.reducer("add", "s64"))
    return xo.Sub(running, counts)


def masked_scatter(ctx, x, mask, source):
    """x where mask is unset; where set, source's elements in order (row-major)."""
    dims = ctx.out_dims()
    size = math.prod(dims)
    flat_mask = xo.Reshape(broadcast_to(mask, dims), (size,))
    flat_source = xo.Reshape(convert(source, ctx.out_dtype()), (math.prod(source.dims),))
    positions = _flat_positions(ctx, flat_mask)
    last = max(math.prod(source.dims) - 1, 0)
    positions = xo.Min(positions, const(ctx, last, "s64"), ())
    picked = xo.Reshape(index(ctx, flat_source, [positions]), dims)
    return xo.Select(broadcast_to(mask, dims), picked, tensor(ctx, x, ctx.out_dtype(), dims))


def masked_scatter_backward(ctx, grad, mask, sizes):
    """source's gradient: the k-th set element's gradient at k, zeros past the set count."""
    dtype = ctx.out_dtype()
    count = math.prod(ctx.out_dims())
    size = math.prod(grad.dims)
    flat_mask = xo.Reshape(broadcast_to(mask, grad.dims), (size,))
    positions = _flat_positions(ctx, flat_mask)
    spare = const(ctx, count, "s64")  # unset elements land one past the end, then cut off
    target = xo.Select(flat_mask, positions, broadcast_to(spare, positions.dims))
    flat_grad = xo.Reshape(convert(grad, dtype), (size,))
    out = index_put(ctx, tensor(ctx, 0, dtype, (count + 1,)), [target], flat_grad, True)
    return xo.Reshape(xo.Slice(out, [0], [count]), ctx.out_dims())


def put(ctx, x, idx, source, accumulate=False):
    """Tensor.put: source written (or added) at flat indices of x (negative from the end)."""
    size = math.prod(x.dims)
    flat = xo.Reshape(x, (size,))
    positions = xo.Reshape(convert(idx, "s64"), (math.prod(idx.dims),))
    values = xo.Reshape(convert(source, x.dtype), (math.prod(source.dims),))
    return xo.Reshape(index_put(ctx, flat, [positions], values, accumulate), x.dims)


def embedding_renorm(ctx, weight, indices, max_norm, norm_type):
    """The weight with each row that `indices` names rescaled to norm max_norm where its
    norm exceeds it (scale max_norm / (norm + 1e-7), as torch)."""
    from .aten_more import _p_norm

    dtype = weight.dtype
    rows = weight.dims[0]
    norms = _p_norm(ctx, xo.Abs(weight), float(norm_type), (1,), dtype)
    flat = xo.Reshape(convert(indices, "s64"), (math.prod(indices.dims),))
    named = index_put(ctx, tensor(ctx, False, "pred", (rows,)), [flat], True)
    too_long = xo.And(named, xo.Gt(norms, const(ctx, max_norm, dtype), ()))
    scale = xo.Div(const(ctx, max_norm, dtype), xo.Add(norms, const(ctx, 1e-7, dtype), ()))
    scale = xo.Select(too_long, scale, tensor(ctx, 1, dtype, (rows,)))
    return xo.Mul(weight, xo.Broadcast(scale, (0,), weight.dims))
