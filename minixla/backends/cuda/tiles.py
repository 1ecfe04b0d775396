"""Tiled transposes: a transpose read at the output index goes through a shared-memory tile.

Read directly, a transpose makes neighbouring threads (neighbouring output elements along the
minor dim) read elements a whole row apart. Here each block owns a TILE x TILE tile of the
output over two dims: `a`, the output's minor dim, and `q`, the output dim that walks along the
transposed operand's minor dim. The block first loads the transpose's values for the tile with
threads laid along `q` (so they read the operand's consecutive elements), stores them in
shared memory, synchronizes, then computes its outputs with threads laid along `a` (so writes
are consecutive), reading the transpose's value from the tile (`tile[tx, k]` is the element
loaded as `tile[k, tx]`). The tile is TILE x (TILE + 1) so column reads hit different banks.

This covers lone transposes, bitcasts that permute dims through layouts (what
layout-assignment makes of transposes) and fusions such as `x + transpose(y)`, as long as the
transpose is read at the output index itself. The rest of the fusion is the elemental code.
"""

from __future__ import annotations

import math

from ..codegen.elemental import physical_order
from ..codegen.scalar import kernel_type
from .kernels import blocks_for, delinearize, leaf_shape, pointwise_reach, store


def minor_reader(instr) -> int | None:
    """For a transpose (or permuting bitcast) that needs a tile: the output dim reading the
    operand's minor dim; None when reads are already contiguous or it is not a permutation."""
    shape = instr.shape
    if shape.is_tuple or shape.rank < 2 or shape.dims[-1] <= 1:
        return None
    if instr.opcode == "transpose":
        perm = list(instr.attrs["dimensions"])
        q = perm.index(len(perm) - 1)
    elif instr.opcode == "bitcast" and _permutes(instr):
        out_order, in_order = physical_order(shape), physical_order(instr.operand(0).shape)
        q = out_order[in_order.index(instr.operand(0).shape.rank - 1)]
    else:
        return None
    return q if q != shape.rank - 1 and shape.dims[q] > 1 else None


def _permutes(bitcast) -> bool:
    """A bitcast whose bytes, read in each side's physical order, are the same dims: a pure
    permutation of logical dims (what layout-assignment makes of a transpose)."""
    operand = bitcast.operand(0)
    if bitcast.shape.rank != operand.shape.rank:
        return False
    for shape in (bitcast.shape, operand.shape):
        if shape.layout is not None and shape.layout.tiles:
            return False
    out_order, in_order = physical_order(bitcast.shape), physical_order(operand.shape)
    return [bitcast.shape.dims[d] for d in out_order] == [operand.shape.dims[d] for d in in_order]


def candidate(groups):
    """(transpose, q) when the kernel has one output group reading exactly one transpose that
    needs a tile at the output index; else None."""
    if len(groups) != 1:
        return None
    group = groups[0]
    if len(leaf_shape(group[0][1], group[0][2]).dims) < 2:
        return None
    found = [(i, minor_reader(i)) for i in pointwise_reach([instr for _, instr, _ in group])]
    found = [(i, q) for i, q in found if q is not None]
    return found[0] if len(found) == 1 else None


def emit(em, group, found, geometry) -> int:
    """The tile loop; returns the number of blocks to launch."""
    transpose, q = found
    w = em.w
    dims = leaf_shape(group[0][1], group[0][2]).dims
    a = len(dims) - 1
    size, rows = geometry.tile, geometry.tile_rows
    tile = w.declare(
        "tile", f"cuda.shared.array(({size}, {size + 1}), {kernel_type(transpose.shape.dtype)})"
    )
    w.line("tid = cuda.threadIdx.x")
    tx, ty = em.bind(f"tid % {size}", "tx"), em.bind(f"tid // {size}", "ty")
    others = [d for d in range(len(dims)) if d not in (q, a)]
    counts = [dims[d] for d in others] + [-(-dims[q] // size), -(-dims[a] // size)]
    t = w.var("t")
    w.line(f"for {t} in range(cuda.blockIdx.x, {math.prod(counts)}, cuda.gridDim.x):")
    w.depth += 1
    em.push()
    parts = delinearize(em, t, counts)
    q0, a0 = em.bind(f"{parts[-2]} * {size}", "q"), em.bind(f"{parts[-1]} * {size}", "a")

    def phase(q_offset: str, a_offset: str, body) -> None:
        k = w.var("k")
        w.line(f"for {k} in range({ty}, {size}, {rows}):")
        w.depth += 1
        iq = em.bind(f"{q0} + {q_offset.format(k=k)}", "iq")
        ia = em.bind(f"{a0} + {a_offset.format(k=k)}", "ia")
        w.line(f"if {iq} < {dims[q]} and {ia} < {dims[a]}:")
        w.depth += 1
        index = [""] * len(dims)
        for d, part in zip(others, parts):
            index[d] = part
        index[q], index[a] = iq, ia
        em.push()
        body(k, tuple(index))
        em.pop()
        w.depth -= 2
        w.line("cuda.syncthreads()")

    def load(k, index):
        w.line(f"{tile}[{k}, {tx}] = {em.value(transpose, index)}")

    def compute(k, index):
        em.tile_value = (id(transpose), f"{tile}[{tx}, {k}]")
        try:
            for out, instr, leaf in group:
                store(em, out, instr, leaf, index)
        finally:
            em.tile_value = None

    phase(tx, "{k}", load)  # threads along q: the operand's minor dim
    phase("{k}", tx, compute)  # threads along a: the output's minor dim
    em.pop()
    w.depth -= 1
    return blocks_for(math.prod(counts), 1, geometry)
