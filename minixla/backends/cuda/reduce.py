"""Block reductions: outputs computed by a reduce get a team of threads each.

A block of T threads is split into `bx` teams of `by` threads (T = bx * by); team `tx` computes
output element `ob * bx + tx`, and its `by` threads split that element's reduced elements
(`for r in range(ty, R, by)`), then combine their partial results with a shared-memory tree
(log2(by) steps, `cuda.syncthreads()` between them). Blocks loop over output tiles
(grid-stride), so any size runs on any grid.

* Row reductions (the input's minor dim is reduced): bx = 1 when rows are long, so the block's
  threads read consecutive elements of one row. This is XLA's block-per-row reduction.
* Column reductions (the minor dim is kept): bx = 32 adjacent outputs, so a warp reads 32
  consecutive elements of each row; the `by` threads per column split the rows.

The reduce may sit anywhere the output index reaches through elementwise ops (a reduction-rooted
fusion, or `sum(x) * 0.5`); everything around it is computed by all threads of the team, and
thread ty == 0 writes. Outputs of a multi-output fusion that are the reduce's own input (softmax's
exp(x - max), returned beside its sum) are written while reducing, as XLA does, instead of being
recomputed in a second loop.

The tree uses shared memory rather than warp shuffles: numba's simulator, which runs these
kernels in CI, has no shuffles, and the tree costs log2(by) steps either way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...reference.ops_reduce import reassociates
from ..codegen.elemental import accumulates_in_f32
from ..codegen.scalar import NotEmittable, kernel_type
from .kernels import blocks_for, delinearize, leaf_shape, pointwise_reach, store


@dataclass
class BlockGroup:
    group: list  # (output number, instr, leaf)
    dims: tuple
    reduces: set  # ids of the reduces the teams compute together
    bx: int
    by: int


@dataclass
class Layout:
    block_groups: list
    loop_groups: list
    side: dict = field(default_factory=dict)  # id(reduce input) -> output numbers written


@dataclass
class Block:
    """Emission context of one block group."""

    reduces: set
    depth: int  # writer depth of the output loop body: only reduces emitted there are shared
    tx: str
    ty: str
    bx: int
    by: int
    side: dict

    def takes(self, em, instr) -> bool:
        return instr.opcode == "reduce" and id(instr) in self.reduces and em.w.depth == self.depth


def _teams(reduce, threads: int) -> tuple[int, int]:
    operand = reduce.operand(0)
    dims = reduce.attrs["dimensions"]
    count = math.prod(operand.shape.dims[d] for d in dims)
    if operand.shape.rank - 1 in dims:  # row: as many threads per output as there is work
        by = min(threads, 1 << max(count - 1, 0).bit_length())
        return threads // by, by
    bx = min(32, max(1, threads // 4))  # column: a warp of adjacent outputs
    return bx, threads // bx


def any_order(reduce) -> bool:
    """Whether a team may combine the reduced elements in its own grouping and order (strided
    partial results, then a tree): the to_apply combines each accumulator with its element by
    one associative op (all of them commute), or picks among its arguments by comparisons, as
    argmax does (taken to break ties consistently). Any other reduce folds in index order, as
    the interpreter does: one thread per output, in a loop."""
    return reassociates(reduce.attrs["to_apply"], reduce.operand_count // 2)


def plan_blocks(groups, geometry) -> Layout | None:
    """Which output groups need block reductions (None: a plain loop kernel will do)."""
    block_groups, loop_groups = [], []
    for group in groups:
        reduces = [
            i
            for i in pointwise_reach([instr for _, instr, _ in group])
            if i.opcode == "reduce"
            and i.attrs["dimensions"]
            and i.operand(0).shape.numel() > 0
            and any_order(i)
        ]
        if not reduces:
            loop_groups.append(group)
            continue
        bx, by = _teams(reduces[0], geometry.threads)
        dims = leaf_shape(group[0][1], group[0][2]).dims
        block_groups.append(BlockGroup(group, dims, {id(r) for r in reduces}, bx, by))
    if not block_groups:
        return None
    inputs = {}
    for bg in block_groups:
        for r in pointwise_reach([instr for _, instr, _ in bg.group]):
            if id(r) in bg.reduces:
                for operand in r.operands[: r.operand_count // 2]:
                    inputs[id(operand)] = operand
    layout = Layout(block_groups, [])
    for group in loop_groups:
        if all(leaf is None and id(instr) in inputs for _, instr, leaf in group):
            for k, instr, _ in group:
                layout.side.setdefault(id(instr), []).append(k)
        else:
            layout.loop_groups.append(group)
    return layout


def emit(em, layout: Layout, geometry) -> int:
    """The block groups' loops; returns the number of blocks to launch."""
    w = em.w
    w.line("tid = cuda.threadIdx.x")
    blocks = 1
    for bg in layout.block_groups:
        n_out = max(math.prod(bg.dims), 1)
        tiles = -(-n_out // bg.bx)
        blocks = max(blocks, blocks_for(n_out, bg.bx, geometry))
        tx, ty = (
            ("0", "tid")
            if bg.bx == 1
            else (em.bind(f"tid % {bg.bx}", "tx"), em.bind(f"tid // {bg.bx}", "ty"))
        )
        ob = w.var("ob")
        w.line(f"for {ob} in range(cuda.blockIdx.x, {tiles}, cuda.gridDim.x):")
        w.depth += 1
        em.push()
        raw = em.bind(f"{ob} * {bg.bx} + {tx}" if bg.bx > 1 else ob, "lin")
        # Teams past the end still take part in every syncthreads: they compute the last
        # output again and do not write it.
        linear = em.bind(f"min({raw}, {n_out - 1})", "lin")
        index = delinearize(em, linear, bg.dims)
        em.block = Block(bg.reduces, w.depth, tx, ty, bg.bx, bg.by, layout.side)
        hoist = em.hoist
        if not bg.dims:
            em.hoist = None  # a scalar output: its reduce must not move in front of the loop
        try:
            for _, instr, _ in bg.group:
                em.value(instr, index)
        finally:
            em.block, em.hoist = None, hoist
        w.line(f"if {raw} < {n_out} and {ty} == 0:")
        w.depth += 1
        for k, instr, leaf in bg.group:
            store(em, k, instr, leaf, index)
        w.depth -= 2
        em.pop()
    return blocks


def block_reduce(em, instr, index):
    """The reduce at output `index`, computed by the `by` threads of this team together."""
    b, w = em.block, em.w
    count = instr.operand_count // 2
    inputs, inits = instr.operands[:count], instr.operands[count:]
    dims = sorted(instr.attrs["dimensions"])
    in_dims = inputs[0].shape.dims
    reduced = [in_dims[d] for d in dims]
    accs = [em.bind(em.value(init, ()), "acc") for init in inits]
    total = math.prod(reduced)
    r = w.var("r")
    w.line(f"for {r} in range({b.ty}, {total}, {b.by}):")
    w.depth += 1
    em.push()
    parts, kept = iter(delinearize(em, r, reduced)), iter(index)
    full = tuple(next(parts) if d in dims else next(kept) for d in range(len(in_dims)))
    elements = [em.value(op, full) for op in inputs]
    for operand, element in zip(inputs, elements):
        for k in b.side.get(id(operand), ()):
            # Lanes past the end write the last output's elements again: same values.
            value = f"h.bf16_store({element})" if operand.shape.dtype == "bf16" else element
            w.line(f"o{k}[{', '.join(full) if full else '0'}] = {value}")
    if b.by > 1:
        # The init value is combined once, as the interpreter does (it need not be an
        # identity): by thread 0; the others start from their first element.
        w.line(f"if {r} == {b.ty} and {b.ty} > 0:")
        w.depth += 1
        _assign(w, accs, elements)
        w.depth -= 1
        w.line("else:")
        w.depth += 1
        em.push()
    _assign(w, accs, em.accumulate(instr, accs, elements))  # a bf16 sum stays in f32
    if b.by > 1:
        em.pop()
        w.depth -= 1
    em.pop()
    w.depth -= 1
    shared = [
        w.declare("sm", f"cuda.shared.array({b.bx * b.by}, {kernel_type(init.shape.dtype)})")
        for init in inits
    ]
    slot = em.bind(f"{b.ty} * {b.bx} + {b.tx}", "j") if b.bx > 1 else b.ty
    for sm, acc in zip(shared, accs):
        w.line(f"{sm}[{slot}] = {acc}")
    w.line("cuda.syncthreads()")
    # Slots 0..active-1 hold partial results; the others hold nothing to combine.
    active = min(total, b.by)
    step = b.by // 2
    while step >= 1:
        pairs = min(step, active - step)  # (ty, ty + step) with both slots holding a result
        if pairs > 0:
            w.line(f"if {b.ty} < {pairs}:")
            w.depth += 1
            mine = [em.bind(f"{sm}[{slot}]") for sm in shared]
            theirs = [em.bind(f"{sm}[{slot} + {step * b.bx}]") for sm in shared]
            for sm, value in zip(shared, em.accumulate(instr, mine, theirs)):
                w.line(f"{sm}[{slot}] = {value}")
            w.depth -= 1
            w.line("cuda.syncthreads()")
        active = min(active, step)
        step //= 2
    results = [em.bind(f"{sm}[{b.tx}]", "red") for sm in shared]
    if accumulates_in_f32(instr):  # rounded once, as the one-thread loop does
        w.line(f"{results[0]} = h.round_bf16({results[0]})")
    w.line("cuda.syncthreads()")  # all have read the result before the arrays are reused
    return results[0] if count == 1 and not instr.shape.is_tuple else tuple(results)


def _assign(w, names, values) -> None:
    if len(names) == 1:
        w.line(f"{names[0]} = {values[0]}")
    else:
        w.line(f"{', '.join(names)} = {', '.join(values)}")


def reduce_window(em, instr, index):
    """reduce-window: one thread per output element folds its window in row-major order,
    skipping padding and base-dilation holes (as the interpreter and XLA's emitters do)."""
    if em.flat:
        raise NotEmittable("reduce-window needs the full index")
    count = instr.operand_count // 2
    inputs, inits = instr.operands[:count], instr.operands[count:]
    if any(op.shape.dtype in ("bf16", "f16") for op in inputs):
        raise NotEmittable("narrow-float reduce-window")  # the spec accumulates in f32
    window = instr.attrs["window"].dims
    if any(wd.reversal for wd in window):
        raise NotEmittable("reduce-window with window reversal")
    w = em.w
    accs = [em.bind(em.value(init, ()), "acc") for init in inits]
    positions, conditions, opened = [], [], 0
    for i, wd, size in zip(index, window, inputs[0].shape.dims):
        offset = "0"
        if wd.size > 1:
            offset = w.var("w")
            w.line(f"for {offset} in range({wd.size}):")
            w.depth += 1
            opened += 1
        base = f"{i} * {wd.stride}" if wd.stride != 1 else i
        position = em.index_var(f"{base} + {offset} * {wd.rhs_dilation} - {wd.padding_low}")
        conditions.append(f"0 <= {position} <= {(size - 1) * wd.lhs_dilation}")
        if wd.lhs_dilation != 1:
            conditions.append(f"{position} % {wd.lhs_dilation} == 0")
            position = em.index_var(f"{position} // {wd.lhs_dilation}")
        positions.append(position)
    w.line(f"if {' and '.join(conditions) or 'True'}:")
    w.depth += 1
    em.push()
    elements = [em.value(op, tuple(positions)) for op in inputs]
    _assign(w, accs, em.inline(instr.attrs["to_apply"], accs + elements))
    em.pop()
    w.depth -= 1 + opened
    return accs[0] if count == 1 and not instr.shape.is_tuple else tuple(accs)
