"""The fusion cost model: which producer may join which consumer, and why not.

Every refusal is a `Decision(False, reason)`, so a dump of the decisions explains the fusion
result. The rules follow XLA's InstructionFusion and CpuInstructionFusion (xla-reference.md 4.2,
4.4): loop-fusible producers only, scalar constants only, never duplicate an expensive producer,
never recompute an expensive producer per reuse, never evaluate a producer at more than
MAX_EVALUATIONS indices per output element (XLA's FusionNodeIndexingEvaluation), and cap each
fusion's size; and they bound how often cheap producers are copied into several fusions
(`Duplication`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.opcodes import ELEMENTWISE, EXPENSIVE

MAX_FUSED_OPS = 64  # instructions in one fused computation (code size / compile time)
MAX_FUSION_OPERANDS = 32
MAX_CONCAT_OPERANDS = 8  # wider concatenates run faster as memcpys (XLA:CPU)
MAX_REDUCES_PER_FUSION = 5
# Indices one output element evaluates a fused producer at (XLA's kAllowedCodeDuplication):
# the sum of 16 slices of one padded input (Winograd's input transform) evaluates it at 64,
# so a chain computing that input is stored once instead of recomputed per slice.
MAX_EVALUATIONS = 15
# Producers that are loads however often they are evaluated.
CHEAP_TO_EVALUATE = frozenset({"constant", "iota", "broadcast"})
# Limits on copying a producer that keeps other users into a fusion (`Duplication`):
MAX_RECOMPUTED_OPS = 16  # such copies in one fusion
MAX_COPIES = 2  # fusions one producer is copied into, unless it or a user had more users
MAX_COPY_READS = 1.25  # elements a copy may read per element of the value it replaces

LOOP_FUSIBLE_MOVEMENT = frozenset(
    {
        "broadcast",
        "iota",
        "reshape",
        "transpose",
        "slice",
        "pad",
        "concatenate",
        "reverse",
        "dynamic-slice",
    }
)
# Elementwise ops that never go into a loop fusion: a called computation, or side effects.
NOT_FUSIBLE_ELEMENTWISE = frozenset({"map", "stochastic-convert"})
# Ops that read an operand element more than once per output element (or once per many
# outputs), so an expensive producer fused into them would be recomputed per reuse.
REUSING_OPS = frozenset({"broadcast", "reduce-window", "gather", "dot", "convolution"})


@dataclass(frozen=True)
class Decision:
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok


YES = Decision(True)


def no(reason: str) -> Decision:
    return Decision(False, reason)


def is_loop_fusible(instr: HloInstruction) -> bool:
    if instr.shape.is_tuple or not instr.shape.is_array:
        return False
    if instr.opcode == "fusion":
        return is_scalar_loop_fusion(instr)
    if instr.opcode == "constant":
        return instr.shape.rank == 0
    if instr.opcode == "bitcast-convert" and instr.shape.dims != instr.operand(0).shape.dims:
        return False  # a change of element width splits or joins elements: not one-to-one
    if instr.opdef.kind == ELEMENTWISE:
        return instr.opcode not in NOT_FUSIBLE_ELEMENTWISE
    return instr.opcode in LOOP_FUSIBLE_MOVEMENT


FUSIBLE_KINDS = ("kLoop", "kInput")  # the fusions fusion may add producers to


def is_fusion_consumer(instr: HloInstruction) -> bool:
    """Can `instr` take producers in: a loop or input fusion, or an op that can become one?"""
    if instr.opcode == "fusion":
        return instr.attrs.get("kind") in FUSIBLE_KINDS
    if instr.control_predecessors or instr.control_successors:
        return False
    return (is_loop_fusible(instr) and instr.opcode != "constant") or is_reduction_root(instr)


def is_scalar_loop_fusion(instr: HloInstruction) -> bool:
    """A loop fusion computing one scalar (a shift amount from a key): its ops inline into a
    consumer fusion, where they run once per kernel and meet their twins."""
    return (
        instr.opcode == "fusion"
        and instr.attrs.get("kind") == "kLoop"
        and instr.shape.is_array
        and instr.shape.numel() == 1
    )


def is_reduction_root(instr: HloInstruction) -> bool:
    return instr.opcode == "reduce" and instr.shape.is_array


def is_expensive(instr: HloInstruction) -> bool:
    """Transcendentals (the table's EXPENSIVE trait), float division, and anything that is
    not an elementwise or movement op (XLA's IsExpensive)."""
    if instr.opcode == "fusion":
        return any(is_expensive(i) for i in instr.attrs["calls"].instructions)
    if instr.opdef.has(EXPENSIVE):
        return True
    if instr.opcode in ("divide", "remainder", "power"):
        return not instr.shape.element_type.is_integer
    return not (
        is_loop_fusible(instr)
        or instr.opcode in ("parameter", "constant", "tuple", "get-tuple-element", "bitcast")
    )


def fused_size(instr: HloInstruction) -> int:
    """The ops counted against MAX_FUSED_OPS: scalar ops (a rotate amount sliced from a key)
    and broadcasts of scalars are computed once per kernel, not per element, so they are free."""
    if instr.opcode != "fusion":
        return 1
    return sum(1 for i in instr.attrs["calls"].instructions if not _free_in_fusion(i))


def _free_in_fusion(instr: HloInstruction) -> bool:
    if instr.opcode == "parameter" or instr.shape.numel() == 1:
        return True
    return instr.opcode == "broadcast" and instr.operand(0).shape.numel() == 1


def reduce_count(instr: HloInstruction) -> int:
    if instr.opcode == "reduce":
        return 1
    if instr.opcode != "fusion":
        return 0
    return sum(1 for i in instr.attrs["calls"].instructions if i.opcode == "reduce")


def param_is_reused(fused: HloComputation, number: int) -> bool:
    """Does some path from fused parameter `number` to the root cross an element-reusing op?"""
    stack = [fused.parameter(number)]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        for user in node.users:
            if user.opcode in REUSING_OPS and not _is_scalar_broadcast(user, node):
                return True
            if id(user) not in seen:
                seen.add(id(user))
                stack.append(user)
    return False


def _is_scalar_broadcast(user: HloInstruction, operand: HloInstruction) -> bool:
    return user.opcode == "broadcast" and operand.shape.numel() == user.shape.numel()


def _reductions(instr: HloInstruction) -> set:
    """(input dims, reduced dims) of every reduce in a fusion candidate."""
    body = instr.attrs["calls"].instructions if instr.opcode == "fusion" else [instr]
    return {
        (r.operand(0).shape.dims, tuple(r.attrs["dimensions"]))
        for r in body
        if r.opcode == "reduce"
    }


def counts_as_recomputed(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """Would fusing `producer` into `consumer` recompute work that stays done elsewhere?
    Not for a producer reading no more than it writes (broadcasts, iotas: XLA's test; slices,
    which read only the elements they write, however large their operand), nor where the
    consumer reads elements no other user reads (an LSTM's four gates sliced from one add)."""
    if all(u is consumer for u in producer.users):
        return False
    if producer.opcode in ("slice", "dynamic-slice") or producer.shape.numel() == 1:
        return False  # a scalar is computed once per kernel, not per element
    read = sum(o.shape.numel() for o in {id(o): o for o in producer.operands}.values())
    return read > producer.shape.numel() and not reads_apart(producer, consumer)


# ---- the parts of a value its users read --------------------------------------------------------
# A part is a list of boxes, one (start, stop) per dim; None is the whole value.
MAX_BOXES = 16  # beyond this many boxes a part counts as the whole value
MAX_DEMAND_DEPTH = 8  # users followed from a value before its part counts as the whole


def reads_apart(producer: HloInstruction, consumer: HloInstruction) -> bool:
    """Does `consumer` read only elements of `producer` that none of its other users read?"""
    mine = read_part(consumer, producer)
    if mine is None:
        return False
    for user in producer.distinct_users():
        if user is consumer:
            continue
        theirs = read_part(user, producer)
        if theirs is None or any(_overlap(a, b) for a in mine for b in theirs):
            return False
    return True


def read_part(user: HloInstruction, value: HloInstruction):
    """The boxes of `value` that `user` reads (for a fusion: what its parameters for `value`
    feed), or None where it may read any element."""
    memo: dict = {}  # a value reached by several paths is walked once
    if user.opcode == "fusion":
        fused = user.attrs["calls"]
        numbers = [i for i, o in enumerate(user.operands) if o is value]
        return _union([_demanded(fused.parameter(i), 0, memo) for i in numbers])
    return _read_through(user, value, 0, memo)


def _demanded(instr: HloInstruction, depth: int, memo: dict):
    """The part of `instr` its users read, following elementwise ops, reshapes that only add
    or drop dims of size 1, and slices; None where that cannot be told."""
    if id(instr) not in memo:
        if instr.is_root() or not instr.users or depth > MAX_DEMAND_DEPTH:
            memo[id(instr)] = None
        else:
            users = instr.distinct_users()
            memo[id(instr)] = _union([_read_through(u, instr, depth, memo) for u in users])
    return memo[id(instr)]


def _read_through(user: HloInstruction, value: HloInstruction, depth: int, memo: dict):
    if user.opcode == "slice":
        box = tuple(
            (start, start + (n - 1) * stride + 1) if n else (start, start)
            for (start, _, stride), n in zip(user.attrs["slice"], user.shape.dims)
        )
        return [box]
    if user.opdef.kind == ELEMENTWISE and user.shape.dims == value.shape.dims:
        return _demanded(user, depth + 1, memo)
    if user.opcode == "reshape" and _unit_dims_only(value.shape.dims, user.shape.dims):
        part = _demanded(user, depth + 1, memo)
        return (
            None
            if part is None
            else [_reshape_box(b, user.shape.dims, value.shape.dims) for b in part]
        )
    return None


def _unit_dims_only(a: tuple, b: tuple) -> bool:
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def _reshape_box(box: tuple, dims: tuple, operand_dims: tuple) -> tuple:
    """A box of a reshape (to `dims`) that only adds or drops dims of size 1, in its
    operand's dims."""
    kept = iter([span for span, d in zip(box, dims) if d != 1])
    return tuple((0, 1) if d == 1 else next(kept) for d in operand_dims)


def _union(parts: list):
    if any(p is None for p in parts):
        return None
    boxes = [b for p in parts for b in p]
    return boxes if len(boxes) <= MAX_BOXES else None


def _overlap(a: tuple, b: tuple) -> bool:
    return all(max(x0, y0) < min(x1, y1) for (x0, x1), (y0, y1) in zip(a, b))


def copy_reads(producer: HloInstruction, consumer: HloInstruction) -> int:
    """The elements a copy of `producer` in `consumer` reads from values `consumer` does not
    read already. The copy pulls in the cheap ops of its size that compute it (an elementwise
    chain) and reads what they read: values stored anyway, expensive ones (which are never
    copied), smaller ones (a broadcast reads its operand). At most MAX_FUSED_OPS ops are
    followed; past them the copy would not fit in a fusion, and the count says so."""
    read = {id(o) for o in consumer.operands}
    size = producer.shape.numel()
    copied: set[int] = set()
    frontier: dict[int, HloInstruction] = {}
    stack = [producer]
    while stack:
        instr = stack.pop()
        if id(instr) in copied:
            continue
        copied.add(id(instr))
        if len(copied) > MAX_FUSED_OPS:
            return sum(o.shape.numel() for o in frontier.values()) + size * MAX_FUSED_OPS
        for operand in instr.operands:
            if id(operand) in read:
                continue
            if operand.opcode in CHEAP_TO_EVALUATE:
                frontier.update((id(o), o) for o in operand.operands if id(o) not in read)
            elif operand.shape.numel() < size or _stored_anyway(operand) or is_expensive(operand):
                frontier[id(operand)] = operand
            else:
                stack.append(operand)
    return sum(o.shape.numel() for o in frontier.values() if id(o) not in copied)


def _stored_anyway(instr: HloInstruction) -> bool:
    """Is `instr` stored whatever fusion does: not loop-fusible, a scalar (computed once per
    kernel), the root, or read by an op no fusion takes in?"""
    if not is_loop_fusible(instr) or instr.shape.numel() == 1 or instr.is_root():
        return True
    return not all(is_fusion_consumer(u) for u in instr.users)


class Duplication:
    """The recomputation fusion has added so far in one computation, and its limits.

    A producer that keeps other users is copied into a fusion (cheap ops only) unless:
    * the fusion already holds MAX_RECOMPUTED_OPS such copies;
    * MAX_COPIES fusions already hold a copy of it, and neither it nor one of its users had
      more users before fusion (four gates sliced from one add each pull in the add's operands);
    * the copy would read much more than the value it replaces (`copy_reads`): a recurrence's
      state pulls in every earlier step's chain.
    Without them, an unrolled recurrence (an LSTM's cell state or its gradient) is copied
    whole into every step's fusion: work quadratic in the steps, and each step's gates
    stored for the copies instead of its state.
    Producers that read no more than they write are copied freely (`counts_as_recomputed`)."""

    def __init__(self, instrs: list[HloInstruction]) -> None:
        # keyed by the objects themselves (identity), so a new instruction never meets the
        # count of a removed one that had the same id
        users = {i: len(i.distinct_users()) for i in instrs}
        self.fan_out = {i: max([users[i]] + [users.get(u, 0) for u in i.users]) for i in instrs}
        self.in_fusion: dict[HloComputation, int] = {}  # fused computation -> copies it holds
        self.of_producer: dict[HloInstruction, int] = {}  # producer -> fusions holding a copy

    def check(self, producer: HloInstruction, consumer: HloInstruction) -> Decision:
        if not counts_as_recomputed(producer, consumer):
            return YES
        reads = copy_reads(producer, consumer)
        if reads > MAX_COPY_READS * producer.shape.numel():
            return no(
                f"a recomputed {producer.opcode} would read {reads} elements where its value "
                f"has {producer.shape.numel()}"
            )
        held = self._held(consumer)
        if held >= MAX_RECOMPUTED_OPS:
            return no(f"the fusion already recomputes {held} ops computed elsewhere")
        copies = self.of_producer.get(producer, 0)
        if copies >= max(MAX_COPIES, self.fan_out.get(producer, 0)):
            return no(f"{copies} fusions already recompute {producer.opcode}")
        return YES

    def record(self, producer: HloInstruction, fusion: HloInstruction) -> None:
        """Called before `producer` is copied into `fusion`."""
        if counts_as_recomputed(producer, fusion):
            fused = fusion.attrs["calls"]
            self.in_fusion[fused] = self._held(fusion) + 1
            self.of_producer[producer] = self.of_producer.get(producer, 0) + 1

    def _held(self, consumer: HloInstruction) -> int:
        return self.in_fusion.get(consumer.attrs["calls"], 0) if consumer.opcode == "fusion" else 0


def should_fuse(
    producer: HloInstruction, consumer: HloInstruction, duplication: Duplication | None = None
) -> Decision:
    """May `producer` be fused into `consumer` (a fusion, or an op about to become one)?
    `duplication` limits copies of producers with other users (none: cheap ones are free)."""
    if producer.opcode == "fusion" and not is_scalar_loop_fusion(producer):
        return no("producer is a fusion (fusions are not fused into their users)")
    if not is_loop_fusible(producer):
        return no(f"{producer.opcode} is not loop-fusible")
    if producer.opcode == "constant" and consumer.opcode != "fusion":
        return no("a lone constant and one op are not worth a fusion")
    if producer.is_root():
        return no("producer is the computation root")
    if producer.opcode == "concatenate" and producer.operand_count > MAX_CONCAT_OPERANDS:
        return no(f"concatenate of {producer.operand_count} operands runs faster as memcpys")
    if producer.control_predecessors or producer.control_successors:
        return no("producer has control dependencies")
    duplicates = any(u is not consumer for u in producer.users)
    if duplicates and is_expensive(producer):
        return no(f"{producer.opcode} is expensive and has other users: fusing would recompute it")
    if is_expensive(producer) and consumer_reuses(producer, consumer):
        return no(
            f"{producer.opcode} is expensive and the consumer reads each element several times"
        )
    if duplication is not None:
        decision = duplication.check(producer, consumer)
        if not decision:
            return decision
    if fused_size(consumer) + 1 > MAX_FUSED_OPS:
        return no(f"fusion would exceed {MAX_FUSED_OPS} ops")
    if consumer.opcode == "fusion" and producer.opcode not in CHEAP_TO_EVALUATE:
        evaluations = producer_evaluations(producer, consumer)
        if evaluations > MAX_EVALUATIONS:
            return no(
                f"{producer.opcode} would be evaluated at {evaluations} indices per output element"
            )
    new_operands = {id(o) for o in producer.operands} - {id(o) for o in consumer.operands}
    if consumer.operand_count + len(new_operands) - 1 > MAX_FUSION_OPERANDS:
        return no(f"fusion would exceed {MAX_FUSION_OPERANDS} operands")
    return YES


def producer_evaluations(producer: HloInstruction, fusion: HloInstruction) -> int:
    """At how many indices one output element of `fusion` reads `producer`: the sum, over the
    paths from the fused parameters it feeds to the root, of the ops that index their
    operands anew (slices, transposes, pads...); elementwise ops read their operands at their
    own index, so a value they share is evaluated once."""
    fused = fusion.attrs["calls"]
    count: dict[HloInstruction, int] = {}
    reached: dict[HloInstruction, set] = {}  # the index-changing users (or the root) of each
    for instr in reversed(fused.post_order()):
        if instr is fused.root or not instr.users:
            reached[instr] = {instr}
            count[instr] = 1
            continue
        targets: set = set()
        for user in instr.distinct_users():
            if user.opdef.kind == ELEMENTWISE and user is not fused.root:
                targets |= reached[user]
            else:
                targets.add(user)
        reached[instr] = targets
        count[instr] = sum(1 if t.opcode == "tuple" else count[t] for t in targets)
    return sum(
        count[fused.parameter(i)]
        for i, operand in enumerate(fusion.operands)
        if operand is producer
    )


def consumer_reuses(producer: HloInstruction, consumer: HloInstruction) -> bool:
    if consumer.opcode != "fusion":
        return consumer.opcode in REUSING_OPS and not _is_scalar_broadcast(consumer, producer)
    fused = consumer.attrs["calls"]
    return any(param_is_reused(fused, i) for i, o in enumerate(consumer.operands) if o is producer)


def loop_shape(instr: HloInstruction) -> tuple[int, ...] | None:
    """The iteration space of a fusion candidate: the output dims of an elementwise loop, the
    input dims of a reduction (XLA's compatible-shape rule for multi-output fusion)."""
    root = instr.attrs["calls"].root if instr.opcode == "fusion" else instr
    roots = root.operands if root.opcode == "tuple" else [root]
    shapes = {(r.operand(0).shape.dims if r.opcode == "reduce" else r.shape.dims) for r in roots}
    return shapes.pop() if len(shapes) == 1 else None


def can_multi_output_fuse(a: HloInstruction, b: HloInstruction) -> Decision:
    """Shape and size rules shared by sibling and producer-consumer multi-output fusion."""
    for instr in (a, b):
        if instr.opcode == "fusion" and instr.attrs.get("kind") not in FUSIBLE_KINDS:
            return no(f"{instr.name} is a {instr.attrs.get('kind')} fusion")
    shape_a, shape_b = loop_shape(a), loop_shape(b)
    if shape_a is None or shape_a != shape_b:
        return no(f"iteration spaces differ: {shape_a} vs {shape_b}")
    if fused_size(a) + fused_size(b) + 1 > MAX_FUSED_OPS:
        return no(f"fusion would exceed {MAX_FUSED_OPS} ops")
    if len(_reductions(a) | _reductions(b)) > 1:
        return no("reductions over different dimensions cannot share one loop nest")
    if reduce_count(a) + reduce_count(b) > MAX_REDUCES_PER_FUSION:
        return no(f"more than {MAX_REDUCES_PER_FUSION} reductions in one fusion")
    operands = {id(o) for o in a.operands} | {id(o) for o in b.operands}
    if len(operands) > MAX_FUSION_OPERANDS:
        return no(f"fusion would exceed {MAX_FUSION_OPERANDS} operands")
    return YES
