"""Buffer assignment: which memory every array of a scheduled module lives in.

`assign_buffers(module)` is what a backend calls after the `copy-insertion` and `scheduling`
passes (xla-reference.md 5.2). Steps:
1. dataflow (dataflow.py): values, buffer sets that must share storage (loop state, branch
   results), and live ranges from the schedule;
2. input/output aliasing: `input_output_alias` entries and `buffer_donor`s matched to outputs
   of the same shape; the output takes the parameter's buffer when the parameter is dead by
   then. An impossible must-alias raises InputOutputAliasError;
3. in-place reuse: a value takes its operand's buffer when the operand dies at this
   instruction and the op reads each element before writing it (elementwise ops,
   dynamic-update-slice, scatter, elementwise loop fusions);
4. allocation: buffer sets, largest first, join an existing allocation of fitting size whose
   buffers are never live at the same time (a live-out buffer needs an exact fit); entry
   parameters and constants get their own read-only allocations;
5. arena: every other allocation gets an offset in one arena (64-byte aligned).
`BufferAssignment.report()` prints it the way XLA's buffer-assignment dump does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import MinixlaError
from ..ir.instruction import HloInstruction
from ..ir.module import AliasEntry, HloModule
from .dataflow import (
    FORWARDING,
    Dataflow,
    HloValue,
    Timeline,
    can_share_operand_buffer,
    interference,
)
from .hlo_utils import CONTROL_FLOW

ALIGNMENT = 64
Index = tuple[int, ...]


class BufferAssignmentError(MinixlaError):
    """The module cannot be given buffers as it stands (not scheduled, or inconsistent)."""


class InputOutputAliasError(BufferAssignmentError):
    """A must-alias input_output_alias entry cannot be honoured."""


def _index_text(index: Index) -> str:
    return "{" + ",".join(map(str, index)) + "}"


@dataclass(eq=False)
class BufferAllocation:
    index: int
    size: int
    values: list[HloValue] = field(default_factory=list)
    offset: int = -1  # offset in the arena; -1: own storage (parameter or constant)
    parameter_number: int | None = None
    param_index: Index = ()
    is_constant: bool = False
    maybe_live_out: bool = False
    output_indices: list[Index] = field(default_factory=list)
    live_ranges: list[tuple[int, int]] = field(default_factory=list)

    @property
    def is_entry_parameter(self) -> bool:
        return self.parameter_number is not None

    @property
    def in_arena(self) -> bool:
        return self.offset >= 0

    @property
    def is_aliased(self) -> bool:
        """A parameter's buffer that also holds an output (written in place)."""
        return self.is_entry_parameter and self.maybe_live_out

    @property
    def is_read_only(self) -> bool:
        return self.is_constant or (self.is_entry_parameter and not self.maybe_live_out)

    def header(self) -> str:
        text = f"allocation {self.index}: size {self.size}"
        if self.is_entry_parameter:
            param = self.values[0].shape.without_layout() if self.values else None
            text += (
                f", parameter {self.parameter_number}, shape |{param}| "
                f"at ShapeIndex {_index_text(self.param_index)}"
            )
        if self.maybe_live_out:
            out = next(
                v.shape
                for v in self.values
                if any(p is p.computation.root and p.computation.is_entry for p, _ in v.positions)
            )
            text += f", output shape is |{out.without_layout()}|"
        if self.is_constant:
            text += ", constant"
        if self.maybe_live_out:
            text += ", maybe-live-out"
        if self.in_arena and not self.maybe_live_out:
            text += ", preallocated-temp"
        if self.in_arena:
            text += f", arena offset {self.offset}"
        return text + ":"

    def to_string(self) -> str:
        lines = [self.header()]
        for value in sorted(self.values, key=lambda v: v.id):
            lines.append(f" value: {value.short()} (size={value.size},offset=0): {value.shape}")
        return "\n".join(lines)


@dataclass(frozen=True)
class BufferSlice:
    allocation: BufferAllocation
    offset: int  # within the allocation
    size: int

    @property
    def arena_offset(self) -> int | None:
        return self.allocation.offset + self.offset if self.allocation.in_arena else None


@dataclass(eq=False)
class _Buffer:
    """A set of values that share storage, with its live range and roles."""

    values: list[HloValue]
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(v.size for v in self.values)


