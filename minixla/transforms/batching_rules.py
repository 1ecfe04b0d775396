"""Batching rules: how each HLO opcode runs on a batch of values (the table `vmap` reads).

`BATCHING_RULES` maps every supported opcode to its rule, `rule(batching, instr, args)`, which
returns the batched value of `instr` given its operands' values (see batching_values.py). The
elementwise rows come from the opcode table's kind; control flow lives in batching_control.py.
Ops without operands (constant, iota) never depend on a batched input, so they need no row.
Opcodes without a row raise an error naming them.
"""

from __future__ import annotations

import math

from ..frontend.tracer import current_builder
from ..ir import Shape, Window, WindowDim, parse_dim_labels
from ..ir.opcodes import ELEMENTWISE, OPCODES
from . import batching_control as control
from .batching_values import Batching, BatchingError, constant, emit, is_batched
from .tracing import emit_like


# -- rules: elementwise and movement ----------------------------------------------------------
def _elementwise(b: Batching, instr, args):
    ops = [b.full(a, instr.shape.dims) for a in args]
    return emit(instr.opcode, ops, dict(instr.attrs), shape=b.shape(instr.shape)), 0


def _map(b: Batching, instr, args):
    ops = [b.full(a, instr.shape.dims) for a in args]
    attrs = dict(instr.attrs, dimensions=tuple(range(instr.shape.rank + 1)))
    return emit("map", ops, attrs, shape=b.shape(instr.shape)), 0


def _broadcast(b: Batching, instr, args):
    dims = (0,) + tuple(d + 1 for d in instr.attrs.get("dimensions", ()))
    return emit(
        "broadcast", [b.front(args[0])], {"dimensions": dims}, shape=b.shape(instr.shape)
    ), 0


def _reshape(b: Batching, instr, args):
    return emit("reshape", [b.front(args[0])], shape=b.shape(instr.shape)), 0


def _shifted(dims) -> tuple:
    return tuple(d + 1 for d in dims)


def _transpose(b: Batching, instr, args):
    perm = (0,) + _shifted(instr.attrs["dimensions"])
    return emit("transpose", [b.front(args[0])], {"dimensions": perm}), 0


def _slice(b: Batching, instr, args):
    spec = ((0, b.size, 1),) + tuple(instr.attrs["slice"])
    return emit("slice", [b.front(args[0])], {"slice": spec}), 0


def _with_dims(b: Batching, instr, args):
    """reverse: the same op over shifted dimensions."""
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return emit(instr.opcode, [b.front(args[0])], attrs), 0


def _concatenate(b: Batching, instr, args):
    attrs = {"dimensions": _shifted(instr.attrs["dimensions"])}
    return emit("concatenate", [b.batched(a) for a in args], attrs), 0


def _pad(b: Batching, instr, args):
    operand, value = args
    config = ((0, 0, 0),) + tuple(instr.attrs["padding"])
    if value[1] is None:
        return emit("pad", [b.batched(operand), value[0]], {"padding": config}), 0
    # a batched padding value: pad with zero, then choose the value where the mask is false
    dtype = instr.shape.dtype
    zero = constant(0, dtype)
    padded = emit("pad", [b.batched(operand), zero], {"padding": config})
    inside = emit(
        "broadcast",
        [constant(True, "pred")],
        {},
        shape=Shape.array("pred", instr.operand(0).shape.dims),
    )
    mask = emit(
        "pad", [inside, constant(False, "pred")], {"padding": tuple(instr.attrs["padding"])}
    )
    mask = emit(
        "broadcast",
        [mask],
        {"dimensions": _shifted(range(mask.rank))},
        shape=Shape.array("pred", padded.dims),
    )
    fill = b.full(value, instr.shape.dims)
    return emit("select", [mask, padded, fill]), 0


def _leading(b: Batching, instr, args):
    """Ops whose leading dimensions already batch (cholesky, fft, topk, ...)."""
    ops = [b.batched(a) for a in args]
    return b.result(emit(instr.opcode, ops, dict(instr.attrs)))


