"""Kernels for ops that are not computed per element: reduce-window, select-and-scatter,
gather, scatter, sort and topk, each one generated Numba function.

A kernel takes the op's operands (scalars as one-element arrays) and one preallocated output
array per result leaf, in the same calling convention as fusion kernels (`KernelSpec`), so
the driver calls them the same way. Reducers, comparators and combiners are inlined by the
elemental emitter, so any computation works, not only the common add/max/min.

Orders follow the interpreter exactly where floating-point results depend on them: windows
are combined in row-major tap order, scatter updates in row-major update order, and sort is a
stable bottom-up merge sort. Two shapes get a better algorithm:

* a reduce-window whose window is a whole axis padded on one side (JAX's cumsum/cummax) is a
  running scan, O(n) instead of O(n * window); the reversed scan reassociates, so it is only
  used with commutative, associative reducers (add, multiply, max, min, and, or, xor);
* topk with a small k keeps a sorted buffer of the k best per row (one pass over the row);
  larger k sorts the row's keys with a stable merge sort.
"""
from __future__ import annotations

import hashlib
import math

from .elemental import Elemental, Writer
from .kernels import KernelSpec, _HEADER
from .scalar import NotEmittable, kernel_type, literal

_COMMUTATIVE = {"add", "multiply", "maximum", "minimum", "and", "or", "xor"}
_SMALL_TOPK = 32  # up to this k, a sorted buffer of k; above, a sort of the whole row


class _Source:
    """One op kernel under construction: arguments, body lines and the elemental emitter for
    inlined scalar computations."""

    def __init__(self, instr):
        self.instr = instr
        self.w = Writer()
        self.w.depth = 1
        self.params = [f"p{i}" for i in range(len(instr.operands))]
        leaves = [s for _, s in instr.shape.leaves()]
        self.out_shapes = leaves
        self.outs = [f"o{k}" for k in range(len(leaves))]
        for shape in [op.shape for op in instr.operands] + leaves:
            kernel_type(shape.dtype)

    def line(self, text: str) -> None:
        self.w.line(text)

    def open(self, var: str, bound) -> None:
        self.line(f"for {var} in range({bound}):")
        self.w.depth += 1

    def close(self, levels: int = 1) -> None:
        self.w.depth -= levels

    def load(self, array: str, dtype: str, index) -> str:
        load = f"{array}[{', '.join(index) if index else '0'}]"
        return self.bind(f"h.bf16_load({load})" if dtype == "bf16" else load)

    def store(self, array: str, dtype: str, index, value: str) -> None:
        value = f"h.bf16_store({value})" if dtype == "bf16" else value
        self.line(f"{array}[{', '.join(index) if index else '0'}] = {value}")

    def bind(self, expr: str, prefix: str = "v") -> str:
        name = self.w.var(prefix)
        self.line(f"{name} = {expr}")
        return name

    def inline(self, comp, args: list[str]) -> list[str]:
        return Elemental(self.w, {}).inline(comp, args)

    def const(self, value, dtype: str) -> str:
        return self.w.const(value, dtype)

    def spec(self, name: str = "kernel", reduce_flags: bool = False) -> KernelSpec:
        instr = self.instr
        fastmath = "{'contract'}"
        lines = [_HEADER.format(doc=f"Kernel for {instr.opcode} %{instr.name}.")]
        lines += [f"{n} = {text}" for text, n in self.w.constants.items()]
        lines += [f"{n} = {key}" for key, n in self.w.math_names.items()]
        lines += ["", "", f"@njit(parallel=False, fastmath={fastmath}, error_model='numpy', "
                  "boundscheck=False, nogil=True, cache=CACHE)",
                  f"def {name}({', '.join(self.params + self.outs)}):"]
        lines += self.w.lines or ["    pass"]
        source = "\n".join(lines) + "\n"
        shapes = [op.shape for op in instr.operands] + self.out_shapes
        args = [("param", i) for i in range(len(instr.operands))] + \
            [("out", k) for k in range(len(self.outs))]
        spec = KernelSpec(name, source, args, [max(s.rank, 1) for s in shapes],
                          [s.dtype for s in shapes], False, False, 1)
        spec.kid = hashlib.sha256((source + spec.signature_text()).encode()).hexdigest()[:32]
        return spec


