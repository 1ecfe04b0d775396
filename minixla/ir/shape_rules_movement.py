"""Shape rules of data-movement ops: broadcast, reshape, slicing, padding, gather/scatter, tuples.

Ops whose text must carry a result shape (reshape, bitcast, slice, dynamic-slice, iota) still
get a rule: it rebuilds the shape from the operands and attributes, so the verifier can compare.
"""

from __future__ import annotations

from math import prod

from .shape_rules_base import (
    array,
    check_reducer,
    declared,
    dim_list,
    fail,
    fmt,
    one_dim,
    operand_array,
    operand_arrays,
    require_declared,
    same_dims_all,
    same_type,
    scalar_of,
    widest,
)
from .shapes import UNBOUNDED, Shape


def broadcast(instr) -> Shape:
    """Result dim dimensions[i] is operand dim i; the other dims come from the declared shape.
    Without one, only a rank-preserving broadcast (a permutation) can be inferred."""
    operand = operand_array(instr, 0)
    target = declared(instr)
    rank = target.rank if target is not None else operand.rank
    if target is not None and not target.is_array:
        raise fail(instr, f"result must be an array, got {fmt(target)}")
    default = () if operand.rank == 0 else None
    dims = dim_list(instr, "dimensions", rank, default=default)
    if len(dims) != operand.rank:
        raise fail(
            instr, f"dimensions={list(dims)} must map each of the operand's {operand.rank} dims"
        )
    if target is None:
        out = [0] * rank
        for i, d in enumerate(dims):
            out[d] = operand.dims[i]
        return array(operand.element_type, out)
    for i, d in enumerate(dims):
        if target.dims[d] != operand.dims[i]:
            raise fail(
                instr,
                f"operand dim {i} (size {operand.dims[i]}) maps to result dim "
                f"{d} of size {target.dims[d]}",
            )
    return array(operand.element_type, target.dims)


def reshape(instr) -> Shape:
    target = require_declared(instr)
    operand = operand_array(instr, 0)
    if not target.is_array:
        raise fail(instr, f"result must be an array, got {fmt(target)}")
    if target.numel() != operand.numel() and not (target.is_dynamic or operand.is_dynamic):
        raise fail(
            instr,
            f"cannot reshape {fmt(operand)} ({operand.numel()} elements) to "
            f"{fmt(target)} ({target.numel()} elements)",
        )
    return array(operand.element_type, target.dims, target.dynamic)


def dynamic_reshape(instr) -> Shape:
    target = require_declared(instr)
    operand = operand_array(instr, 0)
    if instr.operand_count != 1 + target.rank:
        raise fail(
            instr,
            f"needs one size operand per result dim ({target.rank}), got {instr.operand_count - 1}",
        )
    for i in range(1, instr.operand_count):
        if not scalar_of(instr, i, " (a size)").element_type.is_integer:
            raise fail(instr, f"size operand {i} must be an integer scalar")
    bounded = UNBOUNDED not in operand.dims + target.dims
    if bounded and prod(operand.dims) != prod(target.dims):  # bounds hold the same elements
        raise fail(
            instr,
            f"{fmt(operand)} has {prod(operand.dims)} elements at its bounds, "
            f"{fmt(target)} {prod(target.dims)}",
        )
    return array(operand.element_type, target.dims, target.dynamic)


def transpose(instr) -> Shape:
    operand = operand_array(instr, 0)
    perm = dim_list(instr, "dimensions", operand.rank)
    if len(perm) != operand.rank:
        raise fail(instr, f"dimensions={list(perm)} is not a permutation of rank {operand.rank}")
    return array(operand.element_type, [operand.dims[p] for p in perm])


def bitcast(instr) -> Shape:
    """Any declared shape. As in XLA, only a layout-sensitive verifier compares byte sizes
    (physical ones: f32[33712,1024] and f32[33708,1024]{1,0:T(8,128)} agree); minixla's, like
    XLA's default, does not, and `minixla.compile` refuses a bitcast whose physical byte sizes
    differ, since reinterpreting the buffer would read past it or drop part of it
    (runtime/runnable.py)."""
    return require_declared(instr).without_layout()


