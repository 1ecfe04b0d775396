"""Auto-sharding's strategies: for one instruction on N devices, the shardings it may take,
what each needs of its operands, and what each costs on one device (passes/auto_sharding.py
chooses among them).

`CANDIDATES` says, per op family, which operand shardings to try besides all-replicated;
spmd_rules.plan() then says what the partitioner would really do with them (the result's
sharding, an all-reduce of partial sums), so the costs are those of the program that runs.
Shardings come from the device mesh: each mesh axis cuts one dim or none, evenly
(`mesh_shardings`). Parameters may take any of them; leaves (constants, iota) start
replicated; ops without a row run replicated and say why.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from ..ir.sharding import HloSharding, mesh_sharding
from ..ir.shapes import Shape
from .cost_analysis import instruction_flops
from .spmd_partitioner import same_sharding
from .spmd_rules import R, even, plan, split_dim


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


def mesh_shardings(shape: Shape, mesh: tuple[int, ...]) -> list[HloSharding]:
    """Every sharding of an array over a device mesh of axis sizes `mesh` (iota order): each
    mesh axis cuts one dim or none, and every cut divides its dim evenly (no padding).
    Replicated comes first; on a 1-D mesh the rest are the splits of each dim."""
    if not shape.is_array:
        return [replicated_like(shape)]
    axes = {f"a{i}": size for i, size in enumerate(mesh)}
    found = [R]
    for owners in itertools.product(range(shape.rank + 1), repeat=len(mesh)):
        dim_axes = [tuple(a for a, o in zip(axes, owners) if o == d) for d in range(shape.rank)]
        pieces = [int(np.prod([axes[a] for a in cut])) for cut in dim_axes]
        if all(p == 1 for p in pieces) or any(size % p for size, p in zip(shape.dims, pieces)):
            continue
        found.append(mesh_sharding(axes, dim_axes))
    return found


def _split(shape: Shape, mesh) -> list[HloSharding]:
    return mesh_shardings(shape, mesh)[1:]


def replicated_like(shape: Shape) -> HloSharding:
    if shape.is_tuple:
        return HloSharding.tuple_of(replicated_like(s) for s in shape.tuple_shapes)
    return R


def _first_operand_split(instr, mesh):
    """Operand 0 split any way it allows, the other operands whole (transpose, reshape,
    broadcast, reduce, slice, pad, copy, convolution)."""
    rest = tuple(replicated_like(o.shape) for o in instr.operands[1:])
    return [(s,) + rest for s in _split(instr.operand(0).shape, mesh)]


def _all_operands_split(instr, mesh):
    """Every operand of the result's rank split like the result (elementwise, concatenate)."""
    rank = instr.shape.rank
    out = []
    for sharding in _split(instr.shape, mesh):
        shapes = [o.shape for o in instr.operands if o.shape.rank == rank]
        if all(d % t == 0 for shape in shapes for d, t in zip(shape.dims, sharding.tile_dims)):
            out.append(tuple(sharding if o.shape.rank == rank else R for o in instr.operands))
    return out


def _dot_candidates(instr, mesh):
    """Each mesh axis cuts a batch dim (of both operands), a row (M) or column (N) dim, the
    contracting dim (K, of both: then the partial sums are all-reduced), or nothing."""
    attrs = instr.attrs
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    lhs_batch, rhs_batch = attrs.get("lhs_batch_dims", ()), attrs.get("rhs_batch_dims", ())
    lhs_con = attrs.get("lhs_contracting_dims", ())
    rhs_con = attrs.get("rhs_contracting_dims", ())
    lhs_free = [d for d in range(lhs.rank) if d not in lhs_batch and d not in lhs_con]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_batch and d not in rhs_con]
    # role -> (the lhs dim it cuts or None, the rhs dim or None)
    roles = (
        [(None, None)]
        + list(zip(lhs_batch, rhs_batch))
        + list(zip(lhs_con, rhs_con))
        + [(d, None) for d in lhs_free]
        + [(None, d) for d in rhs_free]
    )
    axes = {f"a{i}": size for i, size in enumerate(mesh)}
    out = []
    for picks in itertools.product(roles, repeat=len(mesh)):
        if all(p == (None, None) for p in picks):
            continue
        pair = []
        for side, shape in ((0, lhs), (1, rhs)):
            dim_axes = [
                tuple(a for a, pick in zip(axes, picks) if pick[side] == d)
                for d in range(shape.rank)
            ]
            pieces = [int(np.prod([axes[a] for a in cut])) for cut in dim_axes]
            if any(size % p for size, p in zip(shape.dims, pieces)):
                break
            pair.append(mesh_sharding(axes, dim_axes).normalized())
        if len(pair) == 2:
            out.append(tuple(pair))
    return out


def _elementwise_rows():
    from ..ir.opcodes import ELEMENTWISE, OPCODES

    return {
        name: _all_operands_split
        for name, row in OPCODES.items()
        if row.kind == ELEMENTWISE and name not in ("map", "bitcast-convert")
    }


# opcode -> the operand shardings to try besides all-replicated; spmd_rules.plan() gives the
# result's sharding and collective for each. Opcodes not here run replicated.
CANDIDATES = {
    **_elementwise_rows(),
    "concatenate": _all_operands_split,
    "dot": _dot_candidates,
    **{
        op: _first_operand_split
        for op in (
            "broadcast",
            "transpose",
            "reshape",
            "reduce",
            "slice",
            "pad",
            "copy",
            "convolution",
        )
    },
}
# Values made on every device whole: they start replicated (slicing them later is free).
LEAVES = ("constant", "iota", "partition-id", "replica-id", "rng", "rng-bit-generator")


