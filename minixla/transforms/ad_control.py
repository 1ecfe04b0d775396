"""Differentiation rules for control flow and calls: while, conditional, call, fusion,
opt-barrier, custom-call.

Reverse mode through a while needs its trip count, so it is supported for loops with a static
one (what `lax.fori_loop` with Python bounds and `lax.scan` emit): the forward loop stacks the
carried values each iteration's backward needs, and the backward loop runs the iterations in
reverse, recomputing each body from its stacked carry. Forward mode handles any while. The
branches of a conditional are differentiated inside a conditional on the same index.

A `call` may stand for a region with its own rule (`checkpoint`, `custom_vjp`, `custom_jvp`,
`stop_gradient`): `SPECIAL_CALLS` maps its computation to that rule (see regions.py).
"""

from __future__ import annotations

import weakref

import numpy as np

from ..frontend.tracer import Tracer
from ..ir import Shape
from . import ad_emit as E
from .ad_rules import Rule
from .tracing import emit_like, input_index

# computation -> object with forward / vjp / jvp_full methods (regions.py)
SPECIAL_CALLS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _ad():
    from . import autodiff  # the walkers; imported late because autodiff imports this table

    return autodiff


def _tracers(ops) -> list[Tracer]:
    return [Tracer(o) for o in ops]


def _ops(tracers) -> list:
    return [t.op for t in tracers]


def _state_shapes(instr) -> list[Shape]:
    return list(instr.shape.tuple_shapes)


# -- while ----------------------------------------------------------------------------------
def constant_value(instr):
    """The value of a scalar integer built from constants (constant, convert, copy), or None."""
    while instr.opcode in ("convert", "copy", "reshape", "broadcast"):
        instr = instr.operand(0)
    if instr.opcode == "constant" and instr.shape.is_array and instr.shape.numel() == 1:
        return int(np.asarray(instr.literal).reshape(()))
    return None


def static_trip_count(instr, init: list) -> int | None:
    """The trip count of `i = start; while i < limit: ...; i += 1` with constant start and
    limit, else None."""
    cond, body = instr.attrs["condition"], instr.attrs["body"]
    test = cond.root
    if test.opcode != "compare" or test.attrs.get("direction") not in ("LT", "LE"):
        return None
    k = input_index(test.operand(0))
    limit = constant_value(test.operand(1))
    if k is None or limit is None or body.root.opcode != "tuple":
        return None
    step = body.root.operand(k)
    if step.opcode != "add":
        return None
    counter = [o for o in step.operands if input_index(o) == k]
    ones = [o for o in step.operands if constant_value(o) == 1]
    start = constant_value(init[k].instr)
    if not counter or not ones or start is None:
        return None
    return max(0, limit - start + (test.attrs["direction"] == "LE"))


def _invariant(body) -> set[int]:
    return {j for j, o in enumerate(body.root.operands) if input_index(o) == j}


def _value_needed(body, j: int) -> bool:
    """Whether the backward of `body` reads carry element j: not when it only passes through
    to the result, possibly as the buffer dynamic-update-slices overwrite (scan's stacked
    outputs)."""
    return any(
        input_index(instr) == j and not _only_overwritten(body, instr)
        for instr in body.instructions
    )


def _only_overwritten(body, instr) -> bool:
    for user in instr.users:
        if user is body.root:
            continue
        if (
            user.opcode == "dynamic-update-slice"
            and user.operand(0) is instr
            and all(o is not instr for o in user.operands[1:])
            and _only_overwritten(body, user)
        ):
            continue
        return False
    return True


def _while_forward(instr, args):
    from ..frontend.lax_api import fori_loop
    from ..frontend.numpy_shape import expand_dims

    init = _ad().unpack(args[0])
    n = static_trip_count(instr, init)
    if n is None:
        return emit_like(instr, [_ad().pack(init)]), None
    body = instr.attrs["body"]
    invariant = _invariant(body)
    saved = [j for j in range(len(init)) if j not in invariant and _value_needed(body, j)]
    stacks = [E.zeros(Shape.array(init[j].dtype, (n,) + init[j].dims)) for j in saved]

    def step(i, carry):
        state, stack = carry
        new_stack = []
        for j, buffer in zip(saved, stack):
            row = expand_dims(state[j], 0)
            starts = [i.op] + [E.scalar(0, i.op.dtype)] * state[j].ndim
            new_stack.append(Tracer(E.emit("dynamic-update-slice", [buffer.op, row.op, *starts])))
        values, _ = _ad().forward(body, [_ops(state)])
        return _tracers(_ad().unpack(values[id(body.root)])), new_stack

    final, stack = fori_loop(0, n, step, (_tracers(init), _tracers(stacks)))
    return _ops(final), (init, dict(zip(saved, _ops(stack))), n, invariant)


