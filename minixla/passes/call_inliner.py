"""Call inlining: replace each `call` by a copy of the computation it calls.

Callees are inlined into callers bottom-up (the module's computation post order), so a callee
is already flat when it is copied. A computation left without callers is removed. Calls with
control edges stay, since their ordering constraint has no single instruction to move to.
"""

from __future__ import annotations

from ..ir.module import HloModule
from .base import Pass, register_pass
from .graph_utils import NameUniquer, remove_if_dead


def inline_call(call, names: NameUniquer) -> None:
    """Copies the callee's instructions into the caller in place of `call`."""
    comp, callee = call.parent, call.attrs["to_apply"]
    mapping = {}
    for instr in callee.post_order():
        if instr.opcode == "parameter":
            mapping[id(instr)] = call.operand(instr.parameter_number)
            continue
        copy = instr.clone([mapping[id(o)] for o in instr.operands], name=names.fresh(instr.name))
        comp.add_instruction(copy)
        mapping[id(instr)] = copy
    for instr in callee.instructions:
        for pred in instr.control_predecessors:
            if instr.opcode != "parameter" and pred.opcode != "parameter":
                mapping[id(pred)].add_control_dependency_to(mapping[id(instr)])
    operands = list(call.operands)
    call.replace_all_uses_with(mapping[id(callee.root)])
    comp.remove_instruction(call)
    remove_if_dead(comp, operands)


@register_pass
class CallInliner(Pass):
    name = "call-inliner"

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        inlined = []
        for comp in module.computation_post_order():
            for instr in comp.post_order():
                if instr.opcode == "call" and not (
                    instr.control_predecessors or instr.control_successors
                ):
                    inlined.append(instr.attrs["to_apply"])
                    inline_call(instr, names)
        if not inlined:
            return False
        called = {id(c) for comp in module.computations for c in comp.called_computations()}
        for callee in {id(c): c for c in inlined}.values():
            if (
                id(callee) not in called
                and callee is not module.entry
                and callee in module.computations
            ):
                module.remove_computation(callee)
        return True
