"""SPMD rules for gather, scatter and sort (after XLA's gather_scatter_handler and its sort
handling, for the common cases).

gather: every cut dim of the operand is a passthrough dim (sliced whole), an operand batching
dim cut like its indices batching dim, or an indexed dim sliced one element wide; the indices
may be cut on their batch dims. Each device gathers from its pieces. Where an indexed dim is
cut, each device shifts the (clamped) indices by its offset, zeroes the rows whose index lies
in another device's piece, and the devices holding the other pieces add theirs with an
all-reduce ("trivial slice" in XLA). Otherwise no communication.

scatter: the result keeps the operand's sharding; the updates and indices are resharded to
match it (cut along passthrough and batching dims, whole along the rest). An indexed dim cut
into pieces shifts the indices by the piece's offset; updates aimed at another piece fall out
of bounds and scatter skips them, so no communication is needed.

sort: sharded on other dims it sorts locally; a cut sort dim is gathered first.
"""

from __future__ import annotations

import numpy as np

from ..ir.sharding import HloSharding
from ..ir.shapes import Shape
from .spmd_rules import (
    R,
    Plan,
    _copy_index,
    _index,
    _pieces,
    grouped_sharding,
    partial_sum_groups,
    tiled,
)


def unsplit(sharding: HloSharding, axes) -> HloSharding | None:
    """`sharding` with the data dims `axes` whole: their devices join the replicated copies."""
    if not sharding.is_tiled or sharding.subgroups not in ((), ("replicated",)):
        return None
    rank = sharding.data_rank
    grid = sharding.grid.devices()
    if not sharding.subgroups:
        grid = grid[..., None]
    kept = [d for d in range(rank) if d not in axes]
    grid = grid.transpose(kept + sorted(axes) + [rank])
    grid = grid.reshape(grid.shape[: len(kept)] + (-1,))
    for axis in sorted(axes):
        grid = np.expand_dims(grid, axis)
    if grid.shape[-1] == 1:
        return HloSharding.tiled(grid[..., 0])
    return HloSharding.tiled(grid, ("replicated",))


class _Dims:
    """How the dims of a gather or scatter correspond (gather names; scatter's in brackets)."""

    def __init__(self, instr):
        a = instr.attrs
        self.is_gather = instr.opcode == "gather"
        self.operand, self.indices = instr.operand(0).shape, instr.operand(1).shape
        self.ivd = a["index_vector_dim"]
        self.index_map = tuple(
            a["start_index_map" if self.is_gather else "scatter_dims_to_operand_dims"]
        )
        self.batching = tuple(
            a.get("operand_batching_dims" if self.is_gather else "input_batching_dims", ())
        )
        self.index_batching = tuple(
            a.get(
                "start_indices_batching_dims"
                if self.is_gather
                else "scatter_indices_batching_dims",
                (),
            )
        )
        dropped = set(a["collapsed_slice_dims" if self.is_gather else "inserted_window_dims"])
        # operand dims that have a window dim in the result [in the updates], in order
        self.window_operand_dims = [
            d for d in range(self.operand.rank) if d not in dropped and d not in self.batching
        ]
        self.window_dims = list(a["offset_dims" if self.is_gather else "update_window_dims"])
        value = instr.shape if self.is_gather else instr.operand(2).shape
        self.value = value  # the gather's result [the scatter's updates]
        self.index_batch_dims = [d for d in range(self.indices.rank) if d != self.ivd]
        self.value_batch_dims = [d for d in range(value.rank) if d not in self.window_dims]
        if self.is_gather:
            self.window = list(a["slice_sizes"])
        else:
            self.window = [1] * self.operand.rank
            for d, w in zip(self.window_operand_dims, self.window_dims):
                self.window[d] = value.dims[w]

    def role(self, d: int) -> str | None:
        """passthrough | batching | indexed: how a cut of operand dim d is partitioned."""
        if d in self.batching:
            return "batching"
        if d in self.window_operand_dims and self.window[d] == self.operand.dims[d]:
            return "passthrough"
        if d in self.index_map and self.window[d] == 1:
            return "indexed"
        return None

    def value_dim_of_operand(self, d: int) -> int:
        if d in self.batching:
            index_dim = self.index_batching[self.batching.index(d)]
            return self.value_batch_dims[self.index_batch_dims.index(index_dim)]
        return self.window_dims[self.window_operand_dims.index(d)]

    def index_dim_of_operand(self, d: int) -> int:
        return self.index_batching[self.batching.index(d)]


def _cut(sharding, shape) -> list[int]:
    return [d for d, t in enumerate(_pieces(sharding, shape)) if t > 1]


