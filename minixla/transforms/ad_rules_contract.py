"""Differentiation rules for contractions, windows, indexing and sorting: dot, convolution,
reduce-window, select-and-scatter, gather, scatter, sort, cholesky, triangular-solve (see
ad_rules.py for the conventions; autodiff.py joins this table with the others)."""

from __future__ import annotations

import numpy as np

from ..ir import Shape, Window, WindowDim, parse_dim_labels
from . import ad_emit as E
from .ad_emit import emit
from .ad_rules import Rule, linear, linear_rule, reducer_kind
from .tracing import emit_like


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
    attrs = {
        "lhs_batch_dims": tuple(range(nb)),
        "rhs_batch_dims": tuple(range(nb)),
        "lhs_contracting_dims": tuple(range(lhs.rank - nc, lhs.rank)),
        "rhs_contracting_dims": tuple(range(nb, nb + nc)),
    }
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
    terms = [
        linear(instr, args, [t if i == k else None for i, t in enumerate(tangents)], [k])
        for k in range(2)
    ]
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
    return Window(
        tuple(
            WindowDim(s, st, lo, hi, ld, rd)
            for s, st, (lo, hi), ld, rd in zip(sizes, strides, padding, lhs_dil, rhs_dil)
        )
    )


class _ConvGeometry:
    """A convolution's dimension numbers and window, with the dilated spatial sizes its two
    transposes need (JAX's conv transposes, written for HLO dim_labels)."""

    def __init__(self, instr, lhs, rhs, ct):
        self.dims = parse_dim_labels(instr.attrs["dim_labels"])
        self.groups = instr.attrs.get("feature_group_count", 1)
        win = instr.attrs["window"].dims
        self.strides, self.lhs_dil, self.rhs_dil = (
            [getattr(w, f) for w in win] for f in ("stride", "lhs_dilation", "rhs_dilation")
        )
        self.pads = [(w.padding_low, w.padding_high) for w in win]
        self.k_sp = [rhs.dims[d] for d in self.dims.kernel_spatial]
        self.out_sp = [ct.dims[d] for d in self.dims.output_spatial]
        in_sp = [lhs.dims[d] for d in self.dims.input_spatial]
        self.lhs_d = [_dilate(n, f) for n, f in zip(in_sp, self.lhs_dil)]
        self.k_d = [_dilate(n, f) for n, f in zip(self.k_sp, self.rhs_dil)]
        self.out_d = [_dilate(n, f) for n, f in zip(self.out_sp, self.strides)]


def _conv_lhs_cotangent(g: _ConvGeometry, lhs, rhs, ct):
    """The cotangent convolved with the spatially reversed kernel, in/out features swapped."""
    d = g.dims
    o_dim, i_dim = d.kernel_output_feature, d.kernel_input_feature
    kernel = rhs if g.groups == 1 else _groups_into_input_feature(rhs, o_dim, i_dim, g.groups)
    kernel = emit("reverse", [kernel], {"dimensions": tuple(d.kernel_spatial)})
    labels = (
        _labels(ct.rank, d.output_batch, d.output_feature, d.output_spatial, "bf")
        + "_"
        + _labels(rhs.rank, i_dim, o_dim, d.kernel_spatial, "oi")
        + "->"
        + _labels(lhs.rank, d.input_batch, d.input_feature, d.input_spatial, "bf")
    )
    pad_lo = [kd - lo - 1 for kd, (lo, _) in zip(g.k_d, g.pads)]
    pad_hi = [ld + kd - 1 - od - pl for ld, kd, od, pl in zip(g.lhs_d, g.k_d, g.out_d, pad_lo)]
    window = _conv_window(g.k_sp, g.lhs_dil, list(zip(pad_lo, pad_hi)), g.strides, g.rhs_dil)
    return emit(
        "convolution",
        [ct, kernel],
        {
            "window": window,
            "dim_labels": labels,
            "feature_group_count": g.groups,
            "batch_group_count": 1,
        },
    )