# ---- reduce-window -----------------------------------------------------------------------------

def _scan_axis(instr):
    """(axis, reverse) when the window is one whole axis padded on one side and every other
    dim is the identity window; else None."""
    dims = instr.operand(0).shape.dims
    found = None
    for d, (n, wd) in enumerate(zip(dims, instr.attrs["window"].dims)):
        plain = wd.stride == 1 and wd.lhs_dilation == 1 and wd.rhs_dilation == 1
        if not plain or wd.reversal:
            return None
        if wd.size == 1 and wd.padding_low == 0 and wd.padding_high == 0:
            continue
        if found is not None or n < 2 or wd.size != n:
            return None
        if (wd.padding_low, wd.padding_high) == (n - 1, 0):
            found = (d, False)
        elif (wd.padding_low, wd.padding_high) == (0, n - 1):
            found = (d, True)
        else:
            return None
    return found


def _is_commutative(comp, count: int) -> bool:
    root = comp.root
    if count != 1 or root.opcode not in _COMMUTATIVE or len(root.operands) != 2:
        return False
    return {op.opcode for op in root.operands} == {"parameter"} and \
        {op.parameter_number for op in root.operands} == {0, 1}


def reduce_window(instr) -> KernelSpec:
    src = _Source(instr)
    count = len(instr.operands) // 2
    comp = instr.attrs["to_apply"]
    in_shapes = [op.shape for op in instr.operands[:count]]
    inits = [src.load(src.params[count + k], instr.operand(count + k).shape.dtype, ())
             for k in range(count)]
    scan = _scan_axis(instr)
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
        before = src.bind(f"{src.outs[k]}[{', '.join(previous)}] if not ({first}) else {inits[k]}"
                          if dtypes[k] != "bf16" else
                          f"h.bf16_load({src.outs[k]}[{', '.join(previous)}]) "
                          f"if not ({first}) else {inits[k]}")
        accs.append(before)
    values = [src.load(src.params[k], in_shapes[k].dtype, index) for k in range(count)]
    combined = src.inline(comp, accs + values)
    for k in range(count):
        src.store(src.outs[k], dtypes[k], index, combined[k])
    src.close(len(dims))


def _window_positions(src, d: int, n: int, wd, out_var: str):
    """Opens the loop over window taps of dim d; returns the operand index variable."""
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


def _windows(src, comp, count, in_shapes, inits, window):
    out_dims = src.out_shapes[0].dims
    in_dims = in_shapes[0].dims
    index = [f"i{d}" for d in range(len(out_dims))]
    for d, n in enumerate(out_dims):
        src.open(index[d], n)
    accs = [src.bind(init, "acc") for init in inits]
    taps = []
    for d, wd in enumerate(window):
        taps.append(_window_positions(src, d, in_dims[d], wd, index[d]))
    values = [src.load(src.params[k], in_shapes[k].dtype, taps) for k in range(count)]
    combined = src.inline(comp, accs + values)
    src.line(f"{', '.join(accs)} = {', '.join(combined)}")
    src.close(len(window))
    for k in range(count):
        src.store(src.outs[k], src.out_shapes[k].dtype, index, accs[k])
    src.close(len(out_dims))


# ---- select-and-scatter ---------------------------------------------------------------------------

def select_and_scatter(instr) -> KernelSpec:
    """Output = init; for each source element in row-major order, the window tap `select`
    prefers (the first valid tap, replaced by a later one `select(best, new)` rejects best for)
    gets `scatter(out, source)`."""
    src = _Source(instr)
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
    for d, n in enumerate(source.shape.dims):
        src.open(index[d], n)
    have = src.bind("False", "have")
    best = src.bind(init_value, "best")
    best_at = [src.bind("0", "at") for _ in range(rank)]
    taps = [_window_positions(src, d, operand.shape.dims[d], wd, index[d])
            for d, wd in enumerate(instr.attrs["window"].dims)]
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
    src.close(rank)
    src.line(f"if {have}:")
    src.w.depth += 1
    update = src.load("p1", source.shape.dtype, index)
    current = src.load("o0", dtype, best_at)
    (new,) = src.inline(instr.attrs["scatter"], [current, update])
    src.store("o0", dtype, best_at, new)
    src.w.depth -= 1
    src.close(rank)
    return src.spec()


