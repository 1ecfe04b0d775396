"""Dots on device grids: the by-device rule, and the cheapest resharding for a dot whose
operands' grids do not line up (a multi-axis mesh where one side cuts the contracting or batch
dim and the other does not).

Each side may stay as it is, gather the dims whose cut the other side does not share, gather
its free dims, follow the other side's cut of the batch and contracting dims (cut out locally
where it holds them whole), or be replicated. Every pair the by-device dot rule accepts is
costed in bytes one device sends (ring model: an all-gather sends what it adds to the piece;
an all-reduce twice the result piece, less its share) and the cheapest wins, as XLA's dot
handler weighs resharding either operand against all-reducing the result.
"""

from __future__ import annotations

import numpy as np

from .spmd_rules import (
    R,
    Plan,
    _copy_index,
    _index,
    _pieces,
    even,
    grouped_sharding,
    partial_sum_groups,
    tiled,
)


def _bytes(sharding, shape) -> int:
    dims = sharding.shard_dims(shape.dims) if tiled(sharding, shape) else shape.dims
    return (
        int(np.prod(dims, dtype=np.int64))
        * shape.byte_size()
        // max(int(np.prod(shape.dims, dtype=np.int64)), 1)
    )


def _holds(outer, inner, shape, n) -> bool:
    """Every device's `inner` piece lies inside its `outer` piece."""
    for device in range(n):
        for (o_lo, o_hi), (i_lo, i_hi) in zip(
            _bounds(outer, shape, device), _bounds(inner, shape, device)
        ):
            if not o_lo <= i_lo <= i_hi <= o_hi:
                return False
    return True


def _bounds(sharding, shape, device):
    return (
        sharding.shard_bounds(shape.dims, device)
        if tiled(sharding, shape)
        else tuple((0, d) for d in shape.dims)
    )


def reshard_bytes(have, want, shape, n) -> int:
    """What the partitioner's resharding of `have` to `want` sends (estimated)."""
    from .spmd_rules_indexing import unsplit

    if not tiled(have, shape):
        return 0  # a dynamic-slice of the replicated value
    axes = [
        a
        for a, (h, w) in enumerate(zip(_pieces(have, shape), _pieces(want, shape)))
        if h > 1 and w == 1
    ]
    middle = unsplit(have, axes) if axes else have
    if middle is not None and _holds(middle, want, shape, n):
        return _bytes(middle, shape) - _bytes(have, shape)
    return shape.byte_size() - _bytes(have, shape)


def _follower(own, other, own_shape, other_shape, pairs, n, keep: bool):
    """`own` cut along the dims in `pairs` (own dim -> other dim) as `other` cuts them, on
    the same devices; along the rest as it is cut now (`keep`) or whole."""
    if not tiled(other, other_shape):
        return None
    rank = own_shape.rank
    mine = _pieces(own, own_shape) if keep else (1,) * rank
    found = grouped_sharding(
        n,
        lambda p: [
            _index(other, other_shape, p)[pairs[d]]
            if d in pairs
            else _index(own, own_shape, p)[d]
            if keep
            else 0
            for d in range(rank)
        ],
        [_pieces(other, other_shape)[pairs[d]] if d in pairs else mine[d] for d in range(rank)],
    )
    return None if found is None else found[0]


def _gathered(own, other, own_shape, other_shape, pairs):
    """`own` with the matched dims that `other` cuts differently gathered whole."""
    from .spmd_rules_indexing import unsplit

    if not tiled(own, own_shape):
        return None
    mine, theirs = _pieces(own, own_shape), _pieces(other, other_shape)
    axes = [d for d, e in pairs.items() if mine[d] > 1 and mine[d] != theirs[e]]
    return unsplit(own, axes) if axes else None


def dot_by_device(instr, shardings, n, dims) -> Plan | None:
    """Both operands tiled: each device multiplies the blocks it holds, if every device holds
    matching batch and contracting blocks; devices that hold different contracting blocks of
    the same result tile add their partial sums with an all-reduce."""
    lhs_batch, rhs_batch, lhs_con, rhs_con, lhs_free, rhs_free = (list(d) for d in dims)
    lhs_shape, rhs_shape = instr.operand(0).shape, instr.operand(1).shape
    lhs, rhs = shardings
    if not (even(lhs, lhs_shape) and even(rhs, rhs_shape)):
        return None
    lp, rp = _pieces(lhs, lhs_shape), _pieces(rhs, rhs_shape)
    if [lp[d] for d in lhs_batch] != [rp[d] for d in rhs_batch] or [lp[d] for d in lhs_con] != [
        rp[d] for d in rhs_con
    ]:
        return None
    blocks = int(np.prod([lp[d] for d in lhs_con]))
    for device in range(n):
        li, ri = _index(lhs, lhs_shape, device), _index(rhs, rhs_shape, device)
        if [li[d] for d in lhs_batch + lhs_con] != [ri[d] for d in rhs_batch + rhs_con]:
            return None
    tiles = [lp[d] for d in lhs_batch] + [lp[d] for d in lhs_free] + [rp[d] for d in rhs_free]

    def position(device):
        li, ri = _index(lhs, lhs_shape, device), _index(rhs, rhs_shape, device)
        return [li[d] for d in lhs_batch + lhs_free] + [ri[d] for d in rhs_free]

    found = grouped_sharding(n, position, tiles)
    if found is None:
        return None
    out, groups = found
    if blocks == 1:
        return Plan((lhs, rhs), out)
    reduce_groups = partial_sum_groups(
        groups,
        lambda d: (_copy_index(lhs, lhs_shape, d), _copy_index(rhs, rhs_shape, d)),
        lambda d: tuple(_index(lhs, lhs_shape, d)[c] for c in lhs_con),
        blocks,
    )
    if reduce_groups is None:
        return None
    return Plan((lhs, rhs), out, all_reduce=True, groups=reduce_groups)


def _options(own, other, own_shape, other_shape, pairs, n) -> list:
    from .spmd_rules_indexing import unsplit

    free = [d for d in range(own_shape.rank) if d not in pairs]
    return [
        own,
        _gathered(own, other, own_shape, other_shape, pairs),
        R,
        unsplit(own, free) if tiled(own, own_shape) else None,
    ] + [_follower(own, other, own_shape, other_shape, pairs, n, keep) for keep in (True, False)]


def cheapest_dot(instr, shardings, n, dims) -> Plan | None:
    lhs_batch, rhs_batch, lhs_con, rhs_con = (list(d) for d in dims[:4])
    lhs, rhs = shardings
    lhs_shape, rhs_shape = instr.operand(0).shape, instr.operand(1).shape
    to_rhs = dict(zip(lhs_batch + lhs_con, rhs_batch + rhs_con))
    to_lhs = {e: d for d, e in to_rhs.items()}
    lhs_options = _options(lhs, rhs, lhs_shape, rhs_shape, to_rhs, n)
    rhs_options = _options(rhs, lhs, rhs_shape, lhs_shape, to_lhs, n)
    best, best_cost = None, None
    for a in (s for s in lhs_options if s is not None):
        for b in (s for s in rhs_options if s is not None):
            found = dot_by_device(instr, [a, b], n, dims)
            if found is None:
                continue
            cost = reshard_bytes(lhs, a, lhs_shape, n) + reshard_bytes(rhs, b, rhs_shape, n)
            if found.all_reduce:
                group = len(found.groups[0]) if found.groups else n
                cost += 2 * (group - 1) * _bytes(found.out, instr.shape) // group
            if best_cost is None or cost < best_cost:
                best, best_cost = found, cost
    return best
