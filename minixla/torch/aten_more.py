"""Lowering rules for the less common ATen ops real models hit: complex numbers and their
views, bit shifts, vector norms, pairwise distances (cdist), cumulative max/min, adaptive max
pooling and embedding bags (the table is `minixla.torch.aten.LOWERINGS`; conventions in
aten_rules.py)."""

from __future__ import annotations

import math

import numpy as np

from ..frontend import ops as xo
from ..frontend.builder import XlaOp
from ..ir import Shape
from .aten_nn import index, index_put
from .aten_rules import (
    COMPLEX,
    FLOATS,
    broadcast_to,
    const,
    const_like,
    convert,
    dims_arg,
    elementwise,
    highest,
    keep_dims,
    lowest,
    reduce,
    tensor,
)


# -- complex numbers --------------------------------------------------------------------------
def complex_(ctx, real, imag):
    dtype = {"c64": "f32", "c128": "f64"}[ctx.out_dtype()]
    dims = ctx.out_dims()
    return xo.Complex(tensor(ctx, real, dtype, dims), tensor(ctx, imag, dtype, dims))


def conj(ctx, x):
    if x.dtype not in COMPLEX:
        return x
    return xo.Complex(xo.Real(x), xo.Neg(xo.Imag(x)))


def view_as_real(ctx, x):
    """[..., 2]: the real and imaginary parts side by side, as the memory of a complex."""
    parts = [xo.Reshape(part(x), (*x.dims, 1)) for part in (xo.Real, xo.Imag)]
    return xo.Concatenate(parts, x.rank)


def view_as_complex(ctx, x):
    def part(i):
        picked = xo.Slice(x, [0] * (x.rank - 1) + [i], (*x.dims[:-1], i + 1))
        return xo.Reshape(picked, x.dims[:-1])

    return xo.Complex(part(0), part(1))


# -- bit shifts -------------------------------------------------------------------------------
def shift_left(ctx, x, y):
    return elementwise(ctx, xo.ShiftLeft, x, y)


def shift_right(ctx, x, y):
    """Arithmetic for signed types (the sign fills in), logical for unsigned."""
    shift = xo.ShiftRightLogical if ctx.out_dtype()[0] in "up" else xo.ShiftRightArithmetic
    return elementwise(ctx, shift, x, y)


# -- norms and distances ----------------------------------------------------------------------
def vector_norm(ctx, x, ord=2, dim=None, keepdim=False, *, dtype=None):
    out = ctx.out_dtype()
    magnitude = convert(xo.Abs(x) if x.dtype in COMPLEX else xo.Abs(convert(x, out)), out)
    dims = dims_arg(dim, x.rank)
    return keep_dims(_p_norm(ctx, magnitude, float(ord), dims, out), dims, keepdim, x.dims)


def _p_norm(ctx, magnitude: XlaOp, p: float, dims, dtype: str) -> XlaOp:
    """The p-norm over `dims` of non-negative values (p = 0 counts the non-zeros)."""
    if p == math.inf:
        return reduce(ctx, magnitude, "maximum", lowest(dtype), dims, dtype)
    if p == -math.inf:
        return reduce(ctx, magnitude, "minimum", highest(dtype), dims, dtype)
    if p == 0:
        nonzero = xo.Convert(xo.Ne(magnitude, const(ctx, 0, dtype), ()), dtype)
        return reduce(ctx, nonzero, "add", 0, dims, dtype)
    if p == 1:
        return reduce(ctx, magnitude, "add", 0, dims, dtype)
    if p == 2:
        return xo.Sqrt(reduce(ctx, xo.Mul(magnitude, magnitude), "add", 0, dims, dtype))
    powered = xo.Pow(magnitude, const(ctx, p, dtype), ())
    return xo.Pow(reduce(ctx, powered, "add", 0, dims, dtype), const(ctx, 1 / p, dtype), ())


