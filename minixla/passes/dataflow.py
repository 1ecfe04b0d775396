"""Dataflow over the sequential computations: values, where they live, who reads them, when.

As XLA's HloDataflowAnalysis + HloAliasAnalysis + HloLiveRange (xla-reference.md 5.1), reduced
to what copy insertion, scheduling and buffer assignment need:
- an `HloValue` is an array produced at an (instruction, shape index); tuple, get-tuple-element,
  bitcast and the other forwarding ops define no value, they only add positions;
- while/conditional/call results and the parameters of their callees are phi values, joined
  with what flows into them into one buffer set (`Dataflow.buffer_of`): a loop's init, body
  parameter, body root, condition parameter and result share storage, and so do a
  conditional's branch roots and result;
- `Timeline` numbers instructions in schedule order with each callee laid out inside its
  caller's span, giving every value and buffer set a [start, end] live range.
Only the entry and the computations it reaches through while/conditional/call are analysed:
fused and per-element (to_apply) computations get no buffers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.layout_math import physical_size_bytes
from ..ir.module import HloModule
from ..ir.opcodes import CONTROL_FLOW, ELEMENTWISE, FORWARDING
from ..ir.shapes import Shape
from .hlo_utils import sequential_computations

Index = tuple[int, ...]


def leaf_bytes(shape: Shape) -> int:
    """Bytes an array occupies in memory under its layout (tiling and padding included)."""
    if not shape.is_array:
        return 0
    layout = shape.layout
    if layout is None or (
        not layout.tiles and layout.tail_padding_alignment == 1 and not layout.element_size_bits
    ):
        return shape.numel() * shape.element_type.byte_size
    return physical_size_bytes(
        shape.dims,
        layout.minor_to_major,
        layout.tiles,
        shape.element_type.bits,
        layout.element_size_bits,
        layout.tail_padding_alignment,
    )


@dataclass(eq=False)
class HloValue:
    id: int
    instr: HloInstruction  # the defining instruction
    index: Index
    shape: Shape
    is_phi: bool = False
    positions: list[tuple[HloInstruction, Index]] = field(default_factory=list)
    uses: list[tuple[HloInstruction, int, Index]] = field(default_factory=list)  # user, operand #

    @cached_property
    def size(self) -> int:
        return leaf_bytes(self.shape)

    def short(self) -> str:
        """XLA's HloValue::ToShortString: `<id name{index}>`, `(phi)` for merge points."""
        index = "{" + ",".join(map(str, self.index)) + "}" if self.instr.shape.is_tuple else ""
        return f"<{self.id} {self.instr.name}{index}{' (phi)' if self.is_phi else ''}>"

    def __repr__(self) -> str:
        return self.short()


