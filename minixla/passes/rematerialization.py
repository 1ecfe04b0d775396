"""rematerialization: recompute values instead of keeping them live, until the scheduled peak of
temporary memory is at most `memory_limit_bytes` (XLA's HloRematerialization).

Runs on a scheduled module (it schedules one that is not, after copy-insertion) and edits the
entry's schedule in place. Each step:
1. buffer assignment measures the temporary bytes live at every schedule time (the same
   figure `memory_analysis().temp_peak_in_bytes` reports) and finds the peak time t;
2. candidates are values live across t (defined before, read after, not read at t) whose
   instruction can be recomputed: pure, array-shaped, read directly by its users (a value that
   flows through a tuple or an opt-barrier is a checkpoint the program chose to keep);
3. a candidate may bring along a small block of its operands' producers when those operands
   are dead at t (so recomputing them costs flops, not memory), as XLA's block remat does;
4. the candidate that frees the most bytes per recomputed flop (flops as cost_analysis counts
   them) is cloned, together with its block, right before its first use after t, and every
   use after t reads the clone. The clones are the same ops on the same values, so results
   are bit-identical;
5. a step that does not lower (peak, bytes over the limit summed over time) is undone and not
   tried again.
When no candidate is left above the limit, RematerializationError gives the lowest peak
reached. The per-clone bytes saved and flops added are in the pass's `report`, which
`minixla opt --memory-limit`, the dumps and `Executable.rematerialization` show.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MinixlaError
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import COLLECTIVE, CONTROL
from .base import Pass, register_pass
from .buffer_assignment import BufferAssignment, assign_buffers
from .cost_analysis import instruction_flops
from .dataflow import HloValue
from .hlo_utils import NameUniquer

BLOCK_LIMIT = 4  # most instructions recomputed together for one value
_NEVER = ("parameter", "constant", "copy-start", "copy-done")


class RematerializationError(MinixlaError):
    """The memory limit cannot be reached by recomputing values."""

    def __init__(self, message: str, lowest_peak_bytes: int):
        super().__init__(message)
        self.lowest_peak_bytes = lowest_peak_bytes


@dataclass
class Remat:
    clone: str
    original: str
    bytes_saved: int  # bytes no longer held across the peak it was chosen at
    flops_added: int


@dataclass
class RematReport:
    limit: int
    peak_before: int
    peak_after: int = 0
    remats: list[Remat] = field(default_factory=list)

    @property
    def flops_added(self) -> int:
        return sum(r.flops_added for r in self.remats)

    def lines(self) -> list[str]:
        lines = [
            f"rematerialization: limit {self.limit} bytes, temporary peak "
            f"{self.peak_before} -> {self.peak_after} bytes, {len(self.remats)} "
            f"instruction(s) recomputed, {self.flops_added} flops added"
        ]
        lines += [
            f"  %{r.clone} (recomputes %{r.original}): saves {r.bytes_saved} bytes, "
            f"adds {r.flops_added} flops"
            for r in self.remats
        ]
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines()) + "\n"


@register_pass
class Rematerialization(Pass):
    name = "rematerialization"

    def __init__(self, memory_limit_bytes: int | None = None):
        self.memory_limit_bytes = memory_limit_bytes
        self.report: RematReport | None = None

    def run(self, module: HloModule) -> bool:
        if self.memory_limit_bytes is None:
            return False  # no limit: nothing to trade
        changed = False
        if not module.is_scheduled:
            from .base import get_pass

            changed |= get_pass("copy-insertion").run(module)
            changed |= get_pass("scheduling").run(module)
        self.report = rematerialize(module, int(self.memory_limit_bytes))
        return changed or bool(self.report.remats)


def _is_rematerializable(instr: HloInstruction) -> bool:
    if instr.opcode in _NEVER or not instr.shape.is_array or instr.has_side_effect():
        return False
    if instr.opdef.kind in (COLLECTIVE,) or (
        instr.opdef.kind == CONTROL and instr.opcode != "fusion"
    ):
        return False  # control flow, tuples, opt-barriers and collectives stay put
    return not (instr.control_predecessors or instr.control_successors)


@dataclass
class _Candidate:
    value: HloValue  # the value to stop holding
    block: list[HloInstruction]  # instructions to clone, operands first; value.instr last
    place: int  # schedule index to insert the clones at
    saved: int
    flops: int

    @property
    def score(self) -> tuple:
        return (self.saved / max(self.flops, 0.5), self.saved, -self.place)


class _Step:
    """One applied rematerialization, so that it can be undone."""

    def __init__(self, comp: HloComputation, clones, redirected, computations):
        self.comp, self.clones = comp, clones
        self.redirected, self.computations = redirected, computations
        self.removed: tuple[int, HloInstruction, tuple] | None = None

    def remove_if_dead(self, original: HloInstruction) -> None:
        """Drops the original from the schedule once every use reads the clone."""
        if original.users or original is self.comp.root:
            return
        index = self.comp.instructions.index(original)
        self.removed = (index, original, original.operands)
        original.drop_operands()
        del self.comp.instructions[index]

    def undo(self, module: HloModule) -> None:
        if self.removed is not None:
            index, original, operands = self.removed
            for operand in operands:
                original.append_operand(operand)
            self.comp.instructions.insert(index, original)
        for user, number, original in self.redirected:
            user.replace_operand(number, original)
        for clone in reversed(self.clones):
            self.comp.remove_instruction(clone)
        for fused in self.computations:
            module.remove_computation(fused)


def rematerialize(module: HloModule, limit: int) -> RematReport:
    comp = module.entry
    assignment = assign_buffers(module, allocate=False)
    report = RematReport(limit, assignment.temp_peak_bytes)
    names = NameUniquer(module)
    tried: set[tuple[int, int]] = set()
    measure = _measure(assignment, limit)
    for _ in range(8 * len(comp.instructions) + 16):
        if assignment.temp_peak_bytes <= limit:
            break
        candidate = _best_candidate(comp, assignment, tried)
        if candidate is None:
            report.peak_after = assignment.temp_peak_bytes
            raise RematerializationError(
                f"module {module.name}: cannot bring the temporary peak under {limit} bytes by "
                f"rematerialization; the lowest peak reached is {assignment.temp_peak_bytes} "
                f"bytes (from {report.peak_before}), at {_peak_place(comp, assignment)}",
                assignment.temp_peak_bytes,
            )
        member_flops = [instruction_flops(i) for i in candidate.block]  # before any removal
        step = _apply(module, comp, candidate, names)
        after = assign_buffers(module, allocate=False)
        if _measure(after, limit) >= measure:
            step.undo(module)
            tried.add((id(candidate.value.instr), assignment.temp_peak_time))
            continue
        report.remats += _records(candidate, step, member_flops)
        assignment, measure = after, _measure(after, limit)
    report.peak_after = assignment.temp_peak_bytes
    if assignment.temp_peak_bytes > limit:
        raise RematerializationError(
            f"module {module.name}: rematerialization stopped above the limit of {limit} "
            f"bytes; the lowest peak reached is {assignment.temp_peak_bytes} bytes",
            assignment.temp_peak_bytes,
        )
    return report


def _records(candidate: _Candidate, step: _Step, member_flops: list[int]) -> list[Remat]:
    """One line per clone: the value's clone saves the bytes, its block only costs flops."""
    records = []
    for original, clone, flops in zip(candidate.block, step.clones, member_flops):
        is_value = original is candidate.value.instr
        if is_value and step.removed is not None:
            flops = 0  # moved, not recomputed: the original is gone
        records.append(Remat(clone.name, original.name, candidate.saved if is_value else 0, flops))
    return records


