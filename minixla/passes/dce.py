"""Dead code elimination: instructions whose values nobody uses, and unreachable computations.

Live means reachable from the root through operands and control edges, or side-effecting
(directly, or through a computation it calls). Parameters always stay: they are the
computation's signature.
"""
from __future__ import annotations

from ..ir.module import HloModule
from .base import Pass, register_pass
from .graph_utils import has_side_effect


def remove_dead_instructions(comp) -> bool:
    memo: dict = {}
    live: set[int] = set()
    roots = [comp.root] + [i for i in comp.instructions if i.opcode == "parameter"
                           or has_side_effect(i, memo)]
    stack = list(roots)
    while stack:
        instr = stack.pop()
        if id(instr) in live:
            continue
        live.add(id(instr))
        stack.extend(instr.operands)
        stack.extend(instr.control_predecessors)
    dead = [i for i in reversed(comp.post_order()) if id(i) not in live]
    for instr in dead:  # users come before their operands in this order
        instr.drop_control_dependencies()
        comp.remove_instruction(instr)
    return bool(dead)


@register_pass
class DeadCodeElimination(Pass):
    name = "dce"

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in module.computations:
            changed |= remove_dead_instructions(comp)
        # after the instructions: a removed call can leave its callee unreachable
        return module.remove_unreachable_computations() or changed