# -- rules: reductions, windows, sorting --------------------------------------------------------
def _unbatched_inits(instr, inits) -> list:
    if any(is_batched(v) for v in inits):
        raise BatchingError(
            f"vmap cannot batch {instr.opcode} %{instr.name} over a batched initial value"
        )
    return [v[0] for v in inits]


def _reduce(b: Batching, instr, args):
    n = len(args) // 2
    inits = _unbatched_inits(instr, args[n:])
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return b.result(emit("reduce", [b.batched(a) for a in args[:n]] + inits, attrs))


def _window(window: Window) -> Window:
    return Window((WindowDim(1),) + tuple(window.dims))


def _reduce_window(b: Batching, instr, args):
    n = len(args) // 2
    inits = _unbatched_inits(instr, args[n:])
    attrs = dict(instr.attrs, window=_window(instr.attrs["window"]))
    return b.result(emit("reduce-window", [b.batched(a) for a in args[:n]] + inits, attrs))


def _select_and_scatter(b: Batching, instr, args):
    init = _unbatched_inits(instr, args[2:])
    attrs = dict(instr.attrs, window=_window(instr.attrs["window"]))
    ops = [b.batched(args[0]), b.batched(args[1])] + init
    return emit("select-and-scatter", ops, attrs), 0


def _sort(b: Batching, instr, args):
    attrs = dict(instr.attrs, dimensions=_shifted(instr.attrs["dimensions"]))
    return b.result(emit("sort", [b.batched(a) for a in args], attrs))


# -- rules: contractions -------------------------------------------------------------------------
def _dot(b: Batching, instr, args):
    (lhs, lb), (rhs, rb) = args
    attrs = dict(instr.attrs)
    names = ("lhs_batch_dims", "lhs_contracting_dims", "rhs_batch_dims", "rhs_contracting_dims")
    dims = {k: tuple(attrs.get(k, ())) for k in names}
    nbatch = len(dims["lhs_batch_dims"])
    if nbatch == 0 and (lb is None) != (rb is None):
        return _dot_folded(b, instr, args, dims)
    lhs_op = b.front((lhs, lb)) if lb is not None else lhs
    rhs_op = b.front((rhs, rb)) if rb is not None else rhs
    for side, batched in (("lhs", lb is not None), ("rhs", rb is not None)):
        if batched:
            for kind in ("batch", "contracting"):
                key = f"{side}_{kind}_dims"
                dims[key] = _shifted(dims[key])
    if lb is not None and rb is not None:
        dims["lhs_batch_dims"] = (0,) + dims["lhs_batch_dims"]
        dims["rhs_batch_dims"] = (0,) + dims["rhs_batch_dims"]
        out = 0
    elif lb is not None:
        out = nbatch
    else:
        out = nbatch + lhs.rank - nbatch - len(dims["lhs_contracting_dims"])
    attrs.update(dims)
    return emit("dot", [lhs_op, rhs_op], attrs, shape=b.shape(instr.shape, out)), out


def _dot_folded(b: Batching, instr, args, dims):
    """One side batched, no dot batch dims: the batch joins that side's free dimensions, so
    the dot keeps its rank (a matrix-vector product becomes a matrix-matrix one)."""
    side = 0 if args[0][1] is not None else 1
    prefix = ("lhs", "rhs")[side]
    contracting = dims[f"{prefix}_contracting_dims"]
    example = instr.operand(side).shape.dims
    free = [d for d in range(len(example)) if d not in contracting]
    op = b.front(args[side])
    merged = b.size * math.prod(example[d] for d in free)
    kept = [example[d] for d in contracting]
    if side == 0:  # [batch, free..., contracting...] -> [batch * free, contracting...]
        order = [0, *_shifted(free), *_shifted(contracting)]
        shape = [merged] + kept
        new_contracting = tuple(range(1, len(kept) + 1))
    else:  # [contracting..., batch, free...] -> [contracting..., batch * free]
        order = [*_shifted(contracting), 0, *_shifted(free)]
        shape = kept + [merged]
        new_contracting = tuple(range(len(kept)))
    if order != list(range(op.rank)):
        op = emit("transpose", [op], {"dimensions": tuple(order)})
    op = emit("reshape", [op], shape=Shape.array(op.dtype, shape))
    operands = [op, args[1][0]] if side == 0 else [args[0][0], op]
    attrs = dict(instr.attrs, **dims)
    attrs[f"{prefix}_contracting_dims"] = new_contracting
    other = instr.operand(1 - side).shape.dims
    other_contracting = dims[f"{('rhs', 'lhs')[side]}_contracting_dims"]
    other_free = [other[d] for d in range(len(other)) if d not in other_contracting]
    flat = [merged] + other_free if side == 0 else other_free + [merged]
    out = emit("dot", operands, attrs, shape=Shape.array(instr.shape.dtype, flat))
    bdim = 0 if side == 0 else len(other_free)
    return emit("reshape", [out], shape=b.shape(instr.shape, bdim)), bdim


