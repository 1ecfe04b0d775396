"""More of XLA's HloVerifier: per-opcode rules on types and async ops, the pairing of
`*-start` with `*-done` across a computation, and execution threads across calls.

`INSTRUCTION_RULES` maps an opcode to a check `(instr) -> None` that raises `RuleFailure(rule,
detail)`; `check_pairs(comp)` checks that every start has exactly one done, `check_threads`
that calls stay on their thread. minixla.ir.verifier runs them and reports failures like its
own.
"""
from __future__ import annotations

import re

from .shapes import Shape


class RuleFailure(Exception):
    def __init__(self, rule: str, detail: str):
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail


def _kind(shape: Shape) -> str:
    return shape.element_type.kind


def _compare_type(instr) -> None:
    """`type=` must suit the operands as XLA's verifier demands: FLOAT or TOTALORDER for
    floats and complex numbers, SIGNED for signed integers, UNSIGNED for unsigned ones and
    pred. Complex numbers have no order: only EQ and NE compare them."""
    kind = instr.attrs.get("type")
    if not instr.operand_count or not instr.operand(0).shape.is_array:
        return
    etype = instr.operand(0).shape.element_type
    if etype.is_complex and instr.attrs.get("direction") not in ("EQ", "NE", None):
        raise RuleFailure("comparison direction", f"{etype.name} values have no order: "
                                                  f"compare them with EQ or NE")
    if kind is None:
        return
    allowed = {"FLOAT": etype.is_float or etype.is_complex,
               "TOTALORDER": etype.is_float or etype.is_complex,
               "SIGNED": etype.is_signed,
               "UNSIGNED": etype.kind in ("unsigned", "pred")}
    if not allowed.get(str(kind), True):
        raise RuleFailure("comparison type", f"type={kind} does not fit {etype.name} operands")


def _rng(instr) -> None:
    shapes = [o.shape for o in instr.operands]
    if len(shapes) != 2:
        raise RuleFailure("rng operands", f"rng takes its two bounds, got {len(shapes)} "
                                          f"operands")
    if any(not s.is_array or s.rank for s in shapes):
        raise RuleFailure("rng operands", "the bounds of rng must be scalars")
    if len({s.dtype for s in shapes} | {instr.shape.dtype}) != 1:
        raise RuleFailure("rng element type", "the bounds and the result must have one "
                                              "element type")
    if not (instr.shape.element_type.is_float or instr.shape.element_type.is_integer):
        raise RuleFailure("rng element type", f"rng cannot produce {instr.shape.dtype}")
    if instr.attrs.get("distribution") == "rng_normal" and \
            not instr.shape.element_type.is_float:
        raise RuleFailure("rng element type", "rng_normal produces floats only")


def _iota(instr) -> None:
    if instr.shape.is_array and _kind(instr.shape) == "pred":
        raise RuleFailure("iota element type", "iota cannot produce pred")


def _select(instr) -> None:
    if instr.shape.is_tuple:
        raise RuleFailure("select of tuples", "select works on arrays only")


def _conditional(instr) -> None:
    index = instr.operand(0).shape
    if not (index.is_array and index.rank == 0 and index.dtype in ("pred", "s32")):
        raise RuleFailure("conditional index", f"the branch index must be pred[] or s32[], "
                                               f"got {index}")


def _composite_call(instr) -> None:
    if not instr.attrs.get("is_composite"):
        return
    frontend = str(instr.attrs.get("frontend_attributes", ""))
    if "composite.name" not in frontend:
        raise RuleFailure("composite call", "frontend_attributes need composite.name")
    version = re.search(r'composite\.version="?(-?\d+)', frontend)
    if version is not None and int(version.group(1)) < 0:
        raise RuleFailure("composite call", "composite.version must be a non-negative integer")


def _bound_output_fits(output: Shape, result: Shape) -> bool:
    """An async context's output element is `()` (not bound yet), the whole result, or, for a
    tuple result bound element by element, a prefix of its elements."""
    if output.compatible(result):
        return True
    if not output.is_tuple:
        return False
    if not result.is_tuple:
        return not output.tuple_shapes
    prefix = result.tuple_shapes[:len(output.tuple_shapes)]
    return len(prefix) == len(output.tuple_shapes) and all(
        a.compatible(b) for a, b in zip(output.tuple_shapes, prefix))