class BufferAssignment:
    def __init__(self, module: HloModule, flow: Dataflow, timeline: Timeline):
        self.module, self.flow, self.timeline = module, flow, timeline
        self.allocations: list[BufferAllocation] = []
        self.aliases: list[AliasEntry] = []  # realized input/output aliases
        self.skipped_aliases: list[tuple[AliasEntry, str]] = []  # may-alias left out, and why
        self.arena_size = 0
        self.peak_bytes = 0  # most bytes live at once in the arena
        # Live bytes of buffer sets under the schedule (packing not counted): temporaries
        # (neither parameter, constant nor output) peak at `temp_peak_bytes` at time
        # `temp_peak_time`; `peak_memory_bytes` adds outputs and all read-only storage.
        self.temp_buffers: list[tuple[list[HloValue], int, int]] = []
        self.temp_peak_bytes = 0
        self.temp_peak_time = -1
        self.peak_memory_bytes = 0
        self._allocation_of: dict[int, BufferAllocation] = {}
        self.live_range: dict[int, tuple[int, int]] = {}

    # -- queries --------------------------------------------------------------------------
    def value_at(self, instr: HloInstruction, index: Index = ()) -> HloValue:
        return self.flow.value_at(instr, index)

    def allocation_of(self, instr: HloInstruction, index: Index = ()) -> BufferAllocation:
        return self._allocation_of[self.value_at(instr, index).id]

    def slice(self, instr: HloInstruction, index: Index = ()) -> BufferSlice:
        """Where the array at (instr, index) lives; forwarding ops resolve to their source."""
        value = self.value_at(instr, index)
        return BufferSlice(self._allocation_of[value.id], 0, value.size)

    def shares(
        self, a: HloInstruction, b: HloInstruction, a_index: Index = (), b_index: Index = ()
    ) -> bool:
        return self.allocation_of(a, a_index) is self.allocation_of(b, b_index)

    def output_slices(self) -> list[tuple[Index, BufferSlice]]:
        root = self.module.entry.root
        return [
            (index, self.slice(root, index)) for index, leaf in root.shape.leaves() if leaf.is_array
        ]

    def parameter_allocations(self) -> list[BufferAllocation]:
        return [a for a in self.allocations if a.is_entry_parameter]

    # -- dump -----------------------------------------------------------------------------
    def report(self) -> str:
        lines = ["BufferAssignment:"] + [a.to_string() for a in self.allocations]
        params = sum(a.size for a in self.allocations if a.is_entry_parameter)
        consts = sum(a.size for a in self.allocations if a.is_constant)
        lines += [
            "",
            f"Total bytes used: {self.arena_size + params + consts} "
            f"(arena {self.arena_size}, parameters {params}, constants {consts})",
            f"Peak live bytes: {self.peak_bytes}",
            f"Peak temporary bytes: {self.temp_peak_bytes}",
        ]
        for entry in self.aliases:
            lines.append(
                f"Aliased: output {_index_text(entry.output_index)} <- parameter "
                f"{entry.param_number} {_index_text(entry.param_index)} ({entry.kind})"
            )
        for entry, reason in self.skipped_aliases:
            lines.append(
                f"Not aliased: output {_index_text(entry.output_index)} <- parameter "
                f"{entry.param_number} {_index_text(entry.param_index)}: {reason}"
            )
        lines += ["", "Live ranges:"]
        for value in self.flow.values:
            start, end = self.live_range[value.id]
            lines.append(f" {value.short()}: {start}-{end}")
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        return self.report()


def assign_buffers(module: HloModule, *, allocate: bool = True) -> BufferAssignment:
    """Buffer assignment for a module after copy-insertion and scheduling. allocate=False
    stops once buffer sets and their live ranges (and so the peaks) are known."""
    if not module.is_scheduled:
        raise BufferAssignmentError(
            f"module {module.name} is not scheduled: run the copy-insertion and scheduling "
            "passes before assigning buffers"
        )
    flow, timeline = Dataflow(module), Timeline(module)
    result = BufferAssignment(module, flow, timeline)
    result.live_range = {v.id: timeline.live_range(flow, v) for v in flow.values}
    spans: dict[int, list[int]] = {}
    for value in flow.values:
        start, end = result.live_range[value.id]
        span = spans.setdefault(flow.buffer_of(value), [start, end])
        span[0], span[1] = min(span[0], start), max(span[1], end)
    for members in flow.buffer_sets().values():  # what copy-insertion guarantees
        reason = interference(flow, result.live_range, members)
        if reason is not None:
            raise BufferAssignmentError(
                f"buffer {members} cannot be shared: {reason}; run "
                "the copy-insertion pass before scheduling"
            )
    joiner = _Joiner(flow, spans)
    _alias_inputs(module, flow, timeline, joiner, result)  # before in-place reuse claims them
    _share_in_place(module, flow, timeline, joiner)
    _measure_peaks(flow, spans, result)
    if allocate:
        _allocate(module, flow, spans, result)
    return result