def _differences(x1, x2):
    """x1[..., P, M] - x2[..., R, M] as [..., P, R, M]."""
    batch, rows, cols, width = x1.dims[:-2], x1.dims[-2], x2.dims[-2], x1.dims[-1]
    dims = (*batch, rows, cols, width)
    lead = tuple(range(len(batch)))
    a = xo.Broadcast(x1, (*lead, len(batch), len(batch) + 2), dims)
    b = xo.Broadcast(x2, (*lead, len(batch) + 1, len(batch) + 2), dims)
    return xo.Sub(a, b)


def cdist(ctx, x1, x2, p, compute_mode=None):
    """Pairwise p-norm distances, from the differences themselves (torch may use a matmul
    expansion for p = 2, which loses precision where points nearly coincide)."""
    dtype = ctx.out_dtype()
    diff = _differences(convert(x1, dtype), convert(x2, dtype))
    return _p_norm(ctx, xo.Abs(diff), float(p), (diff.rank - 1,), dtype)


def cdist_backward(ctx, grad, x1, x2, p, distances):
    """d cdist / d x1: per pair, the derivative of the p-norm of x1[i] - x2[j] (zero where
    the distance is zero), weighted by the pair's gradient and summed over j."""
    dtype = ctx.out_dtype()
    p = float(p)
    diff = _differences(convert(x1, dtype), convert(x2, dtype))
    dims = diff.dims
    rank = diff.rank
    dist = xo.Broadcast(convert(distances, dtype), tuple(range(rank - 1)), dims)
    zero = tensor(ctx, 0, dtype, dims)
    sign = xo.Sign(diff)
    if p == 0:
        return tensor(ctx, 0, dtype, ctx.out_dims())
    if p == 1:
        local = sign
    elif p == math.inf:
        hits = xo.Eq(xo.Abs(diff), dist)
        local = xo.Select(hits, sign, zero)
    elif p == 2:
        local = xo.Div(diff, dist)
    else:
        magnitude = xo.Pow(xo.Abs(diff), const(ctx, p - 1, dtype), ())
        local = xo.Div(xo.Mul(sign, magnitude), xo.Pow(dist, const(ctx, p - 1, dtype), ()))
    local = xo.Select(xo.Eq(dist, zero), zero, local)
    weighted = xo.Mul(local, xo.Broadcast(convert(grad, dtype), tuple(range(rank - 1)), dims))
    return reduce(ctx, weighted, "add", 0, (rank - 2,), dtype)


# -- cumulative max and min -------------------------------------------------------------------
def cummax(ctx, x, dim, *, largest=True):
    """(values, indices) of the running max (min) along `dim`, torch's way: a tie takes the
    later index, a NaN stays and a later NaN takes its index. One variadic reduce-window over
    (value, index) whose combiner is associative, so the windows may be summed in any order."""
    dim %= max(x.rank, 1)
    if x.rank == 0:
        return x, tensor(ctx, 0, "s64")
    dtype = x.dtype
    positions = xo.Iota(ctx.builder, Shape.array("s64", x.dims), dim)

    def later(a, ia, b, ib):
        beats = xo.Gt(b, a) if largest else xo.Lt(b, a)
        takes = xo.Or(beats, xo.And(xo.Eq(a, b), xo.Gt(ib, ia)))
        if dtype in FLOATS:
            a_nan, b_nan = xo.Ne(a, a), xo.Ne(b, b)
            takes = xo.Or(
                xo.And(b_nan, xo.Or(xo.Not(a_nan), xo.Gt(ib, ia))),
                xo.And(xo.Not(a_nan), takes),
            )
        return xo.Select(takes, b, a), xo.Select(takes, ib, ia)

    size = x.dims[dim]
    window = [1] * x.rank
    window[dim] = size
    pads = [(0, 0)] * x.rank
    pads[dim] = (size - 1, 0)
    init = lowest(dtype) if largest else highest(dtype)
    out = xo.ReduceWindow(
        ctx.builder,
        [x, positions],
        [const(ctx, init, dtype), const(ctx, -1, "s64")],
        later,
        window,
        None,
        pads,
    )
    return xo.GetTupleElement(out, 0), xo.GetTupleElement(out, 1)