# ---- gather and scatter ---------------------------------------------------------------------------

def _start_values(src, array: str, indices, index_vector_dim: int, batch_vars: list[str],
                  index_map, operand_dims, sizes, batching, clamp: bool) -> list[str]:
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
            raw = src.bind(f"min({raw}, np.uint64({2 ** 63 - 1}))")
        starts[dim] = src.bind(f"np.int64({raw})", "s")
    for operand_dim, indices_dim in batching:
        axis = indices_dim if indices_dim < index_vector_dim else indices_dim - 1
        starts[operand_dim] = batch_vars[axis]
    if clamp:
        starts = [src.bind(f"min(max({s}, 0), {max(n - size, 0)})", "s") if s != "0" or
                  n - size < 0 else s for s, n, size in zip(starts, operand_dims, sizes)]
    return starts


def _indices_number(src) -> int:
    return (len(src.instr.operands) - 1) // 2


def gather(instr) -> KernelSpec:
    src = _Source(instr)
    operand, indices = instr.operands
    attrs = instr.attrs
    offset_dims = set(attrs.get("offset_dims", ()))
    sizes = list(attrs["slice_sizes"])
    operand_batching = list(attrs.get("operand_batching_dims", ()))
    dropped = set(attrs.get("collapsed_slice_dims", ())) | set(operand_batching)
    kept = [d for d in range(operand.shape.rank) if d not in dropped]
    out_dims = instr.shape.dims
    index = [f"i{d}" for d in range(len(out_dims))]
    batch_out = [d for d in range(len(out_dims)) if d not in offset_dims]
    offset_out = [d for d in range(len(out_dims)) if d in offset_dims]
    batching = list(zip(operand_batching, attrs.get("start_indices_batching_dims", ())))

    def starts():
        return _start_values(src, "p1", indices, attrs["index_vector_dim"],
                             [index[d] for d in batch_out], attrs["start_index_map"],
                             operand.shape.dims, sizes, batching, clamp=True)
    begin = starts() if not batch_out else None
    for d, n in enumerate(out_dims):
        src.open(index[d], n)
        if batch_out and d == batch_out[-1]:
            begin = starts()
    operand_index = list(begin)
    for d, out_d in zip(kept, offset_out):
        operand_index[d] = src.bind(f"{begin[d]} + {index[out_d]}" if begin[d] != "0"
                                    else index[out_d], "q")
    value = src.load("p0", operand.shape.dtype, operand_index)
    src.store("o0", instr.shape.dtype, index, value)
    src.close(len(out_dims))
    return src.spec()


def scatter(instr, in_place: bool = False) -> KernelSpec:
    """Outputs = inputs, then each in-bounds update element (row-major over the updates) is
    combined into its target; a window that does not fit entirely is skipped, as in XLA.
    `in_place`: the output is operand 0's buffer, so the copy is left out."""
    src = _Source(instr)
    count = _indices_number(src)
    inputs, indices = instr.operands[:count], instr.operand(count)
    updates = instr.operands[count + 1:]
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
        values = _start_values(src, src.params[count], indices, attrs["index_vector_dim"],
                               [index[d] for d in scatter_dims],
                               attrs["scatter_dims_to_operand_dims"], operand_dims,
                               window_size, batching, clamp=False)
        checks = [f"0 <= {s} <= {n - size}" for s, n, size in
                  zip(values, operand_dims, window_size) if s != "0" or n - size < 0]
        src.line(f"if {' and '.join(checks) or 'True'}:")
        src.w.depth += 1
        return values
    opened = 0
    begin = starts() if not scatter_dims else None
    opened += 0 if scatter_dims else 1
    for d, n in enumerate(update_dims):
        src.open(index[d], n)
        opened += 1
        if scatter_dims and d == scatter_dims[-1]:
            begin = starts()
            opened += 1
    target = list(begin)
    for dim, update_dim in zip(window_operand_dims, window_dims):
        target[dim] = src.bind(f"{begin[dim]} + {index[update_dim]}" if begin[dim] != "0"
                               else index[update_dim], "q")
    current = [src.load(src.outs[k], dtypes[k], target) for k in range(count)]
    new = [src.load(src.params[count + 1 + k], updates[k].shape.dtype, index)
           for k in range(count)]
    combined = src.inline(attrs["to_apply"], current + new)
    for k in range(count):
        src.store(src.outs[k], dtypes[k], target, combined[k])
    src.close(opened)
    return src.spec()