@functools.lru_cache(maxsize=1 << 16)
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
    return min(
        (shard_bytes(s, h) / max(s.byte_size(), 1) for s, h in shapes if s.is_array), default=1.0
    )


@functools.lru_cache(maxsize=1 << 16)  # one program asks for the same pairs many times
def reshard_bytes(shape: Shape, have: HloSharding, want: HloSharding, n: int) -> float:
    """Bytes one device sends to turn `have` into `want`, the way the partitioner reshards:
    slicing a replicated value, or a finer cut of what each device holds, is free; a 1-D
    split to another dim is an all-to-all; the same pieces on other devices a
    collective-permute; anything else an all-gather per cut dim, then a free slice."""
    if same_sharding(have, want) or have.is_replicated or not shape.is_array:
        return 0.0
    size = shape.byte_size()
    if split_dim(have, shape, n) is not None and split_dim(want, shape, n) is not None:
        return (n - 1) * size / (n * n)
    if want.is_tiled and _refines(have, want, shape, n):
        return 0.0
    if want.is_tiled and have.tile_dims == want.tile_dims:
        return float(shard_bytes(shape, have))  # collective-permute
    dims, sent = list(have.shard_dims(shape.dims)), 0.0
    for axis, pieces in enumerate(have.tile_dims):
        if pieces > 1:
            dims[axis] *= pieces
            sent += (pieces - 1) / pieces * float(np.prod(dims)) * shape.element_type.byte_size
    return sent


def _refines(have: HloSharding, want: HloSharding, shape: Shape, n: int) -> bool:
    """Every device's `want` piece lies inside its `have` piece (the partitioner's refine)."""
    if not (even(have, shape) and even(want, shape)):
        return False
    for device in range(n):
        inner, outer = want.shard_bounds(shape.dims, device), have.shard_bounds(shape.dims, device)
        if any(
            not h_lo <= w_lo <= w_hi <= h_hi for (w_lo, w_hi), (h_lo, h_hi) in zip(inner, outer)
        ):
            return False
    return True


def _strategy(instr, operands, n: int) -> Strategy | None:
    """The strategy plan() makes of these operand shardings, if plan() keeps them (so that
    the partitioner, which plans from the annotated operands, does the same)."""
    step = plan(instr, list(operands), n)
    if step.out.is_tuple or not all(same_sharding(a, b) for a, b in zip(step.operands, operands)):
        again = plan(instr, list(step.operands), n)
        if (
            again.out.is_tuple
            or not same_sharding(again.out, step.out)
            or again.all_reduce != step.all_reduce
        ):
            return None
    out = step.out
    local = shard_bytes(instr.shape, out)
    group = len(step.groups[0]) if step.groups else n
    return Strategy(
        out,
        tuple(step.operands),
        instruction_flops(instr) * _work_fraction(instr, out, step.operands),
        2 * (group - 1) * local / group if step.all_reduce else 0.0,
        local,
        step.all_reduce,
    )


def _replicated(instr) -> Strategy:
    out = replicated_like(instr.shape)
    return Strategy(
        out,
        tuple(replicated_like(o.shape) for o in instr.operands),
        float(instruction_flops(instr)),
        0.0,
        shard_bytes(instr.shape, out),
    )


def _fixed(instr, sharding: HloSharding) -> Strategy:
    """An instruction whose sharding is given: the partitioner reshards its operand to it."""
    return Strategy(
        sharding, (sharding,) * instr.operand_count, 0.0, 0.0, shard_bytes(instr.shape, sharding)
    )


def _given(instr) -> HloSharding | None:
    sharding = instr.attrs.get("sharding")
    if not isinstance(sharding, HloSharding) or sharding.kind == "named":
        return None
    if sharding.kind in ("maximal", "unknown", "unreduced"):
        return R
    return sharding.normalized()


def strategies(instr, mesh: tuple[int, ...]) -> tuple[list[Strategy], str | None]:
    """(the strategies of `instr` on a device mesh of axis sizes `mesh`, None or why it has
    only the replicated one)."""
    n = int(np.prod(mesh))
    given = _given(instr)
    if instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") == "Sharding":
        return [_fixed(instr, given or R)], None
    if instr.shape.is_tuple:
        return [_replicated(instr)], "tuple-shaped: runs replicated"
    if instr.opcode == "parameter":
        if given is not None:
            return [_fixed(instr, given)], "sharding given"
        return [_fixed(instr, s) for s in mesh_shardings(instr.shape, mesh)], None
    if instr.opcode in LEAVES:
        return [_replicated(instr)], None
    rule = CANDIDATES.get(instr.opcode)
    if rule is None:
        return [
            _replicated(instr)
        ], f"no auto-sharding strategies for {instr.opcode}: runs replicated"
    found: list[Strategy] = [_replicated(instr)]
    for operands in rule(instr, mesh):
        strategy = _strategy(instr, operands, n)
        if strategy is not None and not any(_same(strategy, s) for s in found):
            found.append(strategy)
    if given is not None:
        kept = [s for s in found if same_sharding(s.out, given)]
        return (kept, "sharding given") if kept else ([_fixed(instr, given)], "sharding given")
    return found, None


def _same(a: Strategy, b: Strategy) -> bool:
    return same_sharding(a.out, b.out) and all(
        same_sharding(x, y) for x, y in zip(a.operands, b.operands)
    )
