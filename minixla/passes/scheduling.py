"""scheduling: a sequential order for every computation that keeps peak memory low.

List scheduling (as XLA's ListMemoryScheduler): among the instructions whose operands and
control predecessors are scheduled, pick the one that frees the most bytes net of what it
allocates; ties keep the DFS post order, which keeps producers next to their consumers.
Bytes come from the dataflow: an instruction frees a value when it is the value's last
unscheduled reader and the value is not live out or read-only; forwarding ops (tuple,
get-tuple-element, bitcast) allocate nothing. Computations without buffers (fused and
per-element ones) just get their post order. The module is then marked `is_scheduled` and each
computation's instruction list is its schedule, which is what the printer shows and what
buffer assignment reads.
"""
from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from .base import Pass, register_pass
from .dataflow import FORWARDING, Dataflow


@register_pass
class Scheduler(Pass):
    name = "scheduling"

    def run(self, module: HloModule) -> bool:
        flow = Dataflow(module)
        sequential = {id(c) for c in flow.computations}
        changed = not module.is_scheduled
        for comp in module.computations:
            order = (list_schedule(comp, flow) if id(comp) in sequential else comp.post_order())
            if order != comp.instructions:
                comp.instructions[:] = order
                changed = True
        module.is_scheduled = True
        return changed


def list_schedule(comp: HloComputation, flow: Dataflow) -> list[HloInstruction]:
    position = {id(i): k for k, i in enumerate(comp.post_order())}
    waiting = {id(i): len(set(map(id, i.operands))) + len(i.control_predecessors)
               for i in comp.instructions}
    readers: dict[int, set[int]] = {}  # value id -> ids of its unscheduled readers
    for instr in comp.instructions:
        for value in _read_values(instr, flow):
            readers.setdefault(value.id, set()).add(id(instr))
    pinned = {v.id for v in flow.values if flow.is_read_only(v) or _live_out(v)}
    ready = [i for i in comp.instructions if waiting[id(i)] == 0]
    order: list[HloInstruction] = []
    while ready:
        best = max(ready, key=lambda i: (_net_freed(i, flow, readers, pinned),
                                         -position[id(i)]))
        ready.remove(best)
        order.append(best)
        for value in _read_values(best, flow):
            readers.get(value.id, set()).discard(id(best))
        for succ in {id(u): u for u in list(best.users) + best.control_successors}.values():
            if succ.parent is not comp:
                continue
            waiting[id(succ)] -= _edges(best, succ)
            if waiting[id(succ)] == 0:
                ready.append(succ)
    if len(order) != len(comp.instructions):
        raise ValueError(f"computation {comp.name} has a cycle; cannot schedule it")
    return order


def _edges(pred: HloInstruction, succ: HloInstruction) -> int:
    return int(pred in succ.operands) + int(pred in succ.control_predecessors)


def _read_values(instr: HloInstruction, flow: Dataflow):
    if instr.opcode in FORWARDING:
        return []
    seen = {}
    for operand in instr.operands:
        for value in flow.values_in(operand):
            seen[value.id] = value
    return list(seen.values())


def _net_freed(instr: HloInstruction, flow: Dataflow, readers, pinned) -> int:
    freed = sum(v.size for v in _read_values(instr, flow)
                if v.id not in pinned and readers.get(v.id) == {id(instr)})
    allocated = 0 if instr.opcode in FORWARDING else sum(
        v.size for v in flow.values_in(instr) if v.instr is instr)
    return freed - allocated


def _live_out(value) -> bool:
    return any(p is p.parent.root for p, _ in value.positions)
