"""Auto-sharding's strategies: for one instruction on N devices, the shardings it may take,
what each needs of its operands, and what each costs on one device (passes/auto_sharding.py
chooses among them).

`CANDIDATES` says, per op family, which operand shardings to try besides all-replicated;
spmd_rules.plan() then says what the partitioner would really do with them (the result's
sharding, an all-reduce of partial sums), so the costs are those of the program that runs.
A split must divide its dim evenly. Parameters are replicated or split on any dim; leaves
(constants, iota) start replicated; ops without a row run replicated and say why.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.sharding import HloSharding
from ..ir.shapes import Shape
from .cost_analysis import instruction_flops
from .spmd_partitioner import same_sharding
from .spmd_rules import R, plan, split, split_dim


@dataclass(frozen=True)
class Strategy:
    out: HloSharding
    operands: tuple[HloSharding, ...]
    flops: float  # on one device
    communication: float  # bytes one device sends in the op's own collective
    memory: int  # bytes of the result on one device
    all_reduce: bool = False

    @property
    def label(self) -> str:
        ins = ", ".join(str(s) for s in self.operands)
        return f"{self.out} <- ({ins})" + (" + all-reduce" if self.all_reduce else "")


def _splits(shape: Shape, n: int) -> list[int]:
    """The dims an even 1-D split of n pieces can cut (no padding)."""
    if not shape.is_array:
        return []
    return [d for d, size in enumerate(shape.dims) if size >= n and size % n == 0]


def replicated_like(shape: Shape) -> HloSharding:
    if shape.is_tuple:
        return HloSharding.tuple_of(replicated_like(s) for s in shape.tuple_shapes)
    return R


def _first_operand_split(instr, n):
    """Operand 0 split on each dim it allows, the other operands whole (transpose, reshape,
    broadcast, reduce, slice, pad, copy, convolution)."""
    operand = instr.operand(0).shape
    rest = tuple(replicated_like(o.shape) for o in instr.operands[1:])
    return [(split(operand.rank, d, n),) + rest for d in _splits(operand, n)]


def _all_operands_split(instr, n):
    """Every operand of the result's rank split on the same dim (elementwise, concatenate)."""
    rank = instr.shape.rank
    out = []
    for d in _splits(instr.shape, n):
        if all(o.shape.rank != rank or d in _splits(o.shape, n) for o in instr.operands):
            out.append(tuple(split(rank, d, n) if o.shape.rank == rank else R
                             for o in instr.operands))
    return out


def _dot_candidates(instr, n):
    """lhs split on a batch, row or contracting dim (plan() splits rhs to match), or rhs
    split on a column dim."""
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    batch_or_con = set(instr.attrs.get("rhs_batch_dims", ())) | \
        set(instr.attrs.get("rhs_contracting_dims", ()))
    out = [(split(lhs.rank, d, n), R) for d in _splits(lhs, n)]
    out += [(R, split(rhs.rank, d, n)) for d in _splits(rhs, n) if d not in batch_or_con]
    return out


def _elementwise_rows():
    from ..ir.opcodes import ELEMENTWISE, OPCODES
    return {name: _all_operands_split for name, row in OPCODES.items()
            if row.kind == ELEMENTWISE and name not in ("map", "bitcast-convert")}


# opcode -> the operand shardings to try besides all-replicated; spmd_rules.plan() gives the
# result's sharding and collective for each. Opcodes not here run replicated.
CANDIDATES = {
    **_elementwise_rows(),
    "concatenate": _all_operands_split, "dot": _dot_candidates,
    **{op: _first_operand_split for op in ("broadcast", "transpose", "reshape", "reduce",
                                           "slice", "pad", "copy", "convolution")},
}
# Values made on every device whole: they start replicated (slicing them later is free).
LEAVES = ("constant", "iota", "partition-id", "replica-id", "rng", "rng-bit-generator")


def shard_bytes(shape: Shape, sharding: HloSharding) -> int:
    if shape.is_tuple:
        return sum(shard_bytes(s, e) for s, e in zip(shape.tuple_shapes, sharding.elements))
    if not shape.is_array:
        return 0
    return int(np.prod(sharding.shard_dims(shape.dims))) * shape.element_type.byte_size


