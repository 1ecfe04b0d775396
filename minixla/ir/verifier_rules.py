"""More of XLA's HloVerifier: per-opcode rules on types and async pairs, and the pairing of
`*-start` with `*-done` across a computation.

`INSTRUCTION_RULES` maps an opcode to a check `(instr) -> None` that raises `RuleFailure(rule,
detail)`; `check_pairs(comp)` checks that every start has exactly one done. minixla.ir.verifier
runs both and reports failures like its own.
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
    """`type=` must suit the operands: FLOAT/TOTALORDER floats, SIGNED/UNSIGNED integers.

    Unlike XLA, an integer may be compared with the other signedness (an unsigned view of
    signed bits, which minixla's integer corner-case tests use)."""
    kind = instr.attrs.get("type")
    if kind is None or not instr.operand_count or not instr.operand(0).shape.is_array:
        return
    etype = instr.operand(0).shape.element_type
    allowed = {"FLOAT": etype.is_float or etype.is_complex,
               "TOTALORDER": etype.is_float or etype.is_complex,
               "SIGNED": etype.is_integer,
               "UNSIGNED": etype.is_integer or _kind(instr.operand(0).shape) == "pred"}
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


INSTRUCTION_RULES = {
    "compare": _compare_type, "rng": _rng, "iota": _iota, "select": _select,
    "conditional": _conditional, "call": _composite_call,
    "async-start": _async_start, "async-update": _async_update,
    "async-done": _async_done, "copy-start": _copy_start,
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
    return None


__all__ = ["INSTRUCTION_RULES", "RuleFailure", "check_pairs"]
