"""Small graph helpers shared by the passes: side effects, fresh names, dead-code removal."""
from __future__ import annotations

import re

from ..ir.instruction import HloInstruction
from ..ir.shapes import Shape


def same_layout(a: Shape, b: Shape) -> bool:
    return a.with_default_layout() == b.with_default_layout()


def has_side_effect(instr: HloInstruction, _memo: dict | None = None) -> bool:
    return instr.has_side_effect(_memo)


class NameUniquer:
    """Hands out instruction names not used anywhere in the module (the verifier wants that)."""

    def __init__(self, module):
        self.used = {i.name for i in module.all_instructions()}

    def fresh(self, base: str) -> str:
        base = re.sub(r"\.\d+$", "", base) or "instr"
        suffix = 0
        candidate = base
        while candidate in self.used:
            suffix += 1
            candidate = f"{base}.{suffix}"
        self.used.add(candidate)
        return candidate


def rewritable_computations(module) -> list:
    """Every computation except fused ones (whose form belongs to the fusion pass)."""
    fused = {id(c) for i in module.all_instructions() if i.opcode == "fusion"
             for c in i.called_computations}
    return [c for c in module.computation_post_order() if id(c) not in fused]


def remove_if_dead(comp, candidates) -> None:
    """Removes candidates (and then their operands) left without users, except parameters,
    the root and side-effecting instructions."""
    stack = list(candidates)
    while stack:
        instr = stack.pop()
        if (instr.parent is not comp or instr.users or instr is comp.root
                or instr.opcode == "parameter" or instr.control_successors
                or has_side_effect(instr)):
            continue
        operands = list(instr.operands)
        comp.remove_instruction(instr)
        stack.extend(operands)
