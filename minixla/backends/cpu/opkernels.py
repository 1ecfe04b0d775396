"""Kernels for ops that are not computed per element: reduce-window, select-and-scatter,
gather and scatter, each one generated Numba function (sort and topk: sort_kernels.py;
rng-bit-generator: rng_kernels.py).

A kernel takes the op's operands (scalars as one-element arrays) and one preallocated output
array per result leaf, in the same calling convention as fusion kernels (`KernelSpec`), so
the driver calls them the same way. Reducers, comparators and combiners are inlined by the
elemental emitter, so any computation works, not only the common add/max/min.

Orders follow the interpreter exactly where floating-point results depend on them: windows
are combined in row-major tap order, scatter updates in row-major update order. One shape gets
a better algorithm:

* a reduce-window whose window is a whole axis padded on one side (JAX's cumsum/cummax) is a
  running scan, O(n) instead of O(n * window); the reversed scan reassociates, so it is only
  used with commutative, associative reducers (add, multiply, max, min, and, or, xor);
"""

from __future__ import annotations

import math


from ..codegen.elemental import accumulates_in_f32
from ..codegen.scalar import KERNEL_TYPES, NotEmittable
from .kernel_source import OpSource, on_stack
from ...reference.ops_reduce import scan_axis
from .kernels import PARALLEL_WORK, KernelSpec
from .rng_kernels import rng_bit_generator
from .sort_kernels import sort, topk

_COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}


# ---- reduce-window ---------------------------------------------------------------------------


def _is_commutative(comp, count: int) -> bool:
    root = comp.root
    if count != 1 or root.opcode not in _COMMUTATIVE or len(root.operands) != 2:
        return False
    return {op.opcode for op in root.operands} == {"parameter"} and {
        op.parameter_number for op in root.operands
    } == {0, 1}


def reduce_window(instr) -> KernelSpec:
    src = OpSource(instr)
    count = len(instr.operands) // 2
    comp = instr.attrs["to_apply"]
    in_shapes = [op.shape for op in instr.operands[:count]]
    inits = [
        src.load(src.params[count + k], instr.operand(count + k).shape.dtype, ())
        for k in range(count)
    ]
    scan = scan_axis(instr.operand(0).shape.dims, instr.attrs["window"])
    if scan is not None and (not scan[1] or _is_commutative(comp, count)):
        _scan(src, comp, count, in_shapes, inits, *scan)
    else:
        _windows(src, comp, count, in_shapes, inits, instr.attrs["window"].dims)
    return src.spec()


def _scan(src, comp, count, in_shapes, inits, axis, reverse):
    """out[i] = f(out[i - 1], x[i]) along `axis` (from the end when reversed): the taps the
    window holds at i are exactly one more than at i - 1."""
    dims = in_shapes[0].dims
    index = [f"i{d}" for d in range(len(dims))]
    wide = accumulates_in_f32(src.instr)
    if wide:  # the running f32 sum, since the bf16 output holds it rounded
        src.line(f"s0 = np.empty(({', '.join(map(str, dims))},), np.float32)")
    for d, n in enumerate(dims):
        if d == axis:
            bound = f"{n - 1}, -1, -1" if reverse else str(n)
            src.open(index[d], bound)
        else:
            src.open(index[d], n)
    previous = list(index)
    previous[axis] = f"{index[axis]} + 1" if reverse else f"{index[axis]} - 1"
    first = f"{index[axis]} == {dims[axis] - 1 if reverse else 0}"
    dtypes = [s.dtype for s in src.out_shapes]
    accs = []
    for k in range(count):
        held = f"{src.outs[k]}[{', '.join(previous)}]"
        if wide:
            held = f"s0[{', '.join(previous)}]"
        elif dtypes[k] == "bf16":
            held = f"h.bf16_load({held})"
        accs.append(src.bind(f"{held} if not ({first}) else {inits[k]}"))
    values = [src.load(src.params[k], in_shapes[k].dtype, index) for k in range(count)]
    combined = src.accumulate(accs, values)
    if wide:
        src.line(f"s0[{', '.join(index)}] = {combined[0]}")
        combined = [src.bind(f"h.round_bf16({combined[0]})")]
    for k in range(count):
        src.store(src.outs[k], dtypes[k], index, combined[k])
    src.close(len(dims))


