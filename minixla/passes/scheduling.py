"""scheduling: a sequential order for every computation that keeps peak memory low.

Two schedules are made and the one with the lower simulated peak wins (peak bytes, then peak
temporary bytes), as XLA's DefaultMemoryScheduler keeps the best of several algorithms:
- early (XLA's ListMemoryScheduler): from the front, among the instructions whose operands and
  control predecessors are scheduled, pick the one that frees the most bytes net of what it
  allocates; ties keep the DFS post order, which keeps producers next to their consumers;
- sunk: the early schedule rebuilt from the back, where an instruction whose users are all
  placed may move down to right before its first user, with the producers only it needs (its
  block), when that ends at least as many live bytes as it starts. Greedy from the front,
  anything that only allocates is scheduled as soon as it is ready: the transpose of a weight
  for the backward pass, or a checkpointed region's recomputation, whose opt-barrier is ready
  as soon as the forward values it reads are. Sinking puts them next to their consumers, so
  the recomputed activations live for one layer of the backward pass instead of all of it.
  Side-effecting ops, collectives and instructions with control dependencies keep their place
  (the early order among themselves).
Bytes come from the dataflow: an instruction frees a value when it is the value's last reader
and the value is not live out or read-only; forwarding ops (tuple, get-tuple-element, bitcast,
opt-barrier) allocate nothing. Computations without buffers (fused and per-element ones) just
get their post order. The module is then marked `is_scheduled` and each computation's
instruction list is its schedule, which is what the printer shows and what buffer assignment
reads.
"""

from __future__ import annotations

import heapq

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import COLLECTIVE
from .base import Pass, register_pass
from .dataflow import FORWARDING, Dataflow, HloValue, can_share_operand_buffer

BLOCK_LIMIT = 16  # most instructions sunk together


@register_pass
class Scheduler(Pass):
    name = "scheduling"

    def run(self, module: HloModule) -> bool:
        flow = Dataflow(module)
        sequential = {id(c) for c in flow.computations}
        changed = not module.is_scheduled
        for comp in module.computations:
            order = memory_schedule(comp, flow) if id(comp) in sequential else comp.post_order()
            if order != comp.instructions:
                comp.instructions[:] = order
                changed = True
        module.is_scheduled = True
        return changed


def memory_schedule(comp: HloComputation, flow: Dataflow) -> list[HloInstruction]:
    """The early list schedule, or the sunk one where its simulated peak is lower."""
    early = list_schedule(comp, flow)
    sunk = sunk_schedule(comp, flow, early)
    if schedule_peak_bytes(sunk, comp, flow) < schedule_peak_bytes(early, comp, flow):
        return sunk
    return early


def list_schedule(comp: HloComputation, flow: Dataflow) -> list[HloInstruction]:
    position = {id(i): k for k, i in enumerate(comp.post_order())}
    waiting = {
        id(i): len(set(map(id, i.operands))) + len(i.control_predecessors)
        for i in comp.instructions
    }
    readers: dict[int, set[int]] = {}  # value id -> ids of its unscheduled readers
    for instr in comp.instructions:
        for value in _read_values(instr, flow):
            readers.setdefault(value.id, set()).add(id(instr))
    pinned = {v.id for v in flow.values if flow.is_read_only(v) or _live_out(v)}
    ready = [i for i in comp.instructions if waiting[id(i)] == 0]
    order: list[HloInstruction] = []
    while ready:
        best = max(ready, key=lambda i: (_net_freed(i, flow, readers, pinned), -position[id(i)]))
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


def sunk_schedule(
    comp: HloComputation, flow: Dataflow, early: list[HloInstruction]
) -> list[HloInstruction]:
    """`early`, rebuilt from the back: an instruction whose users are all placed is placed
    there, right before its first user, together with the producers only it needs (its
    block), when that ends live bytes and at least as many as it starts; anything else
    keeps its early place. Side effects, collectives and control dependencies never move."""
    position = {id(i): k for k, i in enumerate(early)}
    waiting = {
        id(i): len({id(u) for u in i.users if u.parent is comp}) + len(i.control_successors)
        for i in early
    }
    read_only = {v.id for v in flow.values if flow.is_read_only(v)}
    live = {v.id for v in flow.values if _live_out(v) and v.id not in read_only}
    ready = [(-position[id(i)], i) for i in early if waiting[id(i)] == 0]
    heapq.heapify(ready)
    placed: set[int] = set()
    order: list[HloInstruction] = []
    fresh: list[HloInstruction] = []  # just became ready: may sink

    def place(instr: HloInstruction) -> None:
        order.append(instr)
        placed.add(id(instr))
        live.update(v.id for v in _read_values(instr, flow) if v.id not in read_only)
        for pred in {id(p): p for p in list(instr.operands) + instr.control_predecessors}.values():
            if pred.parent is comp:
                waiting[id(pred)] -= _edges(pred, instr)
                if waiting[id(pred)] == 0:
                    fresh.append(pred)

    while ready or fresh:
        if fresh:
            instr = fresh.pop()
            if id(instr) in placed:
                continue  # a member of a block placed before it was popped
            block = _sink_block(instr, comp, flow, placed, live, read_only)
            for member in sorted(block, key=lambda i: -position[id(i)]):
                place(member)
            if not block:
                heapq.heappush(ready, (-position[id(instr)], instr))
            continue
        _, instr = heapq.heappop(ready)
        if id(instr) not in placed:
            place(instr)
    if len(order) != len(comp.instructions):
        raise ValueError(f"computation {comp.name} has a cycle; cannot schedule it")
    return order[::-1]


def _movable(instr: HloInstruction, comp: HloComputation) -> bool:
    return (
        instr.parent is comp
        and instr.opcode != "parameter"
        and instr is not comp.root
        and not instr.control_predecessors
        and not instr.control_successors
        and not _keeps_order(instr)
    )