def _while_vjp(instr, args, out, ct, residual):
    from ..frontend.lax_api import fori_loop

    ad = _ad()
    if residual is None:
        raise ad.ad_error(
            instr,
            "reverse mode needs a while loop with a static trip count "
            "(lax.fori_loop with Python bounds, or lax.scan); jvp "
            "handles any while_loop",
        )
    init, stacks, n, invariant = residual
    body = instr.attrs["body"]
    shapes = _state_shapes(instr)
    floats = [j for j, s in enumerate(shapes) if E.is_float(s)]
    ct = ad.as_ct_list(ct, len(shapes))
    carry = [ct[j] if ct[j] is not None else E.zeros(shapes[j]) for j in floats]

    def step(k, carry):
        i = Tracer(E.emit("subtract", [E.scalar(n - 1, k.op.dtype), k.op]))
        state = []
        for j, shape in enumerate(shapes):
            if j in stacks:
                starts = [i.op] + [E.scalar(0, i.op.dtype)] * shape.rank
                row = E.emit(
                    "dynamic-slice",
                    [stacks[j], *starts],
                    {"dynamic_slice_sizes": (1,) + shape.dims},
                )
                state.append(E.reshape(row, shape.dims))
            elif j in invariant:
                state.append(init[j])
            else:
                state.append(E.zeros(shape))
        values, residuals = ad.forward(body, [state])
        root_ct = [None] * len(shapes)
        for j, c in zip(floats, carry):
            root_ct[j] = c.op
        param_ct = ad.backward(body, values, residuals, root_ct).get(0)
        param_ct = ad.as_ct_list(param_ct, len(shapes))
        return [
            Tracer(param_ct[j] if param_ct[j] is not None else E.zeros(shapes[j])) for j in floats
        ]

    final = fori_loop(0, n, step, _tracers(carry)) if floats else []
    result = [None] * len(shapes)
    for j, c in zip(floats, final):
        result[j] = c.op
    return [result]


def _while_jvp_full(instr, args, tangents):
    from ..frontend.lax_api import while_loop

    ad = _ad()
    init = ad.unpack(args[0])
    shapes = _state_shapes(instr)
    floats = [j for j, s in enumerate(shapes) if E.is_float(s)]
    t_in = ad.as_ct_list(tangents[0], len(shapes))
    t_init = [t_in[j] if t_in[j] is not None else E.zeros(shapes[j]) for j in floats]
    cond, body = instr.attrs["condition"], instr.attrs["body"]

    def cond_fn(carry):
        values, _ = ad.forward(cond, [_ops(carry[0])])
        return Tracer(values[id(cond.root)])

    def body_fn(carry):
        state, ts = carry
        full = [None] * len(shapes)
        for j, t in zip(floats, ts):
            full[j] = t.op
        out, t_out = ad.jvp_walk(body, [_ops(state)], [full])
        t_out = ad.as_ct_list(t_out, len(shapes))
        return (
            _tracers(ad.unpack(out)),
            [Tracer(t_out[j] if t_out[j] is not None else E.zeros(shapes[j])) for j in floats],
        )

    state, ts = while_loop(cond_fn, body_fn, (_tracers(init), _tracers(t_init)))
    result = [None] * len(shapes)
    for j, t in zip(floats, ts):
        result[j] = t.op
    return _ops(state), result


# -- conditional ----------------------------------------------------------------------------
def _branch_comps(instr) -> list:
    if "branch_computations" in instr.attrs:
        return list(instr.attrs["branch_computations"])
    return [instr.attrs["true_computation"], instr.attrs["false_computation"]]


def _switch(index, fns):
    """Runs fns[index] in an HLO conditional (an out-of-range s32 index picks the last
    branch, as HLO does; a pred index picks fns[0] when true)."""
    from ..frontend import lax_api
    from ..frontend import numpy_api as mnp

    selector = Tracer(index)
    if index.dtype == "pred":
        return lax_api.cond(selector, fns[0], fns[1])
    last = len(fns) - 1
    in_range = mnp.logical_and(selector >= 0, selector <= last)
    return lax_api.switch(mnp.where(in_range, selector, last), fns)