def _is_identity(wd) -> bool:
    """A window dim that takes exactly the output's own position: no loop needed."""
    return (wd.size, wd.stride, wd.padding_low, wd.padding_high) == (1, 1, 0, 0) and (
        wd.lhs_dilation == wd.rhs_dilation == 1
    )


def _window_positions(src, d: int, n: int, wd, out_var: str):
    """Opens the loop over window taps of dim d (none for an identity dim); returns the
    operand index variable."""
    if _is_identity(wd):
        return out_var
    base = src.bind(f"{out_var} * {wd.stride} - {wd.padding_low}", "b")
    tap = f"w{d}"
    if wd.lhs_dilation == 1:
        rd = wd.rhs_dilation
        low = src.bind(f"max(0, (-{base} + {rd - 1}) // {rd})", "lo")
        high = src.bind(f"min({wd.size}, ({n - 1} - {base}) // {rd} + 1)", "hi")
        src.open(tap, f"{low}, {high}")
        return src.bind(f"{base} + {tap} * {rd}" if rd != 1 else f"{base} + {tap}", "q")
    src.open(tap, wd.size)
    position = src.bind(f"{base} + {tap} * {wd.rhs_dilation}", "x")
    ld = wd.lhs_dilation
    src.line(f"if {position} < 0 or {position} % {ld} != 0 or {position} > {(n - 1) * ld}:")
    src.line("    continue")
    return src.bind(f"{position} // {ld}", "q")


def _tap_loops(window) -> int:
    return sum(not _is_identity(wd) for wd in window)


def _windows(src, comp, count, in_shapes, inits, window):
    out_dims = src.out_shapes[0].dims
    in_dims = in_shapes[0].dims
    index = [f"i{d}" for d in range(len(out_dims))]
    if _lanes_innermost(src, count, window):
        _windows_by_lanes(src, in_shapes[0], inits[0], window, index)
        return
    for d, n in enumerate(out_dims):
        src.open(index[d], n)
    accs = [src.bind(init, "acc") for init in inits]
    taps = []
    for d, wd in enumerate(window):
        taps.append(_window_positions(src, d, in_dims[d], wd, index[d]))
    values = [src.load(src.params[k], in_shapes[k].dtype, taps) for k in range(count)]
    combined = src.accumulate(accs, values)
    src.line(f"{', '.join(accs)} = {', '.join(combined)}")
    src.close(_tap_loops(window))
    if accumulates_in_f32(src.instr):
        accs = [src.bind(f"h.round_bf16({accs[0]})")]
    for k in range(count):
        src.store(src.outs[k], src.out_shapes[k].dtype, index, accs[k])
    src.close(len(out_dims))


def _lanes_innermost(src, count: int, window) -> bool:
    """Whether the innermost dim, an identity window (channels-last pooling), can run
    innermost, inside the tap loops: each tap then combines a contiguous row of outputs,
    which LLVM vectorizes. Each output still combines its taps in row-major order; the row
    lives in the output, so only types that hold their accumulator exactly qualify."""
    dtype = src.out_shapes[0].dtype
    return (
        count == 1
        and len(window) >= 2
        and _is_identity(window[-1])
        and _tap_loops(window) > 0
        and dtype not in ("bf16", "f16")
        and not dtype.startswith("f8")
        and not accumulates_in_f32(src.instr)
    )


