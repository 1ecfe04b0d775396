"""Control flow, calls, single-device collectives and async pairs of `minixla.ops`
(re-exported there; see ops.py for the conventions)."""

from __future__ import annotations

from ..ir import Raw, Shape
from ..ir.sharding import SourceTargetPairs
from .builder import Builder, XlaOp, as_shape
from .errors import FrontendTypeError
from .ops_core import Op, _builder, _camel, _reducer


# -- control flow and calls -----------------------------------------------------------------
def While(condition, body, init: XlaOp) -> XlaOp:
    """condition: state -> pred[]; body: state -> state (callables get the state as one
    XlaOp; use GetTupleElement on tuple states)."""
    builder = init.builder
    cond = builder.computation(condition, [init.shape], "condition")
    loop = builder.computation(body, [init.shape], "body")
    return Op("while", [init], {"condition": cond, "body": loop}, builder=builder)


def Scan(inputs, carries, body, dimension: int = 0, is_reverse: bool = False) -> XlaOp:
    """At each index along `dimension` (from the end with `is_reverse`), body(the inputs'
    slices there..., the carries...) returns (the step's outputs..., the new carries...);
    the result is a tuple: the outputs stacked along `dimension`, then the last carries."""
    inputs, carries = list(inputs), list(carries)
    builder = _builder(*inputs, *carries)
    slices = [
        Shape.array(x.dtype, x.shape.dims[:dimension] + x.shape.dims[dimension + 1 :])
        for x in inputs
    ]
    comp = builder.computation(body, slices + [c.shape for c in carries], "scan_body")
    attrs = {"dimensions": (dimension,), "num_carries": len(carries), "to_apply": comp}
    if is_reverse:
        attrs["is_reverse"] = True
    return Op("scan", [*inputs, *carries], attrs, builder=builder)


def Conditional(branch_index: XlaOp, branch_operands, branch_computations) -> XlaOp:
    """A pred[] selector picks branch 0 (true) or 1 (false); an s32[] one indexes the
    branches (out of range picks the last). Branch i receives branch_operands[i]."""
    builder = _builder(branch_index, *branch_operands)
    comps = [
        builder.computation(fn, [o.shape], f"branch_{i}")
        for i, (fn, o) in enumerate(zip(branch_computations, branch_operands))
    ]
    if branch_index.dtype == "pred":
        if len(comps) != 2:
            raise FrontendTypeError("a pred selector needs exactly two branches")
        attrs = {"true_computation": comps[0], "false_computation": comps[1]}
    else:
        attrs = {"branch_computations": comps}
    return Op("conditional", [branch_index, *branch_operands], attrs, builder=builder)


def Cond(
    pred: XlaOp, true_operand: XlaOp, true_computation, false_operand: XlaOp, false_computation
) -> XlaOp:
    return Conditional(pred, [true_operand, false_operand], [true_computation, false_computation])


def Call(builder: Builder, computation, operands) -> XlaOp:
    comp = builder.computation(computation, [o.shape for o in operands], "called")
    return Op("call", list(operands), {"to_apply": comp}, builder=builder)


def CustomCall(
    builder: Builder,
    call_target_name: str,
    operands,
    shape,
    backend_config: str = "",
    has_side_effect: bool = False,
) -> XlaOp:
    attrs = {"custom_call_target": call_target_name}
    if has_side_effect:
        attrs["custom_call_has_side_effect"] = True
    if backend_config:
        attrs["backend_config"] = Raw('"' + backend_config.replace('"', '\\"') + '"')
    return Op("custom-call", list(operands), attrs, as_shape(shape), builder)


def OptBarrier(operand: XlaOp) -> XlaOp:
    return Op("opt-barrier", [operand])


def AddDependency(operand: XlaOp, token: XlaOp) -> XlaOp:
    return Op("add-dependency", [operand, token])


def Domain(operand: XlaOp) -> XlaOp:
    return Op("domain", [operand])


# -- single-device collectives --------------------------------------------------------------
def AllReduce(operand: XlaOp, computation) -> XlaOp:
    builder = operand.builder
    comp = _reducer(builder, computation, [operand], [operand], "all_reduce")
    return Op("all-reduce", [operand], {"to_apply": comp}, builder=builder)


