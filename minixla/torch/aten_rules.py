"""Lowering rules for ATen's elementwise, shape, creation and reduction ops.

A rule is `rule(ctx, *args, **kwargs)` with the node's arguments: tensors arrive as XlaOps,
everything else as the Python values in the graph. Elementwise rules compute in the node's
traced output dtype and broadcast to its traced shape, so torch's promotion and broadcasting
rules are followed without being restated here. The table that maps ops to rules is
`minixla.torch.aten.LOWERINGS`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..frontend import ops as xo
from ..frontend.builder import XlaOp
from ..ir import Shape
from .convert import TORCH_DTYPES, hlo_dtype

FLOATS = ("f16", "bf16", "f32", "f64")
COMPLEX = ("c64", "c128")


# -- helpers ----------------------------------------------------------------------------------
def const(ctx, value, dtype: str) -> XlaOp:
    return ctx.builder.constant(np.asarray(value, dtype=Shape.array(dtype).numpy_dtype))


def convert(op: XlaOp, dtype: str) -> XlaOp:
    return op if op.dtype == dtype else xo.Convert(op, dtype)


def broadcast_to(op: XlaOp, dims) -> XlaOp:
    """NumPy-style broadcast of `op` to `dims` (trailing dims align; size-1 dims stretch)."""
    dims = tuple(dims)
    if op.dims == dims:
        return op
    offset = len(dims) - op.rank
    kept = [i for i, d in enumerate(op.dims) if d == dims[i + offset]]
    if len(kept) != op.rank:
        op = xo.Reshape(op, [op.dims[i] for i in kept])
    return xo.Broadcast(op, [i + offset for i in kept], dims)


def tensor(ctx, value, dtype: str, dims=()) -> XlaOp:
    """`value` (an XlaOp or a Python number) as `dtype`, broadcast to `dims`."""
    op = convert(value, dtype) if isinstance(value, XlaOp) else const(ctx, value, dtype)
    return broadcast_to(op, dims)


def elementwise(ctx, fn, *args, dtype: str | None = None):
    """fn over the args converted to `dtype` (default: the node's output dtype) and
    broadcast to the node's output shape."""
    dtype = dtype or ctx.out_dtype()
    dims = ctx.out_dims()
    return fn(*[tensor(ctx, a, dtype, dims) for a in args])


_CATEGORY = {
    "pred": 0,
    **{f"{k}{b}": 1 for k in "su" for b in (8, 16, 32, 64)},
    **{f: 2 for f in FLOATS},
    **{c: 3 for c in COMPLEX},
}


def result_type(*args) -> str:
    """torch.result_type over XlaOps and Python scalars (dimensioned tensors win over 0-d
    tensors, which win over Python scalars, unless a lower group has a higher category)."""

    def combine(dtypes):
        out = None
        for dtype in dtypes:
            out = (
                dtype if out is None else hlo_dtype(torch.promote_types(_torch(out), _torch(dtype)))
            )
        return out

    dimmed = combine(a.dtype for a in args if isinstance(a, XlaOp) and a.rank > 0)
    zero_d = combine(a.dtype for a in args if isinstance(a, XlaOp) and a.rank == 0)
    scalars = [a for a in args if not isinstance(a, XlaOp)]
    out = dimmed
    if zero_d is not None and (out is None or _CATEGORY[zero_d] > _CATEGORY[out]):
        out = zero_d
    for value in scalars:
        kind = _python_dtype(value)
        if out is None or _CATEGORY[kind] > _CATEGORY[out]:
            out = kind
    return out


def _python_dtype(value) -> str:
    if isinstance(value, bool):
        return "pred"
    if isinstance(value, int):
        return "s64"
    if isinstance(value, float):
        return hlo_dtype(torch.get_default_dtype())
    return "c64"


def _torch(dtype: str):
    return TORCH_DTYPES[dtype]


def dims_arg(dims, rank: int) -> tuple[int, ...]:
    """A dim list (None or [] means all dims), normalized to non-negative, sorted."""
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return tuple(range(rank))
    dims = [dims] if isinstance(dims, int) else dims
    return tuple(sorted(d % max(rank, 1) for d in dims))


def reduce(ctx, op: XlaOp, opcode: str, init, dims, dtype: str) -> XlaOp:
    op = convert(op, dtype)
    return xo.Reduce(
        ctx.builder, op, const(ctx, init, dtype), ctx.builder.reducer(opcode, dtype), dims
    )


def keep_dims(op: XlaOp, dims, keepdim: bool, full_dims) -> XlaOp:
    if not keepdim:
        return op
    return xo.Reshape(op, [1 if i in dims else d for i, d in enumerate(full_dims)])


def lowest(dtype: str):
    if dtype in FLOATS:
        return -math.inf
    return False if dtype == "pred" else np.iinfo(Shape.array(dtype).numpy_dtype).min


def highest(dtype: str):
    if dtype in FLOATS:
        return math.inf
    return True if dtype == "pred" else np.iinfo(Shape.array(dtype).numpy_dtype).max


# -- elementwise ------------------------------------------------------------------------------
def unary(opcode: str):
    def rule(ctx, x):
        return elementwise(ctx, lambda a: xo.Op(opcode, [a]), x)

    rule.__name__ = f"lower_{opcode.replace('-', '_')}"
    return rule


def binary(opcode: str):
    def rule(ctx, x, y):
        return elementwise(ctx, lambda a, b: xo.Op(opcode, [a, b]), x, y)

    rule.__name__ = f"lower_{opcode.replace('-', '_')}"
    return rule


def compare(direction: str):
    def rule(ctx, x, y):
        dtype = result_type(x, y)
        return elementwise(ctx, lambda a, b: xo.Compare(a, b, direction), x, y, dtype=dtype)

    rule.__name__ = f"lower_compare_{direction.lower()}"
    return rule


def logical(opcode: str):
    def rule(ctx, x, y):
        return elementwise(
            ctx, lambda a, b: xo.Op(opcode, [a, b]), truth(ctx, x), truth(ctx, y), dtype="pred"
        )

    rule.__name__ = f"lower_logical_{opcode}"
    return rule


def truth(ctx, x):
    if not isinstance(x, XlaOp):
        return bool(x)
    return x if x.dtype == "pred" else xo.Ne(x, const(ctx, 0, x.dtype), broadcast_dimensions=())


def add(ctx, x, y, alpha=1):
    # x + alpha * y
    if alpha == 1:
        return elementwise(ctx, xo.Add, x, y)
    return elementwise(ctx, lambda a, b, c: xo.Add(a, xo.Mul(b, c)), x, y, alpha)


def sub(ctx, x, y, alpha=1):
    if alpha == 1:
        return elementwise(ctx, xo.Sub, x, y)
    return elementwise(ctx, lambda a, b, c: xo.Sub(a, xo.Mul(b, c)), x, y, alpha)


def mul(ctx, x, y):
    return elementwise(ctx, xo.Mul, x, y)


def div(ctx, x, y, rounding_mode=None):
    if rounding_mode is None:
        return elementwise(ctx, xo.Div, x, y)
    dtype = result_type(x, y)
    dims = ctx.out_dims()
    a, b = tensor(ctx, x, dtype, dims), tensor(ctx, y, dtype, dims)
    if dtype not in FLOATS:
        if rounding_mode == "trunc":
            return xo.Div(a, b)  # HLO integer divide truncates, as C does
        a, b = convert(a, "f64"), convert(b, "f64")
        return convert(xo.Floor(xo.Div(a, b)), dtype)
    quotient = xo.Div(a, b)
    rounded = (
        xo.Floor(quotient)
        if rounding_mode == "floor"
        else xo.Select(
            xo.Lt(quotient, const(ctx, 0, dtype), broadcast_dimensions=()),
            xo.Ceil(quotient),
            xo.Floor(quotient),
        )
    )
    return rounded


def remainder(ctx, x, y):
    # Python's modulo: HLO remainder has the dividend's sign; shift by y when signs differ
    def fn(a, b):
        rem = xo.Rem(a, b)
        zero = const(ctx, 0, a.dtype)
        differ = xo.And(xo.Ne(rem, zero, ()), xo.Ne(xo.Lt(rem, zero, ()), xo.Lt(b, zero, ())))
        return xo.Select(differ, xo.Add(rem, b), rem)

    return elementwise(ctx, fn, x, y)


def abs_(ctx, x):
    if isinstance(x, XlaOp) and x.dtype in COMPLEX:  # |re + i im|, a real number
        return xo.Abs(x)
    return elementwise(ctx, xo.Abs, x)


def reciprocal(ctx, x):
    return elementwise(ctx, lambda a: xo.Div(const(ctx, 1, a.dtype), a, ()), x)


def relu(ctx, x):
    return elementwise(ctx, lambda a: xo.Max(a, const(ctx, 0, a.dtype), ()), x)


def sigmoid(ctx, x):
    return elementwise(ctx, xo.Logistic, x)


def gelu(ctx, x, approximate="none"):
    def exact(a):
        dtype = a.dtype
        half = const(ctx, 0.5, dtype)
        inner = xo.Erf(xo.Mul(a, const(ctx, 1 / math.sqrt(2), dtype), ()))
        return xo.Mul(xo.Mul(a, half, ()), xo.Add(inner, const(ctx, 1, dtype), ()))

    def tanh_form(a):
        dtype = a.dtype
        cube = xo.Mul(xo.Mul(a, a), a)
        inner = xo.Add(a, xo.Mul(cube, const(ctx, 0.044715, dtype), ()))
        t = xo.Tanh(xo.Mul(inner, const(ctx, math.sqrt(2 / math.pi), dtype), ()))
        return xo.Mul(xo.Mul(a, const(ctx, 0.5, dtype), ()), xo.Add(t, const(ctx, 1, dtype), ()))

    # half types compute in f32 and round once, as torch's kernels do
    out = ctx.out_dtype()
    wide = "f32" if out in ("f16", "bf16") else out
    return convert(
        elementwise(ctx, exact if approximate == "none" else tanh_form, x, dtype=wide), out
    )


def pow_(ctx, x, y):
    if not isinstance(y, XlaOp) and y == 2:
        return elementwise(ctx, lambda a: xo.Mul(a, a), x)
    return elementwise(ctx, xo.Pow, x, y)


def clamp(ctx, x, low=None, high=None):
    def fn(a, *bounds):
        bounds = list(bounds)
        if low is not None:
            a = xo.Max(a, bounds.pop(0))
        if high is not None:
            a = xo.Min(a, bounds.pop(0))
        return a

    return elementwise(ctx, fn, x, *[b for b in (low, high) if b is not None])


def where(ctx, cond, x, y):
    dims = ctx.out_dims()
    return xo.Select(
        broadcast_to(truth(ctx, cond), dims),
        tensor(ctx, x, ctx.out_dtype(), dims),
        tensor(ctx, y, ctx.out_dtype(), dims),
    )


def logical_not(ctx, x):
    return broadcast_to(xo.Not(truth(ctx, x)), ctx.out_dims())


def bitwise_not(ctx, x):
    return xo.Not(x)


def isnan(ctx, x):
    return xo.Ne(x, x)


def copy(ctx, x, **_):
    return x


def to_copy(ctx, x, dtype=None, **_):
    return convert(x, hlo_dtype(dtype)) if dtype is not None else x


def copy_into(ctx, dst, src, non_blocking=False):
    return tensor(ctx, src, dst.dtype, dst.dims)


def threshold_backward(ctx, grad, x, threshold):
    dims = ctx.out_dims()
    keep = xo.Gt(tensor(ctx, x, x.dtype, dims), tensor(ctx, threshold, x.dtype, dims))
    grad = tensor(ctx, grad, ctx.out_dtype(), dims)
    return xo.Select(keep, grad, const_like(ctx, 0, grad))


def const_like(ctx, value, op: XlaOp) -> XlaOp:
    return broadcast_to(const(ctx, value, op.dtype), op.dims)


# -- shape ------------------------------------------------------------------------------------
def view(ctx, x, size=None, *_):
    return xo.Reshape(x, ctx.out_dims())


def permute(ctx, x, dims):
    return xo.Transpose(x, [d % x.rank for d in dims])


def expand(ctx, x, size, implicit=False):
    return broadcast_to(x, ctx.out_dims())


def slice_(ctx, x, dim=0, start=None, end=None, step=1):
    dim %= x.rank
    size = x.dims[dim]
    start, end, _ = slice(start, end, step).indices(size)
    end = max(end, start)
    starts = [0] * x.rank
    limits = list(x.dims)
    strides = [1] * x.rank
    starts[dim], limits[dim], strides[dim] = start, end, step
    return xo.Slice(x, starts, limits, strides)


def select(ctx, x, dim, index):
    dim %= x.rank
    index %= x.dims[dim]
    piece = slice_(ctx, x, dim, index, index + 1)
    return xo.Reshape(piece, ctx.out_dims())


def cat(ctx, tensors, dim=0):
    tensors = [t for t in tensors if not (t.rank == 1 and t.dims[0] == 0)]
    dtype = ctx.out_dtype()
    return xo.Concatenate([convert(t, dtype) for t in tensors], dim % ctx.val.dim())


def constant_pad_nd(ctx, x, pad, value=0):
    config = [(0, 0, 0)] * x.rank
    for i in range(len(pad) // 2):  # pad lists the last dim first
        config[x.rank - 1 - i] = (pad[2 * i], pad[2 * i + 1], 0)
    low_cut = [max(-lo, 0) for lo, _, _ in config]
    padded = xo.Pad(
        x, const(ctx, value, x.dtype), [(max(lo, 0), max(hi, 0), 0) for lo, hi, _ in config]
    )
    if any(lo < 0 or hi < 0 for lo, hi, _ in config):  # negative padding crops
        limits = [d - max(-hi, 0) for d, (_, hi, _) in zip(padded.dims, config)]
        padded = xo.Slice(padded, low_cut, limits)
    return padded


def flip(ctx, x, dims):
    return xo.Reverse(x, [d % x.rank for d in dims])


# -- creation ---------------------------------------------------------------------------------
def full(ctx, size, value, **_):
    return tensor(ctx, value, ctx.out_dtype(), ctx.out_dims())


def full_like(ctx, x, value, **_):
    return tensor(ctx, value, ctx.out_dtype(), ctx.out_dims())


def scalar_tensor(ctx, value, **_):
    return const(ctx, value, ctx.out_dtype())


def arange(ctx, start, end=None, step=1, **_):
    if end is None:
        start, end = 0, start
    dtype, dims = ctx.out_dtype(), ctx.out_dims()
    count = xo.Iota(ctx.builder, Shape.array(dtype if dtype in FLOATS else "s64", dims))
    values = xo.Add(
        xo.Mul(count, const(ctx, step, count.dtype), ()), const(ctx, start, count.dtype), ()
    )
    return convert(values, dtype)


def empty(ctx, *_, **__):
    return tensor(ctx, 0, ctx.out_dtype(), ctx.out_dims())


# -- reductions -------------------------------------------------------------------------------
def sum_(ctx, x, dims=None, keepdim=False, dtype=None):
    dims = dims_arg(dims, x.rank)
    out = reduce(ctx, x, "add", 0, dims, ctx.out_dtype())
    return keep_dims(out, dims, keepdim, x.dims)


def mean(ctx, x, dims=None, keepdim=False, dtype=None):
    dims = dims_arg(dims, x.rank)
    total = reduce(ctx, x, "add", 0, dims, ctx.out_dtype())
    count = math.prod(x.dims[d] for d in dims)
    return keep_dims(xo.Div(total, const(ctx, count, total.dtype), ()), dims, keepdim, x.dims)


def var(ctx, x, dims=None, correction=None, keepdim=False):
    dims = dims_arg(dims, x.rank)
    dtype = ctx.out_dtype()
    x = convert(x, dtype)
    count = math.prod(x.dims[d] for d in dims)
    centred = xo.Sub(
        x,
        broadcast_to(
            keep_dims(
                xo.Div(reduce(ctx, x, "add", 0, dims, dtype), const(ctx, count, dtype), ()),
                dims,
                True,
                x.dims,
            ),
            x.dims,
        ),
    )
    squares = reduce(ctx, xo.Mul(centred, centred), "add", 0, dims, dtype)
    correction = 1 if correction is None else correction
    out = xo.Div(squares, const(ctx, max(count - correction, 0), dtype), ())
    return keep_dims(out, dims, keepdim, x.dims)


def amax(ctx, x, dims=(), keepdim=False):
    dims = dims_arg(dims, x.rank)
    return keep_dims(
        reduce(ctx, x, "maximum", lowest(x.dtype), dims, x.dtype), dims, keepdim, x.dims
    )


def amin(ctx, x, dims=(), keepdim=False):
    dims = dims_arg(dims, x.rank)
    return keep_dims(
        reduce(ctx, x, "minimum", highest(x.dtype), dims, x.dtype), dims, keepdim, x.dims
    )


def any_(ctx, x, dims=None, keepdim=False):
    dims = dims_arg(dims, x.rank)
    return keep_dims(reduce(ctx, truth(ctx, x), "or", False, dims, "pred"), dims, keepdim, x.dims)


def all_(ctx, x, dims=None, keepdim=False):
    dims = dims_arg(dims, x.rank)
    return keep_dims(reduce(ctx, truth(ctx, x), "and", True, dims, "pred"), dims, keepdim, x.dims)


def prod(ctx, x, dims=None, keepdim=False, dtype=None):
    dims = dims_arg(dims, x.rank)
    return keep_dims(reduce(ctx, x, "multiply", 1, dims, ctx.out_dtype()), dims, keepdim, x.dims)


def argmax(ctx, x, dim=None, keepdim=False, *, largest=True):
    """Index of the first max (or min) along `dim`, as a variadic reduce over (value, index)."""
    flat = dim is None
    if flat:
        x, dim = xo.Reshape(x, [math.prod(x.dims)]), 0
    dim %= x.rank
    index = xo.Iota(ctx.builder, Shape.array("s64", x.dims), dim)
    dtype = x.dtype

    def better(a, ia, b, ib):
        wins = xo.Gt(a, b) if largest else xo.Lt(a, b)
        if dtype in FLOATS:  # NaN wins, as in torch
            wins = xo.Or(wins, xo.And(xo.Ne(a, a), xo.Eq(b, b)))
        tie = xo.And(xo.Eq(a, b), xo.Lt(ia, ib))
        take_a = xo.Or(wins, tie)
        return xo.Select(take_a, a, b), xo.Select(take_a, ia, ib)

    init = lowest(dtype) if largest else highest(dtype)
    out = xo.Reduce(
        ctx.builder, [x, index], [const(ctx, init, dtype), const(ctx, 0, "s64")], better, [dim]
    )
    result = xo.GetTupleElement(out, 1)
    if flat:  # a scalar, or all-ones dims with keepdim
        return xo.Reshape(result, ctx.out_dims())
    return keep_dims(result, (dim,), keepdim, x.dims)


def argmin(ctx, x, dim=None, keepdim=False):
    return argmax(ctx, x, dim, keepdim, largest=False)


def softmax(ctx, x, dim, half_to_float=False):
    dtype = ctx.out_dtype()
    x = convert(x, dtype)
    dim %= x.rank
    shifted = xo.Sub(x, broadcast_to(amax(ctx, x, [dim], True), x.dims))
    exps = xo.Exp(shifted)
    total = broadcast_to(
        keep_dims(reduce(ctx, exps, "add", 0, (dim,), dtype), (dim,), True, x.dims), x.dims
    )
    return xo.Div(exps, total)


def log_softmax(ctx, x, dim, half_to_float=False):
    dtype = ctx.out_dtype()
    x = convert(x, dtype)
    dim %= x.rank
    shifted = xo.Sub(x, broadcast_to(amax(ctx, x, [dim], True), x.dims))
    total = keep_dims(reduce(ctx, xo.Exp(shifted), "add", 0, (dim,), dtype), (dim,), True, x.dims)
    return xo.Sub(shifted, broadcast_to(xo.Log(total), x.dims))


def softmax_backward(ctx, grad, out, dim, input_dtype):
    dim %= out.rank
    dtype = ctx.out_dtype()
    grad, out = convert(grad, dtype), convert(out, dtype)
    inner = keep_dims(
        reduce(ctx, xo.Mul(grad, out), "add", 0, (dim,), dtype), (dim,), True, out.dims
    )
    return xo.Mul(out, xo.Sub(grad, broadcast_to(inner, out.dims)))


def log_softmax_backward(ctx, grad, out, dim, input_dtype):
    dim %= out.rank
    dtype = ctx.out_dtype()
    grad, out = convert(grad, dtype), convert(out, dtype)
    total = keep_dims(reduce(ctx, grad, "add", 0, (dim,), dtype), (dim,), True, out.dims)
    return xo.Sub(grad, xo.Mul(xo.Exp(out), broadcast_to(total, out.dims)))


def max_all(ctx, x):
    return amax(ctx, x, None)


def min_all(ctx, x):
    return amin(ctx, x, None)


def max_dim(ctx, x, dim, keepdim=False):
    return amax(ctx, x, [dim], keepdim), argmax(ctx, x, dim, keepdim)


def min_dim(ctx, x, dim, keepdim=False):
    return amin(ctx, x, [dim], keepdim), argmin(ctx, x, dim, keepdim)


def repeat(ctx, x, repeats):
    # tile: each dim d of size n becomes (r, n) broadcast, then merged to r * n
    dims = (1,) * (len(repeats) - x.rank) + x.dims
    x = xo.Reshape(x, dims)
    tiled = [size for r, n in zip(repeats, dims) for size in (r, n)]
    wide = xo.Broadcast(x, [2 * i + 1 for i in range(len(dims))], tiled)
    return xo.Reshape(wide, ctx.out_dims())


def leaky_relu(ctx, x, slope=0.01):
    def fn(a):
        zero = const(ctx, 0, a.dtype)
        return xo.Select(xo.Gt(a, zero, ()), a, xo.Mul(a, const(ctx, slope, a.dtype), ()))

    return elementwise(ctx, fn, x)


def hardtanh(ctx, x, low=-1.0, high=1.0):
    return clamp(ctx, x, low, high)


def elu(ctx, x, alpha=1.0, scale=1.0, input_scale=1.0):
    # x > 0: scale * x; else scale * alpha * (exp(input_scale * x) - 1)
    def fn(a):
        dtype = a.dtype
        negative = xo.Mul(
            xo.Expm1(xo.Mul(a, const(ctx, input_scale, dtype), ())),
            const(ctx, alpha * scale, dtype),
            (),
        )
        positive = xo.Mul(a, const(ctx, scale, dtype), ())
        return xo.Select(xo.Gt(a, const(ctx, 0, dtype), ()), positive, negative)

    return elementwise(ctx, fn, x)


def uniform(ctx, dims, dtype: str) -> XlaOp:
    """Uniform [0, 1) floats: 23 random mantissa bits under the exponent of 1.0, minus 1."""
    bits = ctx.random_bits(dims)
    mantissa = xo.ShiftRightLogical(bits, const(ctx, 9, "u32"), ())
    one_to_two = xo.BitcastConvert(xo.Or(mantissa, const(ctx, 0x3F800000, "u32"), ()), "f32")
    return convert(xo.Sub(one_to_two, const(ctx, 1, "f32"), ()), dtype)


def native_dropout(ctx, x, p, train):
    """(x * mask / (1 - p), mask) with mask ~ Bernoulli(1 - p) from minixla's RNG."""
    if not train:
        return x, tensor(ctx, True, "pred", x.dims)
    if p >= 1:
        return const_like(ctx, 0, x), tensor(ctx, False, "pred", x.dims)
    keep = xo.Ge(uniform(ctx, x.dims, "f32"), const(ctx, p, "f32"), ())
    scaled = xo.Mul(x, const(ctx, 1 / (1 - p), x.dtype), ())
    return xo.Select(keep, scaled, const_like(ctx, 0, x)), keep


def native_dropout_backward(ctx, grad, mask, scale):
    return elementwise(
        ctx, lambda g, m: xo.Mul(xo.Mul(g, m), const(ctx, scale, g.dtype), ()), grad, mask
    )


def rand_like(ctx, x, **_):
    return uniform(ctx, ctx.out_dims(), ctx.out_dtype())


def rand(ctx, size, **_):
    return uniform(ctx, ctx.out_dims(), ctx.out_dtype())


def randn(ctx, *_, **__):
    """Standard normal draws by Box-Muller over two uniform draws."""
    dtype, dims = ctx.out_dtype(), ctx.out_dims()
    radius_draw = xo.Sub(const(ctx, 1, "f32"), uniform(ctx, dims, "f32"), ())  # in (0, 1]
    angle = xo.Mul(uniform(ctx, dims, "f32"), const(ctx, 2 * math.pi, "f32"), ())
    radius = xo.Sqrt(xo.Mul(xo.Log(radius_draw), const(ctx, -2, "f32"), ()))
    return convert(xo.Mul(radius, xo.Cos(angle)), dtype)
