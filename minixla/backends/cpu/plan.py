"""Where each value of a driver computation lives: parameter, constant, arena slot, fresh array.

Temporaries go into one preallocated arena of bytes: a value gets an (offset, size) slot, and
values whose live ranges do not overlap share bytes (XLA's GlobalDecreasingSizeBestFitHeap:
largest first, lowest offset that does not clash in time). Values that leave the computation
(reach its root) get a fresh array per call instead, so results never alias the arena, which
the next call (or the next loop iteration) overwrites.

Aliases are tracked with union-find: views (reshape, bitcast, get-tuple-element, tuple), ops
that may return one of their operands (while, call, conditional, fallbacks) and in-place
dynamic-update-slice join their operand's group, and a group's slot stays live until the last
use of any member. A value's `kinds` says where its leaves may live; the driver copies a
result leaf at the exit when that could be the arena (or, for the entry, anything not fresh).
"""
from __future__ import annotations

from dataclasses import dataclass, field

ALIGNMENT = 64

# Ops whose result is (a view of) operand 0 and never new storage.
VIEWS = {"reshape", "get-tuple-element", "tuple", "opt-barrier", "domain", "add-dependency"}
# Ops whose results may be any of their operands (or fresh arrays).
MAY_ALIAS = {"while", "call", "conditional"}


@dataclass
class Slot:
    offset: int
    size: int


@dataclass
class ComputationPlan:
    order: list  # instructions in execution order
    slots: dict = field(default_factory=dict)  # (id(instr), leaf) -> Slot
    fresh: set = field(default_factory=set)  # ids of instructions given fresh arrays
    in_place: set = field(default_factory=set)  # ids of DUS that update operand 0 in place
    kinds: dict = field(default_factory=dict)  # id(instr) -> nested kinds (frozensets)
    arena_bytes: int = 0


def is_view(instr) -> bool:
    if instr.opcode == "bitcast":
        return _row_major(instr) and _row_major(instr.operand(0))
    return instr.opcode in VIEWS


def _row_major(instr) -> bool:
    shape = instr.shape
    layout = shape.layout
    return layout is None or (tuple(layout.minor_to_major) == tuple(range(shape.rank - 1, -1, -1))
                              and not layout.tiles)


class _UnionFind:
    def __init__(self):
        self.parent: dict[int, int] = {}

    def find(self, x: int) -> int:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)


def plan_computation(comp, *, is_entry: bool, defines_buffer, may_alias) -> ComputationPlan:
    """`defines_buffer(instr)`: the driver writes instr's result into storage it allocates;
    `may_alias(instr)`: its result may be one of its operands (fallback implementations)."""
    order = comp.post_order()
    position = {id(instr): k for k, instr in enumerate(order)}
    plan = ComputationPlan(order)
    groups = _UnionFind()
    for instr in order:
        if instr.opcode == "dynamic-update-slice" and _can_update_in_place(instr,
                                                                             defines_buffer):
            plan.in_place.add(id(instr))
    escaping = _escaping(comp, plan.in_place)
    for instr in order:
        if is_view(instr) or id(instr) in plan.in_place or instr.opcode in MAY_ALIAS \
                or may_alias(instr):
            for operand in instr.operands:
                groups.union(id(instr), id(operand))
    last_use: dict[int, int] = {}
    for instr in order:
        for operand in instr.operands:
            root = groups.find(id(operand))
            last_use[root] = max(last_use.get(root, -1), position[id(instr)])
    end = len(order)
    for instr in escaping:
        last_use[groups.find(id(instr))] = end
    buffers = []
    for instr in order:
        plan.kinds[id(instr)] = _kinds(instr, plan, is_entry, escaping, defines_buffer,
                                       may_alias)
        if not defines_buffer(instr) or id(instr) in plan.in_place:
            continue
        if id(instr) in escaping:
            plan.fresh.add(id(instr))
            continue
        start = position[id(instr)]
        stop = last_use.get(groups.find(id(instr)), start)
        for leaf, shape in instr.shape.leaves():
            if shape.is_array:
                buffers.append(((id(instr), leaf), _nbytes(shape), start, stop))
    plan.slots, plan.arena_bytes = _pack(buffers)
    return plan


def _nbytes(shape) -> int:
    return max(shape.numel() * shape.numpy_dtype.itemsize, 1)


def _escaping(comp, in_place: set) -> set:
    """Instructions whose value (or part of it) is returned, through views, tuples and
    in-place updates."""
    out: set = set()
    stack = [comp.root]
    while stack:
        instr = stack.pop()
        if id(instr) in out:
            continue
        out.add(id(instr))
        if is_view(instr):
            stack.extend(instr.operands)
        elif id(instr) in in_place:
            stack.append(instr.operand(0))
    return out


def _can_update_in_place(instr, defines_buffer) -> bool:
    """DUS may write into operand 0 when nothing else ever reads it: a buffer this computation
    allocated, used only here (views count as uses)."""
    operand = instr.operand(0)
    if len(operand.users) != 1 or not defines_buffer(operand) or operand.is_root():
        return False
    return all(op is not operand for op in instr.operands[1:])


def _kinds(instr, plan, is_entry, escaping, defines_buffer, may_alias):
    k = plan.kinds
    if instr.opcode == "parameter":
        return _fill(instr.shape, frozenset({"param"}))
    if instr.opcode == "constant":
        return _fill(instr.shape, frozenset({"const"}))
    if instr.opcode == "tuple":
        return tuple(k[id(op)] for op in instr.operands)
    if instr.opcode == "get-tuple-element":
        return k[id(instr.operand(0))][instr.attrs["index"]]
    if is_view(instr) or id(instr) in plan.in_place:
        return k[id(instr.operand(0))]
    if instr.opcode in MAY_ALIAS or may_alias(instr):
        union = frozenset({"fresh"}).union(*(_flatten(k[id(op)]) for op in instr.operands))
        return _fill(instr.shape, union)
    if defines_buffer(instr):
        return _fill(instr.shape, frozenset({"fresh" if id(instr) in escaping else "arena"}))
    return _fill(instr.shape, frozenset({"fresh"}))


def _fill(shape, kinds):
    if shape.is_tuple:
        return tuple(_fill(s, kinds) for s in shape.tuple_shapes)
    return kinds


def _flatten(kinds) -> frozenset:
    if isinstance(kinds, tuple):
        return frozenset().union(*(_flatten(k) for k in kinds)) if kinds else frozenset()
    return kinds


def needs_copy(kinds: frozenset, is_entry: bool) -> bool:
    """A result leaf is copied at the exit unless it is certainly a fresh array (entry), or
    certainly not in the arena (other computations: their results are never written)."""
    return bool(kinds - {"fresh"}) if is_entry else "arena" in kinds


def _pack(buffers):
    """Greedy best-fit by decreasing size: lowest aligned offset not overlapping in time."""
    placed: list[tuple[int, int, int, int]] = []  # (offset, size, start, stop)
    slots = {}
    total = 0
    for key, size, start, stop in sorted(buffers, key=lambda b: (-b[1], b[2])):
        size = -(-size // ALIGNMENT) * ALIGNMENT
        clashes = sorted((o, s) for o, s, a, b in placed if a <= stop and start <= b)
        offset = 0
        for other_offset, other_size in clashes:
            if offset + size <= other_offset:
                break
            offset = max(offset, other_offset + other_size)
        placed.append((offset, size, start, stop))
        slots[key] = Slot(offset, size)
        total = max(total, offset + size)
    return slots, total
