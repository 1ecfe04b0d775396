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

import numpy as np

ALIGNMENT = 64

# Ops whose result can be a NumPy view of operand 0 (no new storage).
VIEWS = {"reshape", "get-tuple-element", "tuple", "opt-barrier", "domain", "add-dependency"}


@dataclass
class Slot:
    offset: int
    size: int
    shared: bool = False  # placed by the module's buffer assignment (absolute offset)


@dataclass
class ComputationPlan:
    order: list  # instructions in execution order
    slots: dict = field(default_factory=dict)  # (id(instr), leaf) -> Slot
    fresh: set = field(default_factory=set)  # ids of instructions given fresh arrays
    in_place: set = field(default_factory=set)  # ids of DUS that update operand 0 in place
    kinds: dict = field(default_factory=dict)  # id(instr) -> nested kinds (frozensets)
    arena_bytes: int = 0  # bytes of this computation's own region


def is_view_op(instr) -> bool:
    """Ops the driver can implement as a NumPy view of operand 0."""
    if instr.opcode == "bitcast":
        return row_major(instr.shape) and row_major(instr.operand(0).shape)
    return instr.opcode in VIEWS


def row_major(shape) -> bool:
    """The shape's elements are stored in row-major order (no layout, or the default one)."""
    layout = shape.layout
    return layout is None or (
        tuple(layout.minor_to_major) == tuple(range(shape.rank - 1, -1, -1)) and not layout.tiles
    )


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


VIEW_KINDS = ("view", "alias", "tuple", "get-tuple-element")
BUFFER_KINDS = ("kernel", "thunk", "dus", "scatter")
IN_PLACE_KINDS = ("dus", "scatter")  # may update operand 0 in place
MAY_ALIAS_KINDS = ("fallback", "call", "while", "conditional")


def plan_computation(
    comp, *, order, is_entry: bool, how, shared=None, carried=frozenset(), native_loops=None
) -> ComputationPlan:
    """`how(instr)` is the driver's lowering kind: views forward operand 0, buffer kinds write
    into storage the plan provides, may-alias kinds return arrays that may be operands.
    `shared(instr, leaf)` may place a temporary at an absolute offset of the module's buffer
    assignment; the rest are packed into this computation's own region. `carried` holds the
    ids of a while body's dynamic-update-slices that may write into the loop state they
    read (see loop_carried_updates: the loop owns those buffers). `native_loops` maps the ids
    of whiles run as one native function to the state leaves they hand back in private copies;
    every other leaf of such a loop's result is its initial buffer."""
    native_loops = native_loops or {}
    position = {id(instr): k for k, instr in enumerate(order)}
    plan = ComputationPlan(order)
    defines = {id(i) for i in order if how(i) in BUFFER_KINDS}
    for instr in order:
        if how(instr) in IN_PLACE_KINDS and (
            _can_update_in_place(instr, defines) or id(instr) in carried
        ):
            plan.in_place.add(id(instr))
    views = {id(i) for i in order if how(i) in VIEW_KINDS} | plan.in_place
    escaping = _escaping(comp, views, native_loops)
    groups = _UnionFind()
    for instr in order:
        if id(instr) in views or how(instr) in MAY_ALIAS_KINDS:
            for operand in instr.operands:
                groups.union(id(instr), id(operand))
    last_use: dict[int, int] = {}
    for instr in order:
        for operand in instr.operands:
            root = groups.find(id(operand))
            last_use[root] = max(last_use.get(root, -1), position[id(instr)])
    for instr_id in escaping:
        last_use[groups.find(instr_id)] = len(order)
    own = []
    for instr in order:
        plan.kinds[id(instr)] = _kinds(instr, plan, escaping, views, defines, how, native_loops)
        if id(instr) not in defines or id(instr) in plan.in_place:
            continue
        if id(instr) in escaping:
            plan.fresh.add(id(instr))
            continue
        start = position[id(instr)]
        stop = last_use.get(groups.find(id(instr)), start)
        for leaf, shape in instr.shape.leaves():
            if not shape.is_array:
                continue
            offset = shared(instr, leaf) if shared is not None else None
            if offset is not None:
                plan.slots[(id(instr), leaf)] = Slot(offset, _nbytes(shape), shared=True)
            else:
                own.append(((id(instr), leaf), _nbytes(shape), start, stop))
    slots, plan.arena_bytes = _pack(own)
    plan.slots.update(slots)
    return plan


def _nbytes(shape) -> int:
    return max(shape.numel() * shape.numpy_dtype.itemsize, 1)


