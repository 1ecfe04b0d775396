"""conditional-simplifier: a conditional whose branch is known is that branch, inlined.

As XLA's ConditionalSimplifier: a constant predicate (or branch index) selects one branch, and
a conditional with a single branch always takes it. Out-of-range indices take the last
branch, as at run time. Branches with side effects are inlined too: exactly one of them runs
either way.
"""

from __future__ import annotations

from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from .base import Pass, register_pass
from .hlo_utils import NameUniquer, inline_computation, remove_if_dead, sequential_computations


def taken_branch(cond: HloInstruction) -> int | None:
    branches = cond.called_computations
    if len(branches) == 1:
        return 0
    selector = cond.operand(0)
    if selector.opcode != "constant":
        return None
    value = selector.literal
    if "branch_computations" not in cond.attrs:
        return 0 if bool(value) else 1
    index = int(value)
    return index if 0 <= index < len(branches) else len(branches) - 1


@register_pass
class ConditionalSimplifier(Pass):
    name = "conditional-simplifier"

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        changed = False
        for comp in sequential_computations(module):
            for cond in [i for i in comp.post_order() if i.opcode == "conditional"]:
                branch = taken_branch(cond)
                if branch is None:
                    continue
                callee = cond.called_computations[branch]
                root = inline_computation(callee, [cond.operand(branch + 1)], comp, names)
                operands = list(cond.operands)
                comp.replace_instruction(cond, root)
                for operand in operands:
                    remove_if_dead(operand)
                changed = True
        if changed:
            module.remove_unreachable_computations()
        return changed
