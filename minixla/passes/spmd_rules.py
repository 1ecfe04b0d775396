"""Per-op SPMD rules: given the shardings of an instruction's operands, how it is computed on
N devices. Sharding propagation and the SPMD partitioner both read `RULES`.

A rule returns a `Plan`: the sharding each operand must have (the partitioner reshards them),
the sharding of the result the local op produces, and whether the local results are partial
sums that an all-reduce must combine (a dot over a sharded contracting dim, a reduce over a
sharded dim). Fast paths cover 1-D shardings: one dim cut evenly into N pieces in device
order (`split(d)`); anything else is computed on replicated operands (`REPLICATED_PLAN`),
which is always correct and costs an all-gather of each operand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeGuard

import numpy as np

from ..ir.sharding import HloSharding

R = HloSharding.replicate()


@dataclass(frozen=True)
class Plan:
    operands: tuple[HloSharding, ...]
    out: HloSharding
    all_reduce: bool = False  # the local results are partial sums: all-reduce them
    groups: tuple[tuple[int, ...], ...] | None = None  # the all-reduce's groups (None: all)
    # (partitioner, instr, local operands, plan) -> the local value, where the local op is not
    # the op itself on the pieces (a gather with shifted indices)
    build: Callable[..., Any] | None = None


def split(rank: int, dim: int, n: int) -> HloSharding:
    """dim `dim` of a rank-`rank` array cut into n pieces, device i holding piece i."""
    dims = [1] * rank
    dims[dim] = n
    return HloSharding.tiled(tuple(dims))


def split_dim(sharding: HloSharding | None, shape, n: int) -> int | None:
    """The dim a 1-D even split shards, or None (replicated, or any other sharding)."""
    if sharding is None or not sharding.is_tiled or not shape.is_array or n <= 1:
        return None
    if any(t != 1 for t in sharding.grid.dims[sharding.data_rank :]):
        return None
    cut = [i for i, t in enumerate(sharding.tile_dims) if t != 1]
    if len(cut) != 1 or sharding.tile_dims[cut[0]] != n or shape.dims[cut[0]] % n:
        return None
    if sharding.grid.devices().reshape(-1).tolist() != list(range(n)):
        return None
    return cut[0]


def tiled(sharding: HloSharding | None, shape) -> TypeGuard[HloSharding]:
    return (
        sharding is not None
        and sharding.is_tiled
        and shape.is_array
        and sharding.data_rank == shape.rank
    )


def even(sharding: HloSharding | None, shape) -> bool:
    """No padding: every cut dim divides evenly (reductions must not add padding in)."""
    return not tiled(sharding, shape) or all(
        d % t == 0 for d, t in zip(shape.dims, sharding.tile_dims)
    )


def _index(sharding: HloSharding | None, shape, device: int) -> tuple[int, ...]:
    return sharding.tile_index(device) if tiled(sharding, shape) else (0,) * shape.rank


def _pieces(sharding: HloSharding | None, shape) -> tuple[int, ...]:
    return sharding.tile_dims if tiled(sharding, shape) else (1,) * shape.rank


def grouped_sharding(n: int, position, tiles) -> tuple[HloSharding, tuple] | None:
    """The sharding in which device p holds tile `position(p)` of a `tiles` grid, plus the
    groups of devices that hold the same tile; None if the groups differ in size."""
    groups: dict[tuple, list[int]] = {}
    for device in range(n):
        groups.setdefault(tuple(position(device)), []).append(device)
    sizes = {len(g) for g in groups.values()}
    if len(sizes) != 1 or len(groups) != int(np.prod(tiles)):
        return None
    size = sizes.pop()
    grid = np.zeros(tuple(tiles) + (size,), np.int64)
    for where, members in groups.items():
        grid[where] = members
    sharding = HloSharding.tiled(
        grid if size > 1 else grid.reshape(tiles), ("replicated",) if size > 1 else ()
    )
    return sharding, tuple(tuple(g) for g in groups.values())


def _copy_index(sharding: HloSharding | None, shape, device: int) -> tuple[int, ...]:
    """Which replicated copy (position along the subgroup dims) `device` holds."""
    if not tiled(sharding, shape) or not sharding.subgroups:
        return ()
    where = np.argwhere(sharding.grid.devices() == device)[0]
    return tuple(int(v) for v in where[sharding.data_rank :])


def partial_sum_groups(groups, copy_of, block_of, blocks: int):
    """All-reduce groups for partial sums: the devices of one result tile that hold the same
    copy index, which must hold each of the `blocks` contracted blocks once; else None."""
    out = []
    for group in groups:
        by_copy: dict[tuple, list[int]] = {}
        for device in group:
            by_copy.setdefault(copy_of(device), []).append(device)
        for members in by_copy.values():
            if len(members) != blocks or len({block_of(d) for d in members}) != blocks:
                return None
            out.append(tuple(members))
    return tuple(out)


def permuted(sharding: HloSharding, order) -> HloSharding:
    """The sharding of a transpose by `order` of an array with `sharding`."""
    grid = sharding.grid.devices()
    extra = list(range(len(order), grid.ndim))
    return HloSharding.tiled(grid.transpose(list(order) + extra), sharding.subgroups)


def replicated_plan(instr) -> Plan:
    return Plan(
        tuple(_replicated_like(o.shape) for o in instr.operands), _replicated_like(instr.shape)
    )


def _replicated_like(shape) -> HloSharding:
    if shape.is_tuple:
        return HloSharding.tuple_of(_replicated_like(s) for s in shape.tuple_shapes)
    return R


def _of(instr, shardings, i, n):
    return split_dim(shardings[i], instr.operand(i).shape, n)


def plan(instr, shardings: list, n: int) -> Plan:
    """The plan for `instr` whose operands currently have `shardings`."""
    rule = RULES.get(instr.opcode)
    if rule is None or instr.shape.is_tuple and instr.opcode not in ("tuple", "sort"):
        return replicated_plan(instr)
    return rule(instr, shardings, n) or replicated_plan(instr)


# -- rules ----------------------------------------------------------------------------------
def _elementwise(instr, shardings, n):
    """Every operand of the result's rank takes the first tiled operand's sharding."""
    rank = instr.shape.rank
    want = next(
        (
            s
            for s, o in zip(shardings, instr.operands)
            if o.shape.rank == rank and tiled(s, o.shape)
        ),
        None,
    )
    if want is None:
        return None
    # scalar operands (clamp's bounds, select's predicate) stay whole
    return Plan(tuple(want if o.shape.rank == rank else R for o in instr.operands), want)


def _broadcast(instr, shardings, n):
    """Operand dim i becomes result dim dimensions[i]; new dims are not cut."""
    operand = instr.operand(0).shape
    if not tiled(shardings[0], operand) or list(instr.attrs["dimensions"]) != sorted(
        instr.attrs["dimensions"]
    ):
        return None
    grid = shardings[0].tile.devices()
    for d in range(instr.shape.rank):
        if d not in instr.attrs["dimensions"]:
            grid = np.expand_dims(grid, d)
    return Plan((shardings[0],), HloSharding.tiled(grid, shardings[0].subgroups))


def _transpose(instr, shardings, n):
    if not tiled(shardings[0], instr.operand(0).shape):
        return None
    return Plan((shardings[0],), permuted(shardings[0], instr.attrs["dimensions"]))


def _reshape(instr, shardings, n):
    """A split dim that survives the reshape whole (same size, same elements before it), or
    becomes the major part of a split (its size divisible by n), stays split. A reshape that
    only adds or drops dims of size 1 keeps any grid."""
    operand = instr.operand(0).shape
    if tiled(shardings[0], operand):
        kept = _unit_dims_only(shardings[0], operand, instr.shape)
        if kept is not None:
            return Plan((shardings[0],), kept)
    dim = _of(instr, shardings, 0, n)
    if dim is None:
        return None
    before, size = instr.operand(0).shape.dims[:dim], instr.operand(0).shape.dims[dim]
    out, prefix = instr.shape.dims, 1
    for b in before:
        prefix *= b
    running = 1
    for e, d in enumerate(out):
        if running == prefix and (d == size or (size % d == 0 and d % n == 0)):
            return Plan((shardings[0],), split(len(out), e, n))
        running *= d
        if running > prefix:
            break
    return None


def _unit_dims_only(sharding: HloSharding, operand, result) -> HloSharding | None:
    big_in = [d for d in range(operand.rank) if operand.dims[d] != 1]
    big_out = [d for d in range(result.rank) if result.dims[d] != 1]
    if [operand.dims[d] for d in big_in] != [result.dims[d] for d in big_out]:
        return None
    if any(sharding.tile_dims[d] != 1 for d in range(operand.rank) if d not in big_in):
        return None
    grid = sharding.grid.devices()
    data = [grid.shape[d] for d in big_in]
    rest = list(grid.shape[operand.rank :])
    dims = [1] * result.rank
    for d, t in zip(big_out, data):
        dims[d] = t
    return HloSharding.tiled(grid.reshape(dims + rest), sharding.subgroups)


def _dot(instr, shardings, n):
    attrs = instr.attrs
    lhs_batch, rhs_batch = attrs.get("lhs_batch_dims", ()), attrs.get("rhs_batch_dims", ())
    lhs_con, rhs_con = attrs.get("lhs_contracting_dims", ()), attrs.get("rhs_contracting_dims", ())
    lhs_rank, rhs_rank = instr.operand(0).shape.rank, instr.operand(1).shape.rank
    lhs_free = [d for d in range(lhs_rank) if d not in lhs_batch and d not in lhs_con]
    rhs_free = [d for d in range(rhs_rank) if d not in rhs_batch and d not in rhs_con]
    out_rank = instr.shape.rank
    from .spmd_rules_dot import cheapest_dot, dot_by_device

    if tiled(shardings[0], instr.operand(0).shape) and tiled(shardings[1], instr.operand(1).shape):
        found = dot_by_device(
            instr, shardings, n, (lhs_batch, rhs_batch, lhs_con, rhs_con, lhs_free, rhs_free)
        )
        if found is not None:
            return found
    lhs, rhs = _of(instr, shardings, 0, n), _of(instr, shardings, 1, n)
    if any(
        tiled(s, o.shape) and d is None for s, o, d in zip(shardings, instr.operands, (lhs, rhs))
    ):
        return cheapest_dot(
            instr, shardings, n, (lhs_batch, rhs_batch, lhs_con, rhs_con, lhs_free, rhs_free)
        )  # grids of several axes
    if lhs in lhs_batch:  # batch: both sides split alike
        k = lhs_batch.index(lhs)
        return Plan((shardings[0], split(rhs_rank, rhs_batch[k], n)), split(out_rank, k, n))
    if rhs in rhs_batch and lhs is None:
        k = rhs_batch.index(rhs)
        return Plan((split(lhs_rank, lhs_batch[k], n), shardings[1]), split(out_rank, k, n))
    if lhs in lhs_con or (lhs is None and rhs in rhs_con):  # contracting: partial sums
        k = lhs_con.index(lhs) if lhs in lhs_con else rhs_con.index(rhs)
        return Plan(
            (split(lhs_rank, lhs_con[k], n), split(rhs_rank, rhs_con[k], n)), R, all_reduce=True
        )
    if lhs in lhs_free:  # rows of the result
        out = len(lhs_batch) + lhs_free.index(lhs)
        return Plan((shardings[0], R), split(out_rank, out, n))
    if rhs in rhs_free:  # columns of the result
        out = len(lhs_batch) + len(lhs_free) + rhs_free.index(rhs)
        return Plan((R, shardings[1]), split(out_rank, out, n))
    return None


def _reduce(instr, shardings, n):
    if instr.operand_count != 2:  # variadic reduces (argmax...) run replicated
        return None
    operand = instr.operand(0).shape
    if tiled(shardings[0], operand) and split_dim(shardings[0], operand, n) is None:
        return _reduce_by_device(instr, shardings, n) if even(shardings[0], operand) else None
    dim = _of(instr, shardings, 0, n)
    if dim is None:
        return None
    reduced = instr.attrs["dimensions"]
    if dim in reduced:
        return Plan((shardings[0], R), R, all_reduce=True)
    kept = [d for d in range(instr.operand(0).shape.rank) if d not in reduced]
    return Plan((shardings[0], R), split(instr.shape.rank, kept.index(dim), n))


def _reduce_by_device(instr, shardings, n):
    """Devices holding the same kept-dim tile but different reduced-dim tiles all-reduce."""
    operand, sharding = instr.operand(0).shape, shardings[0]
    reduced = instr.attrs["dimensions"]
    kept = [d for d in range(operand.rank) if d not in reduced]
    pieces = sharding.tile_dims
    found = grouped_sharding(
        n, lambda p: [sharding.tile_index(p)[d] for d in kept], [pieces[d] for d in kept]
    )
    if found is None:
        return None
    out, groups = found
    blocks = int(np.prod([pieces[d] for d in reduced]))
    if blocks == 1:
        return Plan((sharding, R), out)
    reduce_groups = partial_sum_groups(
        groups,
        lambda p: _copy_index(sharding, operand, p),
        lambda p: tuple(sharding.tile_index(p)[d] for d in reduced),
        blocks,
    )
    if reduce_groups is None:
        return None
    return Plan((sharding, R), out, all_reduce=True, groups=reduce_groups)


def _untouched_dim(instr, shardings, n, touched) -> Plan | None:
    """slice and pad: a split dim the op leaves alone stays split."""
    dim = _of(instr, shardings, 0, n)
    if dim is None or touched(dim):
        return None
    rest = tuple(R for _ in instr.operands[1:])
    return Plan((shardings[0],) + rest, split(instr.shape.rank, dim, n))


def _slice(instr, shardings, n):
    size = instr.operand(0).shape.dims
    return _untouched_dim(instr, shardings, n, lambda d: instr.attrs["slice"][d] != (0, size[d], 1))


def _pad(instr, shardings, n):
    return _untouched_dim(instr, shardings, n, lambda d: instr.attrs["padding"][d] != (0, 0, 0))


def _concatenate(instr, shardings, n):
    axis = instr.attrs["dimensions"][0]
    dims = {_of(instr, shardings, i, n) for i in range(instr.operand_count)}
    dim = next((d for d in dims if d is not None), None)
    if dim is None or dim == axis:
        return None
    want = split(instr.shape.rank, dim, n)
    return Plan((want,) * instr.operand_count, want)


def _convolution(instr, shardings, n):
    if (
        instr.attrs.get("feature_group_count", 1) != 1
        or instr.attrs.get("batch_group_count", 1) != 1
    ):
        return None
    from ..ir.attrs import parse_dim_labels

    labels = parse_dim_labels(instr.attrs["dim_labels"])
    lhs, rhs = _of(instr, shardings, 0, n), _of(instr, shardings, 1, n)
    rank = instr.shape.rank
    if lhs == labels.input_batch and lhs is not None:
        return Plan((shardings[0], R), split(rank, labels.output_batch, n))
    if rhs == labels.kernel_output_feature and rhs is not None:
        return Plan((R, shardings[1]), split(rank, labels.output_feature, n))
    return None


def _tuple(instr, shardings, n):
    return Plan(
        tuple(shardings),
        HloSharding.tuple_of(
            s if s is not None else _replicated_like(o.shape)
            for s, o in zip(shardings, instr.operands)
        ),
    )


def _get_tuple_element(instr, shardings, n):
    whole = shardings[0]
    index = instr.attrs["index"]
    if whole is None or not whole.is_tuple or instr.shape.is_tuple:
        return None
    return Plan((whole,), whole.elements[index])


def _elementwise_rows():
    from ..ir.opcodes import ELEMENTWISE, OPCODES

    return {
        name: _elementwise
        for name, row in OPCODES.items()
        if row.kind == ELEMENTWISE and name not in ("map", "bitcast-convert")
    }


def _indexing_rows():
    from .spmd_rules_indexing import gather, scatter, sort

    return {"gather": gather, "scatter": scatter, "sort": sort}


RULES = {
    **_elementwise_rows(),
    **_indexing_rows(),
    "broadcast": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "dot": _dot,
    "reduce": _reduce,
    "slice": _slice,
    "pad": _pad,
    "concatenate": _concatenate,
    "convolution": _convolution,
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "copy": _elementwise,
}