def _gather_plan(instr, operand_sharding, indices_sharding, n) -> Plan | None:
    g = _Dims(instr)
    op, ix = operand_sharding, indices_sharding
    roles = {d: g.role(d) for d in _cut(op, g.operand)}
    if None in roles.values() or (g.ivd < g.indices.rank and g.ivd in _cut(ix, g.indices)):
        return None
    for d in g.batching:  # an implicit batch index is only right if both sides cut alike
        e = g.index_dim_of_operand(d)
        if (
            any(_index(op, g.operand, p)[d] != _index(ix, g.indices, p)[e] for p in range(n))
            or _pieces(op, g.operand)[d] != _pieces(ix, g.indices)[e]
        ):
            return None
    indexed = [d for d, role in roles.items() if role == "indexed"]
    if indexed and instr.shape.dtype == "pred":
        return None
    out_dims = g.value.rank
    source = {}  # output dim -> ("operand" | "indices", dim)
    for k, j in enumerate(g.value_batch_dims):
        source[j] = ("indices", g.index_batch_dims[k])
    for d, j in zip(g.window_operand_dims, g.window_dims):
        source[j] = ("operand", d)

    def tile(p):
        return [
            (_index(op, g.operand, p) if source[j][0] == "operand" else _index(ix, g.indices, p))[
                source[j][1]
            ]
            for j in range(out_dims)
        ]

    tiles = [
        (_pieces(op, g.operand) if source[j][0] == "operand" else _pieces(ix, g.indices))[
            source[j][1]
        ]
        for j in range(out_dims)
    ]
    found = grouped_sharding(n, tile, tiles)
    if found is None:
        return None
    out, groups = found
    if not indexed:
        return Plan((op, ix), out, build=_local_gather)
    blocks = int(np.prod([_pieces(op, g.operand)[d] for d in indexed]))
    reduce_groups = partial_sum_groups(
        groups,
        lambda p: (_copy_index(op, g.operand, p), _copy_index(ix, g.indices, p)),
        lambda p: tuple(_index(op, g.operand, p)[d] for d in indexed),
        blocks,
    )
    if reduce_groups is None:
        return None
    return Plan((op, ix), out, all_reduce=True, groups=reduce_groups, build=_local_gather)


def gather(instr, shardings, n):
    """Both operands as they are; else the operand's sharding alone; else the indices'."""
    op, ix = shardings
    if not (tiled(op, instr.operand(0).shape) or tiled(ix, instr.operand(1).shape)):
        return None
    for attempt in ((op, ix), (op, R), (R, ix)):
        found = _gather_plan(instr, *attempt, n)
        if found is not None:
            return found
    return None


def scatter(instr, shardings, n):
    """The result and the operand keep the operand's sharding; indices and updates follow."""
    if instr.operand_count != 3:  # variadic scatters run replicated
        return None
    g = _Dims(instr)
    op = shardings[0]
    if not tiled(op, g.operand) or any(g.role(d) is None for d in _cut(op, g.operand)):
        return None
    cut = _cut(op, g.operand)
    follow = {g.value_dim_of_operand(d): d for d in cut if g.role(d) != "indexed"}
    index_follow = {g.index_dim_of_operand(d): d for d in cut if g.role(d) == "batching"}
    pieces = _pieces(op, g.operand)

    def follower(rank, mapping):
        found = grouped_sharding(
            n,
            lambda p: [
                _index(op, g.operand, p)[mapping[k]] if k in mapping else 0 for k in range(rank)
            ],
            [pieces[mapping[k]] if k in mapping else 1 for k in range(rank)],
        )
        return None if found is None else found[0]

    updates, indices = follower(g.value.rank, follow), follower(g.indices.rank, index_follow)
    if updates is None or indices is None:
        return None
    return Plan((op, indices, updates), op, build=_local_scatter)


def sort(instr, shardings, n):
    """The first tiled operand's sharding for every operand, with the sort dim whole."""
    dim = instr.attrs["dimensions"][0]
    want = next((s for s, o in zip(shardings, instr.operands) if tiled(s, o.shape)), None)
    if want is None:
        return None
    if want.tile_dims[dim] > 1:
        want = unsplit(want, [dim])
        if want is None:
            return None
    out = HloSharding.tuple_of([want] * instr.operand_count) if instr.shape.is_tuple else want
    return Plan((want,) * instr.operand_count, out)