def _check_async_context(instr, bound: list[Shape]) -> None:
    """`instr`'s shape is ((bound operands...), output, state...) for its wrapped computation:
    the operands bound so far are a prefix of its parameters (late binding binds the rest in
    async-updates) and the output fits its result. The state elements are the target's own."""
    comp, shape = instr.attrs["calls"], instr.shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2 or not shape.tuple_shapes[0].is_tuple:
        raise RuleFailure("async shape", f"{instr.opcode} returns ((operands), result, "
                                         f"state...), declared {shape}")
    listed = shape.tuple_shapes[0].tuple_shapes
    if len(listed) != len(bound) or any(not a.compatible(b) for a, b in zip(listed, bound)):
        raise RuleFailure("async operands", f"the operands bound are "
                                            f"{[str(s) for s in bound]}, the shape lists "
                                            f"{[str(s) for s in listed]}")
    params = comp.parameter_shapes
    if len(bound) > len(params) or any(not p.compatible(b) for p, b in zip(params, bound)):
        raise RuleFailure("async operands", f"%{comp.name} takes "
                                            f"{[str(p) for p in params]}, given "
                                            f"{[str(s) for s in bound]}")
    output, result = shape.tuple_shapes[1], comp.root.shape
    if not _bound_output_fits(output, result):
        raise RuleFailure("async shape", f"the output element {output} is neither () nor "
                                         f"(a prefix of) %{comp.name}'s result {result}")


_ALIAS = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _async_aliasing(instr) -> None:
    """Each `{output index}: (operand, {index})` pairs equal shapes: an index of the async
    context (under {1}, of the wrapped computation's result, which may be bound later) with
    one of its parameters (late-bound ones included)."""
    comp = instr.attrs["calls"]
    params = comp.parameter_shapes
    for out, number, index in _ALIAS.findall(str(instr.attrs["output_to_operand_aliasing"])):
        out_index, in_index = (tuple(int(i) for i in x.split(",") if i.strip())
                               for x in (out, index))
        try:
            output = comp.root.shape.subshape(out_index[1:]) if out_index[:1] == (1,) \
                else instr.shape.subshape(out_index)
            param = params[int(number)].subshape(in_index)
        except IndexError:
            raise RuleFailure("output_to_operand_aliasing", f"{{{out}}}: ({number}, {{{index}}})"
                                                            f" names no shape") from None
        if not output.compatible(param):
            raise RuleFailure("output_to_operand_aliasing", f"output {{{out}}} is {output}, "
                                                            f"operand {number} {{{index}}} "
                                                            f"is {param}")


def _async_start(instr) -> None:
    if instr.attrs.get("calls") is not None:
        _check_async_context(instr, [o.shape for o in instr.operands])
        if "output_to_operand_aliasing" in instr.attrs:
            _async_aliasing(instr)


def _previous_binding(instr) -> list[Shape] | None:
    """The operands the async op before `instr` has bound; None where it is not an async op
    (the context came through a loop's state: checked where it started)."""
    previous = instr.operand(0)
    if previous.opcode not in ("async-start", "async-update") or not previous.shape.is_tuple \
            or instr.attrs.get("calls") is None or previous.attrs.get("calls") is None:
        return None
    if previous.attrs.get("calls") is not instr.attrs.get("calls"):
        raise RuleFailure("async pair", f"{instr.opcode} wraps %{instr.attrs['calls'].name}, "
                                        f"%{previous.name} %{previous.attrs['calls'].name}")
    operands = previous.shape.tuple_shapes[0]
    return list(operands.tuple_shapes) if operands.is_tuple else None


def _async_update(instr) -> None:
    bound = _previous_binding(instr)
    if bound is not None:
        _check_async_context(instr, bound + [o.shape for o in instr.operands[1:]])


def _async_done(instr) -> None:
    comp, bound = instr.attrs.get("calls"), _previous_binding(instr)
    if comp is None:
        return
    if bound is not None and len(bound) != len(comp.parameters):
        raise RuleFailure("async operands", f"async-done needs all {len(comp.parameters)} "
                                            f"operands of %{comp.name} bound, %"
                                            f"{instr.operand(0).name} has bound {len(bound)}")
    if not instr.shape.compatible(comp.root.shape):
        raise RuleFailure("async shape", f"async-done returns %{comp.name}'s result "
                                         f"{comp.root.shape}, declared {instr.shape}")