# ---- sort and topk ----------------------------------------------------------------------------

def _outer_loops(src, dims, axis: int) -> list[str]:
    """Opens loops over every dim but `axis`; returns the index with `t` at `axis`."""
    index = []
    for d, n in enumerate(dims):
        if d == axis:
            index.append("t")
            continue
        src.open(f"i{d}", n)
        index.append(f"i{d}")
    return index


def sort(instr) -> KernelSpec:
    """Stable bottom-up merge sort of an index permutation per row; the comparator decides
    whether the right run's head goes strictly before the left run's."""
    src = _Source(instr)
    axis = instr.attrs["dimensions"][0]
    dims = instr.operand(0).shape.dims
    n = dims[axis]
    count = len(instr.operands)
    dtypes = [op.shape.dtype for op in instr.operands]
    src.line(f"perm = np.empty({max(n, 1)}, np.int64)")
    src.line(f"spare = np.empty({max(n, 1)}, np.int64)")
    index = _outer_loops(src, dims, axis)
    src.open("t", n)
    src.line("perm[t] = t")
    src.close()
    src.line("order, other = perm, spare")
    src.line("width = 1")
    src.line(f"while width < {n}:")
    src.w.depth += 1
    src.line("lo = 0")
    src.line(f"while lo < {n}:")
    src.w.depth += 1
    src.line(f"mid = min(lo + width, {n})")
    src.line(f"hi = min(lo + 2 * width, {n})")
    src.line("a = lo")
    src.line("b = mid")
    src.open("t", "lo, hi")
    src.line("take_b = a >= mid")
    src.line("if not take_b and b < hi:")
    src.w.depth += 1
    args = []
    for k in range(count):
        right = [("order[b]" if v == "t" else v) for v in index]
        left = [("order[a]" if v == "t" else v) for v in index]
        args += [src.load(src.params[k], dtypes[k], right),
                 src.load(src.params[k], dtypes[k], left)]
    (less,) = src.inline(instr.attrs["to_apply"], args)
    src.line(f"take_b = {less}")
    src.w.depth -= 1
    src.line("if take_b:")
    src.line("    other[t] = order[b]")
    src.line("    b += 1")
    src.line("else:")
    src.line("    other[t] = order[a]")
    src.line("    a += 1")
    src.close()
    src.line("lo += 2 * width")
    src.w.depth -= 1
    src.line("order, other = other, order")
    src.line("width *= 2")
    src.w.depth -= 1
    src.open("t", n)
    source = [("order[t]" if v == "t" else v) for v in index]
    for k in range(count):
        value = src.load(src.params[k], dtypes[k], source)
        src.store(src.outs[k], src.out_shapes[k].dtype, index, value)
    src.close()
    src.close(len(dims) - 1)
    return src.spec()


def _order_key(src, value: str, dtype: str, largest: bool) -> str:
    """An int64 whose ascending order is the wanted order: floats by the total order
    (-NaN < -inf < ... < -0 < +0 < ... < NaN), descending for largest (bitwise not)."""
    if dtype in ("f32", "bf16", "f64"):
        width = "np.int64" if dtype == "f64" else "np.int32"
        bits = src.bind(f"h.bitcast({value}, {width})")
        top = (1 << 63) - 1 if dtype == "f64" else (1 << 31) - 1
        key = src.bind(f"np.int64({bits} ^ {width}({top}) if {bits} < 0 else {bits})", "key")
    elif dtype == "u64":
        key = src.bind(f"np.int64({value} ^ np.uint64({1 << 63}))", "key")
    else:
        key = src.bind(f"np.int64({value})", "key")
    return src.bind(f"~{key}", "key") if largest else key