def slice_(instr) -> Shape:
    operand = operand_array(instr, 0)
    spec = instr.attrs.get("slice")
    if spec is None or len(spec) != operand.rank:
        raise fail(instr, f"slice needs one [start:limit:stride] per dim of {fmt(operand)}")
    dims = []
    for i, (start, limit, stride) in enumerate(spec):
        if stride < 1 or not 0 <= start <= limit <= operand.dims[i]:
            raise fail(
                instr,
                f"slice [{start}:{limit}:{stride}] is out of bounds for dim {i} of {fmt(operand)}",
            )
        dims.append(-(-(limit - start) // stride))
    return array(operand.element_type, dims)


def _start_indices(instr, first: int, rank: int) -> None:
    """Start indices: one integer scalar per dim, or (legacy) one rank-1 vector."""
    indices = operand_arrays(instr, range(first, instr.operand_count))
    if len(indices) == 1 and indices[0].rank == 1:
        ok = indices[0].dims[0] == rank
    else:
        ok = len(indices) == rank and all(s.rank == 0 for s in indices)
    if not ok:
        raise fail(instr, f"needs {rank} scalar start indices, got {[fmt(s) for s in indices]}")
    if (
        any(not s.element_type.is_integer for s in indices)
        or len({s.element_type for s in indices}) > 1
    ):
        raise fail(instr, "start indices must be integers of one type")


def dynamic_slice(instr) -> Shape:
    operand = operand_array(instr, 0)
    _start_indices(instr, 1, operand.rank)
    sizes = tuple(instr.attrs.get("dynamic_slice_sizes", ()))
    if len(sizes) != operand.rank or any(not 0 <= s <= d for s, d in zip(sizes, operand.dims)):
        raise fail(instr, f"dynamic_slice_sizes={list(sizes)} do not fit {fmt(operand)}")
    return array(operand.element_type, sizes)


def dynamic_update_slice(instr, mixed: bool = False) -> Shape:
    operand, update = operand_arrays(instr, (0, 1))
    _start_indices(instr, 2, operand.rank)
    if (
        not same_type(update, operand, mixed)
        or update.rank != operand.rank
        or any(u > d for u, d in zip(update.dims, operand.dims))
    ):
        raise fail(instr, f"update {fmt(update)} does not fit into {fmt(operand)}")
    return operand.without_layout()


def concatenate(instr, mixed: bool = False) -> Shape:
    shapes = operand_arrays(instr)
    if not shapes:
        raise fail(instr, "needs at least one operand")
    first = shapes[0]
    dim = one_dim(instr, first.rank)
    for shape in shapes[1:]:
        if (
            not same_type(shape, first, mixed)
            or shape.rank != first.rank
            or any(a != b for i, (a, b) in enumerate(zip(shape.dims, first.dims)) if i != dim)
        ):
            raise fail(instr, f"{fmt(shape)} cannot be joined to {fmt(first)} along dim {dim}")
    dims = list(first.dims)
    dims[dim] = sum(s.dims[dim] for s in shapes)
    return array(widest(shapes), dims)


def pad(instr, mixed: bool = False) -> Shape:
    operand = operand_array(instr, 0)
    value = scalar_of(instr, 1, " (the padding value)")
    if not same_type(value, operand, mixed):
        raise fail(instr, f"padding value {fmt(value)} must have type {operand.dtype}")
    padding = instr.attrs.get("padding", ())
    if len(padding) != operand.rank:
        raise fail(
            instr, f"padding has {len(padding)} dims, operand {fmt(operand)} has {operand.rank}"
        )
    dims = []
    for i, (lo, hi, interior) in enumerate(padding):
        size = operand.dims[i]
        out = lo + hi + size + interior * max(size - 1, 0)
        if interior < 0 or out < 0:
            raise fail(instr, f"padding {lo}_{hi}_{interior} of dim {i} (size {size}) is invalid")
        dims.append(out)
    return array(operand.element_type, dims)


def _batch_dims(instr, indices: Shape, index_vector_dim: int) -> tuple[list[int], int]:
    """Dims of the index array other than the index vector dim (which may be the implicit
    trailing one), and the index vector length."""
    if not 0 <= index_vector_dim <= indices.rank:
        raise fail(instr, f"index_vector_dim={index_vector_dim} is out of range for {fmt(indices)}")
    if not indices.element_type.is_integer:
        raise fail(instr, f"indices must be integers, got {fmt(indices)}")
    dims = list(indices.dims) + ([1] if index_vector_dim == indices.rank else [])
    return dims[:index_vector_dim] + dims[index_vector_dim + 1 :], dims[index_vector_dim]


def _check_batching(instr, operand, indices, op_names, idx_names) -> None:
    op_dims = dim_list(instr, op_names, operand.rank, default=())
    idx_dims = dim_list(instr, idx_names, indices.rank, default=())
    if len(op_dims) != len(idx_dims) or any(
        operand.dims[a] != indices.dims[b] for a, b in zip(op_dims, idx_dims)
    ):
        raise fail(instr, f"{op_names} and {idx_names} must pair dims of equal size")


def gather(instr) -> Shape:
    operand, indices = operand_arrays(instr)
    attrs = instr.attrs
    batch, vector = _batch_dims(instr, indices, attrs["index_vector_dim"])
    offset = tuple(attrs["offset_dims"])
    collapsed = dim_list(instr, "collapsed_slice_dims", operand.rank)
    start_map = dim_list(instr, "start_index_map", operand.rank)
    batching = dim_list(instr, "operand_batching_dims", operand.rank, default=())
    _check_batching(instr, operand, indices, "operand_batching_dims", "start_indices_batching_dims")
    sizes = tuple(attrs["slice_sizes"])
    if len(start_map) != vector:
        raise fail(
            instr, f"start_index_map has {len(start_map)} entries, the index vector has {vector}"
        )
    if len(sizes) != operand.rank or any(not 0 <= s <= d for s, d in zip(sizes, operand.dims)):
        raise fail(instr, f"slice_sizes={list(sizes)} do not fit {fmt(operand)}")
    if set(collapsed) & set(batching) or any(sizes[d] > 1 for d in collapsed + batching):
        raise fail(instr, "collapsed and batching dims must be distinct and of slice size <= 1")
    window = [s for d, s in enumerate(sizes) if d not in collapsed and d not in batching]
    if len(offset) != len(window):
        raise fail(
            instr, f"offset_dims has {len(offset)} entries for {len(window)} uncollapsed slice dims"
        )
    rank = len(offset) + len(batch)
    if list(offset) != sorted(set(offset)) or any(not 0 <= d < rank for d in offset):
        raise fail(instr, f"offset_dims={list(offset)} must be sorted and < {rank}")
    window_iter, batch_iter = iter(window), iter(batch)
    dims = [next(window_iter) if d in offset else next(batch_iter) for d in range(rank)]
    return array(operand.element_type, dims)


def scatter(instr) -> Shape:
    """N inputs, the indices, N updates; the result is the input shape(s)."""
    if instr.operand_count % 2 == 0 or instr.operand_count < 3:
        raise fail(instr, f"needs 2N+1 operands, got {instr.operand_count}")
    n = instr.operand_count // 2
    shapes = operand_arrays(instr)
    inputs, indices, updates = shapes[:n], shapes[n], shapes[n + 1 :]
    same_dims_all(instr, inputs, "inputs")
    same_dims_all(instr, updates, "updates")
    operand, attrs = inputs[0], instr.attrs
    batch, vector = _batch_dims(instr, indices, attrs["index_vector_dim"])
    window_dims = tuple(attrs["update_window_dims"])
    inserted = dim_list(instr, "inserted_window_dims", operand.rank)
    batching = dim_list(instr, "input_batching_dims", operand.rank, default=())
    _check_batching(instr, operand, indices, "input_batching_dims", "scatter_indices_batching_dims")
    to_operand = dim_list(instr, "scatter_dims_to_operand_dims", operand.rank)
    if len(to_operand) != vector:
        raise fail(
            instr,
            f"scatter_dims_to_operand_dims has {len(to_operand)} entries, the "
            f"index vector has {vector}",
        )
    update = updates[0]
    if update.rank != len(window_dims) + len(batch) or any(
        not 0 <= d < update.rank for d in window_dims
    ):
        raise fail(instr, f"updates {fmt(update)} need rank {len(window_dims) + len(batch)}")
    if len(window_dims) + len(inserted) + len(batching) != operand.rank or set(inserted) & set(
        batching
    ):
        raise fail(
            instr,
            "update_window_dims, inserted_window_dims and input_batching_dims "
            "must cover the operand's dims once",
        )
    window_bounds = [d for i, d in enumerate(operand.dims) if i not in inserted + batching]
    for w, bound in zip(window_dims, window_bounds):
        if update.dims[w] > bound:
            raise fail(
                instr, f"update window dim {w} ({update.dims[w]}) exceeds the operand bound {bound}"
            )
    scatter_dims = [s for i, s in enumerate(update.dims) if i not in window_dims]
    if scatter_dims != batch:
        raise fail(
            instr, f"update scatter dims {scatter_dims} must equal the index batch dims {batch}"
        )
    check_reducer(
        instr,
        "to_apply",
        [s.element_type for s in inputs],
        [s.element_type for s in updates],
        ignore_fp_precision=True,
    )
    results = [s.without_layout() for s in inputs]
    return results[0] if n == 1 else Shape.tuple_of(results)


def tuple_(instr) -> Shape:
    return Shape.tuple_of(o.shape.without_layout() for o in instr.operands)


def get_tuple_element(instr) -> Shape:
    operand = instr.operand(0).shape
    index = instr.attrs.get("index", -1)
    if not operand.is_tuple or not 0 <= index < len(operand.tuple_shapes):
        raise fail(instr, f"index={index} is not an element of {fmt(operand)}")
    return operand.tuple_shapes[index].without_layout()


def get_dimension_size(instr) -> Shape:
    one_dim(instr, operand_array(instr, 0).rank)
    return array("s32", ())


def set_dimension_size(instr) -> Shape:
    operand = operand_array(instr, 0)
    dim = one_dim(instr, operand.rank)
    if scalar_of(instr, 1, " (the size)").dtype != "s32":
        raise fail(instr, "the size operand must be s32[]")
    dynamic = list(operand.dynamic or (False,) * operand.rank)
    dynamic[dim] = True
    return array(operand.element_type, operand.dims, dynamic)


def iota(instr) -> Shape:
    target = require_declared(instr)
    dim = instr.attrs.get("iota_dimension", -1)
    if not target.is_array or not 0 <= dim < target.rank:
        raise fail(instr, f"iota_dimension={dim} must be < the rank of {fmt(target)}")
    return target.without_layout()
