"""Lowering rules for ATen's linear algebra, convolution, pooling, normalization and indexing
ops (the table is `minixla.torch.aten.LOWERINGS`; conventions in aten_rules.py)."""

from __future__ import annotations

import math

import numpy as np

from ..frontend import ops as xo
from ..frontend.builder import XlaOp
from ..ir import Shape
from .aten_rules import FLOATS, broadcast_to, const, convert, keep_dims, lowest, reduce, tensor


# -- matmul -----------------------------------------------------------------------------------
def mm(ctx, a, b):
    dtype = ctx.out_dtype()
    return xo.Dot(convert(a, dtype), convert(b, dtype), lhs_contracting=(1,), rhs_contracting=(0,))


def bmm(ctx, a, b):
    dtype = ctx.out_dtype()
    return xo.Dot(
        convert(a, dtype),
        convert(b, dtype),
        lhs_batch=(0,),
        rhs_batch=(0,),
        lhs_contracting=(2,),
        rhs_contracting=(1,),
    )


def addmm(ctx, bias, a, b, beta=1, alpha=1):
    return _scaled_sum(ctx, bias, mm(ctx, a, b), beta, alpha)


def baddbmm(ctx, bias, a, b, beta=1, alpha=1):
    return _scaled_sum(ctx, bias, bmm(ctx, a, b), beta, alpha)


def _scaled_sum(ctx, bias, product, beta, alpha):
    # beta * bias + alpha * product; beta == 0 ignores bias entirely (NaNs included), as torch
    if alpha != 1:
        product = xo.Mul(product, const(ctx, alpha, product.dtype), ())
    if beta == 0:
        return product
    bias = tensor(ctx, bias, product.dtype, product.dims)
    if beta != 1:
        bias = xo.Mul(bias, const(ctx, beta, bias.dtype), ())
    return xo.Add(bias, product)


# -- convolution ------------------------------------------------------------------------------
def _labels(spatial: int, kernel: str) -> str:
    digits = "".join(str(i) for i in range(spatial))
    return f"bf{digits}_{kernel}{digits}->bf{digits}"


