"""Loop nests of a kernel: which outputs share a nest, and how each nest walks memory.

* `plan_nests` groups a fusion's outputs: outputs with the same dims share one nest; row
  reductions and the elementwise outputs over their input share one nest too (XLA's
  reduction with side outputs: the input is read, and its producers computed, once).
* `emit_nest` writes one nest: a flat loop for elementwise-only kernels; row-major loops over
  the output otherwise, tiled 32x32 when a transpose reads across the minor dim; column
  reductions that accumulate into the output along the contiguous minor dim; the fused row
  reduction above.

A large kernel is split across threads along its outermost loop: it takes one more argument,
`part` ([which part, how many parts]), and runs that share of the loop (driver's run_split
calls the parts at once). Every iteration of the outermost loop writes its own outputs, so
the parts need no synchronization; a kernel of several nests is not split.
"""

from __future__ import annotations

from ...passes.row_fusion import is_row_broadcast, row_rank, row_shape
from ...passes.hlo_utils import ancestors
from ..codegen.elemental import Elemental, Writer, accumulates_in_f32


def leaf_shape(instr, k):
    return instr.shape if k is None else instr.shape.tuple_shapes[k]


def plan_nests(outputs, flat: bool, comp=None) -> list:
    """Groups of (output number, instr, leaf); a group whose first entry is the marker
    "row" is a fused row reduction: ["row", reduces, sides]; "rows" a row program (every
    output in one nest): ["rows", comp, kept dims, outputs]."""
    kept = None if flat or comp is None else row_rank(comp)
    if kept is not None:
        return [["rows", comp, kept, [(k, i, leaf) for k, (i, leaf) in enumerate(outputs)]]]
    family = None if flat else _row_family(outputs)
    taken = set()
    groups: list = []
    if family is not None:
        reduces, sides = family
        groups.append(["row", reduces, sides])
        taken = {k for k, _, _ in reduces + sides}
    columns = None if flat else _column_sides([o for o in _entries(outputs) if o[0] not in taken])
    if columns is not None:
        groups.append(columns)
        taken |= {k for k, _, _ in columns[1] + columns[2]}
    by_dims: dict[tuple, list] = {}
    for k, instr, leaf in _entries(outputs):
        if k not in taken:
            by_dims.setdefault(leaf_shape(instr, leaf).dims, []).append((k, instr, leaf))
    return groups + list(by_dims.values())


def _entries(outputs) -> list:
    return [(k, instr, leaf) for k, (instr, leaf) in enumerate(outputs)]


def emit_nest(em: Elemental, w: Writer, group, flat: bool, parallel: bool) -> None:
    if group[0] == "row":
        _emit_row_family(em, w, group[1], group[2], parallel)
        return
    if group[0] == "rows":
        _emit_rows(em, w, *group[1:], parallel)
        return
    if group[0] == "columns":
        _emit_column_reduces(em, w, group[1], parallel, sides=group[2])
        return
    _emit_loop_nest(em, w, group, flat, parallel)


def _is_row_reduce(instr) -> bool:
    dims = sorted(instr.attrs["dimensions"])
    rank = instr.operand(0).shape.rank
    return bool(dims) and dims == list(range(rank - len(dims), rank))


def _depends_on_reduce(instr) -> bool:
    seen, stack = set(), list(instr.operands)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.opcode == "reduce":
            return True
        stack.extend(node.operands)
    return False


def _row_family(outputs):
    """Row reductions over one input shape plus the outputs with that shape, when those do
    not themselves read a reduction (that would recompute it per element)."""
    reduces = [
        (k, i, leaf)
        for k, (i, leaf) in enumerate(outputs)
        if i.opcode == "reduce" and _is_row_reduce(i)
    ]
    if not reduces:
        return None
    first = reduces[0][1]
    key = (first.operand(0).shape.dims, tuple(sorted(first.attrs["dimensions"])))
    reduces = [
        r
        for r in reduces
        if (r[1].operand(0).shape.dims, tuple(sorted(r[1].attrs["dimensions"]))) == key
    ]
    sides = [
        (k, i, leaf)
        for k, (i, leaf) in enumerate(outputs)
        if i.opcode != "reduce" and leaf_shape(i, leaf).dims == key[0]
    ]
    if not sides or any(_depends_on_reduce(i) for _, i, _ in sides):
        return None
    return reduces, sides


