"""XLA's HloVerifier rules on async chains: async-start -> async-update* -> async-done.

Every op of a chain runs one wrapped computation. async-start and async-update return the
chain's state, `((operands bound so far...), output bound so far, target state...)`:

* operands: a prefix of the computation's parameters. The start binds its operands, each
  update the operands after its first (late binding); the async-done needs all of them.
* output: `()` while nothing is bound, the computation's whole result, or, for a tuple
  result bound element by element (late-bound outputs), a tuple of its first elements. An
  update may bind more, never less. The async-done returns the whole result, bound or not.
* target state: the elements after the output belong to the op the chain wraps; unchecked.

An update or done continues the start or update it takes as operand 0: same computation, same
execution thread, never an async-done. A chain may pass its state through a while loop; the
op after the loop must run the computation that started it (or one structurally equal).
`ASYNC_RULES` maps the three opcodes to checks `(instr) -> None` raising RuleFailure;
`check_loop_async(module)` checks chains across loops.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .shapes import Shape
from .verifier_attributes import output_to_operand_pairs, same_array
from .verifier_rules import MAIN_THREAD, RuleFailure

if TYPE_CHECKING:
    from .instruction import HloInstruction

CONTINUED = ("async-start", "async-update")


@dataclasses.dataclass(frozen=True)
class AsyncState:
    """What an async-start or async-update holds of its chain."""

    operands: tuple[Shape, ...]
    output: Shape


def state_of(instr, shape: Shape | None = None) -> AsyncState:
    """The chain state `shape` (default: instr's) describes; RuleFailure if it has not the
    form ((operands...), output, target state...)."""
    shape = instr.shape if shape is None else shape
    if not shape.is_tuple or len(shape.tuple_shapes) < 2 or not shape.tuple_shapes[0].is_tuple:
        raise RuleFailure(
            "async shape",
            f"{instr.opcode} returns ((operands), result, state...), declared {shape}",
        )
    return AsyncState(tuple(shape.tuple_shapes[0].tuple_shapes), shape.tuple_shapes[1])


def _shapes(shapes) -> list[str]:
    return [str(s) for s in shapes]


def _bound_count(output: Shape, result: Shape) -> int | None:
    """How many outputs `output` binds of `result` (a non-tuple result counts as one); None
    when it is neither `()`, the whole result nor a prefix of a tuple result."""
    if output.compatible(result):
        return len(result.tuple_shapes) if result.is_tuple else 1
    if not output.is_tuple:
        return None
    if not output.tuple_shapes:
        return 0
    bound = output.tuple_shapes
    if (
        not result.is_tuple
        or len(bound) > len(result.tuple_shapes)
        or not all(a.compatible(b) for a, b in zip(bound, result.tuple_shapes))
    ):
        return None
    return len(bound)


def _check_state(
    instr, comp, state: AsyncState, bound: list[Shape], previous: AsyncState | None
) -> None:
    """`state` lists the operands `bound` so far, a prefix of `comp`'s parameters, and an
    output that fits `comp`'s result and extends the `previous` op's."""
    if len(state.operands) != len(bound) or any(
        not a.compatible(b) for a, b in zip(state.operands, bound)
    ):
        raise RuleFailure(
            "async operands",
            f"the operands bound are {_shapes(bound)}, the shape lists {_shapes(state.operands)}",
        )
    params = comp.parameter_shapes
    if len(bound) > len(params) or any(not p.compatible(b) for p, b in zip(params, bound)):
        raise RuleFailure(
            "async operands", f"%{comp.name} takes {_shapes(params)}, given {_shapes(bound)}"
        )
    result = comp.root.shape
    count = _bound_count(state.output, result)
    before = 0 if previous is None else _bound_count(previous.output, result)
    if count is None or (before is not None and count < before):
        raise RuleFailure(
            "async result",
            f"%{comp.name} returns {result}; the outputs bound so far are {state.output}",
        )


def _previous(instr) -> tuple[object, AsyncState | None]:
    """The op `instr` continues and the state it passes on (None when it comes through a
    loop's state in some other form: checked where it started)."""
    previous = instr.operand(0)
    if previous.opcode == "async-done":
        raise RuleFailure(
            "async pair",
            f"{instr.opcode} continues an async-start or "
            f"async-update, not the async-done %{previous.name}",
        )
    try:
        return previous, state_of(previous)
    except RuleFailure:
        return previous, None


def _check_continuation(instr, comp, previous) -> None:
    if previous.opcode not in CONTINUED:
        return  # passed through a loop's state: check_loop_async
    started = previous.attrs.get("calls")
    if started is not None and started is not comp:
        raise RuleFailure(
            "async computation",
            f"{instr.opcode} names %{comp.name}, but %{previous.name} runs %{started.name}",
        )
    thread = instr.attrs.get("async_execution_thread")  # absent: the previous op's thread
    if thread is not None and thread != previous.attrs.get("async_execution_thread", MAIN_THREAD):
        raise RuleFailure(
            "async thread", f'async_execution_thread="{thread}" differs from %{previous.name}\'s'
        )


def _check_aliasing(instr, comp) -> None:
    """Each `{output index}: (operand, {index})` pairs one shape and layout. The output index
    points into the state, under {1} into the computation's result (which may be bound later).
    An async-start's operand numbers name the computation's parameters (late-bound ones
    included), an async-update's its own operands (the state first)."""
    attr = instr.attrs.get("output_to_operand_aliasing")
    if attr is None:
        return
    pairs = output_to_operand_pairs(str(getattr(attr, "text", attr)))
    if pairs is None:
        raise RuleFailure("output_to_operand_aliasing", f"cannot read {attr}")
    operands = (
        comp.parameter_shapes
        if instr.opcode == "async-start"
        else [o.shape for o in instr.operands]
    )
    for out_index, number, in_index in pairs:
        out, inside = (",".join(map(str, index)) for index in (out_index, in_index))
        where = f"{{{out}}}: ({number}, {{{inside}}})"
        if not out_index:
            raise RuleFailure(
                "output_to_operand_aliasing", "an async op cannot alias its whole result"
            )
        if not 0 <= number < len(operands):
            raise RuleFailure(
                "output_to_operand_aliasing",
                f"{where}: operand {number} does not exist ({len(operands)} operands)",
            )
        try:
            output = (
                comp.root.shape.subshape(out_index[1:])
                if out_index[0] == 1
                else instr.shape.subshape(out_index)
            )
            operand = operands[number].subshape(in_index)
        except IndexError:
            raise RuleFailure("output_to_operand_aliasing", f"{where} names no shape") from None
        # aliased buffers are one buffer: the layouts must agree where both give one
        layouts = (
            output.is_array and operand.is_array and None not in (output.layout, operand.layout)
        )
        if not same_array(output, operand) or (
            layouts and output.minor_to_major() != operand.minor_to_major()
        ):
            raise RuleFailure(
                "output_to_operand_aliasing",
                f"output {{{out}}} is {output}, operand {number} {{{inside}}} is {operand}",
            )


def _async_start(instr) -> None:
    comp = instr.attrs.get("calls")
    if comp is None:
        return
    _check_state(instr, comp, state_of(instr), [o.shape for o in instr.operands], None)
    _check_aliasing(instr, comp)


def _async_update(instr) -> None:
    previous, before = _previous(instr)
    comp = instr.attrs.get("calls")
    if comp is None:
        return
    _check_continuation(instr, comp, previous)
    state = state_of(instr)
    if before is not None:
        _check_state(
            instr,
            comp,
            state,
            list(before.operands) + [o.shape for o in instr.operands[1:]],
            before,
        )
    _check_aliasing(instr, comp)


def _async_done(instr) -> None:
    previous, before = _previous(instr)
    comp = instr.attrs.get("calls")
    if comp is None:
        return
    _check_continuation(instr, comp, previous)
    params, result = comp.parameters, comp.root.shape
    if before is not None and len(before.operands) != len(params):
        raise RuleFailure(
            "async operands",
            f"%{comp.name} takes {len(params)} operands, "
            f"{len(before.operands)} were passed by the "
            f"async-done",
        )
    if instr.shape.compatible(result):
        return
    if instr.shape.is_tuple and _bound_count(instr.shape, result):
        raise RuleFailure(
            "async result",
            f"async-done returns {instr.shape}, but "
            f"%{comp.name} returns {result}: every output must "
            f"be bound by then",
        )
    raise RuleFailure(
        "async shape", f"async-done returns %{comp.name}'s result {result}, declared {instr.shape}"
    )


ASYNC_RULES = {
    "async-start": _async_start,
    "async-update": _async_update,
    "async-done": _async_done,
}


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
    if value.opcode in CONTINUED:
        return value
    if value.opcode == "get-tuple-element":
        return _element(value.operand(0), value.attrs["index"], loops, seen)
    return None


def check_loop_async(module) -> tuple[HloInstruction, RuleFailure] | None:
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
            if (
                instr.opcode not in ("async-update", "async-done")
                or calls is None
                or instr.operand(0).opcode in CONTINUED
            ):
                continue
            origin = _async_origin(instr.operand(0), loops, set())
            while (
                origin is not None
                and origin.opcode == "async-update"
                and origin.attrs.get("calls") is None
                and origin.operand_count
            ):
                origin = _async_origin(origin.operand(0), loops, set())
            started = origin.attrs.get("calls") if origin is not None else None
            # XLA accepts another computation that does the same thing
            if (
                started is not None
                and started is not calls
                and not started.structurally_equal(calls)
            ):
                return instr, RuleFailure(
                    "async computation",
                    f"{instr.opcode} names "
                    f"%{calls.name}, but its state "
                    f"comes from %{origin.name}, "
                    f"which runs %{started.name}",
                )
    return None


__all__ = ["ASYNC_RULES", "AsyncState", "check_loop_async", "state_of"]