# -- local ops --------------------------------------------------------------------------------
def _local_gather(part, instr, operands, step):
    """The gather on this device's pieces: passthrough slices take the local piece; indexed
    cut dims shift the indices and zero the rows another device holds."""
    from .spmd_partitioner import local_shape

    g = _Dims(instr)
    operand, indices = operands
    sizes = tuple(
        operand.shape.dims[d] if g.role(d) == "passthrough" else w for d, w in enumerate(g.window)
    )
    shifted, mask = _shift_indices(part, g, indices, step.operands[0], clamp_low=0)
    shape = local_shape(instr.shape, step.out)
    attrs = dict(instr.attrs, slice_sizes=sizes)
    attrs.pop("sharding", None)
    value = part.add("gather", shape, [operand, shifted], attrs, name=instr.name)
    if mask is None:
        return value
    wide = part.add(
        "broadcast",
        Shape.array("pred", shape.dims),
        [mask],
        {"dimensions": tuple(g.value_batch_dims)},
    )
    zero = part.add("broadcast", shape, [part.constant(0, shape.dtype)], {"dimensions": ()})
    return part.add("select", shape, [wide, value, zero])


def _local_scatter(part, instr, operands, step):
    from .spmd_partitioner import local_shape

    g = _Dims(instr)
    operand, indices, updates = operands
    signed = not g.indices.dtype.startswith("u")
    shifted, _ = _shift_indices(
        part, g, indices, step.out, clamp_low=-1 if signed else 0, masked=False
    )
    attrs = dict(instr.attrs)
    attrs.pop("sharding", None)
    return part.add(
        "scatter",
        local_shape(instr.shape, step.out),
        [operand, shifted, updates],
        attrs,
        name=instr.name,
    )


def _shift_indices(part, g: _Dims, indices, operand_sharding, clamp_low: int, masked: bool = True):
    """(indices shifted by this device's offset along each cut indexed dim, pred[batch dims]
    true where the row's index lies in this device's piece); unchanged without such dims.
    Indices are first clamped to [clamp_low, dim - window + (clamp_low < 0)], which keeps
    gather's clamping and scatter's out-of-bounds skipping as they are globally."""
    cut = [d for d in _cut(operand_sharding, g.operand) if g.role(d) == "indexed"]
    if not cut:
        return indices, None
    shape, dtype = indices.shape, indices.shape.dtype
    pieces = operand_sharding.shard_dims(g.operand.dims)
    components = range(len(g.index_map))
    explicit = g.ivd < g.indices.rank

    def per_component(values):  # one value per index component, along the index vector dim
        if not explicit or len(values) == 1:
            return part.add("broadcast", shape, [values[0]], {"dimensions": ()})
        scalars = [part.add("reshape", Shape.array(dtype, (1,)), [v]) for v in values]
        vector = part.add(
            "concatenate", Shape.array(dtype, (len(values),)), scalars, {"dimensions": (0,)}
        )
        return part.add("broadcast", shape, [vector], {"dimensions": (g.ivd,)})

    def offset(d):
        table = tuple(operand_sharding.tile_index(p)[d] * pieces[d] for p in range(part.n))
        value = part.partition_offset(table)
        return value if dtype == "s32" else part.add("convert", Shape.array(dtype, ()), [value])

    high = clamp_low < 0
    low = per_component([part.constant(clamp_low, dtype) for _ in components])
    top = per_component(
        [part.constant(g.operand.dims[d] - g.window[d] + high, dtype) for d in g.index_map]
    )
    clamped = part.add("clamp", shape, [low, indices, top])
    shift = per_component([offset(d) if d in cut else part.constant(0, dtype) for d in g.index_map])
    shifted = part.add("subtract", shape, [clamped, shift])
    batch = Shape.array(dtype, [shape.dims[d] for d in g.index_batch_dims])
    mask = None
    for d in cut if masked else ():
        k = g.index_map.index(d)
        column = shifted
        if explicit:
            limits = [(0, s, 1) for s in shape.dims]
            limits[g.ivd] = (k, k + 1, 1)
            piece = part.add(
                "slice",
                Shape.array(dtype, [hi - lo for lo, hi, _ in limits]),
                [shifted],
                {"slice": tuple(limits)},
            )
            column = part.add("reshape", batch, [piece])
        flags = Shape.array("pred", batch.dims)
        zero = part.add("broadcast", batch, [part.constant(0, dtype)], {"dimensions": ()})
        size = part.add("broadcast", batch, [part.constant(pieces[d], dtype)], {"dimensions": ()})
        inside = part.add(
            "and",
            flags,
            [
                part.add("compare", flags, [column, zero], {"direction": "GE"}),
                part.add("compare", flags, [column, size], {"direction": "LT"}),
            ],
        )
        mask = inside if mask is None else part.add("and", flags, [mask, inside])
    return shifted, mask