def topk(instr) -> KernelSpec:
    """Per row: the k first elements of the stable sort by key (ties keep index order)."""
    src = _Source(instr)
    operand = instr.operand(0)
    dims = operand.shape.dims
    axis = len(dims) - 1
    n, k = dims[axis], instr.attrs["k"]
    largest = instr.attrs.get("largest", True)
    dtype = operand.shape.dtype
    values_dtype, indices_dtype = (s.dtype for s in src.out_shapes)
    src.line(f"keys = np.empty({max(n, 1)}, np.int64)")
    src.line(f"best = np.empty({max(k, 1)}, np.int64)")
    index = _outer_loops(src, dims, axis)
    src.open("t", n)
    key = _order_key(src, src.load("p0", dtype, index), dtype, largest)
    src.line(f"keys[t] = {key}")
    src.close()
    if k <= _SMALL_TOPK:
        src.line("filled = 0")
        src.open("t", n)
        src.line("key = keys[t]")
        src.line(f"if filled == {k} and key >= keys[best[{k - 1}]]:")
        src.line("    continue")
        src.line(f"at = filled if filled < {k} else {k - 1}")
        src.line("while at > 0 and keys[best[at - 1]] > key:")
        src.line(f"    if at < {k}:")
        src.line("        best[at] = best[at - 1]")
        src.line("    at -= 1")
        src.line("best[at] = t")
        src.line(f"if filled < {k}:")
        src.line("    filled += 1")
        src.close()
    else:
        src.line("order = np.argsort(keys, kind='mergesort')")
        src.open("t", k)
        src.line("best[t] = order[t]")
        src.close()
    src.open("t", k)
    src.line("j = best[t]")
    source = ["j" if v == "t" else v for v in index]
    value = src.load("p0", dtype, source)
    src.store("o0", values_dtype, index, value)
    src.store("o1", indices_dtype, index, f"{kernel_type(indices_dtype)}(j)")
    src.close()
    src.close(len(dims) - 1)
    return src.spec()


# ---- rng-bit-generator ------------------------------------------------------------------------