def _measure(assignment: BufferAssignment, limit: int) -> tuple[int, int]:
    """(peak, bytes above the limit summed over schedule time): what a step must lower."""
    events = []
    for values, start, end in assignment.temp_buffers:
        size = max(v.size for v in values)
        events += [(start, size), (end + 1, -size)]
    events.sort()
    live, excess, last = 0, 0, None
    for time, delta in events:
        if last is not None:
            excess += (time - last) * max(0, live - limit)
        live, last = live + delta, time
    return assignment.temp_peak_bytes, excess


def _peak_index(comp: HloComputation, assignment: BufferAssignment) -> int | None:
    """Schedule index of the entry instruction running at the peak (a callee's caller)."""
    t, span = assignment.temp_peak_time, assignment.timeline.span
    return next(
        (k for k, i in enumerate(comp.instructions) if span[id(i)][0] <= t <= span[id(i)][1]), None
    )


def _peak_place(comp: HloComputation, assignment: BufferAssignment) -> str:
    index = _peak_index(comp, assignment)
    if index is None:
        return "the end of the program"
    return f"%{comp.instructions[index].name}, where recomputing no live value lowers it"


def _best_candidate(comp: HloComputation, assignment: BufferAssignment, tried):
    t = assignment.temp_peak_time
    position = {id(i): k for k, i in enumerate(comp.instructions)}
    at = _peak_index(comp, assignment)
    if at is None:
        return None
    best = None
    for values, _, _ in assignment.temp_buffers:
        for value in values:
            candidate = _candidate(value, comp, assignment, position, at, t)
            if candidate is None or (id(value.instr), t) in tried:
                continue
            if best is None or candidate.score > best.score:
                best = candidate
    return best