def convolution(
    ctx, x, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    dtype = ctx.out_dtype()
    x, weight = convert(x, dtype), convert(weight, dtype)
    spatial = x.rank - 2
    stride, padding, dilation = (_per_dim(v, spatial) for v in (stride, padding, dilation))
    if transposed:
        out = _transposed(
            ctx, x, weight, stride, padding, dilation, _per_dim(output_padding, spatial), groups
        )
    else:
        out = xo.Convolution(
            x,
            weight,
            stride,
            [(p, p) for p in padding],
            None,
            dilation,
            _labels(spatial, "oi"),
            groups,
        )
    if bias is not None:
        out = xo.Add(out, xo.Broadcast(convert(bias, dtype), (1,), out.dims))
    return out


def _per_dim(value, spatial: int) -> list[int]:
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * spatial if len(value) == 1 else value


def _transposed(ctx, x, weight, stride, padding, dilation, output_padding, groups):
    """The transpose of a convolution whose weight is `weight` (C_x, C_out/groups, *k): a
    convolution of `x` dilated by the stride with the spatially reversed kernel."""
    spatial = x.rank - 2
    kernel = weight.dims[2:]
    if groups > 1:  # kernel input features must be per group: (C_x/g, C_out, *k)
        per_in, per_out = weight.dims[0] // groups, weight.dims[1]
        grouped = xo.Reshape(weight, (groups, per_in, per_out, *kernel))
        swapped = xo.Transpose(grouped, (1, 0, 2, *range(3, 3 + spatial)))
        weight = xo.Reshape(swapped, (per_in, groups * per_out, *kernel))
    flipped = xo.Reverse(weight, range(2, 2 + spatial))
    pads = [
        (d * (k - 1) - p, d * (k - 1) - p + extra)
        for k, p, d, extra in zip(kernel, padding, dilation, output_padding)
    ]
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        raise ctx.fail("transposed convolution with padding larger than the kernel reach")
    return xo.Convolution(
        x, flipped, [1] * spatial, pads, stride, dilation, _labels(spatial, "io"), groups
    )


def convolution_backward(
    ctx,
    grad,
    x,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    spatial = x.rank - 2
    stride, padding, dilation = (_per_dim(v, spatial) for v in (stride, padding, dilation))
    kernel = weight.dims[2:]
    grad_input = grad_weight = grad_bias = None
    if output_mask[0] and transposed:  # the transpose of a transposed conv is the conv
        grad_input = xo.Convolution(
            grad,
            weight,
            stride,
            [(p, p) for p in padding],
            None,
            dilation,
            _labels(spatial, "oi"),
            groups,
        )
        grad_input = _crop(grad_input, x.dims)
    elif output_mask[0]:
        natural = [
            (g - 1) * s - 2 * p + d * (k - 1) + 1
            for g, s, p, d, k in zip(grad.dims[2:], stride, padding, dilation, kernel)
        ]
        extra = [n - m for n, m in zip(x.dims[2:], natural)]
        grad_input = _transposed(ctx, grad, weight, stride, padding, dilation, extra, groups)
    if output_mask[1]:  # a transposed conv's weight sees the roles of input and output swapped
        source, sink = (grad, x) if transposed else (x, grad)
        grad_weight = _weight_grad(source, sink, kernel, stride, padding, dilation, groups)
    if output_mask[2]:
        grad_bias = reduce(ctx, grad, "add", 0, [0, *range(2, grad.rank)], grad.dtype)
    return grad_input, grad_weight, grad_bias


def _weight_grad(x, grad, kernel, stride, padding, dilation, groups):
    """dL/dw as a convolution of the input (batch as features) with the output gradient as
    kernel: window strides are the dilation, kernel dilation is the stride."""
    spatial = x.rank - 2
    digits = "".join(str(i) for i in range(spatial))
    pads = []
    for size, g, k, s, p, d in zip(x.dims[2:], grad.dims[2:], kernel, stride, padding, dilation):
        high = (k - 1) * d + (g - 1) * s + 1 - size - p
        pads.append((p, max(high, 0)))
    out = xo.Convolution(
        x, grad, dilation, pads, None, stride, f"fb{digits}_io{digits}->fb{digits}", 1, groups
    )
    if out.dims[2:] != tuple(kernel):  # zero high padding overshot: keep the first k taps
        out = xo.Slice(out, [0] * out.rank, (*out.dims[:2], *kernel))
    return out


# -- pooling ----------------------------------------------------------------------------------
def _pool_window(x, out_dims, kernel, stride, padding, dilation):
    """Window sizes, strides, paddings over all dims of `x` for torch's trailing-dims pool
    (high padding sized so the window count matches torch's, ceil_mode included)."""
    spatial = len(kernel)
    lead = x.rank - spatial
    pads = []
    for size, out, k, s, p, d in zip(
        x.dims[lead:], out_dims[lead:], kernel, stride, padding, dilation
    ):
        high = (out - 1) * s + d * (k - 1) + 1 - size - p
        pads.append((p, max(high, 0)))
    return (
        [1] * lead + list(kernel),
        [1] * lead + list(stride),
        [(0, 0)] * lead + pads,
        [1] * lead + list(dilation),
    )


def _pool_args(x, kernel, stride, padding, dilation=1):
    spatial = len(kernel)
    stride = _per_dim(stride, spatial) if stride else list(kernel)
    return list(kernel), stride, _per_dim(padding, spatial), _per_dim(dilation, spatial)


# A pool whose window has at most this many taps is lowered tap by tap: each tap is a strided
# slice of the (padded) input and the taps fold elementwise, so the whole pool fuses into one
# vectorizable loop (as a reduce-window it was a scalar loop nest per output: on a CNN's
# 2x2 pools about 10x slower). Larger windows stay reduce-windows.
MAX_UNROLLED_TAPS = 32


def max_pool_with_indices(
    ctx, x, kernel, stride=(), padding=0, dilation=1, ceil_mode=False, *, spatial=2
):
    kernel, stride, padding, dilation = _pool_args(
        x, _per_dim(kernel, spatial), stride, padding, dilation
    )
    if math.prod(kernel) <= MAX_UNROLLED_TAPS:
        return _max_pool_taps(ctx, x, ctx.out_dims(0), kernel, stride, padding, dilation)
    window, strides, pads, dilations = _pool_window(
        x, ctx.out_dims(0), kernel, stride, padding, dilation
    )
    spatial = len(kernel)
    flat = _flat_spatial_index(ctx, x.dims, spatial)
    dtype = x.dtype

    def better(a, ia, b, ib):
        wins = xo.Or(xo.Gt(b, a), xo.And(xo.Eq(a, b), xo.Lt(ib, ia)))
        if dtype in FLOATS:  # NaN wins, as in torch
            wins = xo.Or(xo.And(wins, xo.Eq(a, a)), xo.And(xo.Ne(b, b), xo.Eq(a, a)))
        return xo.Select(wins, b, a), xo.Select(wins, ib, ia)

    out = xo.ReduceWindow(
        ctx.builder,
        [x, flat],
        [const(ctx, lowest(dtype), dtype), const(ctx, -1, "s64")],
        better,
        window,
        strides,
        pads,
        None,
        dilations,
    )
    values, indices = xo.GetTupleElement(out, 0), xo.GetTupleElement(out, 1)
    return _crop(values, ctx.out_dims(0)), _crop(indices, ctx.out_dims(1))


class _PoolTaps:
    """The taps of a pooling window over the trailing dims of `x`: for output position o and
    tap t, the input position in each spatial dim is o * stride - padding + t * dilation.
    `position(tap)` is that position's flat index in the input plane (torch's pool index)
    and `inside(tap)` whether it lies in the input (None where it always does)."""

    def __init__(self, ctx, x_dims, out_dims, kernel, stride, padding, dilation):
        self.ctx = ctx
        self.spatial = len(kernel)
        self.lead = len(x_dims) - self.spatial
        self.sizes = x_dims[self.lead :]
        self.outs = tuple(out_dims[self.lead :])
        self.out_dims = tuple(out_dims)
        self.kernel, self.stride, self.padding, self.dilation = kernel, stride, padding, dilation
        self.pitches = [math.prod(self.sizes[i + 1 :]) for i in range(self.spatial)]
        self._iotas = [
            xo.Iota(ctx.builder, Shape.array("s64", self.out_dims), self.lead + i)
            for i in range(self.spatial)
        ]
        base = None  # sum over dims of o * stride * pitch
        for iota, s, pitch in zip(self._iotas, stride, self.pitches):
            term = xo.Mul(iota, const(ctx, s * pitch, "s64"), ())
            base = term if base is None else xo.Add(base, term)
        self._base = base

    def taps(self):
        return np.ndindex(*self.kernel)

    def first(self, tap, i: int) -> int:
        return tap[i] * self.dilation[i] - self.padding[i]  # the position at o = 0

    def position(self, tap) -> XlaOp:
        offset = sum(self.first(tap, i) * p for i, p in enumerate(self.pitches))
        return xo.Add(self._base, const(self.ctx, offset, "s64"), ())

    def inside(self, tap) -> XlaOp | None:
        mask = None
        for i in range(self.spatial):
            low = self.first(tap, i)
            high = low + (self.outs[i] - 1) * self.stride[i]
            if low >= 0 and high < self.sizes[i]:
                continue
            at = xo.Add(
                xo.Mul(self._iotas[i], const(self.ctx, self.stride[i], "s64"), ()),
                const(self.ctx, low, "s64"),
                (),
            )
            ok = xo.And(
                xo.Ge(at, const(self.ctx, 0, "s64"), ()),
                xo.Lt(at, const(self.ctx, self.sizes[i], "s64"), ()),
            )
            mask = ok if mask is None else xo.And(mask, ok)
        return mask

    def padded(self, x: XlaOp, value: XlaOp) -> XlaOp:
        """x padded so that every tap's slice (see `values`) is in bounds."""
        config = [(0, 0, 0)] * self.lead
        for i in range(self.spatial):
            reach = (self.outs[i] - 1) * self.stride[i] + (self.kernel[i] - 1) * self.dilation[i]
            high = max(reach + 1 - self.padding[i] - self.sizes[i], 0)
            config.append((self.padding[i], high, 0))
        if all(c == (0, 0, 0) for c in config):
            return x
        return xo.Pad(x, value, config)

    def values(self, padded: XlaOp, tap) -> XlaOp:
        """The input value each output position sees at `tap`, from `padded(x)`."""
        starts = [0] * self.lead + [t * d for t, d in zip(tap, self.dilation)]
        limits = list(self.out_dims[: self.lead]) + [
            start + (n - 1) * s + 1
            for start, n, s in zip(starts[self.lead :], self.outs, self.stride)
        ]
        strides = [1] * self.lead + list(self.stride)
        return xo.Slice(padded, starts, limits, strides)


def _max_pool_taps(ctx, x, out_dims, kernel, stride, padding, dilation):
    """torch's CPU max pool, tap by tap in window order: a tap replaces the running maximum
    when its value is larger or NaN (the first maximum and the last NaN keep their index),
    taps outside the input never count."""
    taps = _PoolTaps(ctx, x.dims, out_dims, kernel, stride, padding, dilation)
    dtype = x.dtype
    padded = taps.padded(x, const(ctx, lowest(dtype), dtype))
    best = index = None
    unset = True  # some output may have seen no tap inside the input yet
    for tap in taps.taps():
        value, position, inside = taps.values(padded, tap), taps.position(tap), taps.inside(tap)
        if best is None:
            if inside is None:
                best, index, unset = value, position, False
            else:
                best = xo.Select(inside, value, tensor(ctx, lowest(dtype), dtype, value.dims))
                index = xo.Select(inside, position, tensor(ctx, -1, "s64", value.dims))
            continue
        wins = xo.Gt(value, best)
        if dtype in FLOATS:
            wins = xo.Or(wins, xo.Ne(value, value))
        if unset:
            wins = xo.Or(wins, xo.Lt(index, const(ctx, 0, "s64"), ()))
        if inside is None:
            unset = False
        else:
            wins = xo.And(wins, inside)
        best, index = xo.Select(wins, value, best), xo.Select(wins, position, index)
    return best, index


def _crop(op, dims):
    return op if op.dims == tuple(dims) else xo.Slice(op, [0] * op.rank, dims)


def _flat_spatial_index(ctx, dims, spatial: int) -> XlaOp:
    """s64 index of each element within its trailing `spatial` dims (torch's pool indices)."""
    total = None
    stride = 1
    for d in reversed(range(len(dims) - spatial, len(dims))):
        term = xo.Iota(ctx.builder, Shape.array("s64", dims), d)
        if stride != 1:
            term = xo.Mul(term, const(ctx, stride, "s64"), ())
        total = term if total is None else xo.Add(total, term)
        stride *= dims[d]
    return total


def max_pool_backward(
    ctx, grad, x, kernel, stride, padding, dilation, ceil_mode, indices, *, spatial=2
):
    """Each window's gradient goes to the input element its index names: for windows that
    tile the input, each input element reads its one window (a broadcast, fused); for few
    taps, each tap's matches are spread back by an interior pad and summed; else a
    scatter-add."""
    kernel, stride, padding, dilation = _pool_args(
        x, _per_dim(kernel, spatial), stride, padding, dilation
    )
    grad = convert(grad, ctx.out_dtype())
    if all(s == k for s, k in zip(stride, kernel)) and all(d == 1 for d in dilation):
        return _max_pool_backward_tiles(ctx, grad, x, indices, kernel, padding)
    if math.prod(kernel) <= MAX_UNROLLED_TAPS:
        return _max_pool_backward_taps(ctx, grad, x, indices, kernel, stride, padding, dilation)
    spatial = len(kernel)
    lead = x.dims[: x.rank - spatial]
    rows = math.prod(lead)
    plane = math.prod(x.dims[x.rank - spatial :])
    zeros = tensor(ctx, 0, ctx.out_dtype(), (rows, plane))
    grad = xo.Reshape(grad, (rows, math.prod(grad.dims) // rows))
    index = xo.Reshape(indices, grad.dims)
    out = scatter_along(ctx, zeros, 1, index, grad, "add")
    return xo.Reshape(out, x.dims)


def _max_pool_backward_tiles(ctx, grad, x, indices, kernel, padding):
    """Windows that tile the input (stride = kernel, no dilation): input position p lies in
    window (p + padding) // kernel, so grad and index repeat kernel-fold along each dim and
    are cropped to the input; an element keeps its window's gradient if it is the max."""
    spatial = len(kernel)
    lead = x.rank - spatial

    def spread(op):
        dims = op.dims
        shape = list(dims[:lead])
        for n, k in zip(dims[lead:], kernel):
            shape += [n, k]
        kept = list(range(lead)) + [lead + 2 * i for i in range(spatial)]
        op = xo.Broadcast(op, kept, shape)
        op = xo.Reshape(op, list(dims[:lead]) + [n * k for n, k in zip(dims[lead:], kernel)])
        starts = [0] * lead + list(padding)
        limits = list(dims[:lead]) + [p + n for p, n in zip(padding, x.dims[lead:])]
        return _slice_or_pad(ctx, op, starts, limits)

    positions = _flat_spatial_index(ctx, x.dims, spatial)
    hits = xo.Eq(spread(indices), positions)
    return xo.Select(hits, spread(grad), tensor(ctx, 0, grad.dtype, x.dims))


def _slice_or_pad(ctx, op, starts, limits):
    """op[starts:limits] where limits may run past op's end (the overhang reads zeros)."""
    over = [max(limit - n, 0) for limit, n in zip(limits, op.dims)]
    if any(over):
        op = xo.Pad(op, const(ctx, 0, op.dtype), [(0, h, 0) for h in over])
    return xo.Slice(op, starts, limits)


def _max_pool_backward_taps(ctx, grad, x, indices, kernel, stride, padding, dilation):
    """Sum over taps: the gradients of the windows whose maximum is at that tap, placed at
    the tap's input positions by a pad with stride - 1 interior zeros (cropping what falls
    outside the input)."""
    taps = _PoolTaps(ctx, x.dims, grad.dims, kernel, stride, padding, dilation)
    zero = const(ctx, 0, grad.dtype)
    total = None
    for tap in taps.taps():
        hits = xo.Eq(indices, taps.position(tap))
        inside = taps.inside(tap)
        if inside is not None:
            hits = xo.And(hits, inside)
        picked = xo.Select(hits, grad, tensor(ctx, 0, grad.dtype, grad.dims))
        config = [(0, 0, 0)] * taps.lead
        for i in range(taps.spatial):
            low = taps.first(tap, i)
            extent = (taps.outs[i] - 1) * stride[i] + 1
            config.append((low, taps.sizes[i] - low - extent, stride[i] - 1))
        placed = xo.Pad(picked, zero, config)
        total = placed if total is None else xo.Add(total, placed)
    return total


def avg_pool(
    ctx,
    x,
    kernel,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
    *,
    spatial=2,
):
    dtype = ctx.out_dtype()
    x = convert(x, dtype)
    window, strides, pads, divisor = _avg_pool_setup(
        ctx,
        x,
        ctx.out_dims(),
        _per_dim(kernel, spatial),
        stride,
        padding,
        count_include_pad,
        divisor_override,
    )
    total = _crop(
        xo.ReduceWindow(
            ctx.builder,
            x,
            const(ctx, 0, dtype),
            ctx.builder.reducer("add", dtype),
            window,
            strides,
            pads,
        ),
        ctx.out_dims(),
    )
    return xo.Div(total, broadcast_to(divisor, total.dims))


def _avg_pool_setup(ctx, x, out_dims, kernel, stride, padding, count_include_pad, divisor_override):
    """Window, strides, paddings and the divisor of each output (a scalar with
    divisor_override; else a count of the elements, padding included or not, that each window
    covers; the ceil_mode overhang never counts)."""
    spatial = len(kernel)
    kernel, stride, padding, dilation = _pool_args(x, kernel, stride, padding)
    dtype = x.dtype
    window, strides, pads, _ = _pool_window(x, out_dims, kernel, stride, padding, dilation)
    if divisor_override:
        return window, strides, pads, const(ctx, divisor_override, dtype)
    ones = tensor(ctx, 1, dtype, x.dims)
    count_pads = pads
    if count_include_pad:
        lead = x.rank - spatial
        ones = xo.Pad(ones, const(ctx, 1, dtype), [(0, 0, 0)] * lead + [(p, p, 0) for p in padding])
        count_pads = [(0, max(hi - lo, 0)) for lo, hi in pads]
    count = _crop(
        xo.ReduceWindow(
            ctx.builder,
            ones,
            const(ctx, 0, dtype),
            ctx.builder.reducer("add", dtype),
            window,
            strides,
            count_pads,
        ),
        out_dims,
    )
    return window, strides, pads, count


def avg_pool_backward(
    ctx,
    grad,
    x,
    kernel,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
    *,
    spatial=2,
):
    """Each window's gradient, divided by its divisor, spread evenly over the window: a
    transposed convolution of every (sample, channel) plane with a kernel of ones."""
    dtype = ctx.out_dtype()
    grad = convert(grad, dtype)
    kernel = _per_dim(kernel, spatial)
    kernel_dims, strides, paddings, _ = _pool_args(x, kernel, stride, padding)
    _, _, _, divisor = _avg_pool_setup(
        ctx, x, grad.dims, kernel, stride, padding, count_include_pad, divisor_override
    )
    scaled = xo.Div(grad, broadcast_to(divisor, grad.dims))
    planes = math.prod(x.dims[: x.rank - spatial])
    flat = xo.Reshape(scaled, (planes, 1, *grad.dims[x.rank - spatial :]))
    ones = tensor(ctx, 1, dtype, (1, 1, *kernel_dims))
    natural = [
        (g - 1) * s - 2 * p + k
        for g, s, p, k in zip(grad.dims[x.rank - spatial :], strides, paddings, kernel_dims)
    ]
    extra = [max(n - m, 0) for n, m in zip(x.dims[x.rank - spatial :], natural)]
    spread = _transposed(ctx, flat, ones, strides, paddings, [1] * spatial, extra, 1)
    spread = _crop(spread, (planes, 1, *x.dims[x.rank - spatial :]))
    return xo.Reshape(spread, x.dims)


def _adaptive_matrix(ctx, size: int, out: int, dtype: str) -> XlaOp:
    """(out, size) averaging matrix of adaptive pooling: row i averages
    [floor(i*size/out), ceil((i+1)*size/out))."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1 / (end - start)
    return const(ctx, matrix, dtype)


def _apply_plane_matrices(ctx, x, matrices):
    """Contracts each of the trailing dims of x with its matrix (rows = new size)."""
    spatial = len(matrices)
    for i, matrix in enumerate(matrices):
        axis = x.rank - spatial + i
        moved = xo.Dot(x, matrix, lhs_contracting=(axis,), rhs_contracting=(1,))
        order = list(range(axis)) + [moved.rank - 1] + list(range(axis, moved.rank - 1))
        x = xo.Transpose(moved, order)
    return x


def adaptive_avg_pool(ctx, x, output_size):
    dtype = ctx.out_dtype()
    spatial = len(output_size)
    sizes = x.dims[x.rank - spatial :]
    return _apply_plane_matrices(
        ctx,
        convert(x, dtype),
        [_adaptive_matrix(ctx, n, o, dtype) for n, o in zip(sizes, output_size)],
    )


def adaptive_avg_pool_backward(ctx, grad, x, *, spatial=2):
    dtype = ctx.out_dtype()
    sizes, outs = x.dims[x.rank - spatial :], grad.dims[grad.rank - spatial :]
    return _apply_plane_matrices(
        ctx,
        convert(grad, dtype),
        [xo.Transpose(_adaptive_matrix(ctx, n, o, dtype), (1, 0)) for n, o in zip(sizes, outs)],
    )


def replication_pad_backward(ctx, grad, x, padding):
    """The gradient of edge padding: each edge element gathers the gradients of its copies
    (per padded dim, the low band summed onto the first element, the high band onto the
    last)."""
    dtype = ctx.out_dtype()
    out = convert(grad, dtype)
    for i in range(len(padding) // 2):  # padding lists the last dim first
        dim = x.rank - 1 - i
        low, high, size = padding[2 * i], padding[2 * i + 1], x.dims[dim]

        def band(start, stop, op=out, dim=dim):
            starts, limits = [0] * op.rank, list(op.dims)
            starts[dim], limits[dim] = start, stop
            return xo.Slice(op, starts, limits)

        middle = band(low, low + size)
        zero = const(ctx, 0, dtype)
        for start, stop, at in ((0, low, 0), (low + size, low + size + high, size - 1)):
            if stop <= start:
                continue
            edge = keep_dims(
                reduce(ctx, band(start, stop), "add", 0, (dim,), dtype), (dim,), True, middle.dims
            )
            config = [(0, 0, 0)] * out.rank
            config[dim] = (at, size - 1 - at, 0)
            middle = xo.Add(middle, xo.Pad(edge, zero, config))
        out = middle
    return out


# -- normalization ----------------------------------------------------------------------------
def native_layer_norm(ctx, x, normalized_shape, weight, bias, eps):
    dtype = ctx.out_dtype(0)
    x = convert(x, dtype)
    axes = tuple(range(x.rank - len(normalized_shape), x.rank))
    count = math.prod(x.dims[a] for a in axes)
    mean = keep_dims(
        xo.Div(reduce(ctx, x, "add", 0, axes, dtype), const(ctx, count, dtype), ()),
        axes,
        True,
        x.dims,
    )
    centred = xo.Sub(x, broadcast_to(mean, x.dims))
    variance = xo.Div(
        reduce(ctx, xo.Mul(centred, centred), "add", 0, axes, dtype), const(ctx, count, dtype), ()
    )
    rstd = xo.Rsqrt(xo.Add(keep_dims(variance, axes, True, x.dims), const(ctx, eps, dtype), ()))
    out = xo.Mul(centred, broadcast_to(rstd, x.dims))
    trailing = tuple(range(x.rank - len(normalized_shape), x.rank))
    if weight is not None:
        out = xo.Mul(out, xo.Broadcast(convert(weight, dtype), trailing, x.dims))
    if bias is not None:
        out = xo.Add(out, xo.Broadcast(convert(bias, dtype), trailing, x.dims))
    return out, convert(mean, ctx.out_dtype(1)), convert(rstd, ctx.out_dtype(2))


def batch_norm_functional(ctx, x, weight, bias, running_mean, running_var, training, momentum, eps):
    """(out, batch mean, batch 1/std, new running mean, new running var): AOTAutograd's
    functional form returns the updated running stats instead of writing them."""
    if not training:
        out, mean, rstd = batch_norm_eval(
            ctx, x, weight, bias, running_mean, running_var, momentum, eps
        )
        return out, mean, rstd, running_mean, running_var
    dtype = ctx.out_dtype(0)
    x = convert(x, dtype)
    axes = (0, *range(2, x.rank))
    count = math.prod(x.dims[a] for a in axes)
    mean = xo.Div(reduce(ctx, x, "add", 0, axes, dtype), const(ctx, count, dtype), ())
    centred = xo.Sub(x, xo.Broadcast(mean, (1,), x.dims))
    variance = xo.Div(
        reduce(ctx, xo.Mul(centred, centred), "add", 0, axes, dtype), const(ctx, count, dtype), ()
    )
    rstd = xo.Rsqrt(xo.Add(variance, const(ctx, eps, dtype), ()))
    out = _scale_shift(ctx, xo.Mul(centred, xo.Broadcast(rstd, (1,), x.dims)), weight, bias)
    if running_mean is None:
        return out, mean, rstd, None, None
    stats_dtype = running_mean.dtype
    keep = const(ctx, 1 - momentum, stats_dtype)
    new_mean = xo.Add(
        xo.Mul(running_mean, keep, ()),
        xo.Mul(convert(mean, stats_dtype), const(ctx, momentum, stats_dtype), ()),
    )
    unbiased = xo.Mul(variance, const(ctx, count / max(count - 1, 1), dtype), ())
    new_var = xo.Add(
        xo.Mul(running_var, keep, ()),
        xo.Mul(convert(unbiased, stats_dtype), const(ctx, momentum, stats_dtype), ()),
    )
    return out, mean, rstd, new_mean, new_var


def batch_norm_no_stats(ctx, x, weight, bias, training, momentum, eps):
    """Batch statistics without running stats (instance norm, or BatchNorm built with
    track_running_stats=False): (out, mean, 1/std)."""
    out, mean, rstd, _, _ = batch_norm_functional(
        ctx, x, weight, bias, None, None, True, momentum, eps
    )
    return out, mean, rstd


def batch_norm_eval(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
    dtype = ctx.out_dtype(0)
    x = convert(x, dtype)
    mean, var = convert(running_mean, dtype), convert(running_var, dtype)
    rstd = xo.Rsqrt(xo.Add(var, const(ctx, eps, dtype), ()))
    normed = xo.Mul(xo.Sub(x, xo.Broadcast(mean, (1,), x.dims)), xo.Broadcast(rstd, (1,), x.dims))
    out = _scale_shift(ctx, normed, weight, bias)
    empty_mean = tensor(ctx, 0, ctx.out_dtype(1), ctx.out_dims(1))
    empty_rstd = tensor(ctx, 0, ctx.out_dtype(2), ctx.out_dims(2))
    return out, empty_mean, empty_rstd


def _scale_shift(ctx, normed, weight, bias):
    if weight is not None:
        normed = xo.Mul(normed, xo.Broadcast(convert(weight, normed.dtype), (1,), normed.dims))
    if bias is not None:
        normed = xo.Add(normed, xo.Broadcast(convert(bias, normed.dtype), (1,), normed.dims))
    return normed


# -- indexing ---------------------------------------------------------------------------------
def _coordinates(ctx, dim: int, index: XlaOp, rank: int) -> XlaOp:
    """For torch's gather/scatter along `dim`: the full operand coordinates of every index
    element (iotas for the other dims), stacked on a new last dim."""
    index = convert(index, "s64")
    columns = []
    for d in range(rank):
        column = index if d == dim else xo.Iota(ctx.builder, Shape.array("s64", index.dims), d)
        columns.append(xo.Reshape(column, (*index.dims, 1)))
    return xo.Concatenate(columns, index.rank)


def gather(ctx, x, dim, index, sparse_grad=False):
    dim %= x.rank
    coords = _coordinates(ctx, dim, index, x.rank)
    return xo.Gather(
        x,
        coords,
        offset_dims=(),
        collapsed_slice_dims=tuple(range(x.rank)),
        start_index_map=tuple(range(x.rank)),
        index_vector_dim=index.rank,
        slice_sizes=(1,) * x.rank,
    )


def scatter_along(ctx, x, dim, index, src, combine: str | None):
    dim %= x.rank
    coords = _coordinates(ctx, dim, index, x.rank)
    if isinstance(src, XlaOp):
        src = convert(src, x.dtype)
        if src.dims != index.dims:
            src = xo.Slice(src, [0] * src.rank, index.dims)
    else:
        src = tensor(ctx, src, x.dtype, index.dims)
    if combine is None:

        def computation(old, new):
            return new
    else:
        computation = ctx.builder.reducer(combine, x.dtype)
    return xo.Scatter(
        x,
        coords,
        src,
        computation,
        update_window_dims=(),
        inserted_window_dims=tuple(range(x.rank)),
        scatter_dims_to_operand_dims=tuple(range(x.rank)),
        index_vector_dim=index.rank,
    )


def scatter(ctx, x, dim, index, src, reduce=None):
    combine = {None: None, "add": "add", "multiply": "multiply"}.get(reduce, "?")
    if combine == "?":
        raise ctx.fail(f"scatter reduce={reduce!r} is not supported")
    return scatter_along(ctx, x, dim, index, src, combine)


def scatter_add(ctx, x, dim, index, src):
    return scatter_along(ctx, x, dim, index, src, "add")


def _advanced(ctx, x, indices):
    """Gather/scatter dimension numbers for torch advanced indexing `x[indices]` (None keeps a
    dim): index tensors broadcast together; their dims replace the indexed dims in place when
    those are adjacent, else go first (NumPy's rule)."""
    indices = list(indices) + [None] * (x.rank - len(indices))
    indexed = [d for d, i in enumerate(indices) if i is not None]
    tensors = [convert(indices[d], "s64") for d in indexed]
    batch = tuple(np.broadcast_shapes(*[t.dims for t in tensors]))
    columns = []
    for d, t in zip(indexed, tensors):
        wrapped = xo.Select(
            xo.Lt(t, const(ctx, 0, "s64"), ()), xo.Add(t, const(ctx, x.dims[d], "s64"), ()), t
        )
        columns.append(xo.Reshape(broadcast_to(wrapped, batch), (*batch, 1)))
    coords = xo.Concatenate(columns, len(batch))
    kept = [d for d in range(x.rank) if d not in indexed]
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    first = indexed[0] if adjacent else 0
    offset_dims = tuple(p if p < first else p + len(batch) for p in range(len(kept)))
    return coords, indexed, kept, offset_dims, batch


def index(ctx, x, indices):
    coords, indexed, kept, offset_dims, batch = _advanced(ctx, x, indices)
    sizes = tuple(1 if d in indexed else x.dims[d] for d in range(x.rank))
    return xo.Gather(
        x,
        coords,
        offset_dims=offset_dims,
        collapsed_slice_dims=tuple(indexed),
        start_index_map=tuple(indexed),
        index_vector_dim=len(batch),
        slice_sizes=sizes,
    )


def index_put(ctx, x, indices, values, accumulate=False):
    coords, indexed, kept, offset_dims, batch = _advanced(ctx, x, indices)
    rank = len(batch) + len(kept)
    update_dims = [0] * rank
    for p, d in zip(offset_dims, kept):
        update_dims[p] = x.dims[d]
    batch_positions = [p for p in range(rank) if p not in offset_dims]
    for p, size in zip(batch_positions, batch):
        update_dims[p] = size
    updates = tensor(ctx, values, x.dtype, update_dims)
    if accumulate:
        computation = ctx.builder.reducer("add", x.dtype)
    else:

        def computation(old, new):
            return new

    return xo.Scatter(
        x,
        coords,
        updates,
        computation,
        update_window_dims=offset_dims,
        inserted_window_dims=tuple(indexed),
        scatter_dims_to_operand_dims=tuple(indexed),
        index_vector_dim=len(batch),
    )


def index_select(ctx, x, dim, idx):
    dim %= x.rank
    return index(ctx, x, [None] * dim + [idx])


def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return index(ctx, weight, [indices])


def embedding_dense_backward(ctx, grad, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        raise ctx.fail("embedding with scale_grad_by_freq=True is not supported")
    dtype = ctx.out_dtype()
    width = grad.dims[-1]
    rows = xo.Reshape(convert(grad, dtype), (math.prod(indices.dims), width))
    flat = xo.Reshape(convert(indices, "s64"), (math.prod(indices.dims),))
    if padding_idx is not None and padding_idx >= 0:  # the padding row gets no gradient
        keep = xo.Ne(flat, const(ctx, padding_idx, "s64"), ())
        rows = xo.Select(
            xo.Broadcast(keep, (0,), rows.dims), rows, tensor(ctx, 0, dtype, rows.dims)
        )
    zeros = tensor(ctx, 0, dtype, (num_weights, width))
    return index_put(ctx, zeros, [flat], rows, accumulate=True)


def cumsum(ctx, x, dim, dtype=None):
    dim %= x.rank
    out_dtype = ctx.out_dtype()
    x = convert(x, out_dtype)
    size = x.dims[dim]
    window = [1] * x.rank
    window[dim] = size
    pads = [(0, 0)] * x.rank
    pads[dim] = (size - 1, 0)
    return xo.ReduceWindow(
        ctx.builder,
        x,
        const(ctx, 0, out_dtype),
        ctx.builder.reducer("add", out_dtype),
        window,
        None,
        pads,
    )


def native_group_norm(ctx, x, weight, bias, batch, channels, spatial, groups, eps):
    """(out, mean, 1/std) with the statistics per (sample, group), shaped (N, groups)."""
    dtype = ctx.out_dtype(0)
    x = convert(x, dtype)
    grouped = xo.Reshape(x, (batch, groups, (channels // groups) * spatial))
    count = (channels // groups) * spatial
    mean = xo.Div(reduce(ctx, grouped, "add", 0, (2,), dtype), const(ctx, count, dtype), ())
    centred = xo.Sub(grouped, xo.Broadcast(mean, (0, 1), grouped.dims))
    variance = xo.Div(
        reduce(ctx, xo.Mul(centred, centred), "add", 0, (2,), dtype), const(ctx, count, dtype), ()
    )
    rstd = xo.Rsqrt(xo.Add(variance, const(ctx, eps, dtype), ()))
    out = xo.Reshape(xo.Mul(centred, xo.Broadcast(rstd, (0, 1), grouped.dims)), x.dims)
    return _scale_shift(ctx, out, weight, bias), mean, rstd


def sort(ctx, x, dim=-1, descending=False, *, stable=True):
    """(values, s64 indices) by a stable sort of (x, iota); NaN sorts as the largest."""
    dim %= x.rank
    index = xo.Iota(ctx.builder, Shape.array("s64", x.dims), dim)
    floating = x.dtype in FLOATS

    def less(a, b, ia, ib):
        first, second = (b, a) if descending else (a, b)
        before = xo.Lt(first, second)
        if floating:  # NaN is larger than every number
            before = xo.Or(before, xo.And(xo.Ne(second, second), xo.Eq(first, first)))
        return before

    out = xo.Sort([x, index], less, dim, is_stable=True)
    return xo.GetTupleElement(out, 0), xo.GetTupleElement(out, 1)


def sort_stable(ctx, x, *, stable=None, dim=-1, descending=False):
    return sort(ctx, x, dim, descending)


def topk(ctx, x, k, dim=-1, largest=True, sorted=True):
    values, indices = sort(ctx, x, dim, descending=largest)
    dim %= x.rank
    limits = list(x.dims)
    limits[dim] = k
    return (xo.Slice(values, [0] * x.rank, limits), xo.Slice(indices, [0] * x.rank, limits))


def split_with_sizes(ctx, x, sizes, dim=0):
    from .aten_rules import slice_

    dim %= x.rank
    starts = np.cumsum([0, *sizes])
    return [slice_(ctx, x, dim, int(a), int(b)) for a, b in zip(starts[:-1], starts[1:])]


def split(ctx, x, size, dim=0):
    dim %= x.rank
    total = x.dims[dim]
    return split_with_sizes(ctx, x, [min(size, total - s) for s in range(0, total, size)], dim)


def unbind(ctx, x, dim=0):
    dim %= x.rank
    pieces = split_with_sizes(ctx, x, [1] * x.dims[dim], dim)
    return [xo.Reshape(p, x.dims[:dim] + x.dims[dim + 1 :]) for p in pieces]


def slice_scatter(ctx, x, src, dim=0, start=None, end=None, step=1):
    """x with x[..., start:end:step, ...] (along `dim`) replaced by src."""
    dim %= x.rank
    positions = np.arange(*slice(start, end, step).indices(x.dims[dim]))
    if step == 1 and len(positions):
        starts = [const(ctx, int(positions[0]) if d == dim else 0, "s64") for d in range(x.rank)]
        return xo.DynamicUpdateSlice(x, convert(src, x.dtype), starts)
    return index_put(ctx, x, [None] * dim + [const(ctx, positions, "s64")], src)