def AllGather(operand: XlaOp, dimension: int) -> XlaOp:
    return Op("all-gather", [operand], {"dimensions": (dimension,)}, operand.shape)


def ReduceScatter(operand: XlaOp, computation, dimension: int) -> XlaOp:
    builder = operand.builder
    comp = _reducer(builder, computation, [operand], [operand], "reduce_scatter")
    return Op(
        "reduce-scatter",
        [operand],
        {"dimensions": (dimension,), "to_apply": comp},
        operand.shape,
        builder,
    )


def AllToAll(operand: XlaOp, dimension: int | None = None) -> XlaOp:
    attrs = {} if dimension is None else {"dimensions": (dimension,)}
    return Op("all-to-all", [operand], attrs, operand.shape)


def CollectiveBroadcast(operand: XlaOp) -> XlaOp:
    return Op("collective-broadcast", [operand], shape=operand.shape)


def CollectivePermute(operand: XlaOp, source_target_pairs) -> XlaOp:
    pairs = SourceTargetPairs(tuple((int(a), int(b)) for a, b in source_target_pairs))
    return Op("collective-permute", [operand], {"source_target_pairs": pairs}, operand.shape)


# -- async pairs: one device, so `-start` already holds the value `-done` returns -------------
def AllReduceStart(operand: XlaOp, computation) -> XlaOp:
    builder = operand.builder
    comp = _reducer(builder, computation, [operand], [operand], "all_reduce")
    return Op("all-reduce-start", [operand], {"to_apply": comp}, operand.shape, builder)


def AllGatherStart(operand: XlaOp, dimension: int) -> XlaOp:
    return Op("all-gather-start", [operand], {"dimensions": (dimension,)}, operand.shape)


def CollectivePermuteStart(operand: XlaOp, source_target_pairs) -> XlaOp:
    permuted = CollectivePermute(operand, source_target_pairs)
    permuted.instr.opcode = "collective-permute-start"  # same attributes, async spelling
    return permuted


def _done(opcode: str):
    def op(start: XlaOp) -> XlaOp:
        return Op(opcode, [start], shape=start.shape)

    op.__name__ = op.__qualname__ = _camel(opcode)
    return op


AllReduceDone, AllGatherDone, CollectivePermuteDone = map(
    _done, ["all-reduce-done", "all-gather-done", "collective-permute-done"]
)


def CopyStart(operand: XlaOp) -> XlaOp:
    """(source, destination, context) of an asynchronous copy."""
    shape = Shape.tuple_of([operand.shape, operand.shape, Shape.array("u32", ())])
    return Op("copy-start", [operand], shape=shape)


def CopyDone(start: XlaOp) -> XlaOp:
    return Op("copy-done", [start], shape=start.shape.tuple_shapes[1])


def AsyncStart(builder: Builder, computation, operands) -> XlaOp:
    """((operands...), result, context) of `computation` run asynchronously."""
    comp = builder.computation(computation, [o.shape for o in operands], "async_computation")
    shape = Shape.tuple_of(
        [Shape.tuple_of([o.shape for o in operands]), comp.root.shape, Shape.array("u32", ())]
    )
    return Op("async-start", list(operands), {"calls": comp}, shape, builder)


def AsyncUpdate(start: XlaOp) -> XlaOp:
    return Op("async-update", [start], {"calls": start.instr.attrs["calls"]}, start.shape)


def AsyncDone(start: XlaOp) -> XlaOp:
    return Op(
        "async-done", [start], {"calls": start.instr.attrs["calls"]}, start.shape.tuple_shapes[1]
    )


def Rng(low: XlaOp, high: XlaOp, shape, distribution: str = "rng_uniform") -> XlaOp:
    """Random numbers in [low, high) (rng_uniform) or N(low, high) (rng_normal)."""
    return Op("rng", [low, high], {"distribution": distribution}, as_shape(shape))


def Fusion(builder: Builder, operands, computation, kind: str = "kLoop") -> XlaOp:
    comp = builder.computation(computation, [o.shape for o in operands], "fused_computation")
    return Op("fusion", list(operands), {"kind": kind, "calls": comp}, comp.root.shape, builder)