def _async_start_structure(instr) -> None:
    """((operands), result, context...): {0} holds the operands' shapes, {1} what the
    called computation returns, and the computation takes the operands."""
    comp = instr.attrs.get("calls")
    shape = instr.shape
    if comp is None:
        return
    if not shape.is_tuple or len(shape.tuple_shapes) < 2:
        raise RuleFailure("async shape", "async-start returns ((operands), result, context...)")
    params = comp.parameters
    operand_shapes = [o.shape for o in instr.operands]
    # late binding: updates may pass the last operands, so a start may give fewer
    if len(params) < len(operand_shapes) or any(
            not p.shape.compatible(s) for p, s in zip(params, operand_shapes)):
        raise RuleFailure("async operands", f"%{comp.name} takes "
                                            f"{[str(p.shape) for p in params]}, given "
                                            f"{[str(s) for s in operand_shapes]}")
    copies = shape.tuple_shapes[0]
    if not copies.is_tuple or len(copies.tuple_shapes) != len(operand_shapes) or any(
            not c.compatible(s) for c, s in zip(copies.tuple_shapes, operand_shapes)):
        raise RuleFailure("async shape", f"{{0}} of the result must be the operands' shapes "
                                         f"({', '.join(map(str, operand_shapes))}), got "
                                         f"{copies}")
    _check_bound_result(shape.tuple_shapes[1], comp)


def _partially_bound(result, comp) -> bool:
    """Late binding: {1} of an async state is a tuple holding the first outputs of a tuple
    result, more with each update. True for such a part (`()` included)."""
    root = comp.root.shape if comp.has_root else None
    return root is not None and root.is_tuple and result.is_tuple and \
        len(result.tuple_shapes) < len(root.tuple_shapes)


def _check_bound_result(result, comp) -> None:
    """The outputs bound so far have the shapes of the computation's first outputs. (Whole
    results are not compared with the computation: XLA's parser tests load async states
    that disagree with it.)"""
    if _partially_bound(result, comp) and not all(
            r.compatible(w) for r, w in zip(result.tuple_shapes, comp.root.shape.tuple_shapes)):
        raise RuleFailure("async result", f"%{comp.name} returns {comp.root.shape}; the "
                                          f"outputs bound so far are {result}")


def _async_continuation(instr) -> None:
    """async-update and async-done continue an async-start or async-update: the same
    computation and execution thread; an update passes on ((operands), result, ...)."""
    operand = instr.operand(0)
    if operand.opcode == "async-done":
        raise RuleFailure("async pair", f"{instr.opcode} continues an async-start or "
                                        f"async-update, not the async-done %{operand.name}")
    if operand.opcode not in ("async-start", "async-update") or not operand.shape.is_tuple:
        return  # passed through a loop's state: checked where it started
    start = operand
    while start.opcode == "async-update" and start.operand_count and \
            start.operand(0).opcode in ("async-start", "async-update"):
        start = start.operand(0)
    calls, started = instr.attrs.get("calls"), start.attrs.get("calls")
    if calls is not None and started is not None and calls is not started:
        raise RuleFailure("async computation", f"{instr.opcode} names %{calls.name}, but "
                                               f"%{start.name} runs %{started.name}")
    thread = instr.attrs.get("async_execution_thread")  # absent: the start's thread
    if thread is not None and thread != operand.attrs.get("async_execution_thread",
                                                          MAIN_THREAD):
        raise RuleFailure("async thread", f"async_execution_thread=\"{thread}\" differs "
                                          f"from %{operand.name}'s")
    if instr.opcode == "async-update" and (
            not instr.shape.is_tuple or len(instr.shape.tuple_shapes) < 2 or
            not instr.shape.tuple_shapes[0].is_tuple):
        # only the structure is fixed: XLA's parser lets an update change the shapes it
        # passes on, and {1} gain outputs an update binds late
        raise RuleFailure("async shape", f"async-update passes {operand.shape} on, declared "
                                         f"{instr.shape}")
    if instr.opcode == "async-update" and started is not None:
        _check_bound_result(instr.shape.tuple_shapes[1], started)
    want = operand.shape.tuple_shapes[1]
    if instr.opcode == "async-done" and not instr.shape.compatible(want):
        raise RuleFailure("async shape", f"{instr.opcode} returns {want}, declared "
                                         f"{instr.shape}")
    copies = operand.shape.tuple_shapes[0]
    if instr.opcode == "async-done" and started is not None and copies.is_tuple and \
            len(copies.tuple_shapes) != len(started.parameters):
        raise RuleFailure("async operands", f"%{started.name} takes "
                                            f"{len(started.parameters)} operands, "
                                            f"{len(copies.tuple_shapes)} were passed by the "
                                            f"async-done")
    if instr.opcode == "async-done" and started is not None and \
            _partially_bound(instr.shape, started):
        root = started.root
        raise RuleFailure("async result", f"async-done returns {instr.shape}, but "
                                          f"%{started.name} returns {root.shape}: every "
                                          f"output must be bound by then")