def _escaping(comp, views: set, native_loops: dict) -> set:
    """Instructions whose value (or part of it) is returned, through views, tuples, in-place
    updates and the leaves a native loop hands back as they came in."""
    out: set = set()
    stack = [comp.root]
    while stack:
        instr = stack.pop()
        if id(instr) in out:
            continue
        out.add(id(instr))
        private = native_loops.get(id(instr))
        init = instr.operand(0) if private is not None else None
        if init is not None and init.opcode == "tuple":
            stack.extend(op for i, op in enumerate(init.operands) if i not in private)
        elif init is not None:
            stack.append(init)
        if id(instr) in views:
            stack.extend(
                instr.operands[:1]
                if instr.opcode in ("dynamic-update-slice", "scatter")
                else instr.operands
            )
    return out


def _can_update_in_place(instr, defines: set) -> bool:
    """DUS or scatter may write into operand 0 when nothing else ever reads it: a buffer this
    computation allocated, used only here (views count as uses)."""
    operand = instr.operand(0)
    if len(operand.users) != 1 or id(operand) not in defines or operand.is_root():
        return False
    return all(op is not operand for op in instr.operands[1:])


def loop_carried_updates(body, how, order) -> dict[int, object]:
    """State leaves a while body may update in place: {leaf index: the updating instruction}.

    Leaf i qualifies when the body's root tuple returns, at i, a dynamic-update-slice (or a
    one-operand scatter) of get-tuple-element(state, i), that update is otherwise read only
    by kernels and thunks (they run within the iteration and copy what they read), and
    every other reader of the old value is a kernel or thunk (it copies what it reads) that
    runs before the update because the update depends on it. The next iteration then
    receives the same buffer, so with an initial state the loop owns (the driver copies it
    once if need be) no iteration copies the carried buffer."""
    root = body.root
    params = body.parameters
    if root.opcode != "tuple" or len(params) != 1 or not params[0].shape.is_tuple:
        return {}
    state = params[0]
    if any(user.opcode != "get-tuple-element" for user in state.users):
        return {}
    position = {id(instr): k for k, instr in enumerate(order)}
    found = {}
    for i, dus in enumerate(root.operands):
        if how(dus) not in IN_PLACE_KINDS or root.operands.count(dus) != 1:
            continue
        if any(u is not root and how(u) not in ("kernel", "thunk") for u in dus.users):
            continue  # readers of the updated value besides the root must copy what they read
        old = dus.operand(0)
        if (
            old.opcode != "get-tuple-element"
            or old.operand(0) is not state
            or old.attrs["index"] != i
        ):
            continue
        readers = [u for g in state.users if g.attrs["index"] == i for u in g.users]
        ancestors = _ancestors(dus)
        if all(
            r is dus
            or (
                how(r) in ("kernel", "thunk")
                and id(r) in ancestors
                and position[id(r)] < position[id(dus)]
            )
            for r in readers
        ) and all(op is not old for op in dus.operands[1:]):
            found[i] = dus
    return found


def _ancestors(instr) -> set:
    seen, stack = set(), list(instr.operands)
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            stack.extend(node.operands)
    return seen


def _kinds(instr, plan, escaping, views, defines, how, native_loops):
    k = plan.kinds
    private = native_loops.get(id(instr))
    if private is not None and isinstance(k[id(instr.operand(0))], tuple):
        init = k[id(instr.operand(0))]
        return tuple(frozenset({"fresh"}) if i in private else init[i] for i in range(len(init)))
    if instr.opcode == "parameter":
        return _fill(instr.shape, frozenset({"param"}))
    if instr.opcode == "constant" or how(instr) == "constant":
        return _fill(instr.shape, frozenset({"const"}))
    if instr.opcode == "tuple":
        return tuple(k[id(op)] for op in instr.operands)
    if instr.opcode == "get-tuple-element":
        return k[id(instr.operand(0))][instr.attrs["index"]]
    if id(instr) in views:
        return k[id(instr.operand(0))]
    if how(instr) in MAY_ALIAS_KINDS:
        union = frozenset({"fresh"}).union(*(_flatten(k[id(op)]) for op in instr.operands))
        return _fill(instr.shape, union)
    if id(instr) in defines:
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


def constant_value(instr) -> np.ndarray | None:
    """The value of ops that depend on nothing (iota): computed once, at compile. replica-id
    and partition-id depend on the device and run through the interpreter's handler."""
    if instr.opcode == "iota":
        dim, dims = instr.attrs["iota_dimension"], instr.shape.dims
        line = np.arange(dims[dim]).astype(instr.shape.numpy_dtype)
        shape = [1] * len(dims)
        shape[dim] = dims[dim]
        return np.ascontiguousarray(np.broadcast_to(line.reshape(shape), dims))
    return None