def _merge(b: Batching, value, target: int):
    """A batched op with the batch folded, major, into its unbatched dimension `target`."""
    op = b.front(value)
    perm = list(range(1, op.rank))
    perm.insert(target, 0)
    moved = emit("transpose", [op], {"dimensions": tuple(perm)})
    dims = list(op.dims[1:])
    dims[target] *= b.size
    return emit("reshape", [moved], shape=Shape.array(op.dtype, dims))


def _split(b: Batching, op, dim: int):
    dims = list(op.dims)
    dims[dim : dim + 1] = [b.size, dims[dim] // b.size]
    return emit("reshape", [op], shape=Shape.array(op.dtype, dims)), dim


def _convolution(b: Batching, instr, args):
    lhs, rhs = args
    labels = parse_dim_labels(instr.attrs["dim_labels"])
    attrs = dict(instr.attrs)
    groups = attrs.get("feature_group_count", 1)
    if attrs.get("batch_group_count", 1) != 1:
        return _unrolled(b, instr, args)
    if rhs[1] is None:  # fold the batch into the input batch dimension
        out = emit("convolution", [_merge(b, lhs, labels.input_batch), rhs[0]], attrs)
        return _split(b, out, labels.output_batch)
    kernel = _merge(b, rhs, labels.kernel_output_feature)
    if lhs[1] is None and groups > 1:  # grouped outputs interleave: batch the input too
        lhs = (b.batched(lhs), 0)
    if lhs[1] is None:  # fold the batch into the output features
        out = emit("convolution", [lhs[0], kernel], attrs)
        return _split(b, out, labels.output_feature)
    # both batched: one feature group per batch element (and per original group)
    attrs["feature_group_count"] = groups * b.size
    out = emit("convolution", [_merge(b, lhs, labels.input_feature), kernel], attrs)
    return _split(b, out, labels.output_feature)


def _custom_call(b: Batching, instr, args):
    """Targets declared to batch over leading dims (the minixla_linalg_* table) get the batch
    there; any other custom call's batching behaviour is unknown."""
    from ..reference.linalg_calls import batches_over_leading_dims

    target = instr.attrs.get("custom_call_target")
    if not batches_over_leading_dims(target):
        raise BatchingError(
            f"vmap cannot batch custom-call {target!r} %{instr.name}: a "
            f"custom call's batching behaviour is unknown"
        )
    shape = instr.shape
    shape = (
        Shape.tuple_of([b.shape(s) for s in shape.tuple_shapes])
        if shape.is_tuple
        else b.shape(shape)
    )
    return b.result(
        emit("custom-call", [b.batched(a) for a in args], dict(instr.attrs), shape=shape)
    )


def _triangular_solve(b: Batching, instr, args):
    ops = [b.batched(a) for a in args]
    return emit("triangular-solve", ops, dict(instr.attrs)), 0


def _unrolled(b: Batching, instr, args):
    """The op once per batch element, the results stacked (for rare combinations)."""
    lanes = []
    for i in range(b.size):
        ops = [b.lane(a, i) if a[1] is not None else a[0] for a in args]
        lanes.append(emit_like(instr, ops))
    return _stack(b, lanes)


def _stack(b: Batching, lanes):
    if lanes[0].shape.is_tuple:
        count = len(lanes[0].shape.tuple_shapes)
        return [
            _stack(b, [emit("get-tuple-element", [lane], {"index": k}) for lane in lanes])
            for k in range(count)
        ]
    rows = [
        emit("reshape", [lane], shape=Shape.array(lane.dtype, (1, *lane.dims))) for lane in lanes
    ]
    return emit("concatenate", rows, {"dimensions": (0,)}), 0


# -- rules: indexing ---------------------------------------------------------------------------
def _index_vector(b: Batching, indices, sizes, bounds):
    """s32[size, n] start indices from n scalar index values, clamped so that each slice
    fits (dynamic-slice semantics; gather and scatter would drop or clamp otherwise)."""
    columns = []
    for value, size, bound in zip(indices, sizes, bounds):
        index = b.batched(value)
        index = emit("convert", [index], shape=Shape.array("s32", index.dims))
        low = emit("broadcast", [constant(0, "s32")], {}, shape=index.shape)
        high = emit("broadcast", [constant(bound - size, "s32")], {}, shape=index.shape)
        index = emit("clamp", [low, index, high])
        columns.append(emit("reshape", [index], shape=Shape.array("s32", (b.size, 1))))
    return emit("concatenate", columns, {"dimensions": (1,)})


def _dynamic_slice(b: Batching, instr, args):
    operand, indices = args[0], args[1:]
    sizes = tuple(instr.attrs["dynamic_slice_sizes"])
    if not indices:  # a rank-0 operand: the slice is the operand
        return operand
    if not any(is_batched(i) for i in indices):
        zero = constant(0, instr.operand(1).shape.dtype)
        attrs = {"dynamic_slice_sizes": (b.size,) + sizes}
        return emit("dynamic-slice", [b.front(operand), zero] + [i[0] for i in indices], attrs), 0
    bounds = instr.operand(0).shape.dims
    starts = _index_vector(b, indices, sizes, bounds)
    rank = len(sizes)
    attrs = {
        "offset_dims": tuple(range(1, rank + 1)),
        "collapsed_slice_dims": (),
        "index_vector_dim": 1,
        "slice_sizes": sizes,
        "indices_are_sorted": False,
    }
    if operand[1] is None:
        attrs.update(
            start_index_map=tuple(range(rank)),
            operand_batching_dims=(),
            start_indices_batching_dims=(),
        )
        return emit("gather", [operand[0], starts], attrs), 0
    attrs.update(
        start_index_map=_shifted(range(rank)),
        operand_batching_dims=(0,),
        start_indices_batching_dims=(0,),
        slice_sizes=(1,) + sizes,
    )
    return emit("gather", [b.front(operand), starts], attrs), 0


def _dynamic_update_slice(b: Batching, instr, args):
    operand, update, indices = args[0], args[1], args[2:]
    if not indices:  # a rank-0 operand: the update replaces it
        return update
    if not any(is_batched(i) for i in indices):
        zero = constant(0, instr.operand(2).shape.dtype)
        ops = [b.batched(operand), b.batched(update), zero] + [i[0] for i in indices]
        return emit("dynamic-update-slice", ops), 0
    sizes = instr.operand(1).shape.dims
    starts = _index_vector(b, indices, sizes, instr.operand(0).shape.dims)
    rank = len(sizes)
    attrs = {
        "update_window_dims": _shifted(range(rank)),
        "inserted_window_dims": (),
        "scatter_dims_to_operand_dims": _shifted(range(rank)),
        "input_batching_dims": (0,),
        "scatter_indices_batching_dims": (0,),
        "index_vector_dim": 1,
        "indices_are_sorted": True,
        "unique_indices": True,
        "to_apply": _take_update(instr.shape.dtype),
    }
    ops = [b.batched(operand), starts, b.batched(update)]
    return emit("scatter", ops, attrs), 0


def _take_update(dtype: str):
    builder = current_builder()
    scalar = Shape.array(dtype, ())
    return builder._root().computation(lambda old, new: new, [scalar, scalar], "take_update")


def _gather(b: Batching, instr, args):
    (operand, ob), indices = args
    attrs = dict(instr.attrs)
    ivd = attrs["index_vector_dim"]
    attrs["offset_dims"] = _shifted(attrs["offset_dims"])
    attrs["index_vector_dim"] = ivd + 1
    attrs["start_indices_batching_dims"] = _shifted(attrs.get("start_indices_batching_dims", ()))
    if ob is None:  # the batch is one more batch dimension of the indices
        return emit("gather", [operand, b.front(indices)], attrs), 0
    for key in ("collapsed_slice_dims", "start_index_map", "operand_batching_dims"):
        attrs[key] = _shifted(attrs.get(key, ()))
    attrs["operand_batching_dims"] = (0,) + attrs["operand_batching_dims"]
    attrs["start_indices_batching_dims"] = (0,) + attrs["start_indices_batching_dims"]
    attrs["slice_sizes"] = (1,) + tuple(attrs["slice_sizes"])
    return emit("gather", [b.front((operand, ob)), b.batched(indices)], attrs), 0


def _scatter(b: Batching, instr, args):
    attrs = dict(instr.attrs)
    for key in (
        "update_window_dims",
        "inserted_window_dims",
        "scatter_dims_to_operand_dims",
        "input_batching_dims",
        "scatter_indices_batching_dims",
    ):
        attrs[key] = _shifted(attrs.get(key, ()))
    attrs["input_batching_dims"] = (0,) + attrs["input_batching_dims"]
    attrs["scatter_indices_batching_dims"] = (0,) + attrs["scatter_indices_batching_dims"]
    attrs["index_vector_dim"] = attrs["index_vector_dim"] + 1
    ops = [b.batched(a) for a in args]
    return b.result(emit("scatter", ops, attrs))


def _refuse(reason: str):
    def rule(b: Batching, instr, args):
        raise BatchingError(f"vmap cannot batch {instr.opcode} %{instr.name}: {reason}")

    return rule


_ELEMENTWISE = {
    name: _elementwise for name, row in OPCODES.items() if row.kind == ELEMENTWISE and name != "map"
}

BATCHING_RULES = {
    **_ELEMENTWISE,
    "map": _map,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "bitcast": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "reverse": _with_dims,
    "concatenate": _concatenate,
    "pad": _pad,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "select-and-scatter": _select_and_scatter,
    "sort": _sort,
    "topk": _leading,
    "dot": _dot,
    "convolution": _convolution,
    "fft": _leading,
    "cholesky": _leading,
    "triangular-solve": _triangular_solve,
    "rng-bit-generator": _unrolled,
    "tuple": control.batch_tuple,
    "get-tuple-element": control.batch_get_tuple_element,
    "call": control.batch_call,
    "while": control.batch_while,
    "conditional": control.batch_conditional,
    "opt-barrier": control.batch_opt_barrier,
    "custom-call": _custom_call,
    "rng": _refuse("rng with batched bounds; use minixla.random"),
}

# Opcodes without a row, and why; `vmap` names the reason when it meets one with batched operands.
DECLINED: dict[str, str] = {
    **{
        name: "takes no operands, so never sees a batched value"
        for name, row in OPCODES.items()
        if row.arity == 0 and name not in BATCHING_RULES
    },
    "after-all": "orders tokens, which are never batched",
    **{
        name: "collectives are not batched: vmap over a mesh axis is shard_map's job"
        for name, row in OPCODES.items()
        if row.kind == "collective" and name not in BATCHING_RULES
    },
    **{
        op: "asynchronous pairs appear only after scheduling, after vmap"
        for op in ["async-start", "async-update", "async-done", "copy-start", "copy-done"]
    },
    **{
        op: "host transfers and peer-to-peer ops are not batched"
        for op in ["infeed", "outfeed", "send", "send-done", "recv", "recv-done"]
    },
    **{
        op: "dynamic shapes are not supported"
        for op in ["dynamic-reshape", "get-dimension-size", "set-dimension-size"]
    },
    "fusion": "fusions appear only in compiled programs, after vmap",
    **{
        op: "no rule yet; batch by hand or with lax.map"
        for op in [
            "scan",
            "scaled-dot",
            "ragged-dot",
            "batch-norm-training",
            "batch-norm-inference",
            "batch-norm-grad",
            "add-dependency",
            "domain",
        ]
    },
}