def _conditional_vjp(instr, args, out, ct, _):
    ad = _ad()
    comps = _branch_comps(instr)
    operands = args[1:]
    slots = [
        (k, j, s)
        for k, o in enumerate(instr.operands[1:])
        for j, s in enumerate(_elements(o.shape))
        if E.is_float(s)
    ]
    root_ct = ct

    def branch(k):
        def fn():
            params = [
                operands[k] if not instr.operands[1 + k].shape.is_tuple else ad.unpack(operands[k])
            ]
            values, residuals = ad.forward(comps[k], params)
            got = ad.backward(comps[k], values, residuals, root_ct).get(0)
            got = (
                ad.as_ct_list(got, len(_elements(instr.operands[1 + k].shape)))
                if instr.operands[1 + k].shape.is_tuple
                else [got]
            )
            return [
                Tracer(got[j] if kk == k and got[j] is not None else E.zeros(s))
                for kk, j, s in slots
            ]

        return fn

    results = _switch(args[0], [branch(k) for k in range(len(comps))]) if slots else []
    cts = [None] + [[None] * len(_elements(o.shape)) for o in instr.operands[1:]]
    for (k, j, _s), value in zip(slots, results):
        cts[1 + k][j] = value.op
    return [cts[0]] + [
        c if instr.operands[1 + k].shape.is_tuple else c[0] for k, c in enumerate(cts[1:])
    ]


def _elements(shape) -> list:
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _conditional_jvp_full(instr, args, tangents):
    ad = _ad()
    comps = _branch_comps(instr)
    out_shapes = _elements(instr.shape)
    floats = [j for j, s in enumerate(out_shapes) if E.is_float(s)]

    def branch(k):
        def fn():
            operand = args[1 + k]
            tuple_operand = instr.operands[1 + k].shape.is_tuple
            params = [ad.unpack(operand) if tuple_operand else operand]
            out, t_out = ad.jvp_walk(comps[k], params, [tangents[1 + k]])
            outs = ad.unpack(out) if instr.shape.is_tuple else [out]
            ts = ad.as_ct_list(t_out, len(out_shapes)) if instr.shape.is_tuple else [t_out]
            return (
                _tracers(outs),
                [Tracer(ts[j] if ts[j] is not None else E.zeros(out_shapes[j])) for j in floats],
            )

        return fn

    outs, ts = _switch(args[0], [branch(k) for k in range(len(comps))])
    tangent = [None] * len(out_shapes)
    for j, t in zip(floats, ts):
        tangent[j] = t.op
    if not instr.shape.is_tuple:
        return outs[0].op, tangent[0]
    return _ops(outs), tangent


# -- calls ----------------------------------------------------------------------------------
def _callee(instr):
    return instr.attrs["to_apply"] if "to_apply" in instr.attrs else instr.attrs["calls"]


def _call_params(instr, args) -> list:
    return [_ad().unpack(a) if o.shape.is_tuple else a for a, o in zip(args, instr.operands)]


def _call_forward(instr, args):
    comp = _callee(instr)
    special = SPECIAL_CALLS.get(comp)
    if special is not None:
        return special.forward(instr, _call_params(instr, args))
    values, residuals = _ad().forward(comp, _call_params(instr, args))
    return values[id(comp.root)], (values, residuals)


def _call_vjp(instr, args, out, ct, residual):
    comp = _callee(instr)
    special = SPECIAL_CALLS.get(comp)
    if special is not None:
        return special.vjp(instr, _call_params(instr, args), ct, residual)
    values, residuals = residual
    cts = _ad().backward(comp, values, residuals, ct)
    return [cts.get(i) for i in range(len(args))]


def _call_jvp_full(instr, args, tangents):
    comp = _callee(instr)
    special = SPECIAL_CALLS.get(comp)
    if special is not None:
        return special.jvp_full(instr, _call_params(instr, args), tangents)
    return _ad().jvp_walk(comp, _call_params(instr, args), tangents)


def _custom_call_error(instr, *_):
    target = instr.attrs.get("custom_call_target", "?")
    raise _ad().ad_error(
        instr,
        f"custom-call {target!r} has no differentiation rule (wrap "
        f"it in minixla.custom_vjp or custom_jvp)",
    )


def _barrier_vjp(instr, args, out, ct, _):
    return [ct]


def _barrier_jvp(instr, args, out, tangents):
    return tangents[0]


CALL_RULE = Rule(None, _call_vjp, forward=_call_forward, jvp_full=_call_jvp_full)

RULES: dict[str, Rule] = {
    "while": Rule(None, _while_vjp, forward=_while_forward, jvp_full=_while_jvp_full),
    "conditional": Rule(None, _conditional_vjp, jvp_full=_conditional_jvp_full),
    "call": CALL_RULE,
    "fusion": CALL_RULE,
    "opt-barrier": Rule(_barrier_jvp, _barrier_vjp),
    "custom-call": Rule(_custom_call_error, _custom_call_error),
}