def _candidate(value, comp, assignment, position, at: int, t: int):
    instr = value.instr
    start, end = assignment.live_range[value.id]
    if instr.parent is not comp or not start <= t <= end or position[id(instr)] >= at:
        return None
    if value.positions != [(instr, ())] or not _is_rematerializable(instr):
        return None  # read through a tuple or opt-barrier: a value the program keeps
    later = [position[id(user)] for user, _, _ in value.uses if position[id(user)] > at]
    if not later or any(position[id(user)] == at for user, _, _ in value.uses):
        return None
    block, extended = _block(instr, assignment, t)
    saved = value.size - extended
    if saved <= 0:
        return None
    flops = sum(instruction_flops(i) for i in block)
    if len(later) == len(value.uses) and instr is not comp.root:
        flops -= instruction_flops(instr)  # no use before t: the original goes, a move
    return _Candidate(value, block, min(later), saved, flops)


def _block(instr: HloInstruction, assignment: BufferAssignment, t: int):
    """The instructions to recompute for `instr` (its dead-at-t operand producers, up to
    BLOCK_LIMIT, operands first) and the bytes of operands that must be kept live longer."""
    flow = assignment.flow
    block, extended, queue = [instr], 0, [instr]
    while queue:
        current = queue.pop(0)
        for operand in current.operands:
            if operand in block:
                continue
            for value in flow.values_in(operand):
                start, end = assignment.live_range[value.id]
                if flow.is_read_only(value) or start <= t <= end or _is_output(value):
                    continue  # already held at t: reading it again costs nothing
                producer = value.instr
                if (
                    len(block) < BLOCK_LIMIT
                    and producer is operand
                    and value.positions == [(producer, ())]
                    and _is_rematerializable(producer)
                    and producer not in block
                ):
                    block.append(producer)
                    queue.append(producer)
                else:
                    extended += value.size
    order = {id(i): k for k, i in enumerate(instr.computation.instructions)}
    block.sort(key=lambda i: order[id(i)])
    return block, extended


def _is_output(value) -> bool:
    return any(p is p.parent.root and p.parent.is_entry for p, _ in value.positions)


def _apply(module: HloModule, comp: HloComputation, candidate: _Candidate, names) -> _Step:
    mapping: dict[int, HloInstruction] = {}
    clones, computations = [], []
    for instr in candidate.block:
        clone = instr.clone(
            [mapping.get(id(o), o) for o in instr.operands], name=names(f"{instr.name}.remat")
        )
        if instr.opcode == "fusion":  # a fused computation belongs to one fusion
            fused = instr.attrs["calls"].clone(names(f"{instr.attrs['calls'].name}.remat"))
            for member in fused.instructions:  # instruction names are unique module-wide
                member.name = names(member.name)
            module.add_computation(fused)
            clone.attrs["calls"] = fused
            computations.append(fused)
        clone.parent = comp
        mapping[id(instr)] = clone
        clones.append(clone)
    comp.instructions[candidate.place : candidate.place] = clones
    original = candidate.value.instr
    position = {id(i): k for k, i in enumerate(comp.instructions)}
    first = position[id(clones[0])]
    redirected = []
    for user in list(original.users):
        if user.parent is comp and position[id(user)] > first and user not in clones:
            for number, operand in enumerate(user.operands):
                if operand is original:
                    user.replace_operand(number, mapping[id(original)])
                    redirected.append((user, number, original))
    step = _Step(comp, clones, redirected, computations)
    step.remove_if_dead(original)
    return step