def _copy_start(instr) -> None:
    shape, operand = instr.shape, instr.operand(0).shape
    if not shape.is_tuple or len(shape.tuple_shapes) != 3 or \
            not shape.tuple_shapes[0].compatible(operand) or shape.tuple_shapes[1] != operand:
        raise RuleFailure("copy-start shape", f"copy-start of {operand} returns (destination, "
                                              f"{operand}, u32[]), declared {shape}")


def _done_of(start: str):
    def check(instr) -> None:
        operand = instr.operand(0)
        if operand.opcode != start:
            raise RuleFailure("async pair", f"{instr.opcode} needs a {start} operand, got "
                                            f"{operand.opcode}")
        want = operand.shape.tuple_shapes[0] if start == "copy-start" else None
        if want is not None and not instr.shape.compatible(want):
            raise RuleFailure("copy-done shape", f"copy-done returns {want}, declared "
                                                 f"{instr.shape}")
    return check


MAIN_THREAD = "main"
ASYNC_OPS = ("async-start", "async-update", "async-done")


def check_threads(module) -> tuple[object, RuleFailure] | None:
    """(instruction, failure) for a call across execution threads, else None. A computation
    runs on its execution_thread. One that names none inherits a thread from its callers: an
    async-start's async_execution_thread (XLA's parser gives the called computation that
    thread), or the thread of the computation that calls it. Every other call stays on the
    caller's thread."""
    threads = {id(c): c.execution_thread for c in module.computations if c.execution_thread}
    pending = [(instr.attrs["calls"], instr.attrs.get("async_execution_thread", MAIN_THREAD))
               for c in module.computations for instr in c.instructions
               if instr.opcode == "async-start" and instr.attrs.get("calls") is not None]
    pending += [(c, MAIN_THREAD) for c in module.computations if c is module.entry]
    pending += [(c, c.execution_thread) for c in module.computations if c.execution_thread]
    while pending:  # hand threads down the call graph
        comp, thread = pending.pop()
        if threads.setdefault(id(comp), thread) != thread:
            continue
        pending += [(callee, thread) for instr in comp.instructions
                    if instr.opcode not in ASYNC_OPS for callee in instr.called_computations
                    if id(callee) not in threads]
    for comp in module.computations:
        thread = threads.get(id(comp), MAIN_THREAD)
        for instr in comp.instructions:
            if instr.opcode in ("async-update", "async-done"):
                continue  # they run what their async-start runs
            want = instr.attrs.get("async_execution_thread", MAIN_THREAD) \
                if instr.opcode == "async-start" else thread
            for callee in instr.called_computations:
                got = threads.get(id(callee), MAIN_THREAD)
                if got != want:
                    return instr, RuleFailure("execution thread", f"%{callee.name} runs on "
                                                                  f"thread \"{got}\", the "
                                                                  f"caller on \"{want}\"")
    return None


def _both(first, second):
    def rule(instr) -> None:
        first(instr)
        second(instr)
    return rule