def _conv_rhs_cotangent(g: _ConvGeometry, lhs, rhs, ct):
    """The input convolved with the cotangent as the kernel: batch becomes the contracted
    feature, and feature groups become batch groups."""
    d = g.dims
    labels = (
        _labels(lhs.rank, d.input_feature, d.input_batch, d.input_spatial, "bf")
        + "_"
        + _labels(ct.rank, d.output_feature, d.output_batch, d.output_spatial, "oi")
        + "->"
        + _labels(rhs.rank, d.kernel_input_feature, d.kernel_output_feature, d.kernel_spatial, "bf")
    )
    pad_hi = [od - ld + kd - lo - 1 for od, ld, kd, (lo, _) in zip(g.out_d, g.lhs_d, g.k_d, g.pads)]
    pads = [(lo, hi) for (lo, _), hi in zip(g.pads, pad_hi)]
    window = _conv_window(g.out_sp, g.rhs_dil, pads, g.lhs_dil, g.strides)
    return emit(
        "convolution",
        [lhs, ct],
        {
            "window": window,
            "dim_labels": labels,
            "feature_group_count": 1,
            "batch_group_count": g.groups,
        },
    )


def _conv_vjp(instr, args, out, ct, _):
    from .autodiff import ad_error

    if instr.attrs.get("batch_group_count", 1) != 1:
        raise ad_error(instr, "convolution with batch_group_count > 1 is not differentiable")
    if any(w.reversal for w in instr.attrs["window"].dims):
        raise ad_error(instr, "convolution with window reversal is not differentiable")
    lhs, rhs = args
    geometry = _ConvGeometry(instr, lhs, rhs, ct)
    return [
        _conv_lhs_cotangent(geometry, lhs, rhs, ct),
        _conv_rhs_cotangent(geometry, lhs, rhs, ct),
    ]