def _sink_block(instr, comp, flow, placed, live, read_only) -> list[HloInstruction]:
    """`instr` and the producers whose users are all placed or in the block, grown while
    that does not lower the net bytes freed; [] unless it ends live bytes and at least as
    many as it starts."""
    if not _movable(instr, comp):
        return []
    block = [instr]
    net = _block_net(block, flow, live, read_only)
    frontier = list(instr.operands)
    while frontier and len(block) < BLOCK_LIMIT:
        producer = frontier.pop()
        members = {id(i) for i in block}
        if id(producer) in members or id(producer) in placed or not _movable(producer, comp):
            continue
        if any(id(u) not in members and id(u) not in placed for u in producer.users):
            continue
        grown = _block_net(block + [producer], flow, live, read_only)
        if grown >= net:
            block, net = block + [producer], grown
            frontier.extend(producer.operands)
    return block if net >= 0 and _block_freed(block, flow, live) > 0 else []


def _block_freed(block, flow, live) -> int:
    return sum(v.size for i in block for v in _defined_values(i, flow) if v.id in live)


def _block_net(block, flow, live, read_only) -> int:
    """Bytes a block placed now ends (its live results) minus those it starts (operands
    defined elsewhere that nothing placed reads yet)."""
    inside = {id(i) for i in block}
    freed = _block_freed(block, flow, live)
    started = {
        v.id: v.size
        for i in block
        for v in _read_values(i, flow)
        if id(v.instr) not in inside and v.id not in live and v.id not in read_only
    }
    return freed - sum(started.values())


def _edges(pred: HloInstruction, succ: HloInstruction) -> int:
    return int(pred in succ.operands) + int(pred in succ.control_predecessors)


def _keeps_order(instr: HloInstruction) -> bool:
    """Side effects and collectives run in the order the early schedule gives them."""
    return instr.opdef.kind == COLLECTIVE or instr.has_side_effect()


def _read_values(instr: HloInstruction, flow: Dataflow):
    if instr.opcode in FORWARDING:
        return []
    seen = {}
    for operand in instr.operands:
        for value in flow.values_in(operand):
            seen[value.id] = value
    return list(seen.values())


def _defined_values(instr: HloInstruction, flow: Dataflow):
    if instr.opcode in FORWARDING:
        return []
    return [v for v in flow.values_in(instr) if v.instr is instr]


def _net_freed(instr: HloInstruction, flow: Dataflow, readers, pinned) -> int:
    freed = sum(
        v.size
        for v in _read_values(instr, flow)
        if v.id not in pinned and readers.get(v.id) == {id(instr)}
    )
    return freed - sum(v.size for v in _defined_values(instr, flow))


def schedule_peak_bytes(
    order: list[HloInstruction], comp: HloComputation, flow: Dataflow
) -> tuple[int, int]:
    """(most bytes live at once, most temporary bytes live at once) of the values `comp`
    defines under `order`, held as buffer assignment holds them: results live out of `comp`
    stay to its end, and an operand that dies at an instruction that may write over it in
    place lends it its buffer (which is then an output's if the result is one). Read-only
    values are the same under every order."""
    end = len(order)
    time = {id(i): k for k, i in enumerate(order)}
    last: dict[int, int] = {}
    for instr in order:
        for value in _defined_values(instr, flow):
            if not flow.is_read_only(value):
                uses = [flow.level_in(user, comp) for user, _, _ in value.uses]
                last[value.id] = max(
                    [time[id(u)] for u in uses if u is not None] + [end] * _live_out(value),
                    default=time[id(instr)],
                )
    lent: dict[int, HloValue] = {}  # result value id -> the operand value whose buffer it takes
    buffer: dict[int, int] = {}  # value id -> id of the first value in its buffer
    for k, instr in enumerate(order):
        source = _lent_operand(instr, flow, last, k)
        if source is not None:
            lent[flow.value_at(instr).id] = source
            buffer[flow.value_at(instr).id] = buffer.get(source.id, source.id)
    outputs = {buffer.get(v, v) for v, t in last.items() if t == end}
    live = temps = peak = temp_peak = 0
    for k, instr in enumerate(order):
        defined = [v for v in _defined_values(instr, flow) if v.id in last]
        for value in defined:
            if value.id not in lent:
                live += value.size
                temps += value.size * (buffer.get(value.id, value.id) not in outputs)
        peak, temp_peak = max(peak, live), max(temp_peak, temps)
        taken = {lent[v.id].id for v in defined if v.id in lent}
        for value in {v.id: v for v in _read_values(instr, flow) + defined}.values():
            if last.get(value.id) == k and value.id not in taken:
                live -= value.size
                temps -= value.size * (buffer.get(value.id, value.id) not in outputs)
    return peak, temp_peak


def _lent_operand(instr: HloInstruction, flow: Dataflow, last, k: int):
    """The temporary operand value that dies at `instr` and whose buffer its result takes."""
    if (
        instr.opcode in FORWARDING
        or not instr.shape.is_array
        or flow.value_at(instr).id not in last
    ):
        return None
    for number, operand in enumerate(instr.operands):
        if not operand.shape.is_array or not can_share_operand_buffer(instr, number):
            continue
        source = flow.value_at(operand)
        if last.get(source.id) != k or source.size != flow.value_at(instr).size:
            continue  # still read later (or live out), or another size
        slots = [n for n, o in enumerate(instr.operands) if source in flow.values_in(o)]
        if all(can_share_operand_buffer(instr, n) for n in slots):
            return source
    return None


def _live_out(value) -> bool:
    return any(p is p.parent.root for p, _ in value.positions)