def rng_bit_generator(instr) -> KernelSpec:
    """XLA's Philox generator (rng_default, rng_philox) on a u64 state: block b encrypts the
    128-bit counter (state[1], state[2]) + b with key state[0]; 32-bit outputs take the four
    words of each block in order, 64-bit outputs two words each. The new state advances the
    counter by the blocks used. Other algorithms and states are not emittable."""
    from .scalar import BITS
    algorithm = str(instr.attrs.get("algorithm", "rng_default"))
    state, data = instr.shape.tuple_shapes
    if algorithm == "rng_three_fry":
        return _threefry(instr)
    if algorithm not in ("rng_default", "rng_philox") or state.dtype != "u64" or \
            instr.operand(0).shape.dtype != "u64" or state.numel() < 2 or \
            data.dtype not in BITS or data.dtype in ("pred", "bf16"):
        raise NotEmittable(f"rng-bit-generator {algorithm} on {state.dtype} -> {data.dtype}")
    src = _Source(instr)
    words, count, width = state.numel(), data.numel(), BITS[data.dtype]
    bits = 64 if width == 64 else 32
    blocks = -(-count * (2 if bits == 64 else 1) // 4)
    u64 = "np.uint64"
    src.line(f"mask = {u64}(0xFFFFFFFF)")
    src.line(f"shift = {u64}(32)")
    src.line("key = p0[0]")
    src.line("low = p0[1]")
    src.line(f"high = p0[{2 if words >= 3 else 0}]")
    src.line("k0 = key & mask")
    src.line("k1 = key >> shift")
    src.open("b", blocks)
    src.line(f"cl = low + {u64}(b)")
    src.line(f"ch = high + {u64}(1) if cl < low else high")
    src.line("r0, r1, r2, r3 = h.philox4x32(cl & mask, cl >> shift, ch & mask, ch >> shift, "
             "k0, k1)")
    if bits == 32:
        pieces = [(f"4 * b + {j}", f"r{j}") for j in range(4)]
    else:
        pieces = [("2 * b", "r0 | (r1 << shift)"), ("2 * b + 1", "r2 | (r3 << shift)")]
    unsigned = f"np.uint{width}"
    for at, word in pieces:
        src.line(f"if {at} < {count}:")
        value = f"{unsigned}({word} & {u64}({(1 << width) - 1}))" if width < 64 else word
        if data.dtype != f"u{width}":
            value = f"h.bitcast({value}, {kernel_type(data.dtype)})"
        src.line(f"    o1[{at}] = {value}")
    src.close()
    src.open("w", words)
    src.line("o0[w] = p0[w]")
    src.close()
    src.line(f"new_low = low + {u64}({blocks})")
    src.line("o0[1] = new_low")
    if words >= 3:
        src.line(f"o0[2] = high + {u64}(1) if new_low < low else high")
    spec = src.spec()
    spec.flat, spec.ndims = True, [1] * len(spec.ndims)
    spec.kid = hashlib.sha256((spec.source + spec.signature_text() + "flat").encode()
                              ).hexdigest()[:32]
    return spec


def _threefry(instr) -> KernelSpec:
    """XLA's ThreeFry generator: counter state[1] + n encrypted with key state[0]. 64-bit
    outputs take both words of counter n (row-major position n); 32-bit outputs split one dim
    (the first even one, else the largest) in halves: counter n gives the two neighbours
    2h and 2h + 1 along it."""
    from .scalar import BITS
    state, data = instr.shape.tuple_shapes
    if state.dtype != "u64" or instr.operand(0).shape.dtype != "u64" or state.numel() < 2 or \
            data.dtype not in BITS or data.dtype in ("pred", "bf16"):
        raise NotEmittable(f"rng-bit-generator rng_three_fry on {state.dtype} -> {data.dtype}")
    src = _Source(instr)
    dims, width = list(data.dims), BITS[data.dtype]
    u64 = "np.uint64"
    src.line(f"mask = {u64}(0xFFFFFFFF)")
    src.line("key = p0[0]")
    src.line("counter = p0[1]")
    src.line("k0 = key & mask")
    src.line(f"k1 = key >> {u64}(32)")
    split = None
    if width == 64:
        loop_dims = dims
    elif not dims:
        loop_dims = []
    else:
        even = [i for i, d in enumerate(dims) if d % 2 == 0]
        split = even[0] if even else dims.index(max(dims))
        loop_dims = dims[:split] + [-(-dims[split] // 2)] + dims[split + 1:]
    index = [f"i{d}" for d in range(len(loop_dims))]
    for d, n in enumerate(loop_dims):
        src.open(index[d], n)
    terms, stride = [], 1
    for d in reversed(range(len(loop_dims))):
        terms.append(f"{index[d]} * {stride}")
        stride *= loop_dims[d]
    flat = " + ".join(terms) or "0"
    src.line(f"c = counter + {u64}({flat})")
    src.line(f"x0, x1 = h.threefry2x32(c & mask, c >> {u64}(32), k0, k1)")

    def store(at, word):
        value = f"np.uint{width}({word} & {u64}({(1 << width) - 1}))" if width < 64 else word
        if data.dtype != f"u{width}":
            value = f"h.bitcast({value}, {kernel_type(data.dtype)})"
        src.line(f"o1[{', '.join(at) or '0'}] = {value}")
    if width == 64:
        store(index, f"x0 | (x1 << {u64}(32))")
    elif split is None:
        store([], "x0")
    else:
        for word in (0, 1):
            at = list(index)
            at[split] = f"2 * {index[split]} + {word}"
            if dims[split] % 2 and word == 1:
                src.line(f"if 2 * {index[split]} + 1 < {dims[split]}:")
                src.w.depth += 1
            store(at, f"x{word}")
            if dims[split] % 2 and word == 1:
                src.w.depth -= 1
    src.close(len(loop_dims))
    src.open("w", state.numel())
    src.line("o0[w] = p0[w]")
    src.close()
    src.line(f"o0[1] = counter + {u64}({math.prod(loop_dims)})")
    return src.spec()


BUILDERS = {"reduce-window": reduce_window, "select-and-scatter": select_and_scatter,
            "gather": gather, "scatter": scatter, "sort": sort, "topk": topk,
            "rng-bit-generator": rng_bit_generator}
