"""Indexing ops on the GPU: gather as an elemental handler, in-place dynamic-update-slice.

gather: the value at an output index is one operand element, found the way XLA defines it
(and the interpreter implements it in ops_indexing.py): output dims split into batch dims
(which pick an index vector from the start indices) and offset dims (positions inside the
slice); each start is clamped so the whole slice fits. One thread per output element, and the
start indices may be computed by the fusion around the gather.

dynamic-update-slice that the plan lets update its operand in place becomes a kernel over the
update's elements only, writing them into the operand's buffer at the clamped start. It moves
raw storage, so it works for every element type.

scatter: the output starts as a device copy of the operand; then one thread per update element
finds its target (XLA skips an update window that does not fit whole) and combines into it
atomically. Only combiners whose result does not depend on the order of duplicate targets
(up to float rounding for add, as on XLA:GPU) are done this way: add, and/or/xor and integer
max/min with CUDA's atomics, float max/min (NaN wins, -0 < +0) with a compare-and-swap loop on
the bits. Others (assignment, where the last update in row-major order wins; arbitrary
combiners; 8/16-bit types; variadic scatter) run on the host.
"""

from __future__ import annotations

import math

from ..codegen.elemental import Elemental
from ..codegen.scalar import NotEmittable, kernel_type
from .kernels import CudaWriter, KernelSpec, assemble, blocks_for, delinearize


def gather(em, instr, index):
    if em.flat:
        raise NotEmittable("gather needs the full index")
    operand, indices = instr.operands
    if indices.shape.dtype == "u64":
        raise NotEmittable("gather with u64 start indices")  # beyond int64 arithmetic
    attrs = instr.attrs
    ivd = attrs["index_vector_dim"]
    sizes = list(attrs["slice_sizes"])
    offset_dims = list(attrs.get("offset_dims", ()))
    operand_batching = list(attrs.get("operand_batching_dims", ()))
    dropped = set(attrs.get("collapsed_slice_dims", ())) | set(operand_batching)
    batch = [i for d, i in enumerate(index) if d not in offset_dims]

    def component(k: int) -> str:
        at = list(batch)
        if ivd < indices.shape.rank:
            at.insert(ivd, str(k))
        return em.value(indices, tuple(at))

    starts = ["0"] * operand.shape.rank
    for k, dim in enumerate(attrs["start_index_map"]):
        starts[dim] = f"np.int64({component(k)})"
    for operand_dim, indices_dim in zip(
        operand_batching, attrs.get("start_indices_batching_dims", ())
    ):
        starts[operand_dim] = batch[indices_dim if indices_dim < ivd else indices_dim - 1]
    offsets = iter(index[d] for d in offset_dims)
    operand_index = []
    for dim, (start, size) in enumerate(zip(starts, sizes)):
        high = operand.shape.dims[dim] - size
        clamped = em.index_var(f"min(max({start}, 0), {high})") if start != "0" else "0"
        inside = "0" if dim in dropped else next(offsets)
        operand_index.append(em.index_var(f"{clamped} + {inside}") if inside != "0" else clamped)
    return em.value(operand, tuple(operand_index))


def build_window_kernel(instr, geometry, name: str = "kernel") -> KernelSpec:
    """In-place dynamic-update-slice: p0 (the operand's buffer) gets p1 at the clamped start."""
    operand, update = instr.operand(0).shape, instr.operand(1).shape
    w = CudaWriter()
    em = Elemental(w, {})
    starts = []
    for d, (size, window) in enumerate(zip(operand.dims, update.dims)):
        starts.append(em.bind(f"min(max(np.int64(p{d + 2}[0]), 0), {size - window})", "s"))
    linear = w.var("lin")
    w.line(f"for {linear} in range(cuda.grid(1), {update.numel()}, cuda.gridsize(1)):")
    w.depth += 1
    inner = delinearize(em, linear, update.dims)
    target = ", ".join(f"{s} + {i}" for s, i in zip(starts, inner)) or "0"
    w.line(f"p0[{target}] = p1[{', '.join(inner) or '0'}]")
    count = instr.operand_count
    args = [("param", i) for i in range(count)]
    ndims = [max(op.shape.rank, 1) for op in instr.operands]
    source = assemble(
        w, name, [f"p{i}" for i in range(count)], f"In-place dynamic-update-slice {instr.name}."
    )
    return KernelSpec(
        name,
        source,
        args,
        ndims,
        [op.shape.dtype for op in instr.operands],
        False,
        geometry.threads,
        blocks_for(update.numel(), geometry.threads, geometry),
        "window",
    ).finish()


def window_ok(instr) -> bool:
    return (
        all(op.shape.is_array for op in instr.operands)
        and math.prod(instr.operand(1).shape.dims) > 0
    )


_NATIVE = {
    "add": ("add", {"f32", "f64", "s32", "u32", "s64", "u64"}),
    "and": ("and_", {"s32", "u32", "s64", "u64"}),
    "or": ("or_", {"s32", "u32", "s64", "u64"}),
    "xor": ("xor", {"s32", "u32", "s64", "u64"}),
    "maximum": ("max", {"s32", "u32", "s64", "u64"}),
    "minimum": ("min", {"s32", "u32", "s64", "u64"}),
}
_BITS = {"f32": "s32", "f64": "s64"}  # float max/min: compare-and-swap on the bit pattern