def _groups_into_input_feature(kernel, o_dim: int, i_dim: int, groups: int):
    """Kernel [.., O, .., I, ..] -> [.., O/G, .., G*I, ..]: the feature groups move from the
    output features into the input features, for the transposed convolution."""
    dims = list(kernel.dims)
    split = dims[:o_dim] + [groups, dims[o_dim] // groups] + dims[o_dim + 1 :]
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
    padded = emit(
        "pad",
        [ct, E.scalar(0, ct.dtype)],
        {"padding": tuple((lo, hi, d.stride - 1) for lo, hi, d in zip(pad_lo, pad_hi, w))},
    )
    sum_window = Window(
        tuple(WindowDim(d.size, d.lhs_dilation, 0, 0, 1, d.rhs_dilation) for d in w)
    )
    from ..frontend.tracer import current_builder

    attrs = {"window": sum_window, "to_apply": current_builder().reducer("add", ct.dtype)}
    return emit("reduce-window", [padded, E.scalar(0, ct.dtype)], attrs)


def _select_and_scatter_add(x, source, window: Window, direction: str):
    from ..frontend.tracer import current_builder

    builder = current_builder()
    element = Shape.array(x.dtype, ())
    select = builder._root().computation(
        lambda a, b: a.builder.emit("compare", [a, b], {"direction": direction}),
        [element, element],
        "select",
    )
    attrs = {
        "window": Window(
            tuple(WindowDim(d.size, d.stride, d.padding_low, d.padding_high) for d in window.dims)
        ),
        "select": select,
        "scatter": builder.reducer("add", x.dtype),
    }
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
    both = emit(
        "reduce-window",
        [x, tangent, init, E.scalar(0, x.dtype)],
        {"window": window, "to_apply": reducer},
    )
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
    return _chosen_tangent(
        args[0], tangents[0], args[1], instr.attrs["window"], "GE" if kind == "maximum" else "LE"
    )


def _select_and_scatter_vjp(instr, args, out, ct, _):
    """The source's cotangent is the output cotangent at each window's selected element (the
    operand's is zero: selection is piecewise constant)."""
    from .autodiff import ad_error

    select, scatter = instr.attrs["select"], instr.attrs["scatter"]
    direction = select.root.attrs.get("direction") if select.root.opcode == "compare" else None
    if direction not in ("GE", "LE", "GT", "LT") or reducer_kind(scatter) != "add":
        raise ad_error(
            instr,
            "only select-and-scatter with a comparison select and an add "
            "scatter (a max-pool gradient) is differentiable",
        )
    x = args[0]
    init = E.scalar(-np.inf if direction in ("GE", "GT") else np.inf, x.dtype)
    return [None, _chosen_tangent(x, ct, init, instr.attrs["window"], direction), None]


# -- gather and scatter ---------------------------------------------------------------------
def _gather_vjp(instr, args, out, ct, _):
    from ..frontend.tracer import current_builder

    operand, indices = args
    a = instr.attrs
    attrs = {
        "update_window_dims": tuple(a["offset_dims"]),
        "inserted_window_dims": tuple(a["collapsed_slice_dims"]),
        "scatter_dims_to_operand_dims": tuple(a["start_index_map"]),
        "input_batching_dims": tuple(a.get("operand_batching_dims", ())),
        "scatter_indices_batching_dims": tuple(a.get("start_indices_batching_dims", ())),
        "index_vector_dim": a["index_vector_dim"],
        "indices_are_sorted": a.get("indices_are_sorted", False),
        "unique_indices": False,
        "to_apply": current_builder().reducer("add", ct.dtype),
    }
    return [emit("scatter", [E.zeros(operand.shape), indices, ct], attrs), None]


def _scatter_kind(instr) -> str:
    from .autodiff import ad_error

    kind = reducer_kind(instr.attrs["to_apply"])
    if len(instr.operands) != 3 or kind not in ("add", "replace"):
        raise ad_error(
            instr, "only scatter-add and scatter (set) of one operand are differentiable"
        )
    return kind


def _scatter_vjp(instr, args, out, ct, _):
    kind = _scatter_kind(instr)
    operand, indices, updates = args
    a = instr.attrs
    skip = set(a["inserted_window_dims"]) | set(a.get("input_batching_dims", ()))
    window = iter(a["update_window_dims"])
    sizes = tuple(1 if d in skip else updates.dims[next(window)] for d in range(operand.rank))
    attrs = {
        "offset_dims": tuple(a["update_window_dims"]),
        "collapsed_slice_dims": tuple(a["inserted_window_dims"]),
        "start_index_map": tuple(a["scatter_dims_to_operand_dims"]),
        "operand_batching_dims": tuple(a.get("input_batching_dims", ())),
        "start_indices_batching_dims": tuple(a.get("scatter_indices_batching_dims", ())),
        "index_vector_dim": a["index_vector_dim"],
        "slice_sizes": sizes,
        "indices_are_sorted": a.get("indices_are_sorted", False),
    }
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
        lambda *params: inline(old, list(params[:-2])), scalars + [s32, s32], "compare"
    )
    attrs = dict(instr.attrs, to_apply=comparator)
    both = emit("sort", list(args) + [perm_in], attrs)
    outs = [emit("get-tuple-element", [both], {"index": k}) for k in range(len(args) + 1)]
    value = outs[0] if len(args) == 1 else outs[:-1]
    return value, outs[-1]


def _inverse_permutation(perm, dim: int):
    from ..frontend.tracer import current_builder

    s32 = Shape.array("s32", ())
    less = (
        current_builder()
        ._root()
        .computation(
            lambda a, b, c, d: a.builder.emit("compare", [a, b], {"direction": "LT"}),
            [s32] * 4,
            "compare",
        )
    )
    both = emit("sort", [perm, E.iota(perm.shape, dim)], {"dimensions": (dim,), "to_apply": less})
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
            values[id(instr)] = builder.emit(
                "constant", shape=instr.shape, literal=instr.literal, name="constant"
            )
        else:
            values[id(instr)] = builder.emit(
                instr.opcode,
                [values[id(o)] for o in instr.operands],
                dict(instr.attrs),
                shape=instr.shape,
            )
    return values[id(comp.root)]


def _select_and_scatter_jvp(instr, args, out, tangents):
    return linear(instr, args, tangents, [1])


# -- cholesky and triangular-solve (real operands; JAX's rules) -----------------------------
def _mT(x):
    from .. import numpy as mnp

    return mnp.swapaxes(x, -1, -2)


def _toggled(mode) -> str:
    return "NO_TRANSPOSE" if str(mode) in ("TRANSPOSE", "ADJOINT") else "TRANSPOSE"