def cummin(ctx, x, dim):
    return cummax(ctx, x, dim, largest=False)


# -- adaptive max pooling ---------------------------------------------------------------------
def _adaptive_windows(size: int, out: int):
    """Start and length of each of torch's adaptive windows: [floor(i*size/out),
    ceil((i+1)*size/out))."""
    starts = [(i * size) // out for i in range(out)]
    ends = [-((-(i + 1) * size) // out) for i in range(out)]
    return starts, [e - s for s, e in zip(starts, ends)]


def adaptive_max_pool(ctx, x, output_size):
    """(values, indices) tap by tap over windows of varying length, with torch's rule (a
    larger value or a NaN replaces the running maximum; indices into the input plane)."""
    spatial = len(output_size)
    lead = x.rank - spatial
    sizes = x.dims[lead:]
    windows = [_adaptive_windows(n, o) for n, o in zip(sizes, output_size)]
    longest = [max(lengths) for _, lengths in windows]
    pitches = [math.prod(sizes[i + 1 :]) for i in range(spatial)]
    out_dims = (*x.dims[:lead], *output_size)
    best = best_index = None
    for tap in np.ndindex(*longest):
        rows, valid = [], np.ones(tuple(output_size), bool)
        for i, ((starts, lengths), t) in enumerate(zip(windows, tap)):
            shape = [1] * spatial
            shape[i] = output_size[i]
            inside = np.array([t < n for n in lengths]).reshape(shape)
            valid = valid & inside
            rows.append(np.minimum(np.array(starts) + t, sizes[i] - 1).reshape(shape))
        position = sum(r * pitch for r, pitch in zip(rows, pitches))
        value = index(ctx, x, [None] * lead + [const(ctx, r, "s64") for r in rows])
        flat = broadcast_to(const(ctx, np.broadcast_to(position, output_size), "s64"), out_dims)
        if best is None:  # the first tap is inside every window
            best, best_index = value, flat
            continue
        wins = xo.Gt(value, best)
        if x.dtype in FLOATS:
            wins = xo.Or(wins, xo.Ne(value, value))
        if not valid.all():
            wins = xo.And(wins, broadcast_to(const(ctx, valid, "pred"), out_dims))
        best, best_index = xo.Select(wins, value, best), xo.Select(wins, flat, best_index)
    return best, best_index


def adaptive_max_pool_backward(ctx, grad, x, indices, *, spatial=2):
    """Each output's gradient added onto the input element its index names."""
    lead = x.dims[: x.rank - spatial]
    rows = math.prod(lead)
    dtype = ctx.out_dtype()
    plane = math.prod(x.dims[x.rank - spatial :])
    flat_grad = xo.Reshape(convert(grad, dtype), (rows, math.prod(grad.dims) // max(rows, 1)))
    flat_index = xo.Reshape(indices, flat_grad.dims)
    row = xo.Iota(ctx.builder, Shape.array("s64", flat_grad.dims), 0)
    zeros = tensor(ctx, 0, dtype, (rows, plane))
    return xo.Reshape(index_put(ctx, zeros, [row, flat_index], flat_grad, True), x.dims)


# -- embedding bags ---------------------------------------------------------------------------
MODES = {0: "sum", 1: "mean", 2: "max"}


def _bags(ctx, indices, offsets, include_last_offset: bool):
    """(bag of each index position, number of bags): bag[k] counts the offsets <= k, minus 1."""
    count = offsets.dims[0] - (1 if include_last_offset else 0)
    starts = xo.Slice(convert(offsets, "s64"), [0], [count])
    length = indices.dims[0]
    position = xo.Iota(ctx.builder, Shape.array("s64", (length, count)), 0)
    started = xo.Convert(xo.Le(xo.Broadcast(starts, (1,), (length, count)), position), "s64")
    bag = xo.Sub(reduce(ctx, started, "add", 0, (1,), "s64"), const(ctx, 1, "s64"), ())
    return bag, count


def _kept(ctx, indices, padding_idx):
    if padding_idx is None or padding_idx < 0:
        return None
    return xo.Ne(convert(indices, "s64"), const(ctx, padding_idx, "s64"), ())


def embedding_bag(
    ctx,
    weight,
    indices,
    offsets,
    scale_grad_by_freq=False,
    mode=0,
    sparse=False,
    per_sample_weights=None,
    include_last_offset=False,
    padding_idx=-1,
):
    """(output, offset2bag, bag_size, max_indices) for mode sum or mean: rows gathered,
    scaled by per_sample_weights, summed into their bags by a scatter-add; a mean divides by
    the bag's count of non-padding indices (an empty bag gives zeros)."""
    if MODES.get(mode) not in ("sum", "mean"):
        raise ctx.fail(f"embedding_bag mode {MODES.get(mode, mode)!r} is not supported")
    dtype = ctx.out_dtype(0)
    bag, count = _bags(ctx, indices, offsets, include_last_offset)
    rows = convert(index(ctx, weight, [indices]), dtype)
    width = weight.dims[-1]
    kept = _kept(ctx, indices, padding_idx)
    weights = tensor(ctx, 1, dtype, indices.dims)
    if per_sample_weights is not None:
        weights = convert(per_sample_weights, dtype)
    if kept is not None:
        weights = xo.Select(kept, weights, tensor(ctx, 0, dtype, indices.dims))
    rows = xo.Mul(rows, xo.Broadcast(weights, (0,), rows.dims))
    sums = index_put(ctx, tensor(ctx, 0, dtype, (count, width)), [bag], rows, True)
    ones = tensor(ctx, 1, "s64", indices.dims)
    if kept is not None:
        ones = xo.Convert(kept, "s64")
    sizes = index_put(ctx, tensor(ctx, 0, "s64", (count,)), [bag], ones, True)
    if MODES[mode] == "mean":
        divisor = convert(xo.Max(sizes, const(ctx, 1, "s64"), ()), dtype)
        sums = xo.Div(sums, xo.Broadcast(divisor, (0,), sums.dims))
    # torch leaves offset2bag, bag_size and max_indices empty where its backward does not
    # read them: each goes out with the shape AOTAutograd traced
    extras = [
        convert(value, ctx.out_dtype(k))
        if value is not None and value.dims == ctx.out_dims(k)
        else tensor(ctx, 0, ctx.out_dtype(k), ctx.out_dims(k))
        for k, value in ((1, bag), (2, sizes), (3, None))
    ]
    return (sums, *extras)


def _bag_of_each(ctx, indices, offsets, offset2bag):
    """offset2bag, or the bags from the offsets where the forward left it empty (a last
    offset that ends the last bag never counts, so include_last_offset needs no flag)."""
    if offset2bag.dims == indices.dims:
        return convert(offset2bag, "s64")
    if offsets is None:
        raise NotImplementedError("embedding_bag backward without offset2bag or offsets")
    return _bags(ctx, indices, offsets, False)[0]


def embedding_bag_backward(
    ctx,
    grad,
    indices,
    offsets,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    sparse,
    per_sample_weights,
    padding_idx=-1,
):
    """The weight's gradient: each index's bag gradient (scaled as in the forward) added onto
    the index's row."""
    if scale_grad_by_freq or sparse:
        raise ctx.fail("embedding_bag with scale_grad_by_freq or sparse is not supported")
    if MODES.get(mode) not in ("sum", "mean"):
        raise ctx.fail(f"embedding_bag mode {MODES.get(mode, mode)!r} is not supported")
    dtype = ctx.out_dtype()
    bag = _bag_of_each(ctx, indices, offsets, offset2bag)
    rows = convert(index(ctx, grad, [bag]), dtype)
    scale = tensor(ctx, 1, dtype, indices.dims)
    if per_sample_weights is not None:
        scale = convert(per_sample_weights, dtype)
    if MODES[mode] == "mean":
        if bag_size.dims != (grad.dims[0],):
            raise NotImplementedError("embedding_bag mean backward without bag sizes")
        sizes = convert(index(ctx, bag_size, [bag]), dtype)
        scale = xo.Div(scale, xo.Max(sizes, const(ctx, 1, dtype), ()))
    kept = _kept(ctx, indices, padding_idx)
    if kept is not None:
        scale = xo.Select(kept, scale, tensor(ctx, 0, dtype, indices.dims))
    rows = xo.Mul(rows, xo.Broadcast(scale, (0,), rows.dims))
    zeros = tensor(ctx, 0, dtype, (num_weights, grad.dims[-1]))
    return index_put(ctx, zeros, [convert(indices, "s64")], rows, True)


def embedding_bag_dense_backward(
    ctx,
    grad,
    indices,
    offset2bag,
    bag_size,
    maximum_indices,
    num_weights,
    scale_grad_by_freq,
    mode,
    per_sample_weights,
    padding_idx=-1,
):
    return embedding_bag_backward(
        ctx,
        grad,
        indices,
        None,
        offset2bag,
        bag_size,
        maximum_indices,
        num_weights,
        scale_grad_by_freq,
        mode,
        False,
        per_sample_weights,
        padding_idx,
    )


def embedding_bag_sample_weights_backward(
    ctx, grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1
):
    """d out / d per_sample_weights[k]: the bag's gradient dotted with the row index k read."""
    dtype = ctx.out_dtype()
    bag_grad = convert(index(ctx, grad, [_bag_of_each(ctx, indices, offsets, offset2bag)]), dtype)
    rows = convert(index(ctx, weight, [indices]), dtype)
    dots = reduce(ctx, xo.Mul(bag_grad, rows), "add", 0, (1,), dtype)
    kept = _kept(ctx, indices, padding_idx)
    if kept is None:
        return dots
    return xo.Select(kept, dots, tensor(ctx, 0, dtype, dots.dims))


def assert_async(ctx, *_, **__):
    """torch._check's runtime assertion: compiled code has no way to raise, so it is dropped
    (eager torch raises for the same input)."""
    return None


# -- more elementwise math --------------------------------------------------------------------
def trunc(ctx, x):
    def fn(a):
        if a.dtype not in FLOATS:
            return a
        return xo.Select(xo.Lt(a, const(ctx, 0, a.dtype), ()), xo.Ceil(a), xo.Floor(a))

    return elementwise(ctx, fn, x)


def log_base(base: float):
    def rule(ctx, x):
        scale = 1 / math.log(base)
        return elementwise(ctx, lambda a: xo.Mul(xo.Log(a), const(ctx, scale, a.dtype), ()), x)

    rule.__name__ = f"lower_log{int(base)}"
    return rule


def exp2(ctx, x):
    return elementwise(ctx, lambda a: xo.Pow(const(ctx, 2, a.dtype), a, ()), x)


def erfc(ctx, x):
    """1 - erf(x), computed in f64 so that the tail keeps its digits."""
    out = ctx.out_dtype()
    wide = "f64" if out in ("f16", "bf16", "f32") else out
    one_minus = elementwise(
        ctx, lambda a: xo.Sub(const(ctx, 1, wide), xo.Erf(a), ()), x, dtype=wide
    )
    return convert(one_minus, out)


def signbit(ctx, x):
    """The sign bit itself, so -0.0 and -NaN count as negative."""
    if x.dtype not in FLOATS:
        return (
            xo.Lt(x, const(ctx, 0, x.dtype), ())
            if x.dtype[0] == "s"
            else const_like(ctx, False, xo.Ne(x, x))
        )
    bits = {"f16": "s16", "bf16": "s16", "f32": "s32", "f64": "s64"}[x.dtype]
    return xo.Lt(xo.BitcastConvert(x, bits), const(ctx, 0, bits), ())


def copysign(ctx, x, y):
    def fn(a, b):
        negative = signbit(ctx, b)
        magnitude = xo.Abs(a)
        return xo.Select(negative, xo.Neg(magnitude), magnitude)

    return elementwise(ctx, fn, x, y)


def fmax(ctx, x, y, *, largest=True):
    """max (min) ignoring a NaN operand unless both are NaN."""

    def fn(a, b):
        both = xo.Max(a, b) if largest else xo.Min(a, b)
        if a.dtype not in FLOATS:
            return both
        return xo.Select(xo.Ne(a, a), b, xo.Select(xo.Ne(b, b), a, both))

    return elementwise(ctx, fn, x, y)


def fmin(ctx, x, y):
    return fmax(ctx, x, y, largest=False)


def hypot(ctx, x, y):
    return elementwise(ctx, lambda a, b: xo.Sqrt(xo.Add(xo.Mul(a, a), xo.Mul(b, b))), x, y)


def round_decimals(ctx, x, *, decimals=0):
    """torch's rule: round-half-even of x * 10^d, divided back (negative d: divided first)."""
    scale = 10.0 ** abs(decimals)

    def fn(a):
        factor = const(ctx, scale, a.dtype)
        if decimals >= 0:
            return xo.Div(xo.RoundNearestEven(xo.Mul(a, factor, ())), factor, ())
        return xo.Mul(xo.RoundNearestEven(xo.Div(a, factor, ())), factor, ())

    return elementwise(ctx, fn, x)


def angle(ctx, x):
    """The argument of a complex number; for reals, pi where x < 0 (NaN stays NaN)."""
    if x.dtype in COMPLEX:
        return xo.Atan2(xo.Imag(x), xo.Real(x))
    dtype = ctx.out_dtype()

    def fn(a):
        zero = const_like(ctx, 0, a)
        turned = xo.Select(xo.Lt(a, zero), const_like(ctx, math.pi, a), zero)
        return xo.Select(xo.Ne(a, a), a, turned)

    return elementwise(ctx, fn, x, dtype=dtype)


# -- matrix-vector and batch-summed products --------------------------------------------------
def addmv(ctx, bias, matrix, vector, beta=1, alpha=1):
    from .aten_nn import _scaled_sum

    dtype = ctx.out_dtype()
    product = xo.Dot(
        convert(matrix, dtype), convert(vector, dtype), lhs_contracting=(1,), rhs_contracting=(0,)
    )
    return _scaled_sum(ctx, bias, product, beta, alpha)


def addbmm(ctx, bias, a, b, beta=1, alpha=1):
    """beta * bias + alpha * sum over the batch of a[i] @ b[i]: one dot contracting the batch
    and the inner dim."""
    from .aten_nn import _scaled_sum

    dtype = ctx.out_dtype()
    product = xo.Dot(
        convert(a, dtype), convert(b, dtype), lhs_contracting=(0, 2), rhs_contracting=(0, 1)
    )
    return _scaled_sum(ctx, bias, product, beta, alpha)


def trilinear(ctx, i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """aten._trilinear (nn.Bilinear): each input unsqueezed at its expand dims, the three
    multiplied with broadcasting and summed over sumdim."""
    dtype = ctx.out_dtype()
    operands = []
    for op, expand in ((i1, expand1), (i2, expand2), (i3, expand3)):
        dims = list(op.dims)
        for d in sorted(expand):
            dims.insert(d, 1)
        operands.append(xo.Reshape(convert(op, dtype), dims))
    full = tuple(max(sizes) for sizes in zip(*(o.dims for o in operands)))
    product = xo.Mul(
        xo.Mul(broadcast_to(operands[0], full), broadcast_to(operands[1], full)),
        broadcast_to(operands[2], full),
    )
    summed = sorted(d % len(full) for d in sumdim)
    if not summed:
        return product
    return reduce(ctx, product, "add", 0, summed, dtype)


# -- fft --------------------------------------------------------------------------------------
def _fft_over(ctx, x, dims, fft_type, lengths):
    """HLO fft over `dims` (moved to the end, at most 3 at a time, then moved back)."""
    dims = [d % x.rank for d in dims]
    out = x
    for start in range(0, len(dims), 3):
        group = dims[start : start + 3]
        order = [d for d in range(x.rank) if d not in group] + group
        moved = xo.Transpose(out, order)
        done = xo.Fft(moved, fft_type, [lengths[dims.index(d)] for d in group])
        out = xo.Transpose(done, list(np.argsort(order)))
    return out


def _fft_scale(ctx, out, normalization: int, count: int):
    """ATen's normalization: 0 none, 1 by 1/sqrt(n), 2 by 1/n."""
    if normalization == 0:
        return out
    factor = 1 / math.sqrt(count) if normalization == 1 else 1 / count
    return xo.Mul(out, const_like(ctx, factor, out))


def fft_c2c(ctx, x, dim, normalization, forward):
    """Complex-to-complex; HLO's IFFT divides by n, which the normalization then redoes."""
    lengths = [x.dims[d % x.rank] for d in dim]
    out = _fft_over(ctx, x, dim, "FFT" if forward else "IFFT", lengths)
    count = math.prod(lengths)
    if not forward:  # undo IFFT's 1/n so ATen's normalization alone applies
        out = xo.Mul(out, const_like(ctx, count, out))
    return _fft_scale(ctx, out, normalization, count)


def fft_r2c(ctx, x, dim, normalization, onesided):
    """Real-to-complex: a real FFT over the last of `dim`, complex FFTs over the others; the
    two-sided result is the full complex FFT."""
    dtype = ctx.out_dtype()
    lengths = [x.dims[d % x.rank] for d in dim]
    count = math.prod(lengths)
    if not onesided:
        return _fft_scale(
            ctx, _fft_over(ctx, convert(x, dtype), dim, "FFT", lengths), normalization, count
        )
    last = dim[-1] % x.rank
    order = [d for d in range(x.rank) if d != last] + [last]
    moved = xo.Transpose(convert(x, {"c64": "f32", "c128": "f64"}[dtype]), order)
    out = xo.Transpose(xo.Fft(moved, "RFFT", [lengths[-1]]), list(np.argsort(order)))
    if len(dim) > 1:
        out = _fft_over(ctx, out, dim[:-1], "FFT", [out.dims[d % x.rank] for d in dim[:-1]])
    return _fft_scale(ctx, out, normalization, count)


def fft_c2r(ctx, x, dim, normalization, last_dim_size):
    """Complex-to-real (the inverse of a one-sided r2c): complex inverse FFTs over all but the
    last of `dim`, a real inverse over the last, of length last_dim_size."""
    out_dims = ctx.out_dims()
    lengths = [out_dims[d % x.rank] for d in dim]
    count = math.prod(lengths)
    if len(dim) > 1:
        x = _fft_over(ctx, x, dim[:-1], "IFFT", [x.dims[d % x.rank] for d in dim[:-1]])
    last = dim[-1] % x.rank
    half = last_dim_size // 2 + 1
    if x.dims[last] != half:  # the inverse reads exactly n // 2 + 1 coefficients
        limits = list(x.dims)
        limits[last] = min(half, x.dims[last])
        x = xo.Slice(x, [0] * x.rank, limits)
        if limits[last] < half:
            config = [(0, 0, 0)] * x.rank
            config[last] = (0, half - limits[last], 0)
            x = xo.Pad(x, const(ctx, 0, x.dtype), config)
    order = [d for d in range(x.rank) if d != last] + [last]
    moved = xo.Transpose(x, order)
    out = xo.Transpose(xo.Fft(moved, "IRFFT", [last_dim_size]), list(np.argsort(order)))
    out = xo.Mul(out, const_like(ctx, count, out))  # HLO's inverses divide by n
    return convert(_fft_scale(ctx, out, normalization, count), ctx.out_dtype())