def _windows_by_lanes(src, in_shape, init, window, index):
    """The row of lanes accumulates in a stack array (the output may alias the input as far
    as LLVM knows, so accumulating in it loads and stores it per tap, unvectorized), and
    threads split the outermost dim when the windows are worth it."""
    out, dtype = src.outs[0], src.out_shapes[0].dtype
    dims = src.out_shapes[0].dims
    lanes = dims[-1]
    row = None
    if on_stack(lanes, KERNEL_TYPES[dtype]):
        row = "acc"
        src.scratch(row, lanes, KERNEL_TYPES[dtype])
    work = src.out_shapes[0].numel() * (math.prod(wd.size for wd in window) + 1)
    split = len(dims) > 1 and dims[0] > 1 and work >= PARALLEL_WORK
    for d, n in enumerate(dims[:-1]):
        if d == 0 and split:
            src.open_split(index[d], n, work)
        else:
            src.open(index[d], n)
    held_at = [index[-1]] if row else index
    src.open(index[-1], lanes)
    src.store(row or out, dtype, held_at, init)
    src.close()
    taps = [
        _window_positions(src, d, in_shape.dims[d], wd, index[d])
        for d, wd in enumerate(window[:-1])
    ]
    src.open(index[-1], lanes)
    held = src.load(row or out, dtype, held_at)
    value = src.load(src.params[0], in_shape.dtype, taps + [index[-1]])
    (combined,) = src.accumulate([held], [value])
    src.store(row or out, dtype, held_at, combined)
    src.close(1 + _tap_loops(window))
    if row:
        src.open(index[-1], lanes)
        src.store(out, dtype, index, src.load(row, dtype, [index[-1]]))
        src.close()
    src.close(len(dims) - 1)


# ---- select-and-scatter ----------------------------------------------------------------------


def select_and_scatter(instr) -> KernelSpec:
    """Output = init; for each source element in row-major order, the window tap `select`
    prefers (the first valid tap, replaced by a later one `select(best, new)` rejects best for)
    gets `scatter(out, source)`."""
    src = OpSource(instr)
    operand, source, init = instr.operands
    dtype = operand.shape.dtype
    rank = operand.shape.rank
    init_value = src.load("p2", init.shape.dtype, ())
    all_index = [f"z{d}" for d in range(rank)]
    for d, n in enumerate(operand.shape.dims):
        src.open(all_index[d], n)
    src.store("o0", dtype, all_index, init_value)
    src.close(rank)
    index = [f"i{d}" for d in range(rank)]
    if _select_by_lanes(instr):
        _select_and_scatter_by_lanes(src, instr, init_value, index)
        return src.spec()
    for d, n in enumerate(source.shape.dims):
        src.open(index[d], n)
    have = src.bind("False", "have")
    best = src.bind(init_value, "best")
    best_at = [src.bind("0", "at") for _ in range(rank)]
    taps = [
        _window_positions(src, d, operand.shape.dims[d], wd, index[d])
        for d, wd in enumerate(instr.attrs["window"].dims)
    ]
    value = src.load("p0", dtype, taps)
    src.line(f"if not {have}:")
    src.w.depth += 1
    src.line(f"{have} = True")
    src.line(f"{best} = {value}")
    for at, tap in zip(best_at, taps):
        src.line(f"{at} = {tap}")
    src.w.depth -= 1
    src.line("else:")
    src.w.depth += 1
    (keep,) = src.inline(instr.attrs["select"], [best, value])
    src.line(f"if not {keep}:")
    src.w.depth += 1
    src.line(f"{best} = {value}")
    for at, tap in zip(best_at, taps):
        src.line(f"{at} = {tap}")
    src.w.depth -= 2
    src.close(_tap_loops(instr.attrs["window"].dims))
    src.line(f"if {have}:")
    src.w.depth += 1
    update = src.load("p1", source.shape.dtype, index)
    current = src.load("o0", dtype, best_at)
    (new,) = src.inline(instr.attrs["scatter"], [current, update])
    src.store("o0", dtype, best_at, new)
    src.w.depth -= 1
    src.close(rank)
    return src.spec()