INSTRUCTION_RULES = {
    "compare": _compare_type, "rng": _rng, "iota": _iota, "select": _select,
    "conditional": _conditional, "call": _composite_call,
    "async-start": _both(_async_start_structure, _async_start),
    "async-update": _both(_async_continuation, _async_update),
    "async-done": _both(_async_continuation, _async_done), "copy-start": _copy_start,
    "copy-done": _done_of("copy-start"),
    "all-reduce-done": _done_of("all-reduce-start"),
    "all-gather-done": _done_of("all-gather-start"),
    "collective-permute-done": _done_of("collective-permute-start"),
}

# start opcode -> the opcodes that continue it, ending with the done
_PAIRS = {"async-start": ("async-update", "async-done"), "copy-start": ("copy-done",),
          "all-reduce-start": ("all-reduce-done",), "all-gather-start": ("all-gather-done",),
          "collective-permute-start": ("collective-permute-done",)}


def check_pairs(comp) -> tuple[object, RuleFailure] | None:
    """(instruction, failure) for a start without exactly one done, else None."""
    for instr in comp.instructions:
        follow = _PAIRS.get(instr.opcode)
        if follow is None:
            continue
        current, dones = instr, 0
        while True:
            users = [u for u in current.users if u.opcode in follow]
            if len(users) > 1:
                return instr, RuleFailure("async pair", f"%{current.name} has "
                                                        f"{len(users)} continuations")
            if not users:
                if current.users or (current.is_root() and not comp.is_entry):
                    dones = 1  # passed on (a loop's state, a tuple): the done is elsewhere
                break
            current = users[0]
            if current.opcode == follow[-1]:
                dones += 1
                break
        if dones != 1:
            return instr, RuleFailure("async pair", f"%{instr.name} ({instr.opcode}) has no "
                                                    f"{follow[-1]}")
    for instr in comp.instructions:
        if instr.opcode == "async-update" and not instr.users and not instr.is_root():
            return instr, RuleFailure("async pair", f"%{instr.name} (async-update) is "
                                                    f"neither continued nor passed on")
    return None


def _element(value, index: int, loops: dict, seen: set):
    """The async op that element `index` of the tuple `value` comes from, following tuples,
    while loops and loop parameters back to where the value was made; None if unknown."""
    if id(value) in seen:
        return None
    seen.add(id(value))
    if value.opcode == "tuple" and index < value.operand_count:
        return _async_origin(value.operand(index), loops, seen)
    if value.opcode == "while" and value.operand_count:
        return _element(value.operand(0), index, loops, seen)
    if value.opcode == "parameter" and value.parent is not None:
        for loop in loops.get(id(value.parent), ()):
            found = _element(loop.operand(0), index, loops, seen)
            if found is not None:
                return found
    return None


def _async_origin(value, loops: dict, seen: set):
    if value.opcode in ("async-start", "async-update"):
        return value
    if value.opcode == "get-tuple-element":
        return _element(value.operand(0), value.attrs["index"], loops, seen)
    return None


def check_loop_async(module) -> tuple[object, RuleFailure] | None:
    """(instruction, failure) for an async-update or async-done that takes its state through
    a loop from an async op running another (not structurally equal) computation, else
    None."""
    loops: dict[int, list] = {}
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode == "while":
                for attr in ("body", "condition"):
                    if instr.attrs.get(attr) is not None:
                        loops.setdefault(id(instr.attrs[attr]), []).append(instr)
    for comp in module.computations:
        for instr in comp.instructions:
            calls = instr.attrs.get("calls")
            if instr.opcode not in ("async-update", "async-done") or calls is None or \
                    instr.operand(0).opcode in ("async-start", "async-update"):
                continue
            origin = _async_origin(instr.operand(0), loops, set())
            while origin is not None and origin.opcode == "async-update" and \
                    origin.attrs.get("calls") is None and origin.operand_count:
                origin = _async_origin(origin.operand(0), loops, set())
            started = origin.attrs.get("calls") if origin is not None else None
            # XLA accepts another computation that does the same thing
            if started is not None and started is not calls and \
                    not started.structurally_equal(calls):
                return instr, RuleFailure("async computation", f"{instr.opcode} names "
                                                               f"%{calls.name}, but its state "
                                                               f"comes from %{origin.name}, "
                                                               f"which runs %{started.name}")
    return None


__all__ = ["INSTRUCTION_RULES", "MAIN_THREAD", "RuleFailure", "check_loop_async", "check_pairs",
           "check_threads"]