def _measure_peaks(flow: Dataflow, spans, result: BufferAssignment) -> None:
    temps, outputs, fixed = [], [], 0
    for root, values in flow.buffer_sets().items():
        size = max(v.size for v in values)
        start, end = spans[root]
        if any(flow.is_read_only(v) for v in values):
            fixed += size  # parameters and constants are held for the whole run
        elif any(map(_is_output, values)):
            outputs.append((start, end, size))
        else:
            temps.append((start, end, size))
            result.temp_buffers.append((values, start, end))
    result.temp_peak_bytes, result.temp_peak_time = live_peak(temps)
    result.peak_memory_bytes = fixed + live_peak(temps + outputs)[0]


def live_peak(ranges: list[tuple[int, int, int]]) -> tuple[int, int]:
    """(most bytes live at once, the first time it happens) over [start, end] ranges."""
    events = sorted(
        (t, delta) for start, end, size in ranges for t, delta in ((start, size), (end + 1, -size))
    )
    live, peak, when = 0, 0, -1
    for time, delta in events:
        live += delta
        if live > peak:
            peak, when = live, time
    return peak, when


class _Joiner:
    """Union of buffer sets that keeps each set's live range and member list up to date."""

    def __init__(self, flow: Dataflow, spans: dict[int, list[int]]):
        self.flow, self.spans = flow, spans
        self._members = flow.buffer_sets()

    def span(self, value: HloValue) -> list[int]:
        return self.spans[self.flow.buffer_of(value)]

    def members(self, value: HloValue) -> list[HloValue]:
        return self._members[self.flow.buffer_of(value)]

    def join(self, a: HloValue, b: HloValue) -> None:
        ra, rb = self.flow.buffer_of(a), self.flow.buffer_of(b)
        if ra == rb:
            return
        self.flow.union(a, b)
        root = self.flow.buffer_of(a)
        (sa, ma), (sb, mb) = (
            (self.spans.pop(ra), self._members.pop(ra)),
            (self.spans.pop(rb), self._members.pop(rb)),
        )
        self.spans[root] = [min(sa[0], sb[0]), max(sa[1], sb[1])]
        self._members[root] = ma + mb


def _share_in_place(module, flow: Dataflow, timeline: Timeline, joiner: _Joiner) -> None:
    instrs = [i for c in flow.computations for i in c.instructions]
    instrs.sort(key=lambda i: timeline.span[id(i)][0])
    for instr in instrs:
        if (
            instr.opcode in FORWARDING | CONTROL_FLOW | {"parameter", "constant"}
            or not instr.shape.is_array
        ):
            continue
        value = flow.value_at(instr)
        start = timeline.span[id(instr)][0]
        if joiner.span(value)[0] < timeline.span[id(instr)][1]:
            continue  # the value's buffer already holds something earlier (loop state)
        for number, operand in enumerate(instr.operands):
            if not operand.shape.is_array or not can_share_operand_buffer(instr, number):
                continue
            source = flow.value_at(operand)
            if _can_take_over(flow, joiner, instr, number, source, value, start):
                joiner.join(source, value)
                break


def _can_take_over(flow, joiner, instr, number, source, value, start) -> bool:
    """May `value` (defined by instr) reuse the buffer of `source` (instr's operand)?"""
    buffer = flow.buffer_of(source)
    if buffer == flow.buffer_of(value) or joiner.span(source)[1] != start:
        return False  # same buffer already, or the operand is still needed afterwards
    members = joiner.members(source)
    if any(flow.is_read_only(m) or _is_output(m) for m in members):
        return False
    if max(m.size for m in members) != value.size:
        return False
    # Every operand slot reading that buffer must be one that may be overwritten in place.
    return all(
        can_share_operand_buffer(instr, k)
        for k, o in enumerate(instr.operands)
        if any(flow.buffer_of(v) == buffer for v in flow.values_in(o))
    )


def _is_output(value: HloValue) -> bool:
    return any(p is p.computation.root and p.computation.is_entry for p, _ in value.positions)


def _alias_inputs(module, flow, timeline, joiner: _Joiner, result: BufferAssignment) -> None:
    entry = module.entry
    entries = list(module.input_output_alias)
    outputs = {e.output_index for e in entries}
    params = {(e.param_number, e.param_index) for e in entries}
    for number, index in module.buffer_donors:  # a donor may feed any matching output
        if (number, index) in params:
            continue
        shape = entry.parameter(number).shape.subshape(index)
        for out_index, leaf in entry.root.shape.leaves():
            if out_index not in outputs and leaf == shape:
                entries.append(AliasEntry(out_index, number, index, "may-alias"))
                outputs.add(out_index)
                break
    for alias in entries:
        param = flow.value_at(entry.parameter(alias.param_number), alias.param_index)
        out = flow.value_at(entry.root, alias.output_index)
        reason = _alias_conflict(flow, timeline, joiner, param, out)
        if reason is None:
            joiner.join(param, out)
            result.aliases.append(alias)
        elif alias.kind == "must-alias":
            raise InputOutputAliasError(
                f"output {_index_text(alias.output_index)} must alias parameter "
                f"{alias.param_number} at {_index_text(alias.param_index)}, but {reason}"
            )
        else:
            result.skipped_aliases.append((alias, reason))