def _select_by_lanes(instr) -> bool:
    """The innermost dim an identity window (channels-last pooling's gradient) of a type
    held exactly in a scratch row: the taps' loops run outside it (_windows_by_lanes)."""
    window = instr.attrs["window"].dims
    dtype = instr.operand(0).shape.dtype
    return (
        len(window) >= 2
        and _is_identity(window[-1])
        and _tap_loops(window) > 0
        and dtype in ("f32", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")
    )


def _select_and_scatter_by_lanes(src, instr, init_value, index):
    """Each row of source elements along the innermost dim chooses its taps together: the
    taps of the other dims are the same for the whole row, so a row's best values and their
    positions live in scratch rows, and the scatters then run in row-major order as before."""
    from .kernels import storage_dtype

    operand, source, _ = instr.operands
    dtype = operand.shape.dtype
    window = instr.attrs["window"].dims
    lanes = source.shape.dims[-1]
    moving = [d for d, wd in enumerate(window) if not _is_identity(wd)]
    src.scratch("best", max(lanes, 1), storage_dtype(dtype).name)
    for d in moving:
        src.scratch(f"at{d}", max(lanes, 1), "int64")
    for d, n in enumerate(source.shape.dims[:-1]):
        src.open(index[d], n)
    have = src.bind("False", "have")
    taps = [
        _window_positions(src, d, operand.shape.dims[d], wd, index[d])
        for d, wd in enumerate(window[:-1])
    ]
    lane = index[-1]
    src.open(lane, lanes)
    value = src.load("p0", dtype, taps + [lane])
    src.line(f"if {have}:")
    src.w.depth += 1
    (keep,) = src.inline(instr.attrs["select"], [f"best[{lane}]", value])
    src.line(f"if {keep}:")
    src.line("    continue")
    src.w.depth -= 1
    src.line(f"best[{lane}] = {value}")
    for d in moving:
        src.line(f"at{d}[{lane}] = {taps[d]}")
    src.close()
    src.line(f"{have} = True")
    src.close(_tap_loops(window))
    src.line(f"if {have}:")
    src.w.depth += 1
    src.open(lane, lanes)
    update = src.load("p1", source.shape.dtype, index)
    best_at = [f"at{d}[{lane}]" if d in moving else index[d] for d in range(operand.shape.rank)]
    current = src.load("o0", dtype, best_at)
    (new,) = src.inline(instr.attrs["scatter"], [current, update])
    src.store("o0", dtype, best_at, new)
    src.close(2 + operand.shape.rank - 1)


# ---- gather and scatter ----------------------------------------------------------------------


def _start_values(
    src,
    array: str,
    indices,
    index_vector_dim: int,
    batch_vars: list[str],
    index_map,
    operand_dims,
    sizes,
    batching,
    clamp: bool,
) -> list[str]:
    """Start index per operand dim for the batch position `batch_vars` (the indices array's
    dims other than index_vector_dim), clamped so the slice fits when `clamp`."""
    rank = len(operand_dims)
    starts = ["0"] * rank
    dtype = indices.shape.dtype
    for k, dim in enumerate(index_map):
        at = list(batch_vars)
        if index_vector_dim < indices.shape.rank:
            at.insert(index_vector_dim, str(k))
        raw = src.load(array, dtype, at)
        if dtype == "u64":
            raw = src.bind(f"min({raw}, np.uint64({2**63 - 1}))")
        starts[dim] = src.bind(f"np.int64({raw})", "s")
    for operand_dim, indices_dim in batching:
        axis = indices_dim if indices_dim < index_vector_dim else indices_dim - 1
        starts[operand_dim] = batch_vars[axis]
    if clamp:
        starts = [
            src.bind(f"min(max({s}, 0), {max(n - size, 0)})", "s")
            if s != "0" or n - size < 0
            else s
            for s, n, size in zip(starts, operand_dims, sizes)
        ]
    return starts


def _indices_number(src) -> int:
    return (len(src.instr.operands) - 1) // 2


def gather(instr) -> KernelSpec:
    src = OpSource(instr)
    operand, indices = instr.operands
    attrs = instr.attrs
    offset_dims = set(attrs.get("offset_dims", ()))
    sizes = list(attrs["slice_sizes"])
    if 0 in sizes:  # zeros (the interpreter's rule); the loops below would read out of bounds
        raise NotEmittable("a gather of empty slices")
    operand_batching = list(attrs.get("operand_batching_dims", ()))
    dropped = set(attrs.get("collapsed_slice_dims", ())) | set(operand_batching)
    kept = [d for d in range(operand.shape.rank) if d not in dropped]
    out_dims = instr.shape.dims
    index = [f"i{d}" for d in range(len(out_dims))]
    batch_out = [d for d in range(len(out_dims)) if d not in offset_dims]
    offset_out = [d for d in range(len(out_dims)) if d in offset_dims]
    batching = list(zip(operand_batching, attrs.get("start_indices_batching_dims", ())))

    def starts():
        return _start_values(
            src,
            "p1",
            indices,
            attrs["index_vector_dim"],
            [index[d] for d in batch_out],
            attrs["start_index_map"],
            operand.shape.dims,
            sizes,
            batching,
            clamp=True,
        )

    begin = starts() if not batch_out else None
    for d, n in enumerate(out_dims):
        src.open(index[d], n)
        if batch_out and d == batch_out[-1]:
            begin = starts()
    operand_index = list(begin)
    for d, out_d in zip(kept, offset_out):
        operand_index[d] = src.bind(
            f"{begin[d]} + {index[out_d]}" if begin[d] != "0" else index[out_d], "q"
        )
    value = src.load("p0", operand.shape.dtype, operand_index)
    src.store("o0", instr.shape.dtype, index, value)
    src.close(len(out_dims))
    return src.spec()


def scatter(instr, in_place: bool = False) -> KernelSpec:
    """Outputs = inputs, then each in-bounds update element (row-major over the updates) is
    combined into its target; a window that does not fit entirely is skipped, as in XLA.
    `in_place`: the output is operand 0's buffer, so the copy is left out."""
    src = OpSource(instr)
    count = _indices_number(src)
    inputs, indices = instr.operands[:count], instr.operand(count)
    updates = instr.operands[count + 1 :]
    attrs = instr.attrs
    operand_dims = inputs[0].shape.dims
    rank = len(operand_dims)
    dtypes = [s.dtype for s in src.out_shapes]
    copy_index = [f"z{d}" for d in range(rank)]
    for d, n in enumerate(operand_dims if not in_place else ()):
        src.open(copy_index[d], n)
    for k in range(count if not in_place else 0):
        value = src.load(src.params[k], inputs[k].shape.dtype, copy_index)
        src.store(src.outs[k], dtypes[k], copy_index, value)
    src.close(rank if not in_place else 0)
    update_dims = updates[0].shape.dims
    window_dims = list(attrs.get("update_window_dims", ()))
    input_batching = list(attrs.get("input_batching_dims", ()))
    skipped = set(attrs.get("inserted_window_dims", ())) | set(input_batching)
    window_operand_dims = [d for d in range(rank) if d not in skipped]
    window_size = [1] * rank
    for update_dim, dim in zip(window_dims, window_operand_dims):
        window_size[dim] = update_dims[update_dim]
    index = [f"i{d}" for d in range(len(update_dims))]
    scatter_dims = [d for d in range(len(update_dims)) if d not in window_dims]
    batching = list(zip(input_batching, attrs.get("scatter_indices_batching_dims", ())))

    def starts():
        values = _start_values(
            src,
            src.params[count],
            indices,
            attrs["index_vector_dim"],
            [index[d] for d in scatter_dims],
            attrs["scatter_dims_to_operand_dims"],
            operand_dims,
            window_size,
            batching,
            clamp=False,
        )
        checks = [
            f"0 <= {s} <= {n - size}"
            for s, n, size in zip(values, operand_dims, window_size)
            if s != "0" or n - size < 0
        ]
        src.line(f"if {' and '.join(checks) or 'True'}:")
        src.w.depth += 1
        return values

    # A window row along both the updates' and the operand's minor dims is first copied to a
    # stack row: combining into the output straight from the updates does not vectorize (the
    # output may alias the updates as far as LLVM knows; a [100000, 16] segment sum).
    last = len(update_dims) - 1
    staged = (
        count == 1
        and last in window_dims
        and window_operand_dims[window_dims.index(last)] == rank - 1
        and dtypes[0] != "bf16"
        and on_stack(update_dims[last], KERNEL_TYPES[dtypes[0]])
    )
    # Where each scatter index updates one such row and the indices are sorted (XLA's
    # indices_are_sorted), the row last updated stays in the stack row while the next index
    # targets it too: each element is combined in the same order, in registers, without a
    # store and load through memory per update. Unsorted, the row changes at almost every
    # update, and its scalar store and load cost more than the staged row's vector copies
    # (a [100000, 16] segment sum: 0.60 ms against 0.79 sorted, 0.77 against 0.66 random).
    held = (
        staged
        and attrs.get("indices_are_sorted", False)
        and all(update_dims[d] == 1 for d in window_dims if d != last)
    )
    if staged:
        src.scratch("row", update_dims[last], KERNEL_TYPES[dtypes[0]])
    if held:
        src.line("row_held = False")
        src.line(" = ".join(_held_keys(rank)) + " = 0")
    opened = 0
    begin = starts() if not scatter_dims else None
    opened += 0 if scatter_dims else 1
    for d, n in enumerate(update_dims):
        if staged and d == last:
            break
        src.open(index[d], n)
        opened += 1
        if scatter_dims and d == scatter_dims[-1]:
            begin = starts()
            opened += 1

    def updated(k: int):  # as the operand's type, which the combiner takes (mixed precision)
        value = src.load(src.params[count + 1 + k], updates[k].shape.dtype, index)
        return src.converted(value, updates[k].shape.dtype, dtypes[k])

    target = list(begin)
    if held:
        row_start = [
            src.bind(f"{begin[dim]} + {index[window_dims[window_operand_dims.index(dim)]]}", "q")
            if dim in window_operand_dims and dim != rank - 1
            else begin[dim]
            for dim in range(rank)
        ]
        _hold_row(src, dtypes[0], row_start, update_dims[last], index[last])
        src.open(index[last], update_dims[last])
        opened += 1
        current = [src.load("row", dtypes[0], [index[last]])]
        combined = src.inline(attrs["to_apply"], current + [updated(0)])
        src.store("row", dtypes[0], [index[last]], combined[0])
        src.close(opened)
        src.line("if row_held:")
        src.w.depth += 1
        _store_held_row(src, dtypes[0], update_dims[last])
        src.close()
        return src.spec()
    if staged:
        src.open(index[last], update_dims[last])
        src.store("row", dtypes[0], [index[last]], updated(0))
        src.close()
        src.open(index[last], update_dims[last])
        opened += 1
    for dim, update_dim in zip(window_operand_dims, window_dims):
        target[dim] = src.bind(
            f"{begin[dim]} + {index[update_dim]}" if begin[dim] != "0" else index[update_dim], "q"
        )
    current = [src.load(src.outs[k], dtypes[k], target) for k in range(count)]
    if staged:
        new = [src.load("row", dtypes[0], [index[last]])]
    else:
        new = [updated(k) for k in range(count)]
    combined = src.inline(attrs["to_apply"], current + new)
    for k in range(count):
        src.store(src.outs[k], dtypes[k], target, combined[k])
    src.close(opened)
    return src.spec()


def _hold_row(src, dtype: str, row_start: list[str], length: int, var: str) -> None:
    """Make the stack row hold the output row starting at `row_start`: unless it already
    does, store the row it holds (if any) and load the new one."""
    keys = _held_keys(len(row_start))
    changed = " or ".join(f"{k} != {v}" for k, v in zip(keys, row_start))
    src.line(f"if not row_held or {changed}:")
    src.w.depth += 1
    src.line("if row_held:")
    src.w.depth += 1
    _store_held_row(src, dtype, length)
    src.close()
    src.open(var, length)
    at = row_start[:-1] + [src.bind(f"{row_start[-1]} + {var}", "q")]
    src.store("row", dtype, [var], src.load(src.outs[0], dtype, at))
    src.close()
    for k, v in zip(keys, row_start):
        src.line(f"{k} = {v}")
    src.line("row_held = True")
    src.close()


def _held_keys(rank: int) -> list[str]:
    """The variables holding the start of the output row the stack row holds."""
    return [f"held_{d}" for d in range(rank)]


def _store_held_row(src, dtype: str, length: int) -> None:
    keys = _held_keys(src.out_shapes[0].rank)
    src.open("j_held", length)
    at = keys[:-1] + [src.bind(f"{keys[-1]} + j_held", "q")]
    src.store(src.outs[0], dtype, at, src.load("row", dtype, ["j_held"]))
    src.close()


BUILDERS = {
    "reduce-window": reduce_window,
    "select-and-scatter": select_and_scatter,
    "gather": gather,
    "scatter": scatter,
    "sort": sort,
    "topk": topk,
    "rng-bit-generator": rng_bit_generator,
}


# A dot this small (multiply-adds) costs less as a generated loop than as a BLAS call from
# the driver (about 2 us of dispatch), and it keeps a loop body native (native_loop.py).
SMALL_DOT_MACS = 4096


def is_small_dot(instr) -> bool:
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    contracted = math.prod(lhs.dims[d] for d in instr.attrs.get("lhs_contracting_dims", ()))
    return (
        instr.shape.numel() * contracted <= SMALL_DOT_MACS
        and lhs.dtype == rhs.dtype == instr.shape.dtype in ("f32", "f64")
    )


def small_dot(instr) -> KernelSpec:
    """out[batch, lhs free, rhs free] = sum over the contracted dims of lhs * rhs, one
    accumulator per output element. Compiled with 'reassoc', as reductions are: summed in
    row-major order, a 64x64 matrix-vector product waits on 64 dependent adds per row
    (2.8 us against 0.27 vectorized)."""
    src = OpSource(instr)
    attrs = instr.attrs
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc = list(attrs.get("lhs_contracting_dims", ()))
    rc = list(attrs.get("rhs_contracting_dims", ()))
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    lf = [d for d in range(lhs.rank) if d not in lb + lc]
    rf = [d for d in range(rhs.rank) if d not in rb + rc]
    out = [f"i{d}" for d in range(instr.shape.rank)]
    red = [f"r{j}" for j in range(len(lc))]
    lhs_index = [
        out[lb.index(d)] if d in lb else out[len(lb) + lf.index(d)] if d in lf else red[lc.index(d)]
        for d in range(lhs.rank)
    ]
    rhs_index = [
        out[rb.index(d)]
        if d in rb
        else out[len(lb) + len(lf) + rf.index(d)]
        if d in rf
        else red[rc.index(d)]
        for d in range(rhs.rank)
    ]
    dtype = instr.shape.dtype
    for var, bound in zip(out, instr.shape.dims):
        src.open(var, bound)
    acc = src.bind(src.const(0, dtype), "acc")
    for var, d in zip(red, lc):
        src.open(var, lhs.dims[d])
    a = src.load("p0", dtype, lhs_index)
    b = src.load("p1", dtype, rhs_index)
    src.line(f"{acc} = {acc} + {a} * {b}")
    src.close(len(red))
    src.store("o0", dtype, out, acc)
    return src.spec(reduce_flags=True)