def _emit_row_family(em: Elemental, w: Writer, reduces, sides, parallel: bool) -> None:
    """for kept index: accumulators = init; for reduced index: compute the inputs once,
    write the side outputs, accumulate; then store the reductions."""
    first = reduces[0][1]
    in_dims, reduced = first.operand(0).shape.dims, set(first.attrs["dimensions"])
    em.w.uses_reduce = True
    instrs = list({id(i): i for _, i, _ in reduces}.values())
    inits = {id(i): [em.value(op, ()) for op in i.operands[i.operand_count // 2 :]] for i in instrs}
    kept = [(f"i{d}", str(n)) for d, n in enumerate(in_dims) if d not in reduced]
    _open(w, kept, parallel)
    accumulators = {id(i): [em.bind(v, "acc") for v in inits[id(i)]] for i in instrs}
    inner = [(f"i{d}", str(n)) for d, n in enumerate(in_dims) if d in reduced]
    _open(w, inner, False)
    em.push()
    full = tuple(f"i{d}" for d in range(len(in_dims)))
    for instr in instrs:
        count = instr.operand_count // 2
        elements = [em.value(op, full) for op in instr.operands[:count]]
        accs = accumulators[id(instr)]
        combined = em.accumulate(instr, accs, elements)
        w.line(f"{', '.join(accs)} = {', '.join(combined)}")
    for k, instr, leaf in sides:
        value = em.value(instr, full)
        value = value[leaf] if leaf is not None else value
        _store_line(w, k, leaf_shape(instr, leaf).dtype, full, value)
    em.pop()
    w.depth -= len(inner)
    for k, instr, leaf in reduces:
        value = accumulators[id(instr)][leaf or 0]
        if accumulates_in_f32(instr):
            value = f"h.round_bf16({value})"
        _store_line(w, k, leaf_shape(instr, leaf).dtype, [var for var, _ in kept], value)
    w.depth -= len(kept)


def _emit_rows(em: Elemental, w: Writer, comp, kept: int, group, parallel: bool) -> None:
    """A row program (passes/row_fusion.py), one row at a time: its reductions in order, each
    a loop over the row, with the row values broadcast back computed once per row; then one
    loop over the row for the outputs. A value that a reduction reads and the outputs read
    again, and that is costly to recompute (softmax's exponentials), is kept in an output's
    row on the way and read back from there."""
    dims, _ = row_shape(comp)
    em.w.uses_reduce = True
    rows = [(f"i{d}", str(n)) for d, n in enumerate(dims[:kept])]
    inner = [(f"i{d}", str(n)) for d, n in enumerate(dims) if d >= kept]
    row, full = tuple(v for v, _ in rows), tuple(f"i{d}" for d in range(len(dims)))
    spare = [
        (k, instr)
        for k, instr, _ in group
        if instr.shape.dims == dims and instr.shape.dtype != "bf16"
    ]
    kept_in = []  # values read from an output's row from here on
    _open(w, rows, parallel)
    em.push()
    for instr in comp.post_order():
        if instr.opcode == "reduce":
            source = instr.operand(0)
            slot = _keep_slot(source, spare, dims, kept, em)
            if slot is not None:
                _open(w, inner, False)
                em.push()
                w.line(f"o{slot}[{', '.join(full)}] = {em.value(source, full)}")
                em.pop()
                w.depth -= len(inner)
                kept_in.append(id(source))
                em.arrays[id(source)] = f"o{slot}"
            em.value(instr, row)
        elif is_row_broadcast(instr, dims, kept):
            em.value(instr.operand(0), row)
    elements = [(k, instr) for k, instr, _ in group if instr.shape.dims == dims]
    if elements:
        _open(w, inner, False)
        em.push()
        stores = [(k, instr, em.value(instr, full)) for k, instr in elements]
        for k, instr, value in stores:  # after every value is read: an output row may hold one
            _store_line(w, k, instr.shape.dtype, full, value)
        em.pop()
        w.depth -= len(inner)
    for k, instr, _ in group:
        if instr.shape.dims != dims:
            _store_line(w, k, instr.shape.dtype, row, em.value(instr, row))
    em.pop()
    w.depth -= len(rows)
    for instr_id in kept_in:  # only values no array held were kept (_keep_slot)
        em.arrays.pop(instr_id)


def _keep_slot(source, spare: list, dims, kept: int, em: Elemental):
    """The output (number) whose row keeps `source` while a reduction reads it, when the
    outputs read it again and recomputing it costs a transcendental or a division; taken from
    `spare`. None: recompute it."""
    if id(source) in em.arrays or source.opcode in ("parameter", "constant"):
        return None
    if len(source.users) < 2 and not any(i is source for _, i in spare):
        return None
    if not _costly(source, dims, kept):
        return None
    for position, (k, instr) in enumerate(spare):
        if instr.shape.dtype == source.shape.dtype:
            del spare[position]
            return k
    return None


def _costly(instr, dims, kept: int) -> bool:
    """Does computing `instr` per element take a transcendental or a division (up to the
    parameters and the row values broadcast back)?"""
    from ...passes.fusion_cost import is_expensive

    seen, stack = set(), [instr]
    while stack:
        node = stack.pop()
        if id(node) in seen or node.opcode in ("parameter", "constant"):
            continue
        seen.add(id(node))
        if is_row_broadcast(node, dims, kept):
            continue
        if is_expensive(node):
            return True
        stack.extend(node.operands)
    return False


def _emit_loop_nest(em: Elemental, w: Writer, group, flat: bool, parallel: bool) -> None:
    dims = leaf_shape(group[0][1], group[0][2]).dims
    if _column_family(group):
        _emit_column_reduces(em, w, group, parallel)
        return
    if flat and dims:
        _emit_flat(em, w, group, parallel)
        return
    tiled = _tiled(em, group)
    loops, index = _loops(dims, tile=tiled)
    cut = None if tiled else concat_split(group, dims, parallel)
    _nests(em, w, loops, cut, parallel, lambda: _store(em, w, group, index))


def _nests(
    em: Elemental, w: Writer, loops, cut, parallel: bool, body, shared: int | None = None
) -> None:
    """Opens `loops` (one per dim, outer to inner) and emits `body()` inside: once, or once per
    range of the concatenated dim where `cut` (concat_split's answer) splits them. Threads
    share out loop `shared`; by default the outermost that has more than one iteration and
    that the ranges do not cut (a leading dim of 1, or ranges along dim 0: the next one)."""
    dim, ranges = cut if cut is not None else (None, [(None, {})])
    if shared is None:
        shared = next(
            (
                d
                for d, (_, extent) in enumerate(loops)
                if d != dim and not (extent.isdigit() and int(extent) <= 1)
            ),
            0,
        )
    for bounds, pieces in ranges:
        em.concat_pieces = pieces
        bounded = [
            (var, f"{bounds[0]}, {bounds[1]}") if d == dim else (var, extent)
            for d, (var, extent) in enumerate(loops)
        ]
        _open(w, bounded, parallel, shared)
        body()
        w.depth -= len(loops)
    em.concat_pieces = {}


MAX_CONCAT_RANGES = 16  # loop nests one kernel is split into (code size)


def concat_split(group, dims, parallel: bool):
    """(dim, [((start, stop), {id(concatenate): (operand, offset)})]) when the group's values
    read concatenations along an output dim through ops that keep its coordinates
    (elementwise ops, reductions over other dims, broadcasts): a loop nest per range of that
    dim in which each such concatenation is one operand, instead of a select among all of
    them at clamped indices in every element (which computes every operand and keeps LLVM
    from vectorizing). A concatenation also read at other coordinates (through a slice, a
    reduction over its dim, another output dim) is left as it is. None when there is none."""
    axis_maps: dict = {}  # concatenate -> the output dims its axis was read along
    other: set[int] = set()  # ids read at coordinates the walk does not follow
    seen: set = set()
    stack = [(instr, tuple(range(len(dims)))) for _, instr, _ in group]
    while stack:
        instr, to_output = stack.pop()  # to_output[d]: the output dim of instr's dim d
        if (id(instr), to_output) in seen or instr.shape.is_tuple or instr.shape.rank == 0:
            continue
        seen.add((id(instr), to_output))
        axis = _piecewise_axis(instr)
        if axis is not None:
            axis_maps.setdefault(instr, set()).add(to_output[axis])
            shifted = tuple(None if d == axis else o for d, o in enumerate(to_output))
            stack.extend((operand, shifted) for operand in instr.operands)
        elif instr.opcode == "reduce":
            reduced = set(instr.attrs["dimensions"])
            count = len(instr.operands) // 2
            rank = instr.operand(0).shape.rank
            kept = iter(to_output)
            mapped = tuple(None if d in reduced else next(kept) for d in range(rank))
            stack.extend((operand, mapped) for operand in instr.operands[:count])
        elif instr.opcode == "broadcast":
            positions = instr.attrs["dimensions"]
            stack.append((instr.operand(0), tuple(to_output[p] for p in positions)))
        elif instr.opdef.kind == "elementwise" and all(
            o.shape.rank == 0 or o.shape.dims == instr.shape.dims for o in instr.operands
        ):
            stack.extend((operand, to_output) for operand in instr.operands)
        else:
            other |= ancestors(instr)
    found: dict[int, list] = {}  # output dim -> concatenations read along it only
    for concat, maps in axis_maps.items():
        if id(concat) not in other and len(maps) == 1 and None not in maps:
            found.setdefault(next(iter(maps)), []).append(concat)
    if not found:
        return None
    dim, concats_on = max(found.items(), key=lambda item: (len(item[1]), -item[0]))
    if parallel and dim == 0 and len(dims) < 2:
        return None  # the outermost loop is shared out among threads, and there is no other
    spans = {id(concat): _spans(concat) for concat in concats_on}
    cuts = sorted({0, dims[dim]} | {stop for each in spans.values() for *_, stop in each})
    if len(cuts) - 1 > MAX_CONCAT_RANGES:
        return None
    ranges = []
    for start, stop in zip(cuts, cuts[1:]):
        pieces = {
            key: (operand, offset)
            for key, each in spans.items()
            for operand, offset, first, end in each
            if first <= start < end
        }
        ranges.append(((start, stop), pieces))
    return dim, ranges


def _piecewise_axis(instr) -> int | None:
    """The axis along which `instr` is one operand per range: a concatenation's, or the one
    padded dim of a pad without interior padding (fill, operand, fill: the gradient of a
    slice, as of a concatenated weight matrix in an RNN's backward pass). Else None."""
    if instr.opcode == "concatenate":
        return instr.attrs["dimensions"][0]
    if instr.opcode != "pad" or instr.operand(0).shape.numel() == 0:
        return None
    padded = [d for d, (low, high, interior) in enumerate(instr.attrs["padding"]) if low or high]
    if len(padded) != 1 or any(interior for _, _, interior in instr.attrs["padding"]):
        return None
    return padded[0]


def _spans(instr) -> list[tuple]:
    """(operand, offset, start, stop) along the piecewise axis for each range in order: output
    coordinate c of the range reads operand coordinate c - offset (operand None: a pad's fill)."""
    axis = _piecewise_axis(instr)
    if instr.opcode == "pad":
        low = instr.attrs["padding"][axis][0]
        size, whole = instr.operand(0).shape.dims[axis], instr.shape.dims[axis]
        start, stop = max(low, 0), min(low + size, whole)
        spans = [(None, 0, 0, start), (instr.operand(0), low, start, stop), (None, 0, stop, whole)]
        return [span for span in spans if span[2] < span[3]]
    offset, spans = 0, []
    for operand in instr.operands:
        size = operand.shape.dims[axis]
        spans.append((operand, offset, offset, offset + size))
        offset += size
    return spans


def _store(em: Elemental, w: Writer, group, index) -> None:
    """Computes the group's outputs at `index` (in a memo scope of its own) and stores them."""
    em.push()
    for k, instr, leaf in group:
        value = em.value(instr, index)
        if leaf is not None:
            value = value[leaf]
        _store_line(w, k, leaf_shape(instr, leaf).dtype, index, value)
    em.pop()


def _store_line(w: Writer, k: int, dtype: str, index, value: str) -> None:
    """o{k}[index] = value (bf16 outputs hold bit patterns)."""
    if dtype == "bf16":
        value = f"h.bf16_store({value})"
    w.line(f"o{k}[{', '.join(index) if index else '0'}] = {value}")


def _emit_flat(em: Elemental, w: Writer, group, parallel: bool) -> None:
    """One loop over the flattened arrays; its bound comes from the output array."""
    _open(w, [("i0", f"o{group[0][0]}.shape[0]")], parallel)
    _store(em, w, group, ("i0",))
    w.depth -= 1


TILE = 32  # a 32x32 f32 tile of the transposed operand spans 32 cache lines and fits in L1


def _loops(dims, *, tile: bool):
    """(loop var, range arguments) from outer to inner, and the index they produce. With
    `tile`, the two minor dims are walked in TILE x TILE blocks (cache-blocked transposes)."""
    loops = [(f"i{d}", str(n)) for d, n in enumerate(dims)]
    index = tuple(f"i{d}" for d in range(len(dims)))
    if not tile or len(dims) < 2:
        return loops, index
    a, b = len(dims) - 2, len(dims) - 1
    # Block loops count blocks, so a split of the outermost loop takes whole blocks.
    blocks = [(f"t{d}", str(-(-dims[d] // TILE))) for d in (a, b)]
    inner = [(f"i{d}", f"t{d} * {TILE}, min(t{d} * {TILE} + {TILE}, {dims[d]})") for d in (a, b)]
    return loops[:a] + blocks + inner, index


SPLIT_ARG = "part"


def _open(w: Writer, loops, parallel: bool, shared: int = 0) -> None:
    """Opens `loops`, outer to inner; with `parallel`, loop number `shared` runs this part's
    share of its range."""
    for depth, (var, bounds) in enumerate(loops):
        if parallel and depth == shared:  # this part's share of the loop
            w.line(f"n_{var} = {bounds}")
            share = f"{SPLIT_ARG}[0] * n_{var} // {SPLIT_ARG}[1]"
            end = f"({SPLIT_ARG}[0] + 1) * n_{var} // {SPLIT_ARG}[1]"
            w.line(f"for {var} in range({share}, {end}):")
            w.line(f"    h.assume_nonnegative({var})")
        else:
            w.line(f"for {var} in range({bounds}):")
        w.depth += 1


def _tiled(em: Elemental, group) -> bool:
    """Tile when some transpose in the fusion reads its operand's minor dim along a non-minor
    output dim: untiled, every element of the inner loop would touch a new cache line."""
    seen, stack = set(), [instr for _, instr, _ in group]
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        source = minor_source(instr)
        if (
            source is not None
            and source != instr.operand(0).shape.rank - 1
            and instr.shape.dims[-1] > 1
        ):
            return True
        stack.extend(instr.operands)
    return False


def minor_source(instr):
    """For a transpose, or a bitcast that permutes dims through layouts: the operand dim that
    the result's minor dim walks along (None for other ops)."""
    if instr.opcode == "transpose":
        return instr.attrs["dimensions"][-1]
    if (
        instr.opcode != "bitcast"
        or instr.shape.dims == instr.operand(0).shape.dims
        and instr.shape.minor_to_major() == instr.operand(0).shape.minor_to_major()
    ):
        return None
    from ..codegen.elemental import physical_order

    out_order, in_order = physical_order(instr.shape), physical_order(instr.operand(0).shape)
    if sorted(instr.shape.dims) != sorted(instr.operand(0).shape.dims) or [
        instr.shape.dims[d] for d in out_order
    ] != [instr.operand(0).shape.dims[d] for d in in_order]:
        return None  # not a pure permutation
    return in_order[out_order.index(instr.shape.rank - 1)]


def is_column_reduce(instr) -> bool:
    """A single-input reduce that keeps its input's minor dim."""
    if (
        instr.opcode != "reduce"
        or instr.operand_count != 2
        or instr.shape.is_tuple
        or instr.shape.dtype == "bf16"
    ):  # the output array would hold bit patterns
        return False
    rank = instr.operand(0).shape.rank
    return bool(instr.attrs["dimensions"]) and rank - 1 not in instr.attrs["dimensions"]


def _column_family(group) -> bool:
    """Column reduces of inputs of one shape over the same dims (a multi-output fusion's
    gradient sums): one walk of the input in row-major order computes all of them."""
    first = group[0][1]
    return all(
        leaf is None
        and is_column_reduce(instr)
        and instr.operand(0).shape.dims == first.operand(0).shape.dims
        and sorted(instr.attrs["dimensions"]) == sorted(first.attrs["dimensions"])
        for _, instr, leaf in group
    )


def _column_sides(entries):
    """["columns", family, sides]: the outputs' column family and the outputs over its input's
    dims (a gradient's tanh that is both summed and stored), computed in one walk of the
    input; None when there are no such sides. Outputs that read a reduction need it whole:
    they are never sides."""
    family = [e for e in entries if e[1].opcode == "reduce"]
    if not family or not _column_family(family):
        return None
    in_dims = family[0][1].operand(0).shape.dims
    sides = [
        e
        for e in entries
        if e[1].opcode != "reduce"
        and leaf_shape(e[1], e[2]).dims == in_dims
        and not _depends_on_reduce(e[1])
    ]
    return ["columns", family, sides] if sides else None


def _emit_column_reduces(
    em: Elemental, w: Writer, group, parallel: bool, sides: tuple | list = ()
) -> None:
    """Accumulate into the outputs while reading the inputs in row-major order, so the inner
    loop runs along the kept minor dim: contiguous, and independent lanes vectorize without
    reassociation. The reduces' shared producers are computed once per element; reading
    each output's input along the reduced dim instead walks it at a stride (a multi-output
    [4096, 32, 16] -> [32, 16] gradient: cache misses on every element). Threads split the
    first kept dim when it is the outermost one."""
    first = group[0][1]
    operand = first.operand(0)
    in_dims, reduced = operand.shape.dims, set(first.attrs["dimensions"])
    out_loops, out_index = _loops(first.shape.dims, tile=False)
    split = parallel and 0 not in reduced  # output dim 0 is input dim 0: the same share
    _open(w, out_loops, split)
    for k, instr, _ in group:
        w.line(f"o{k}[{', '.join(out_index) or '0'}] = {em.value(instr.operand(1), ())}")
    w.depth -= len(out_loops)
    loops = [(f"i{d}", str(n)) for d, n in enumerate(in_dims)]
    index = tuple(f"i{d}" for d in range(len(in_dims)))
    kept = ", ".join(f"i{d}" for d in range(len(in_dims)) if d not in reduced)

    def accumulate() -> None:
        em.push()
        for k, instr, _ in group:
            target = f"o{k}[{kept}]"
            element = em.value(instr.operand(0), index)
            (combined,) = em.inline(instr.attrs["to_apply"], [target, element])
            w.line(f"{target} = {combined}")
        _store(em, w, sides, index)
        em.pop()

    # With the outermost dim reduced there is no kept dim to split but the minor one, and
    # blocks of it read short runs at a large stride: a 4096^2 sum over rows took 18 ms in
    # blocks of 512 columns on one thread (39 ms under prange) against 8 ms row by row, and on
    # an idle machine two threads took 5.0 ms against 2.3. So that case stays serial.
    cut = concat_split(
        [(k, instr.operand(0), None) for k, instr, _ in group] + list(sides), in_dims, split
    )
    if split and cut is not None and cut[0] == 0:
        cut = None  # the parts own rows of the output: they must share out dim 0 as above
    # dim 0 even when it has one iteration: another shared loop could be a reduced one, whose
    # parts would add into the same outputs at once
    _nests(em, w, loops, cut, split, accumulate, shared=0)