class Dataflow:
    def __init__(self, module: HloModule):
        self.module = module
        self.computations = sequential_computations(module)
        self.values: list[HloValue] = []
        self._at: dict[tuple[int, Index], HloValue] = {}
        self.caller: dict[int, HloInstruction] = {}  # callee computation -> calling instruction
        for comp in self.computations:
            for instr in comp.instructions:
                if instr.opcode in CONTROL_FLOW:
                    for callee in instr.called_computations:
                        self.caller.setdefault(id(callee), instr)
        for comp in self.computations:
            for instr in comp.post_order():
                self._define(instr)
        for comp in self.computations:
            for instr in comp.instructions:
                self._record_uses(instr)
        self._parent = list(range(len(self.values)))
        self._join_control_flow()

    # -- values and positions -------------------------------------------------------------
    def value_at(self, instr: HloInstruction, index: Index = ()) -> HloValue:
        return self._at[(id(instr), index)]

    def values_in(self, instr: HloInstruction) -> list[HloValue]:
        return [
            self._at[(id(instr), idx)]
            for idx, leaf in instr.shape.leaves()
            if (id(instr), idx) in self._at
        ]

    def _new(self, instr, index, shape, phi=False) -> HloValue:
        value = HloValue(len(self.values), instr, index, shape, phi)
        self.values.append(value)
        return value

    def _define(self, instr: HloInstruction) -> None:
        op = instr.opcode
        for index, leaf in instr.shape.leaves():
            if not leaf.is_array:
                continue
            if op == "tuple":
                value = self._at[(id(instr.operand(index[0])), index[1:])]
            elif op == "get-tuple-element":
                value = self._at[(id(instr.operand(0)), (instr.attrs["index"],) + index)]
            elif op in FORWARDING:
                value = self._at[(id(instr.operand(0)), index)]
            else:
                phi = op in CONTROL_FLOW or (op == "parameter" and not instr.computation.is_entry)
                value = self._new(instr, index, leaf, phi)
            value.positions.append((instr, index))
            self._at[(id(instr), index)] = value

    def _record_uses(self, instr: HloInstruction) -> None:
        if instr.opcode in FORWARDING:
            return
        for number, operand in enumerate(instr.operands):
            for index, _leaf in operand.shape.leaves():
                value = self._at.get((id(operand), index))
                if value is not None:
                    value.uses.append((instr, number, index))

    # -- buffer sets (union-find over values) ---------------------------------------------
    def buffer_of(self, value: HloValue) -> int:
        root = value.id
        while self._parent[root] != root:
            self._parent[root] = self._parent[self._parent[root]]
            root = self._parent[root]
        return root

    def union(self, a: HloValue, b: HloValue) -> None:
        ra, rb = self.buffer_of(a), self.buffer_of(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def _join(self, a: HloInstruction, b: HloInstruction) -> None:
        for index, _leaf in a.shape.leaves():
            if (id(a), index) in self._at and (id(b), index) in self._at:
                self.union(self._at[(id(a), index)], self._at[(id(b), index)])

    def _join_control_flow(self) -> None:
        for comp in self.computations:
            for instr in comp.instructions:
                if instr.opcode == "while":
                    body, cond = instr.attrs["body"], instr.attrs["condition"]
                    for other in (
                        instr.operand(0),
                        body.parameter(0),
                        cond.parameter(0),
                        body.root,
                    ):
                        self._join(instr, other)
                elif instr.opcode == "call":
                    callee = instr.attrs["to_apply"]
                    for param, operand in zip(callee.parameters, instr.operands):
                        self._join(param, operand)
                    self._join(instr, callee.root)
                elif instr.opcode == "conditional":
                    for b, branch in enumerate(instr.called_computations):
                        self._join(branch.parameter(0), instr.operand(b + 1))
                        self._join(instr, branch.root)

    def buffer_sets(self) -> dict[int, list[HloValue]]:
        sets: dict[int, list[HloValue]] = {}
        for value in self.values:
            sets.setdefault(self.buffer_of(value), []).append(value)
        return sets

    # -- facts used by copy insertion and buffer assignment -------------------------------
    def is_read_only(self, value: HloValue) -> bool:
        """Entry parameters and constants: storage the program must not overwrite."""
        return value.instr.opcode == "constant" or (
            value.instr.opcode == "parameter" and value.instr.computation.is_entry
        )

    def level_in(self, instr: HloInstruction, comp: HloComputation) -> HloInstruction | None:
        """The instruction of `comp` during which `instr` runs (itself, or the control-flow op
        whose callee runs it); None when `instr` runs outside `comp`."""
        level: HloInstruction | None = instr
        while level is not None and level.parent is not comp:
            level = self.caller.get(id(level.parent))
        return level


def can_share_operand_buffer(user: HloInstruction, number: int, output: Index = ()) -> bool:
    """May `user` write its result (its `output` element, for a multi-output fusion) into
    operand `number`'s buffer (when that operand dies at `user`)? Only when every output
    element is written after the operand elements it needs were read: same-shape elementwise
    ops, dynamic-update-slice's and scatter's operand 0, and loop fusions that read the
    parameter only elementwise (XLA's CanShareOperandBufferWithUser). A multi-output loop
    fusion reads all of its operands' elements at one index before it writes its outputs there.
    """
    operand = user.operand(number)
    result = user.shape.subshape(output) if output else user.shape
    if not operand.shape.is_array or not result.is_array:
        return False
    if user.shape.is_tuple and user.opcode != "fusion":
        return False
    if leaf_bytes(operand.shape) != leaf_bytes(result):
        return False
    if user.opcode in ("dynamic-update-slice", "scatter"):
        return number == 0 and operand.shape.layout == user.shape.layout
    if operand.shape.dims != result.dims or operand.shape.layout != result.layout:
        return False
    if user.opcode == "fusion":
        fused = user.attrs["calls"]
        # A fusion with reductions (a row program) may write an output row before it has
        # read the whole row of every parameter.
        return (
            user.attrs.get("kind") == "kLoop"
            and not any(i.opcode == "reduce" for i in fused.instructions)
            and _elementwise_only(fused, number)
        )
    return user.opdef.kind == ELEMENTWISE and user.opcode not in ("copy", "map")


def _elementwise_only(fused: HloComputation, number: int) -> bool:
    """Is fused parameter `number` read only by same-shape elementwise ops up to the root?"""
    stack, seen = [fused.parameter(number)], set()
    while stack:
        node = stack.pop()
        for user in node.users:
            if user is fused.root and user.opcode == "tuple":
                continue
            if (
                user.opdef.kind != ELEMENTWISE
                or user.shape.dims != node.shape.dims
                or user.opcode == "map"
            ):
                return False
            if id(user) not in seen:  # once per user: paths through a shared DAG multiply
                seen.add(id(user))
                stack.append(user)
    return True


class Timeline:
    """Schedule times: each instruction of a sequential computation gets [start, end]; a
    control-flow op's span contains its callees' instructions (XLA's HloLiveRange)."""

    def __init__(self, module: HloModule):
        self.span: dict[int, tuple[int, int]] = {}
        self.comp_end: dict[int, int] = {}
        self.time = 0
        self._visit(module.entry)
        self.end = self.time

    def _visit(self, comp: HloComputation) -> None:
        order = (
            comp.instructions
            if comp.parent is not None and comp.parent.is_scheduled
            else comp.post_order()
        )
        for instr in order:
            start = self.time
            self.time += 1
            if instr.opcode in CONTROL_FLOW:
                for callee in instr.called_computations:
                    self._visit(callee)
                self.time += 1
            self.span[id(instr)] = (start, self.time - 1)
        self.comp_end[id(comp)] = self.time
        self.time += 1

    def live_range(self, flow: Dataflow, value: HloValue) -> tuple[int, int]:
        """[definition, last use]; entry parameters start at -1, entry outputs live to the end,
        a callee's root values are read when the callee finishes."""
        instr = value.instr
        if instr.opcode == "parameter":
            caller = flow.caller.get(id(instr.parent))
            start = -1 if caller is None else self.span[id(caller)][0]
        else:
            start = self.span[id(instr)][1]
        end = start
        for user, _, _ in value.uses:
            end = max(end, self.span[id(user)][0])
        for position, _ in value.positions:
            comp = position.computation
            if position is comp.root:
                end = max(end, self.end if comp.is_entry else self.comp_end[id(comp)])
        return start, end


def interference(flow: Dataflow, ranges: dict[int, tuple[int, int]], members) -> str | None:
    """Why the values of one buffer set cannot share storage under this schedule, or None.

    A non-phi value is a write into the storage at its definition; phi values (loop state,
    branch parameters, ...) only name what is already there. Every value that starts before a
    write must be dead by then; the writing instruction may still read it if it does so in
    place (`can_share_operand_buffer`). Read-only storage allows no write but its own."""
    writes = [m for m in members if not m.is_phi]
    if any(flow.is_read_only(m) for m in members) and len(writes) > 1:
        names = ", ".join(w.short() for w in writes)
        return f"read-only storage is written by several values ({names})"
    for write in writes:
        time = ranges[write.id][0]
        for other in members:
            start, end = ranges[other.id]
            if other is write or start >= time or end < time:
                continue
            if end == time and reads_in_place(flow, write, other):
                continue
            return f"{other.short()} is still needed when {write.short()} overwrites it"
    return None


def reads_in_place(flow: Dataflow, write: HloValue, value: HloValue) -> bool:
    """Does `write`'s instruction read value's buffer only through operands it may overwrite
    in place?"""
    buffer, writer = flow.buffer_of(value), write.instr
    slots = [
        k
        for k, o in enumerate(writer.operands)
        if any(flow.buffer_of(v) == buffer for v in flow.values_in(o))
    ]
    return bool(slots) and all(can_share_operand_buffer(writer, k, write.index) for k in slots)
