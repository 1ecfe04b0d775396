"""Batching rules for tuples, calls and control flow (while, conditional); see
batching_values.py for the value representation."""

from __future__ import annotations

from ..frontend.tracer import Tracer
from .batching_values import (
    Batching,
    any_flag,
    batched_flags,
    constant,
    emit,
    expand,
    flags_like,
    flags_of,
    or_flags,
    while_flags,
)


def batch_tuple(b: Batching, instr, args):
    return list(args)


def batch_get_tuple_element(b: Batching, instr, args):
    value = expand(args[0])
    return value[instr.attrs["index"]]


def batch_call(b: Batching, instr, args):
    return b.run(instr.attrs["to_apply"], args)


def batch_opt_barrier(b: Batching, instr, args):
    value = b.conform(args[0], flags_of(expand(args[0])))
    fenced = emit("opt-barrier", [_tuple_op(value)])
    return _unpack(fenced, value)


def _tuple_op(value):
    if isinstance(value, list):
        return emit("tuple", [_tuple_op(v) for v in value])
    return value[0]


def _unpack(op, like):
    if isinstance(like, list):
        return [
            _unpack(emit("get-tuple-element", [op], {"index": i}), v) for i, v in enumerate(like)
        ]
    return op, like[1]


def _to_tracers(value):
    if isinstance(value, list):
        return [_to_tracers(v) for v in value]
    return Tracer(value[0])


def _from_tracers(tree, flags):
    if isinstance(flags, list):
        return [_from_tracers(t, f) for t, f in zip(tree, flags)]
    return tree.op, (0 if flags else None)


def batch_while(b: Batching, instr, args):
    from ..frontend.lax_api import while_loop
    from ..frontend.numpy_reduce import any as any_

    cond, body = instr.attrs["condition"], instr.attrs["body"]
    init = expand(args[0])
    flags = while_flags(instr, flags_of(init))
    lanes_differ = any_flag(batched_flags(cond, [flags]))

    def predicate(state):
        return b.run(cond, [_from_tracers(state, flags)])

    def cond_fun(state):
        pred = predicate(state)
        return Tracer(pred[0]) if pred[1] is None else any_(Tracer(b.front(pred)))

    def body_fun(state):
        values = _from_tracers(state, flags)
        out = b.conform(b.run(body, [values]), flags)
        if lanes_differ:  # finished lanes keep their state
            out = b.select(b.front(predicate(state)), out, values)
        return _to_tracers(out)

    final = while_loop(cond_fun, body_fun, _to_tracers(b.conform(init, flags)))
    return _from_tracers(final, flags)


def batch_conditional(b: Batching, instr, args):
    selector, operands = args[0], [expand(a) for a in args[1:]]
    if "branch_computations" in instr.attrs:
        comps = list(instr.attrs["branch_computations"])
    else:
        comps = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
    if selector[1] is not None:
        return _conditional_as_select(b, selector, comps, operands)
    from ..frontend.lax_api import cond, switch

    flags = False
    for comp, operand in zip(comps, operands):
        flags = or_flags(
            flags_like(comp.root.shape, flags),
            flags_like(comp.root.shape, batched_flags(comp, [flags_of(operand)])),
        )

    def branch(k):
        def run(tracers):
            values = _from_tracers(tracers, flags_of(operands[k]))
            return _to_tracers(b.conform(b.run(comps[k], [values]), flags))

        return run

    inputs = [_to_tracers(b.conform(o, flags_of(o))) for o in operands]

    def pick(k):
        return lambda *ops: branch(k)(ops[k])

    if selector[0].dtype == "pred":
        out = cond(Tracer(selector[0]), pick(0), pick(1), *inputs)
    else:
        out = switch(
            Tracer(_branch_index(selector[0], len(comps))),
            [pick(k) for k in range(len(comps))],
            *inputs,
        )
    return _from_tracers(out, flags)


def _branch_index(index, count: int):
    """HLO's rule: an index outside [0, count) runs the last branch."""
    low = emit("broadcast", [constant(0, "s32")], {}, shape=index.shape)
    high = emit("broadcast", [constant(count, "s32")], {}, shape=index.shape)
    last = emit("broadcast", [constant(count - 1, "s32")], {}, shape=index.shape)
    inside = emit(
        "and",
        [
            emit("compare", [index, low], {"direction": "GE"}),
            emit("compare", [index, high], {"direction": "LT"}),
        ],
    )
    return emit("select", [inside, index, last])


def _conditional_as_select(b: Batching, selector, comps, operands):
    """A batched selector: every branch runs, each lane keeps its own branch's result."""
    outs = [b.run(comp, [operand]) for comp, operand in zip(comps, operands)]
    index = b.front(selector)
    if index.dtype == "pred":
        return b.select(index, outs[0], outs[1])
    index = _branch_index(index, len(comps))
    result = outs[-1]
    for k in reversed(range(len(comps) - 1)):
        k_op = emit("broadcast", [constant(k, "s32")], {}, shape=index.shape)
        result = b.select(emit("compare", [index, k_op], {"direction": "EQ"}), outs[k], result)
    return result
