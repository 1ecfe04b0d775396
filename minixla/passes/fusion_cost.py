"""The fusion cost model: which producer may join which consumer, and why not.

Every refusal is a `Decision(False, reason)`, so a dump of the decisions explains the fusion
result. The rules follow XLA's InstructionFusion and CpuInstructionFusion (xla-reference.md 4.2,
4.4): loop-fusible producers only, scalar constants only, never duplicate an expensive producer,
never recompute an expensive producer per reuse, and cap each fusion's size.
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
    if instr.opcode == "constant":
        return instr.shape.rank == 0
    if instr.opcode == "bitcast-convert" and instr.shape.dims != instr.operand(0).shape.dims:
        return False  # a change of element width splits or joins elements: not one-to-one
    if instr.opdef.kind == ELEMENTWISE:
        return instr.opcode not in NOT_FUSIBLE_ELEMENTWISE
    return instr.opcode in LOOP_FUSIBLE_MOVEMENT


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
    if instr.opcode != "fusion":
        return 1
    return sum(1 for i in instr.attrs["calls"].instructions if i.opcode != "parameter")


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


def should_fuse(producer: HloInstruction, consumer: HloInstruction) -> Decision:
    """May `producer` be fused into `consumer` (a fusion, or an op about to become one)?"""
    if producer.opcode == "fusion":
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
    if fused_size(consumer) + 1 > MAX_FUSED_OPS:
        return no(f"fusion would exceed {MAX_FUSED_OPS} ops")
    new_operands = {id(o) for o in producer.operands} - {id(o) for o in consumer.operands}
    if consumer.operand_count + len(new_operands) - 1 > MAX_FUSION_OPERANDS:
        return no(f"fusion would exceed {MAX_FUSION_OPERANDS} operands")
    return YES


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
        if instr.opcode == "fusion" and instr.attrs.get("kind") not in ("kLoop", "kInput"):
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
