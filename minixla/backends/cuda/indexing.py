"""Indexing ops on the GPU: gather as an elemental handler, in-place dynamic-update-slice.

gather: the value at an output index is one operand element, found the way XLA defines it
(and the interpreter implements it in ops_indexing.py): output dims split into batch dims
(which pick an index vector from the start indices) and offset dims (positions inside the
slice); each start is clamped so the whole slice fits. One thread per output element, and the
start indices may be computed by the fusion around the gather.

dynamic-update-slice that the plan lets update its operand in place becomes a kernel over the
update's elements only, writing them into the operand's buffer at the clamped start. It moves
raw storage, so it works for every element type.

scatter runs on the host (fallback.scatter): its combiner sees duplicate targets in row-major
update order, which atomics would not keep for non-commutative or NaN-sensitive combiners.
"""
from __future__ import annotations

import math

from ..cpu.elemental import Elemental
from ..cpu.scalar import NotEmittable
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
    for operand_dim, indices_dim in zip(operand_batching,
                                        attrs.get("start_indices_batching_dims", ())):
        starts[operand_dim] = batch[indices_dim if indices_dim < ivd else indices_dim - 1]
    offsets = iter(index[d] for d in offset_dims)
    operand_index = []
    for dim, (start, size) in enumerate(zip(starts, sizes)):
        high = operand.shape.dims[dim] - size
        clamped = em.index_var(f"min(max({start}, 0), {high})") if start != "0" else "0"
        inside = "0" if dim in dropped else next(offsets)
        operand_index.append(em.index_var(f"{clamped} + {inside}") if inside != "0"
                             else clamped)
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
    source = assemble(w, name, [f"p{i}" for i in range(count)],
                      f"In-place dynamic-update-slice {instr.name}.")
    return KernelSpec(name, source, args, ndims, [op.shape.dtype for op in instr.operands],
                      False, geometry.threads,
                      blocks_for(update.numel(), geometry.threads, geometry), "window").finish()


def window_ok(instr) -> bool:
    return all(op.shape.is_array for op in instr.operands) and \
        math.prod(instr.operand(1).shape.dims) > 0