def _combiner(instr) -> tuple[str, str]:
    """(kind, atomic op): ("native", "add"), ("cas", "fmax"), ...; NotEmittable otherwise."""
    dtype, root = instr.shape.dtype, instr.attrs["to_apply"].root
    if instr.operand_count != 3 or instr.shape.is_tuple or instr.shape.rank == 0:
        raise NotEmittable("variadic or scalar scatter")
    if (
        sorted(
            getattr(op, "parameter_number", -1) for op in root.operands if op.opcode == "parameter"
        )
        != [0, 1]
        or root.operand_count != 2
    ):
        raise NotEmittable("scatter combiner is not op(p0, p1)")
    if root.opcode in ("maximum", "minimum") and dtype in _BITS:
        return "cas", "fmax" if root.opcode == "maximum" else "fmin"
    if root.opcode in _NATIVE and dtype in _NATIVE[root.opcode][1]:
        return "native", _NATIVE[root.opcode][0]
    raise NotEmittable(f"scatter combining with {root.opcode} on {dtype} needs ordered updates")


def build_scatter_kernel(instr, geometry, name: str = "kernel") -> KernelSpec:
    """o0 (the output, flat, already holding the operand) gets every fitting update combined."""
    kind, op = _combiner(instr)
    operand, indices, updates = (o.shape for o in instr.operands)
    if indices.dtype == "u64":
        raise NotEmittable("scatter with u64 indices")
    attrs = instr.attrs
    ivd = attrs["index_vector_dim"]
    window_dims = list(attrs.get("update_window_dims", ()))
    input_batching = list(attrs.get("input_batching_dims", ()))
    skipped = set(attrs.get("inserted_window_dims", ())) | set(input_batching)
    w = CudaWriter()
    em = Elemental(w, {})
    linear = w.var("lin")
    w.line(f"for {linear} in range(cuda.grid(1), {updates.numel()}, cuda.gridsize(1)):")
    w.depth += 1
    u = delinearize(em, linear, updates.dims)
    batch = [i for d, i in enumerate(u) if d not in window_dims]

    def index_at(k: int) -> str:
        at = list(batch)
        if ivd < indices.rank:
            at.insert(ivd, str(k))
        return em.bind(f"np.int64(p1[{', '.join(at) or '0'}])", "s")

    starts = ["0"] * operand.rank
    for k, dim in enumerate(attrs["scatter_dims_to_operand_dims"]):
        starts[dim] = index_at(k)
    for operand_dim, indices_dim in zip(
        input_batching, attrs.get("scatter_indices_batching_dims", ())
    ):
        starts[operand_dim] = batch[indices_dim if indices_dim < ivd else indices_dim - 1]
    # Window dims of the operand pair up, in order, with the update's window dims.
    paired = [d for d in range(operand.rank) if d not in skipped]
    size = {d: updates.dims[w_dim] for d, w_dim in zip(paired, window_dims)}
    offset = {d: u[w_dim] for d, w_dim in zip(paired, window_dims)}
    checks, terms = [], []
    for d in range(operand.rank):
        checks.append(f"0 <= {starts[d]} <= {operand.dims[d] - size.get(d, 1)}")
        position = f"{starts[d]} + {offset[d]}" if d in offset else starts[d]
        stride = math.prod(operand.dims[d + 1 :])
        terms.append(f"({position})" + (f" * {stride}" if stride != 1 else ""))
    value = em.bind(f"p2[{', '.join(u) or '0'}]", "v")
    w.line(f"if {' and '.join(checks)}:")  # XLA skips a window that does not fit whole
    w.depth += 1
    at = em.bind(" + ".join(terms), "t")
    if kind == "native":
        w.line(f"cuda.atomic.{op}(o0, {at}, {value})")
    else:
        bits, ftype = kernel_type(_BITS[instr.shape.dtype]), kernel_type(instr.shape.dtype)
        w.lines += [
            f"{'    ' * w.depth}{line}"
            for line in (
                f"old = o0[{at}]",
                "while True:",
                f"    new = h.bitcast(h.{op}(h.bitcast(old, {ftype}), {value}), {bits})",
                f"    seen = cuda.atomic.cas(o0, {at}, old, new)",
                "    if seen == old:",
                "        break",
                "    old = seen",
            )
        ]
    out_dtype = _BITS[instr.shape.dtype] if kind == "cas" else instr.shape.dtype
    source = assemble(w, name, ["o0", "p1", "p2"], f"Atomic scatter {instr.name}.")
    return KernelSpec(
        name,
        source,
        [("out", 0), ("param", 1), ("param", 2)],
        [1, max(indices.rank, 1), max(updates.rank, 1)],
        [out_dtype, indices.dtype, updates.dtype],
        False,
        geometry.threads,
        blocks_for(updates.numel(), geometry.threads, geometry),
        "scatter",
    ).finish()