def _work_fraction(instr, out: HloSharding, operands) -> float:
    """The share of the op's work one device does: the smallest share of any array it
    touches (a dot with K split holds all of its result but 1/N of each operand)."""
    shapes = [(instr.shape, out)] + list(zip((o.shape for o in instr.operands), operands))
    return min((shard_bytes(s, h) / max(s.byte_size(), 1) for s, h in shapes if s.is_array),
               default=1.0)


def _all_reduce_bytes(n: int, size: int) -> float:
    return 2 * (n - 1) * size / n


def reshard_bytes(shape: Shape, have: HloSharding, want: HloSharding, n: int) -> float:
    """Bytes one device sends to turn `have` into `want` (the partitioner's resharding):
    slicing a replicated value is free, a split to another split dim is an all-to-all,
    anything else goes through an all-gather."""
    if same_sharding(have, want) or have.is_replicated or not shape.is_array:
        return 0.0
    size = shape.byte_size()
    if split_dim(have, shape, n) is not None and split_dim(want, shape, n) is not None:
        return (n - 1) * size / (n * n)
    return (n - 1) * size / n


def _strategy(instr, operands, n) -> Strategy | None:
    """The strategy plan() makes of these operand shardings, if plan() keeps them (so that
    the partitioner, which plans from the annotated operands, does the same)."""
    step = plan(instr, list(operands), n)
    if step.out.is_tuple or not all(same_sharding(a, b) for a, b in zip(step.operands,
                                                                        operands)):
        again = plan(instr, list(step.operands), n)
        if again.out.is_tuple or not same_sharding(again.out, step.out) or \
                again.all_reduce != step.all_reduce:
            return None
    out = step.out
    local = shard_bytes(instr.shape, out)
    return Strategy(out, tuple(step.operands),
                    instruction_flops(instr) * _work_fraction(instr, out, step.operands),
                    _all_reduce_bytes(n, local) if step.all_reduce else 0.0, local,
                    step.all_reduce)


def _replicated(instr) -> Strategy:
    out = replicated_like(instr.shape)
    return Strategy(out, tuple(replicated_like(o.shape) for o in instr.operands),
                    float(instruction_flops(instr)), 0.0, shard_bytes(instr.shape, out))


def _fixed(instr, sharding: HloSharding) -> Strategy:
    """An instruction whose sharding is given: the partitioner reshards its operand to it."""
    return Strategy(sharding, (sharding,) * instr.operand_count, 0.0, 0.0,
                    shard_bytes(instr.shape, sharding))


def _given(instr) -> HloSharding | None:
    sharding = instr.attrs.get("sharding")
    if not isinstance(sharding, HloSharding) or sharding.kind == "named":
        return None
    if sharding.kind in ("maximal", "unknown", "unreduced"):
        return R
    return sharding.normalized()


def strategies(instr, n: int) -> tuple[list[Strategy], str | None]:
    """(the strategies of `instr`, None or why it has only the replicated one)."""
    given = _given(instr)
    if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding":
        return [_fixed(instr, given or R)], None
    if instr.shape.is_tuple:
        return [_replicated(instr)], "tuple-shaped: runs replicated"
    if instr.opcode == "parameter":
        if given is not None:
            return [_fixed(instr, given)], "sharding given"
        outs = [R] + [split(instr.shape.rank, d, n) for d in _splits(instr.shape, n)]
        return [_fixed(instr, s) for s in outs], None
    if instr.opcode in LEAVES:
        return [_replicated(instr)], None
    rule = CANDIDATES.get(instr.opcode)
    if rule is None:
        return [_replicated(instr)], f"no auto-sharding strategies for {instr.opcode}: " \
                                     f"runs replicated"
    found: list[Strategy] = [_replicated(instr)]
    for operands in rule(instr, n):
        strategy = _strategy(instr, operands, n)
        if strategy is not None and not any(_same(strategy, s) for s in found):
            found.append(strategy)
    if given is not None:
        kept = [s for s in found if same_sharding(s.out, given)]
        return (kept, "sharding given") if kept else ([_fixed(instr, given)], "sharding given")
    return found, None


def _same(a: Strategy, b: Strategy) -> bool:
    return same_sharding(a.out, b.out) and all(
        same_sharding(x, y) for x, y in zip(a.operands, b.operands))
