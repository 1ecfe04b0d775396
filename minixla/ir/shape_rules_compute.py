"""Shape rules of reductions, windows, sorting, contractions and other compute ops.

Window arithmetic follows XLA's: a dim of size n dilated by d spans (n-1)*d+1 elements (0 if
n == 0), and a window of span w over a padded span p with stride s has (p-w)//s+1 positions
(0 if w > p).
"""

from __future__ import annotations

from .attrs import Window, parse_dim_labels, parse_sparsity_config
from .shape_rules_base import (
    array,
    check_reducer,
    check_signature,
    declared,
    dim_list,
    fail,
    fmt,
    one_dim,
    operand_array,
    operand_arrays,
    same_dims_all,
    scalar_of,
)
from .shapes import Shape


def _dilated(size: int, dilation: int) -> int:
    return 0 if size == 0 else (size - 1) * dilation + 1


def _window_dims(instr, window: Window, dims) -> list[int]:
    if len(window.dims) != len(dims):
        raise fail(instr, f"window has {len(window.dims)} dims, the input has {len(dims)}")
    out = []
    for i, (w, size) in enumerate(zip(window.dims, dims)):
        if min(w.size, w.stride, w.lhs_dilation, w.rhs_dilation) < 1:
            raise fail(instr, f"window dim {i} needs positive size, stride and dilations")
        padded = w.padding_low + _dilated(size, w.lhs_dilation) + w.padding_high
        span = _dilated(w.size, w.rhs_dilation)
        out.append(0 if span > padded else (padded - span) // w.stride + 1)
    return out


def _inputs_and_inits(instr) -> tuple[list[Shape], list[Shape]]:
    """Variadic reductions take N inputs followed by N scalar initial values."""
    if instr.operand_count < 2 or instr.operand_count % 2:
        raise fail(
            instr, f"needs N inputs and N initial values, got {instr.operand_count} operands"
        )
    n = instr.operand_count // 2
    inputs = operand_arrays(instr, range(n))
    inits = [scalar_of(instr, i, " (an initial value)") for i in range(n, 2 * n)]
    same_dims_all(instr, inputs, "inputs")
    return inputs, inits


def _results(instr, shapes: list[Shape]) -> Shape:
    """One array, or a tuple when there are several or the reducer returns a tuple (XLA:
    a reducer returning `(f32[])` makes a reduce of one input return a 1-tuple)."""
    tupled = len(shapes) > 1 or instr.attrs["to_apply"].root.shape.is_tuple
    return Shape.tuple_of(shapes) if tupled else shapes[0]


def reduce(instr, mixed: bool = False) -> Shape:
    inputs, inits = _inputs_and_inits(instr)
    reduced = dim_list(instr, "dimensions", inputs[0].rank)
    types = _reducer_types(instr, inputs, inits, mixed)
    dims = [d for i, d in enumerate(inputs[0].dims) if i not in reduced]
    return _results(instr, [array(t, dims) for t in types])


def reduce_window(instr, mixed: bool = False) -> Shape:
    inputs, inits = _inputs_and_inits(instr)
    dims = _window_dims(instr, instr.attrs["window"], inputs[0].dims)
    types = _reducer_types(instr, inputs, inits, mixed)
    return _results(instr, [array(t, dims) for t in types])


def _reducer_types(instr, inputs, inits, mixed: bool) -> list:
    """The result element types: the initial values' (with `mixed`, XLA's: the reducer's
    accumulators, which may be floats of other widths than the operands)."""
    check_reducer(
        instr,
        "to_apply",
        [s.element_type for s in inits],
        [s.element_type for s in inputs],
        ignore_fp_precision=mixed,
    )
    if not mixed:
        return [s.element_type for s in inits]
    return [s.element_type for s in instr.attrs["to_apply"].parameter_shapes[: len(inits)]]


def select_and_scatter(instr) -> Shape:
    operand, source = operand_arrays(instr, (0, 1))
    init = scalar_of(instr, 2, " (the initial value)")
    windows = _window_dims(instr, instr.attrs["window"], operand.dims)
    if list(source.dims) != windows:
        raise fail(instr, f"source {fmt(source)} must have the window output dims {windows}")
    element = array(operand.element_type, ())
    check_signature(instr, "select", [element, element], array("pred", ()))
    check_reducer(
        instr, "scatter", [init.element_type], [source.element_type], ignore_fp_precision=True
    )
    return operand.without_layout()


def sort(instr) -> Shape:
    shapes = operand_arrays(instr)
    if not shapes:
        raise fail(instr, "needs at least one operand")
    same_dims_all(instr, shapes)
    one_dim(instr, shapes[0].rank)
    params = [array(s.element_type, ()) for s in shapes for _ in range(2)]
    check_signature(instr, "to_apply", params, array("pred", ()))
    results = [s.without_layout() for s in shapes]
    return results[0] if len(results) == 1 else Shape.tuple_of(results)


def topk(instr) -> Shape:
    operand = operand_array(instr, 0)
    k = instr.attrs["k"]
    if not operand.rank or not 0 <= k <= operand.dims[-1]:
        raise fail(instr, f"k={k} must be within the last dim of {fmt(operand)}")
    dims = operand.dims[:-1] + (k,)
    return Shape.tuple_of([array(operand.element_type, dims), array("s32", dims)])


def _contraction_type(instr, lhs: Shape, rhs: Shape):
    """A declared result type wins (XLA's preferred_element_type); otherwise the operands'
    common type, or the more precise of two mixed ones."""
    target = declared(instr)
    if target is not None:
        if not target.is_array:
            raise fail(instr, f"result must be an array, got {fmt(target)}")
        return target.element_type
    a, b = lhs.element_type, rhs.element_type
    if a == b:
        return a
    return max((a, b), key=lambda t: (t.is_complex, t.is_float, t.bits))


def dot(instr) -> Shape:
    """Result dims: batch dims, then lhs free dims, then rhs free dims."""
    lhs, rhs = operand_arrays(instr, (0, 1))
    lb = dim_list(instr, "lhs_batch_dims", lhs.rank, default=())
    rb = dim_list(instr, "rhs_batch_dims", rhs.rank, default=())
    lc = dim_list(instr, "lhs_contracting_dims", lhs.rank, default=())
    rc = dim_list(instr, "rhs_contracting_dims", rhs.rank, default=())
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise fail(instr, "lhs and rhs must have as many batch dims and contracting dims")
    if set(lb) & set(lc) or set(rb) & set(rc):
        raise fail(instr, "a dim cannot be both a batch and a contracting dim")
    for kind, pairs in (("batch", zip(lb, rb)), ("contracting", zip(lc, rc))):
        for a, b in pairs:
            if lhs.dims[a] != rhs.dims[b]:
                raise fail(
                    instr,
                    f"{kind} dims differ: lhs dim {a} is {lhs.dims[a]}, rhs dim "
                    f"{b} is {rhs.dims[b]}",
                )
    dims = [lhs.dims[d] for d in lb]
    dims += [s for i, s in enumerate(lhs.dims) if i not in lb + lc]
    dims += [s for i, s in enumerate(rhs.dims) if i not in rb + rc]
    return array(_contraction_type(instr, lhs, rhs), dims)


def scaled_dot(instr) -> Shape:
    """dot(lhs, rhs) of block-scaled operands: each scale has its operand's rank, and each of
    its dims divides the operand's (a scale element covers one block)."""
    if instr.operand_count != 4:
        raise fail(instr, "scaled-dot takes lhs, rhs, lhs_scale and rhs_scale")
    for side, operand, scale in (("lhs", 0, 2), ("rhs", 1, 3)):
        values, scales = operand_arrays(instr, (operand, scale))
        if scales.rank != values.rank or any(
            s < 1 or v % s for v, s in zip(values.dims, scales.dims)
        ):
            raise fail(
                instr,
                f"{side}_scale {fmt(scales)} must have {fmt(values)}'s rank and "
                f"dims that divide its dims",
            )
    return dot(instr)


def _sparse_operands(instr, lhs: Shape, rhs: Shape) -> tuple[Shape, Shape]:
    """The dense lhs and rhs a structured-sparse convolution stands for: along `dimension`, a
    compressed operand (one with a metadata operand `idx`, after lhs and rhs) stores n of every
    m elements, so its dense size is size * m / n, and its metadata is an integer array of the
    operand's rank. A side without `idx` only describes a dense operand."""
    try:
        sides = parse_sparsity_config(str(instr.attrs["sparsity_config"]))
    except ValueError as exc:
        raise fail(instr, str(exc)) from None
    compressed = [s.idx for s in sides.values() if s.idx is not None]
    if instr.operand_count != 2 + len(compressed):
        raise fail(
            instr,
            f"sparsity_config names {len(compressed)} metadata operand(s), so "
            f"the convolution takes {2 + len(compressed)} operands, got "
            f"{instr.operand_count}",
        )
    if len(set(compressed)) != len(compressed):
        raise fail(instr, "sparsity_config: lhs and rhs name the same metadata operand")
    dense = {"lhs": lhs, "rhs": rhs}
    for side, sp in sides.items():
        shape = dense[side]
        if not 1 <= sp.n < sp.m or sp.stride < 1:
            raise fail(
                instr,
                f"sparsity_config: {side} sparsity={sp.n}x{sp.m} must keep n of "
                f"m elements with 1 <= n < m (stride >= 1)",
            )
        if not 0 <= sp.dimension < shape.rank:
            raise fail(
                instr,
                f"sparsity_config: {side} dimension={sp.dimension} is not a dim of {fmt(shape)}",
            )
        if sp.idx is None:
            continue
        if not 2 <= sp.idx < instr.operand_count:
            raise fail(
                instr,
                f"sparsity_config: {side} idx={sp.idx} must name a metadata "
                f"operand after lhs and rhs",
            )
        meta = operand_array(instr, sp.idx)
        if not meta.element_type.is_integer or meta.rank != shape.rank:
            raise fail(
                instr,
                f"sparsity_config: {side} metadata (operand {sp.idx}) must be an "
                f"integer array of rank {shape.rank}, got {fmt(meta)}",
            )
        stored = shape.dims[sp.dimension]
        if stored * sp.m % sp.n:
            raise fail(
                instr,
                f"sparsity_config: {side} dim {sp.dimension} stores {stored} "
                f"elements, not a whole number of {sp.n}-of-{sp.m} groups",
            )
        dims = list(shape.dims)
        dims[sp.dimension] = stored * sp.m // sp.n
        dense[side] = array(shape.element_type, dims)
    return dense["lhs"], dense["rhs"]


def convolution(instr) -> Shape:
    lhs, rhs = operand_arrays(instr, (0, 1))
    if "sparsity_config" in instr.attrs:  # verified on its dense operands; no backend runs it
        lhs, rhs = _sparse_operands(instr, lhs, rhs)
    elif instr.operand_count != 2:
        raise fail(
            instr,
            f"convolution takes lhs and rhs (metadata operands only with a "
            f"sparsity_config), got {instr.operand_count} operands",
        )
    try:
        dn = parse_dim_labels(instr.attrs["dim_labels"])
    except ValueError as exc:
        raise fail(instr, str(exc)) from None
    spatial = len(dn.input_spatial)
    if lhs.rank != spatial + 2 or rhs.rank != spatial + 2:
        raise fail(
            instr, f"dim_labels need rank-{spatial + 2} operands, got {fmt(lhs)} and {fmt(rhs)}"
        )
    window = instr.attrs.get("window") or Window(())
    features = instr.attrs.get("feature_group_count", 1)
    batches = instr.attrs.get("batch_group_count", 1)
    batch, in_features = lhs.dims[dn.input_batch], lhs.dims[dn.input_feature]
    kernel_in, kernel_out = rhs.dims[dn.kernel_input_feature], rhs.dims[dn.kernel_output_feature]
    if features < 1 or batches < 1 or (features > 1 and batches > 1):
        raise fail(instr, "feature_group_count and batch_group_count must be >= 1, not both > 1")
    if in_features != kernel_in * features or kernel_out % features:
        raise fail(
            instr,
            f"input features ({in_features}) must be kernel input features "
            f"({kernel_in}) x feature_group_count ({features})",
        )
    if batch % batches or kernel_out % batches:
        raise fail(
            instr,
            f"batch_group_count={batches} must divide the batch ({batch}) and "
            f"the output features ({kernel_out})",
        )
    for i, (w, d) in enumerate(zip(window.dims, dn.kernel_spatial)):
        if w.size != rhs.dims[d]:
            raise fail(
                instr,
                f"window size {w.size} of spatial dim {i} differs from the kernel "
                f"size {rhs.dims[d]}",
            )
    outputs = _window_dims(instr, window, [lhs.dims[d] for d in dn.input_spatial])
    dims = [0] * lhs.rank
    dims[dn.output_batch], dims[dn.output_feature] = batch // batches, kernel_out
    for d, size in zip(dn.output_spatial, outputs):
        dims[d] = size
    return array(_contraction_type(instr, lhs, rhs), dims)


def fft(instr) -> Shape:
    operand = operand_array(instr, 0)
    kind, lengths = instr.attrs["fft_type"], tuple(instr.attrs["fft_length"])
    n = len(lengths)
    if not 1 <= n <= 3 or operand.rank < n:
        raise fail(instr, f"fft_length={list(lengths)} needs 1-3 dims within {fmt(operand)}")
    inner, etype = operand.dims[-n:], operand.element_type
    if kind in ("FFT", "IFFT"):  # the operand's shape; fft_length may differ (see below)
        if not etype.is_complex:
            raise fail(instr, f"{kind} needs a complex operand, got {fmt(operand)}")
        return operand.without_layout()
    if kind == "RFFT":
        if etype.name not in ("f32", "f64") or inner != lengths:
            raise fail(instr, f"RFFT needs an f32/f64 operand ending in {list(lengths)}")
        dims = operand.dims[:-1] + (lengths[-1] // 2 + 1,)
        return array("c64" if etype.name == "f32" else "c128", dims)
    if kind == "IRFFT":
        if not etype.is_complex or inner != lengths[:-1] + (lengths[-1] // 2 + 1,):
            raise fail(
                instr,
                f"IRFFT needs a complex operand ending in {list(lengths[:-1])} "
                f"and {lengths[-1] // 2 + 1}",
            )
        dims = operand.dims[:-1] + (lengths[-1],)
        return array("f32" if etype.bits == 64 else "f64", dims)
    raise fail(instr, f"unknown fft_type {kind}")


def triangular_solve(instr) -> Shape:
    a, b = operand_arrays(instr)
    if a.element_type != b.element_type or not (
        a.element_type.is_float or a.element_type.is_complex
    ):
        raise fail(instr, f"a and b must share a float or complex type: {fmt(a)}, {fmt(b)}")
    if a.rank < 2 or a.dims[-1] != a.dims[-2] or b.rank != a.rank or b.dims[:-2] != a.dims[:-2]:
        raise fail(instr, f"a {fmt(a)} must be square matrices batched like b {fmt(b)}")
    solved = b.dims[-2] if instr.attrs.get("left_side") else b.dims[-1]
    if solved != a.dims[-1]:
        raise fail(instr, f"b {fmt(b)} does not match a {fmt(a)} on the solved side")
    return b.without_layout()


def _feature_vectors(instr, indices) -> tuple[Shape, Shape]:
    """Batch norm: the operand and the rank-1 per-feature operands at `indices`."""
    operand = operand_array(instr, 0)
    if not operand.element_type.is_float:
        raise fail(instr, f"needs a floating-point operand, got {fmt(operand)}")
    index = instr.attrs["feature_index"]
    if not 0 <= index < operand.rank:
        raise fail(instr, f"feature_index={index} is out of range for {fmt(operand)}")
    vector = array(operand.element_type, (operand.dims[index],))
    for i in indices:
        shape = operand_array(instr, i)
        if shape.element_type != vector.element_type or shape.dims != vector.dims:
            raise fail(instr, f"operand {i} must be {fmt(vector)}, got {fmt(shape)}")
    return operand.without_layout(), vector


def batch_norm_training(instr) -> Shape:
    operand, vector = _feature_vectors(instr, (1, 2))
    return Shape.tuple_of([operand, vector, vector])


def batch_norm_grad(instr) -> Shape:
    operand, vector = _feature_vectors(instr, (1, 2, 3))
    grad = operand_array(instr, 4)
    if grad.element_type != operand.element_type or grad.dims != operand.dims:
        raise fail(instr, f"grad_output {fmt(grad)} must match the operand {fmt(operand)}")
    return Shape.tuple_of([operand, vector, vector])