def _triangle(instr, a):
    """The part of `a` a triangular solve reads (strictly triangular with a unit diagonal)."""
    from .. import numpy as mnp

    lower, unit = (
        bool(instr.attrs.get("lower", False)),
        bool(instr.attrs.get("unit_diagonal", False)),
    )
    if lower:
        return mnp.tril(a, -1 if unit else 0)
    return mnp.triu(a, 1 if unit else 0)


def _op_a(instr, a):
    return _mT(a) if str(instr.attrs.get("transpose_a", "NO_TRANSPOSE")) != "NO_TRANSPOSE" else a


def _triangular_solve_jvp(instr, args, out, tangents):
    """op(A) X = B (left) or X op(A) = B: dX solves the same system with dB - op(dA) X (or
    dB - X op(dA))."""
    da, db = tangents
    if da is None and db is None:
        return None
    x = E.T(out)
    rhs = E.T(db) if db is not None else None
    if da is not None:
        op_da = _op_a(instr, _triangle(instr, E.T(da)))
        product = op_da @ x if instr.attrs.get("left_side", False) else x @ op_da
        rhs = -product if rhs is None else rhs - product
    return emit("triangular-solve", [args[0], E.op_of(rhs)], dict(instr.attrs))


def _triangular_solve_vjp(instr, args, out, ct, _):
    if ct is None:
        return [None, None]
    attrs = dict(instr.attrs, transpose_a=_toggled(instr.attrs.get("transpose_a")))
    ct_b = E.T(emit("triangular-solve", [args[0], ct], attrs))
    x = E.T(out)
    left = bool(instr.attrs.get("left_side", False))
    ct_op_a = -(ct_b @ _mT(x)) if left else -(_mT(x) @ ct_b)
    ct_a = _triangle(instr, _op_a(instr, ct_op_a))
    return [E.op_of(ct_a), ct_b.op]


def _phi(x):
    """The lower triangle with its diagonal halved."""
    from .. import numpy as mnp

    n = x.shape[-1]
    return mnp.tril(x) * (1 - 0.5 * mnp.eye(n, dtype=x.dtype))


def _lower_factor(instr, out):
    from .. import numpy as mnp

    factor = E.T(out)
    return mnp.tril(factor) if instr.attrs.get("lower", False) else _mT(mnp.triu(factor))


def _cholesky_jvp(instr, args, out, tangents):
    """dL = L phi(L^-1 dA L^-T) (JAX's forward rule, which takes dA as symmetric)."""
    from ..frontend.lax_linalg import triangular_solve

    (da,) = tangents
    if da is None:
        return None
    factor = _lower_factor(instr, out)
    tmp = triangular_solve(factor, E.T(da), left_side=False, lower=True, transpose_a=True)
    inner = triangular_solve(factor, tmp, left_side=True, lower=True)
    dl = factor @ _phi(inner)
    return E.op_of(dl if instr.attrs.get("lower", False) else _mT(dl))


def _cholesky_vjp(instr, args, out, ct, _):
    """The transpose of the JVP: dA_bar = L^-T phi(L^T L_bar) L^-1."""
    from ..frontend.lax_linalg import triangular_solve

    if ct is None:
        return [None]
    factor = _lower_factor(instr, out)
    ct_l = E.T(ct) if instr.attrs.get("lower", False) else _mT(E.T(ct))
    p = _phi(_mT(factor) @ ct_l)
    tmp = triangular_solve(factor, p, left_side=True, lower=True, transpose_a=True)
    return [E.op_of(triangular_solve(factor, tmp, left_side=False, lower=True))]


RULES: dict[str, Rule] = {
    "dot": Rule(_bilinear_jvp, _dot_vjp),
    "convolution": Rule(_bilinear_jvp, _conv_vjp),
    "reduce-window": Rule(_reduce_window_jvp, _reduce_window_vjp),
    "select-and-scatter": Rule(_select_and_scatter_jvp, _select_and_scatter_vjp),
    "gather": linear_rule([0], _gather_vjp),
    "scatter": Rule(_scatter_jvp, _scatter_vjp),
    "sort": Rule(None, _sort_vjp, forward=_sort_forward, jvp_full=_sort_jvp_full),
    "cholesky": Rule(_cholesky_jvp, _cholesky_vjp),
    "triangular-solve": Rule(_triangular_solve_jvp, _triangular_solve_vjp),
}