def _alias_conflict(flow, timeline, joiner: _Joiner, param, out) -> str | None:
    if flow.buffer_of(param) == flow.buffer_of(out):
        return None  # the parameter is returned as is
    if param.size != out.size:
        return f"their sizes differ ({param.size} vs {out.size} bytes)"
    out_members, param_members = joiner.members(out), joiner.members(param)
    if any(flow.is_read_only(m) for m in out_members):
        return "the output is a constant or another parameter"
    if any(_is_output(m) for m in param_members):
        return "the parameter is also returned as another output"
    first = min(out_members, key=lambda m: timeline.live_range(flow, m)[0])
    param_end, out_start = joiner.span(param)[1], joiner.span(out)[0]
    if param_end > out_start or (
        param_end == out_start and not _reads_in_place(flow, first.instr, param)
    ):
        return f"the parameter is still read when %{first.instr.name} writes the output"
    return None


def _reads_in_place(flow: Dataflow, writer: HloInstruction, param: HloValue) -> bool:
    buffer = flow.buffer_of(param)
    return all(
        can_share_operand_buffer(writer, k)
        for k, o in enumerate(writer.operands)
        if any(flow.buffer_of(v) == buffer for v in flow.values_in(o))
    )


def _allocate(module, flow: Dataflow, spans, result: BufferAssignment) -> None:
    buffers = [_Buffer(values, *spans[root]) for root, values in flow.buffer_sets().items()]
    buffers.sort(
        key=lambda b: (-b.size, not any(map(_is_output, b.values)), b.start, b.values[0].id)
    )
    temps: list[BufferAllocation] = []
    made: list[BufferAllocation] = []
    for buffer in buffers:
        allocation = _place(buffer, temps, made)
        allocation.values.extend(buffer.values)
        allocation.live_ranges.append((buffer.start, buffer.end))
        for value in buffer.values:
            for position, index in value.positions:
                if position is module.entry.root:
                    allocation.maybe_live_out = True
                    allocation.output_indices.append(index)
    # Parameters first (by number), then the arena, then constants.
    made.sort(
        key=lambda a: (
            0 if a.is_entry_parameter else 2 if a.is_constant else 1,
            a.parameter_number or 0,
            a.param_index,
        )
    )
    offset = 0
    for i, allocation in enumerate(made):
        allocation.index = i
        if not allocation.is_entry_parameter and not allocation.is_constant:
            allocation.offset = offset
            offset += -(-allocation.size // ALIGNMENT) * ALIGNMENT
        for value in allocation.values:
            result._allocation_of[value.id] = allocation
    result.allocations, result.arena_size = made, offset
    events = sorted(
        (t, s)
        for a in made
        if a.in_arena
        for start, end in a.live_ranges
        for t, s in ((start, a.size), (end + 1, -a.size))
    )
    live = 0
    for _, delta in events:
        live += delta
        result.peak_bytes = max(result.peak_bytes, live)


def _place(buffer: _Buffer, temps: list, made: list) -> BufferAllocation:
    params = {
        (v.instr.parameter_number, v.index)
        for v in buffer.values
        if v.instr.opcode == "parameter" and v.instr.computation.is_entry
    }
    constant = any(v.instr.opcode == "constant" for v in buffer.values)
    if len(params) + int(constant) > 1:
        raise BufferAssignmentError(
            f"values {buffer.values} would share one buffer between several parameters or "
            "constants; run copy-insertion first"
        )
    if params or constant:
        ((number, index),) = params or {(None, ())}
        allocation = BufferAllocation(
            len(made), buffer.size, parameter_number=number, param_index=index, is_constant=constant
        )
        made.append(allocation)
        return allocation
    live_out = any(map(_is_output, buffer.values))
    for allocation in sorted(temps, key=lambda a: a.size):
        fits = allocation.size == buffer.size if live_out else allocation.size >= buffer.size
        if fits and all(
            end < buffer.start or buffer.end < start for start, end in allocation.live_ranges
        ):
            return allocation
    allocation = BufferAllocation(len(made), buffer.size)
    made.append(allocation)
    temps.append(allocation)
    return allocation
