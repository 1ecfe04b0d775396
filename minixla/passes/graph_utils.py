"""Small graph helpers shared by the passes: side effects, fresh names, dead-code removal."""

from __future__ import annotations


from ..ir.instruction import HloInstruction
from ..ir.module import NameUniquer  # noqa: F401  (re-exported for the passes)
from ..ir.shapes import Shape


def same_layout(a: Shape, b: Shape) -> bool:
    return a.with_default_layout() == b.with_default_layout()


def has_side_effect(instr: HloInstruction, _memo: dict | None = None) -> bool:
    return instr.has_side_effect(_memo)


def rewritable_computations(module) -> list:
    """Every computation except fused ones (whose form belongs to the fusion pass)."""
    fused = {
        id(c)
        for i in module.all_instructions()
        if i.opcode == "fusion"
        for c in i.called_computations
    }
    return [c for c in module.computation_post_order() if id(c) not in fused]


def remove_if_dead(comp, candidates) -> None:
    """Removes candidates (and then their operands) left without users, except parameters,
    the root and side-effecting instructions."""
    stack = list(candidates)
    while stack:
        instr = stack.pop()
        if (
            instr.parent is not comp
            or instr.users
            or instr is comp.root
            or instr.opcode == "parameter"
            or instr.control_successors
            or has_side_effect(instr)
        ):
            continue
        operands = list(instr.operands)
        comp.remove_instruction(instr)
        stack.extend(operands)
