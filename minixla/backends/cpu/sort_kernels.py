"""Sort and topk kernels.

* sort: per row, a stable bottom-up merge sort of an index permutation; the comparator (any
  computation, any number of operands) decides whether the right run's head goes strictly
  before the left run's, which is the interpreter's order;
* topk: keys in the float total order, descending for largest; k <= 32 keeps a sorted
  buffer of the k best per row (one pass), larger k a heap of the k best where the row is
  over 8k long (O(n log k)), else sorts the row's keys stably.
"""

from __future__ import annotations

from .kernel_source import OpSource
from .kernels import KernelSpec
from ..codegen.scalar import kernel_type

_SMALL_TOPK = 32  # up to this k, a sorted buffer of k
# above it, a heap of the k best where the row is this many times k (a sort of the whole row
# otherwise): top-50 of [64, 32000] logits sorted every row, 192 ms against XLA's 5
_HEAP_ROWS = 8


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
    src = OpSource(instr)
    axis = instr.attrs["dimensions"][0]
    dims = instr.operand(0).shape.dims
    n = dims[axis]
    count = len(instr.operands)
    dtypes = [op.shape.dtype for op in instr.operands]
    src.scratch("perm", max(n, 1), "int64")
    src.scratch("spare", max(n, 1), "int64")
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
        args += [
            src.load(src.params[k], dtypes[k], right),
            src.load(src.params[k], dtypes[k], left),
        ]
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
    src = OpSource(instr)
    operand = instr.operand(0)
    dims = operand.shape.dims
    axis = len(dims) - 1
    n, k = dims[axis], instr.attrs["k"]
    largest = instr.attrs.get("largest", True)
    dtype = operand.shape.dtype
    values_dtype, indices_dtype = (s.dtype for s in src.out_shapes)
    src.scratch("keys", max(n, 1), "int64")
    src.scratch("best", max(k, 1), "int64")
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
    elif n > _HEAP_ROWS * k:
        _heap_select(src, n, k)
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


def _heap_select(src, n: int, k: int) -> None:
    """`best[:k]` = the k best of `keys[:n]` (smallest key, then lowest index) in order: a
    heap with the worst of them at its root, which a later element replaces only when its key
    is strictly smaller (its index is larger than any kept), then the k sorted stably by key
    after a sort by index. O(n log k) for any input."""
    src.line("filled = 0")
    src.open("t", n)
    src.line("key = keys[t]")
    src.line(f"if filled < {k}:")  # sift up: a parent never better than its children
    src.line("    at = filled")
    src.line("    filled += 1")
    src.line("    while at > 0:")
    src.line("        parent = (at - 1) >> 1")
    src.line("        if keys[best[parent]] > key:")
    src.line("            break")
    src.line("        best[at] = best[parent]")
    src.line("        at = parent")
    src.line("    best[at] = t")
    src.line("elif key < keys[best[0]]:")  # sift down from the root the new element replaces
    src.line("    at = 0")
    src.line("    while True:")
    src.line("        child = 2 * at + 1")
    src.line(f"        if child >= {k}:")
    src.line("            break")
    src.line("        c = best[child]")
    src.line(f"        if child + 1 < {k}:")
    src.line("            d = best[child + 1]")
    src.line("            if keys[d] > keys[c] or (keys[d] == keys[c] and d > c):")
    src.line("                child += 1")
    src.line("                c = d")
    src.line("        if keys[c] <= key:")
    src.line("            break")
    src.line("        best[at] = c")
    src.line("        at = child")
    src.line("    best[at] = t")
    src.close()
    src.line(f"chosen = np.sort(best[:{k}])")
    src.line("order = np.argsort(keys[chosen], kind='mergesort')")
    src.open("t", k)
    src.line("best[t] = chosen[order[t]]")
    src.close()
