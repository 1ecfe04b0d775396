"""Differentiation rules for HLO opcodes: one `Rule` per opcode, JVP and VJP side by side.

A rule sees the instruction being differentiated, its primal operand values (`args`, XlaOps of
the current trace), its primal result `out`, and either the operand tangents (`jvp`: returns
the result tangent) or the result cotangent (`vjp`: returns one cotangent per operand). None is
a symbolic zero in both directions. Elementwise ops declare their partial derivatives once
(`elementwise`) and get both directions from them. Control flow lives in ad_control.py, and
autodiff.py joins both tables into `RULES`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import numpy as mnp
from ..ir import Shape, Window, WindowDim, parse_dim_labels
from . import ad_emit as E
from .ad_emit import T, emit
from .tracing import emit_like


@dataclass(frozen=True)
class Rule:
    jvp: Callable | None = None        # (instr, args, out, tangents) -> tangent | None
    vjp: Callable | None = None        # (instr, args, out, ct, residual) -> [ct | None]
    forward: Callable | None = None    # (instr, args) -> (out, residual), for residuals
    jvp_full: Callable | None = None   # (instr, args, tangents) -> (out, tangent)
    nondiff: bool = False              # the result has no tangent (ints, preds, constants)


NONDIFF = Rule(nondiff=True)


def linear(instr, args, tangents, positions):
    """The op itself applied to tangents in `positions` (other operands kept as primals)."""
    if all(tangents[i] is None for i in positions):
        return None
    ops = [(tangents[i] if tangents[i] is not None else E.zeros(a.shape))
           if i in positions else a for i, a in enumerate(args)]
    return emit_like(instr, ops)


# -- elementwise ----------------------------------------------------------------------------
def _scale(value, partial):
    """value * partial, where the partial may be the Python number 1 or -1."""
    if isinstance(partial, (int, float)) and partial in (1, -1):
        return value if partial == 1 else emit("negate", [value])
    return (T(value) * partial).op


def elementwise(partials) -> Rule:
    """A rule from `partials(*operands, out) -> [d out / d operand_i]` over Tracers; an entry
    may be 1 or -1 (no multiply) or None (no dependence)."""
    def jvp(instr, args, out, tangents):
        total = None
        for p, t in zip(partials(*map(T, args), T(out)), tangents):
            if p is not None and t is not None:
                total = E.add(total, _scale(t, p))
        return total

    def vjp(instr, args, out, ct, _):
        return [None if p is None else _scale(ct, p) for p in partials(*map(T, args), T(out))]
    return Rule(jvp, vjp)


def _like(x, value):
    return mnp.full_like(x, value)


def _pow_partials(x, y, out):
    safe_x = mnp.where(x == 0, _like(x, 1), x)
    dx = mnp.where(y == 0, _like(x, 0), y * mnp.power(x, y - 1))
    return [dx, out * mnp.log(safe_x)]


def _max_partials(x, y, out, greater=True):
    """Ties split the gradient in half, as JAX does."""
    win = (x > y) if greater else (x < y)
    half = mnp.where(x == y, _like(x, 0.5), _like(x, 0))
    dx = mnp.where(win, _like(x, 1), half)
    return [dx, 1 - dx]


def _clamp_partials(lo, x, hi, out):
    zero, one = _like(x, 0), _like(x, 1)
    d_lo = mnp.where((lo > x) & (lo < hi), one, zero)
    d_x = mnp.where((x > lo) & (x < hi), one, zero)
    d_hi = mnp.where(hi < x, one, zero)
    return [d_lo, d_x, d_hi]


def _rem_partials(x, y, out):
    quotient = x / y
    return [1, -(mnp.sign(quotient) * mnp.floor(mnp.abs(quotient)))]


_SQRT_PI = math.sqrt(math.pi)

ELEMENTWISE = {
    "add": lambda x, y, out: [1, 1],
    "subtract": lambda x, y, out: [1, -1],
    "multiply": lambda x, y, out: [y, x],
    "divide": lambda x, y, out: [1 / y, -out / y],
    "negate": lambda x, out: [-1],
    "exponential": lambda x, out: [out],
    "exponential-minus-one": lambda x, out: [out + 1],
    "log": lambda x, out: [1 / x],
    "log-plus-one": lambda x, out: [1 / (x + 1)],
    "tanh": lambda x, out: [1 - out * out],
    "logistic": lambda x, out: [out * (1 - out)],
    "sqrt": lambda x, out: [0.5 / out],
    "rsqrt": lambda x, out: [-0.5 * out / x],
    "cbrt": lambda x, out: [out / (3 * x)],
    "power": _pow_partials,
    "sine": lambda x, out: [mnp.cos(x)],
    "cosine": lambda x, out: [-mnp.sin(x)],
    "tan": lambda x, out: [1 + out * out],
    "sinh": lambda x, out: [mnp.cosh(x)],
    "cosh": lambda x, out: [mnp.sinh(x)],
    "asin": lambda x, out: [1 / mnp.sqrt(1 - x * x)],
    "acos": lambda x, out: [-1 / mnp.sqrt(1 - x * x)],
    "atan": lambda x, out: [1 / (1 + x * x)],
    "asinh": lambda x, out: [1 / mnp.sqrt(x * x + 1)],
    "acosh": lambda x, out: [1 / mnp.sqrt(x * x - 1)],
    "atanh": lambda x, out: [1 / (1 - x * x)],
    "atan2": lambda y, x, out: [x / (x * x + y * y), -y / (x * x + y * y)],
    "abs": lambda x, out: [mnp.sign(x)],
    "maximum": _max_partials,
    "minimum": lambda x, y, out: _max_partials(x, y, out, greater=False),
    "remainder": _rem_partials,
    "erf": lambda x, out: [(2 / _SQRT_PI) * mnp.exp(-x * x)],
    "clamp": _clamp_partials,
    "copy": lambda x, out: [1],
    "reduce-precision": lambda x, out: [1],
}

# Piecewise-constant or non-float results: the tangent is zero (JAX gives zeros too).
NONDIFFERENTIABLE = [
    "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even", "is-finite", "compare",
    "not", "and", "or", "xor", "popcnt", "count-leading-zeros", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "mulhi", "iota", "constant", "rng",
    "rng-bit-generator", "parameter", "bitcast-convert", "get-dimension-size", "partition-id",
    "replica-id", "after-all", "stochastic-convert",
]


def _select_vjp(instr, args, out, ct, _):
    pred = args[0]
    zero = E.zeros(ct.shape)
    if pred.rank == 0 and ct.rank:  # HLO's scalar predicate selects whole arrays
        pred = E.broadcast_in_dim(pred, ct.shape.with_dtype("pred"), ())
    return [None, emit("select", [pred, ct, zero]), emit("select", [pred, zero, ct])]


def _convert_vjp(instr, args, out, ct, _):
    return [E.convert(ct, args[0].dtype) if E.is_float(args[0].shape) else None]


# -- data movement --------------------------------------------------------------------------
def _broadcast_vjp(instr, args, out, ct, _):
    dims = tuple(instr.attrs["dimensions"])
    summed = E.reduce_sum(ct, [d for d in range(ct.rank) if d not in dims])
    order = sorted(dims)
    return [E.transpose(summed, [order.index(d) for d in dims])]


def _reshape_vjp(instr, args, out, ct, _):
    return [E.reshape(ct, args[0].dims)]


def _transpose_vjp(instr, args, out, ct, _):
    perm = instr.attrs["dimensions"]
    return [E.transpose(ct, list(np.argsort(perm)))]


def _slice_vjp(instr, args, out, ct, _):
    operand = args[0].shape
    if ct.shape.numel() == 0:
        return [E.zeros(operand)]
    config = []
    for (start, _limit, stride), size, n in zip(instr.attrs["slice"], operand.dims, ct.dims):
        last = start + (n - 1) * stride
        config.append((start, size - last - 1, stride - 1))
    return [emit("pad", [ct, E.scalar(0, ct.dtype)], {"padding": tuple(config)})]


def _pad_vjp(instr, args, out, ct, _):
    config = instr.attrs["padding"]
    unpad = tuple((-lo, -hi, 0) for lo, hi, _ in config)
    trimmed = emit("pad", [ct, E.scalar(0, ct.dtype)], {"padding": unpad})
    spec = tuple((0, d, interior + 1) for d, (_, _, interior) in zip(trimmed.dims, config))
    operand_ct = emit("slice", [trimmed], {"slice": spec})
    total = E.reduce_sum(ct, range(ct.rank))
    inner = E.reduce_sum(operand_ct, range(operand_ct.rank))
    return [operand_ct, emit("subtract", [total, inner])]


def _concatenate_vjp(instr, args, out, ct, _):
    dim = instr.attrs["dimensions"][0]
    cts, start = [], 0
    for a in args:
        spec = tuple((start, start + a.dims[dim], 1) if d == dim else (0, n, 1)
                     for d, n in enumerate(ct.dims))
        cts.append(emit("slice", [ct], {"slice": spec}))
        start += a.dims[dim]
    return cts


def _reverse_vjp(instr, args, out, ct, _):
    return [emit("reverse", [ct], dict(instr.attrs))]


def _dynamic_slice_vjp(instr, args, out, ct, _):
    starts = args[1:]
    ct_operand = emit("dynamic-update-slice", [E.zeros(args[0].shape), ct, *starts])
    return [ct_operand] + [None] * len(starts)


def _dynamic_update_slice_vjp(instr, args, out, ct, _):
    update, starts = args[1], args[2:]
    ct_operand = emit("dynamic-update-slice", [ct, E.zeros(update.shape), *starts])
    ct_update = emit("dynamic-slice", [ct, *starts], {"dynamic_slice_sizes": update.dims})
    return [ct_operand, ct_update] + [None] * len(starts)


# -- reductions -----------------------------------------------------------------------------
def reducer_kind(comp) -> str | None:
    """add / maximum / minimum / multiply for a scalar binary reducer; "replace" for a
    scatter combiner that returns its update; None otherwise."""
    root = comp.root
    if root.opcode == "parameter" and root.attrs.get("parameter_number",
                                                     root.parameter_number) == 1:
        return "replace"
    if root.opcode in ("add", "maximum", "minimum", "multiply", "or", "and") and \
            all(o.opcode == "parameter" for o in root.operands) and len(comp.parameters) == 2:
        return root.opcode
    return None


def _reduce_kind(instr) -> str:
    from .autodiff import ad_error
    kind = reducer_kind(instr.attrs["to_apply"])
    if len(instr.operands) != 2 or kind not in ("add", "maximum", "minimum", "multiply"):
        raise ad_error(instr, "only sum, product, max and min reductions of one operand are "
                              "differentiable")
    return kind


def _kept(instr, rank: int) -> list[int]:
    return [d for d in range(rank) if d not in instr.attrs["dimensions"]]


def _extreme_mask(instr, args, out):
    """(mask of the elements equal to the reduced max/min, how many tie per result)."""
    x = args[0]
    wide = E.broadcast_in_dim(out, x.shape, _kept(instr, x.rank))
    mask = E.convert(emit("compare", [x, wide], {"direction": "EQ"}), x.dtype)
    return mask, E.reduce_sum(mask, instr.attrs["dimensions"])


def _product_of_others(instr, x):
    """For each element of x, the product of the other elements it is reduced with (exact
    when some are zero, unlike out / x): exclusive products from both ends."""
    from ..frontend.numpy_reduce import cumprod
    from ..frontend.numpy_shape import concatenate, flip
    dims = list(instr.attrs["dimensions"])
    kept = _kept(instr, x.rank)
    moved = E.transpose(x, kept + dims)
    n = int(np.prod([x.dims[d] for d in dims], dtype=np.int64))
    rows = T(E.reshape(moved, [x.dims[d] for d in kept] + [n]))
    ones = mnp.ones_like(rows[..., :1])

    def exclusive(values):
        return concatenate([ones, cumprod(values, axis=-1)[..., :-1]], axis=-1)
    others = exclusive(rows) * flip(exclusive(flip(rows, -1)), -1)
    back = E.reshape(others.op, moved.dims)
    return E.transpose(back, list(np.argsort(kept + dims)))


def _reduce_vjp(instr, args, out, ct, _):
    kind = _reduce_kind(instr)
    x = args[0]
    kept = _kept(instr, x.rank)
    if kind == "add":
        return [E.broadcast_in_dim(ct, x.shape, kept), E.reduce_sum(ct, range(ct.rank))]
    if kind == "multiply":
        wide = E.broadcast_in_dim(ct, x.shape, kept)
        return [emit("multiply", [wide, _product_of_others(instr, x)]), None]
    mask, count = _extreme_mask(instr, args, out)
    share = E.broadcast_in_dim(emit("divide", [ct, count]), x.shape, kept)
    return [emit("multiply", [share, mask]), None]


def _reduce_jvp(instr, args, out, tangents):
    kind = _reduce_kind(instr)
    tx = tangents[0]
    if tx is None:
        return None
    if kind == "add":
        return E.reduce_sum(tx, instr.attrs["dimensions"])
    if kind == "multiply":
        weighted = emit("multiply", [tx, _product_of_others(instr, args[0])])
        return E.reduce_sum(weighted, instr.attrs["dimensions"])
    mask, count = _extreme_mask(instr, args, out)
    summed = E.reduce_sum(emit("multiply", [tx, mask]), instr.attrs["dimensions"])
    return emit("divide", [summed, count])


# -- dot and convolution --------------------------------------------------------------------
def _dims(instr, side: str):
    a = instr.attrs
    return tuple(a[f"{side}_contracting_dims"]), tuple(a[f"{side}_batch_dims"])


def _dot(lhs, rhs, lc, rc, lb, rb):
    """dot_general with operands transposed into the canonical [batch, free, contracting] x
    [batch, contracting, free] form, which backends run fastest; the result is the same."""
    lc, rc, lb, rb = (list(dims) for dims in (lc, rc, lb, rb))
    l_free = [d for d in range(lhs.rank) if d not in lc + lb]
    r_free = [d for d in range(rhs.rank) if d not in rc + rb]
    lhs = E.transpose(lhs, lb + l_free + lc)
    rhs = E.transpose(rhs, rb + rc + r_free)
    nb, nc = len(lb), len(lc)
    attrs = {"lhs_batch_dims": tuple(range(nb)), "rhs_batch_dims": tuple(range(nb)),
             "lhs_contracting_dims": tuple(range(lhs.rank - nc, lhs.rank)),
             "rhs_contracting_dims": tuple(range(nb, nb + nc))}
    return emit("dot", [lhs, rhs], attrs)


def _dot_transpose(ct, y, x_rank, x_contract, x_batch, y_contract, y_batch, swap):
    """Cotangent of the dot operand x given the other operand y (JAX's dot transpose): a dot
    of the cotangent with y over y's free dims, then x's dim order."""
    x_kept = [d for d in range(x_rank) if d not in x_contract + x_batch]
    y_kept = [d for d in range(y.rank) if d not in y_contract + y_batch]
    nb = len(x_batch)
    if swap:
        ans_y = list(range(nb, nb + len(y_kept)))
    else:
        ans_y = list(range(nb + len(x_kept), nb + len(x_kept) + len(y_kept)))
    x_contract_by_y = [x_contract[i] for i in np.argsort(y_contract)]
    # dot(y, ct) yields x's dims as batch, contracting, kept: no transpose when that is x's
    # own order (the weight gradient x^T ct of a matmul)
    if list(x_batch) + x_contract_by_y + x_kept == list(range(x_rank)):
        return _dot(y, ct, y_kept, ans_y, y_batch, list(range(nb)))
    product = _dot(ct, y, ans_y, y_kept, list(range(nb)), y_batch)
    return E.transpose(product, list(np.argsort(list(x_batch) + x_kept + x_contract_by_y)))


def _dot_vjp(instr, args, out, ct, _):
    lhs, rhs = args
    (lc, lb), (rc, rb) = _dims(instr, "lhs"), _dims(instr, "rhs")
    ct = E.convert(ct, lhs.dtype) if lhs.dtype == rhs.dtype else ct
    ct_lhs = _dot_transpose(ct, rhs, lhs.rank, lc, lb, rc, rb, swap=False)
    ct_rhs = _dot_transpose(ct, lhs, rhs.rank, rc, rb, lc, lb, swap=True)
    return [ct_lhs, ct_rhs]


def _bilinear_jvp(instr, args, out, tangents):
    terms = [linear(instr, args, [t if i == k else None for i, t in enumerate(tangents)], [k])
             for k in range(2)]
    return E.add(*terms)


def _labels(rank: int, first: int, second: int, spatial, letters: str) -> str:
    chars = [""] * rank
    chars[first], chars[second] = letters[0], letters[1]
    for k, d in enumerate(spatial):
        chars[d] = str(k)
    return "".join(chars)


def _dilate(size: int, factor: int) -> int:
    return 0 if size == 0 else 1 + factor * (size - 1)


def _conv_window(sizes, strides, padding, lhs_dil, rhs_dil) -> Window:
    return Window(tuple(WindowDim(s, st, lo, hi, ld, rd) for s, st, (lo, hi), ld, rd
                        in zip(sizes, strides, padding, lhs_dil, rhs_dil)))


def _conv_vjp(instr, args, out, ct, _):
    from .autodiff import ad_error
    lhs, rhs = args
    dims = parse_dim_labels(instr.attrs["dim_labels"])
    groups = instr.attrs.get("feature_group_count", 1)
    if instr.attrs.get("batch_group_count", 1) != 1:
        raise ad_error(instr, "convolution with batch_group_count > 1 is not differentiable")
    win = instr.attrs["window"].dims
    if any(w.reversal for w in win):
        raise ad_error(instr, "convolution with window reversal is not differentiable")
    strides, lhs_dil, rhs_dil = ([getattr(w, f) for w in win]
                                 for f in ("stride", "lhs_dilation", "rhs_dilation"))
    pads = [(w.padding_low, w.padding_high) for w in win]
    in_sp = [lhs.dims[d] for d in dims.input_spatial]
    k_sp = [rhs.dims[d] for d in dims.kernel_spatial]
    out_sp = [ct.dims[d] for d in dims.output_spatial]
    lhs_d = [_dilate(n, f) for n, f in zip(in_sp, lhs_dil)]
    k_d = [_dilate(n, f) for n, f in zip(k_sp, rhs_dil)]
    out_d = [_dilate(n, f) for n, f in zip(out_sp, strides)]
    out_labels = _labels(ct.rank, dims.output_batch, dims.output_feature, dims.output_spatial,
                         "bf")
    in_labels = _labels(lhs.rank, dims.input_batch, dims.input_feature, dims.input_spatial,
                        "bf")
    # lhs: convolve the cotangent with the spatially reversed kernel, in/out features swapped
    kernel = rhs
    o_dim, i_dim = dims.kernel_output_feature, dims.kernel_input_feature
    if groups > 1:
        kernel = _groups_into_input_feature(kernel, o_dim, i_dim, groups)
    kernel = emit("reverse", [kernel], {"dimensions": tuple(dims.kernel_spatial)})
    k_labels = _labels(rhs.rank, i_dim, o_dim, dims.kernel_spatial, "oi")
    pad_lo = [kd - lo - 1 for kd, (lo, _) in zip(k_d, pads)]
    pad_hi = [ld + kd - 1 - od - pl for ld, kd, od, pl in zip(lhs_d, k_d, out_d, pad_lo)]
    attrs = {"window": _conv_window(k_sp, lhs_dil, list(zip(pad_lo, pad_hi)), strides, rhs_dil),
             "dim_labels": f"{out_labels}_{k_labels}->{in_labels}",
             "feature_group_count": groups, "batch_group_count": 1}
    ct_lhs = emit("convolution", [ct, kernel], attrs)
    # rhs: convolve the input with the cotangent as the kernel (batch becomes the feature)
    r_pad_hi = [od - ld + kd - lo - 1 for od, ld, kd, (lo, _) in zip(out_d, lhs_d, k_d, pads)]
    lhs_t = _labels(lhs.rank, dims.input_feature, dims.input_batch, dims.input_spatial, "bf")
    ct_t = _labels(ct.rank, dims.output_feature, dims.output_batch, dims.output_spatial, "oi")
    rhs_t = _labels(rhs.rank, i_dim, o_dim, dims.kernel_spatial, "bf")
    attrs = {"window": _conv_window(out_sp, rhs_dil, [(lo, hi) for (lo, _), hi
                                                      in zip(pads, r_pad_hi)], lhs_dil, strides),
             "dim_labels": f"{lhs_t}_{ct_t}->{rhs_t}",
             "feature_group_count": 1, "batch_group_count": groups}
    ct_rhs = emit("convolution", [lhs, ct], attrs)
    return [ct_lhs, ct_rhs]


def _groups_into_input_feature(kernel, o_dim: int, i_dim: int, groups: int):
    """Kernel [.., O, .., I, ..] -> [.., O/G, .., G*I, ..]: the feature groups move from the
    output features into the input features, for the transposed convolution."""
    dims = list(kernel.dims)
    split = dims[:o_dim] + [groups, dims[o_dim] // groups] + dims[o_dim + 1:]
    kernel = E.reshape(kernel, split)
    perm = [d for d in range(len(split)) if d != o_dim]
    perm.insert(i_dim, o_dim)
    moved = E.transpose(kernel, perm)
    merged = [n for d, n in enumerate(split) if d != o_dim]
    merged[i_dim] *= groups
    return E.reshape(moved, merged)


# -- windows --------------------------------------------------------------------------------
def _reduce_window_vjp(instr, args, out, ct, _):
    from .autodiff import ad_error
    kind = reducer_kind(instr.attrs["to_apply"])
    window = instr.attrs["window"]
    if len(args) != 2 or kind not in ("add", "maximum", "minimum"):
        raise ad_error(instr, "only sum, max and min reduce-windows are differentiable")
    x = args[0]
    if kind == "add":
        return [_reduce_window_sum_transpose(ct, x.shape, window), None]
    if any(w.lhs_dilation != 1 or w.rhs_dilation != 1 for w in window.dims):
        raise ad_error(instr, "max/min reduce-window with dilation is not differentiable")
    return [_select_and_scatter_add(x, ct, window, "GE" if kind == "maximum" else "LE"), None]


def _reduce_window_sum_transpose(ct, shape: Shape, window: Window):
    w = window.dims
    lhs_d = [_dilate(n, d.lhs_dilation) for n, d in zip(shape.dims, w)]
    k_d = [_dilate(d.size, d.rhs_dilation) for d in w]
    out_d = [_dilate(n, d.stride) for n, d in zip(ct.dims, w)]
    pad_lo = [kd - d.padding_low - 1 for kd, d in zip(k_d, w)]
    pad_hi = [ld + kd - 1 - od - pl for ld, kd, od, pl in zip(lhs_d, k_d, out_d, pad_lo)]
    padded = emit("pad", [ct, E.scalar(0, ct.dtype)],
                  {"padding": tuple((lo, hi, d.stride - 1)
                                    for lo, hi, d in zip(pad_lo, pad_hi, w))})
    sum_window = Window(tuple(WindowDim(d.size, d.lhs_dilation, 0, 0, 1, d.rhs_dilation)
                              for d in w))
    from ..frontend.tracer import current_builder
    attrs = {"window": sum_window, "to_apply": current_builder().reducer("add", ct.dtype)}
    return emit("reduce-window", [padded, E.scalar(0, ct.dtype)], attrs)


def _select_and_scatter_add(x, source, window: Window, direction: str):
    from ..frontend.tracer import current_builder
    builder = current_builder()
    element = Shape.array(x.dtype, ())
    select = builder._root().computation(
        lambda a, b: a.builder.emit("compare", [a, b], {"direction": direction}),
        [element, element], "select")
    attrs = {"window": Window(tuple(WindowDim(d.size, d.stride, d.padding_low, d.padding_high)
                                    for d in window.dims)),
             "select": select, "scatter": builder.reducer("add", x.dtype)}
    return emit("select-and-scatter", [x, source, E.scalar(0, x.dtype)], attrs)


def _chosen_tangent(x, tangent, init, window: Window, direction: str):
    """For each window, the tangent of the element max (GE) or min (LE) picks: a reduce-window
    over (x, tangent) pairs."""
    from ..frontend.tracer import current_builder
    element = Shape.array(x.dtype, ())

    def choose(acc, acc_t, value, value_t):
        b = acc.builder
        pick = b.emit("compare", [acc, value], {"direction": direction})
        return (b.emit("select", [pick, acc, value]), b.emit("select", [pick, acc_t, value_t]))
    reducer = current_builder()._root().computation(choose, [element] * 4, "choose_tangent")
    both = emit("reduce-window", [x, tangent, init, E.scalar(0, x.dtype)],
                {"window": window, "to_apply": reducer})
    return emit("get-tuple-element", [both], {"index": 1})


def _reduce_window_jvp(instr, args, out, tangents):
    from .autodiff import ad_error
    kind = reducer_kind(instr.attrs["to_apply"])
    if len(args) != 2 or kind not in ("add", "maximum", "minimum"):
        raise ad_error(instr, "only sum, max and min reduce-windows are differentiable")
    if kind == "add":
        return linear(instr, args, tangents, [0])
    if tangents[0] is None:
        return None
    return _chosen_tangent(args[0], tangents[0], args[1], instr.attrs["window"],
                           "GE" if kind == "maximum" else "LE")


def _select_and_scatter_vjp(instr, args, out, ct, _):
    """The source's cotangent is the output cotangent at each window's selected element (the
    operand's is zero: selection is piecewise constant)."""
    from .autodiff import ad_error
    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    direction = select.root.attrs.get("direction") if select.root.opcode == "compare" else None
    if direction not in ("GE", "LE", "GT", "LT") or reducer_kind(scatter) != "add":
        raise ad_error(instr, "only select-and-scatter with a comparison select and an add "
                              "scatter (a max-pool gradient) is differentiable")
    x = args[0]
    init = E.scalar(-np.inf if direction in ("GE", "GT") else np.inf, x.dtype)
    return [None, _chosen_tangent(x, ct, init, instr.attrs["window"], direction), None]


# -- gather and scatter ---------------------------------------------------------------------
def _gather_vjp(instr, args, out, ct, _):
    from ..frontend.tracer import current_builder
    operand, indices = args
    a = instr.attrs
    attrs = {"update_window_dims": tuple(a["offset_dims"]),
             "inserted_window_dims": tuple(a["collapsed_slice_dims"]),
             "scatter_dims_to_operand_dims": tuple(a["start_index_map"]),
             "input_batching_dims": tuple(a.get("operand_batching_dims", ())),
             "scatter_indices_batching_dims": tuple(a.get("start_indices_batching_dims", ())),
             "index_vector_dim": a["index_vector_dim"],
             "indices_are_sorted": a.get("indices_are_sorted", False), "unique_indices": False,
             "to_apply": current_builder().reducer("add", ct.dtype)}
    return [emit("scatter", [E.zeros(operand.shape), indices, ct], attrs), None]


def _scatter_kind(instr) -> str:
    from .autodiff import ad_error
    kind = reducer_kind(instr.attrs["to_apply"])
    if len(instr.operands) != 3 or kind not in ("add", "replace"):
        raise ad_error(instr, "only scatter-add and scatter (set) of one operand are "
                              "differentiable")
    return kind


def _scatter_vjp(instr, args, out, ct, _):
    kind = _scatter_kind(instr)
    operand, indices, updates = args
    a = instr.attrs
    skip = set(a["inserted_window_dims"]) | set(a.get("input_batching_dims", ()))
    window = iter(a["update_window_dims"])
    sizes = tuple(1 if d in skip else updates.dims[next(window)] for d in range(operand.rank))
    attrs = {"offset_dims": tuple(a["update_window_dims"]),
             "collapsed_slice_dims": tuple(a["inserted_window_dims"]),
             "start_index_map": tuple(a["scatter_dims_to_operand_dims"]),
             "operand_batching_dims": tuple(a.get("input_batching_dims", ())),
             "start_indices_batching_dims": tuple(a.get("scatter_indices_batching_dims", ())),
             "index_vector_dim": a["index_vector_dim"], "slice_sizes": sizes,
             "indices_are_sorted": a.get("indices_are_sorted", False)}
    ct_updates = emit("gather", [ct, indices], attrs)
    ct_operand = ct
    if kind == "replace":  # overwritten elements get nothing
        ct_operand = emit_like(instr, [ct, indices, E.zeros(updates.shape)])
    return [ct_operand, None, ct_updates]


def _scatter_jvp(instr, args, out, tangents):
    _scatter_kind(instr)
    return linear(instr, args, tangents, [0, 2])


# -- sort: through the permutation, found by sorting an iota alongside ----------------------
def _sort_forward(instr, args):
    from ..frontend.tracer import current_builder
    builder = current_builder()
    dim = instr.attrs["dimensions"][0]
    perm_in = E.iota(Shape.array("s32", args[0].dims), dim)
    old = instr.attrs["to_apply"]
    scalars = [p.shape for p in sorted(old.parameters, key=lambda p: p.parameter_number)]
    s32 = Shape.array("s32", ())
    comparator = builder._root().computation(
        lambda *params: inline(old, list(params[:-2])), scalars + [s32, s32], "compare")
    attrs = dict(instr.attrs, to_apply=comparator)
    both = emit("sort", list(args) + [perm_in], attrs)
    outs = [emit("get-tuple-element", [both], {"index": k}) for k in range(len(args) + 1)]
    value = outs[0] if len(args) == 1 else outs[:-1]
    return value, outs[-1]


def _inverse_permutation(perm, dim: int):
    from ..frontend.tracer import current_builder
    s32 = Shape.array("s32", ())
    less = current_builder()._root().computation(
        lambda a, b, c, d: a.builder.emit("compare", [a, b], {"direction": "LT"}),
        [s32] * 4, "compare")
    both = emit("sort", [perm, E.iota(perm.shape, dim)], {"dimensions": (dim,),
                                                         "to_apply": less})
    return emit("get-tuple-element", [both], {"index": 1})


def _sort_vjp(instr, args, out, ct, perm):
    dim = instr.attrs["dimensions"][0]
    cts = ct if isinstance(ct, list) else [ct]
    inverse = _inverse_permutation(perm, dim)
    return [None if c is None else E.take_along(c, inverse, dim) for c in cts]


def _sort_jvp_full(instr, args, tangents):
    value, perm = _sort_forward(instr, args)
    dim = instr.attrs["dimensions"][0]
    outs = [None if t is None else E.take_along(t, perm, dim) for t in tangents]
    return value, (outs[0] if len(args) == 1 else outs)


def inline(comp, params: list):
    """Emits `comp` (parameters numbered 0..n-1) on `params`, into the builder of `params`."""
    builder = params[0].builder
    values: dict[int, object] = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            values[id(instr)] = params[instr.parameter_number]
        elif instr.opcode == "constant":
            values[id(instr)] = builder.emit("constant", shape=instr.shape,
                                             literal=instr.literal, name="constant")
        else:
            values[id(instr)] = builder.emit(instr.opcode, [values[id(o)] for o in
                                                            instr.operands],
                                             dict(instr.attrs), shape=instr.shape)
    return values[id(comp.root)]


# -- tuples ---------------------------------------------------------------------------------
def _identity_vjp(instr, args, out, ct, _):
    return [ct]


def _identity_jvp(instr, args, out, tangents):
    return tangents[0]


def _select_and_scatter_jvp(instr, args, out, tangents):
    return linear(instr, args, tangents, [1])


def _linear_rule(positions, vjp) -> Rule:
    return Rule(lambda instr, args, out, tangents: linear(instr, args, tangents, positions), vjp)


RULES: dict[str, Rule] = {
    "add-dependency": Rule(lambda instr, args, out, ts: ts[0],
                           lambda instr, args, out, ct, _: [ct, None]),
    "domain": Rule(_identity_jvp, _identity_vjp),
    **{opcode: elementwise(partials) for opcode, partials in ELEMENTWISE.items()},
    **{opcode: NONDIFF for opcode in NONDIFFERENTIABLE},
    "select": _linear_rule([1, 2], _select_vjp),
    "convert": _linear_rule([0], _convert_vjp),
    "broadcast": _linear_rule([0], _broadcast_vjp),
    "reshape": _linear_rule([0], _reshape_vjp),
    "bitcast": _linear_rule([0], _reshape_vjp),
    "transpose": _linear_rule([0], _transpose_vjp),
    "slice": _linear_rule([0], _slice_vjp),
    "pad": _linear_rule([0, 1], _pad_vjp),
    "concatenate": Rule(lambda instr, args, out, ts: linear(instr, args, ts,
                                                           list(range(len(args)))),
                        _concatenate_vjp),
    "reverse": _linear_rule([0], _reverse_vjp),
    "dynamic-slice": _linear_rule([0], _dynamic_slice_vjp),
    "dynamic-update-slice": _linear_rule([0, 1], _dynamic_update_slice_vjp),
    "reduce": Rule(_reduce_jvp, _reduce_vjp),
    "dot": Rule(_bilinear_jvp, _dot_vjp),
    "convolution": Rule(_bilinear_jvp, _conv_vjp),
    "reduce-window": Rule(_reduce_window_jvp, _reduce_window_vjp),
    "select-and-scatter": Rule(_select_and_scatter_jvp, _select_and_scatter_vjp),
    "gather": _linear_rule([0], _gather_vjp),
    "scatter": Rule(_scatter_jvp, _scatter_vjp),
    "sort": Rule(None, _sort_vjp, forward=_sort_forward, jvp_full=_sort_jvp_full),
}
