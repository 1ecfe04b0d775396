"""Interpreter handlers for gather and scatter, vectorized with NumPy fancy indexing.

Both ops first turn the index array into one start vector per batch position (index vector dim
moved last, start_index_map / scatter_dims_to_operand_dims applied, batching dims filled from
the batch position itself), then build full operand index arrays for every element of the slice
or update window.

Out-of-range starts follow XLA: gather clamps each start so the whole slice fits; scatter skips
an update window whose full extent does not fit. Duplicate scatter targets are combined in the
row-major order of the update elements.
"""

from __future__ import annotations

import numpy as np

from ..ir.opcodes import ELEMENTWISE
from .evaluator import as_dtype

# Ops a scatter combiner may use and still run on whole vectors of elements at once.
_VECTOR_SAFE = {"parameter", "constant", "tuple", "get-tuple-element"}

# Combiners `op(p0, p1)` that ufunc.at applies exactly. Float maximum/minimum are absent: XLA
# orders -0 below +0, which NumPy does not, so they go through the interpreter's own op.
_UFUNCS = {
    "add": np.add,
    "multiply": np.multiply,
    "or": np.bitwise_or,
    "and": np.bitwise_and,
    "xor": np.bitwise_xor,
}
_INT_UFUNCS = {"maximum": np.maximum, "minimum": np.minimum}


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """The indices as int64 with the index vector dim last (an implicit trailing 1 if absent)."""
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    else:
        indices = np.moveaxis(indices, index_vector_dim, -1)
    if indices.dtype == np.uint64:  # keep huge values huge rather than wrapping negative
        indices = np.minimum(indices, np.uint64(np.iinfo(np.int64).max))
    return indices.astype(np.int64)


def _starts(indices, operand_rank, index_map, operand_batching, indices_batching, ivd):
    """Start vectors in operand space, shape batch_shape + (operand_rank,)."""
    batch_shape = indices.shape[:-1]
    starts = np.zeros(batch_shape + (operand_rank,), np.int64)
    for k, dim in enumerate(index_map):
        starts[..., dim] = indices[..., k]
    for operand_dim, indices_dim in zip(operand_batching, indices_batching):
        # the batch position along this indices dim is the start in the operand batching dim
        axis = indices_dim if indices_dim < ivd else indices_dim - 1
        iota_shape = [1] * len(batch_shape)
        iota_shape[axis] = batch_shape[axis]
        starts[..., operand_dim] = np.arange(batch_shape[axis]).reshape(iota_shape)
    return starts


def _along(values: np.ndarray, axis: int, rank: int) -> np.ndarray:
    """A 1-D array reshaped to lie along `axis` of a rank-`rank` broadcast."""
    shape = [1] * rank
    shape[axis] = values.size
    return values.reshape(shape)


# ---- gather -----------------------------------------------------------------------------------


def _gather(ev, instr, operands):
    operand, indices = operands
    attrs = instr.attrs
    ivd = attrs["index_vector_dim"]
    sizes = np.array(attrs["slice_sizes"], np.int64)
    if not sizes.all():  # an empty slice, even of a collapsed dim: zeros, as XLA simplifies it
        return np.zeros(instr.shape.dims, instr.shape.numpy_dtype)
    offset_dims = attrs.get("offset_dims", ())
    operand_batching = attrs.get("operand_batching_dims", ())
    dropped = set(attrs.get("collapsed_slice_dims", ())) | set(operand_batching)
    starts = _starts(
        _index_vectors(indices, ivd),
        operand.ndim,
        attrs["start_index_map"],
        operand_batching,
        attrs.get("start_indices_batching_dims", ()),
        ivd,
    )
    starts = np.clip(starts, 0, np.array(operand.shape, np.int64) - sizes)
    batch_shape, rank = starts.shape[:-1], operand.ndim
    full_rank = len(batch_shape) + rank
    index = tuple(
        starts[..., dim].reshape(batch_shape + (1,) * rank)
        + _along(np.arange(sizes[dim]), len(batch_shape) + dim, full_rank)
        for dim in range(rank)
    )
    window = operand[index] if rank else np.broadcast_to(operand, batch_shape).copy()
    offset_sizes = tuple(int(sizes[d]) for d in range(rank) if d not in dropped)
    window = window.reshape(batch_shape + offset_sizes)  # dropped dims all have size 1
    # output dim j is the next offset dim if j is in offset_dims, else the next batch dim
    batch_axes = iter(range(len(batch_shape)))
    offset_axes = iter(range(len(batch_shape), window.ndim))
    perm = [next(offset_axes) if j in offset_dims else next(batch_axes) for j in range(window.ndim)]
    return as_dtype(np.asarray(window.transpose(perm), order="C"), instr.shape)


# ---- scatter ----------------------------------------------------------------------------------


def _scatter_targets(instr, operand_shape, indices, update_shape):
    """Flat operand positions of the in-bounds update elements, and the mask selecting those
    elements from the row-major flattened updates."""
    attrs = instr.attrs
    ivd = attrs["index_vector_dim"]
    window_dims = tuple(attrs.get("update_window_dims", ()))
    input_batching = attrs.get("input_batching_dims", ())
    skipped = set(attrs.get("inserted_window_dims", ())) | set(input_batching)
    starts = _starts(
        _index_vectors(indices, ivd),
        len(operand_shape),
        attrs["scatter_dims_to_operand_dims"],
        input_batching,
        attrs.get("scatter_indices_batching_dims", ()),
        ivd,
    )
    rank, update_rank = len(operand_shape), len(update_shape)
    window_operand_dims = [d for d in range(rank) if d not in skipped]
    window_size = np.ones(rank, np.int64)
    for update_dim, dim in zip(window_dims, window_operand_dims):
        window_size[dim] = update_shape[update_dim]
    # XLA skips the whole window when any part of it falls outside the operand
    fits = np.all((starts >= 0) & (starts + window_size <= np.array(operand_shape)), axis=-1)
    mask = np.broadcast_to(np.expand_dims(fits, window_dims), update_shape).ravel()
    coords = []
    for dim in range(rank):
        coord = np.expand_dims(starts[..., dim], window_dims)
        if dim in window_operand_dims:
            update_dim = window_dims[window_operand_dims.index(dim)]
            coord = coord + _along(np.arange(update_shape[update_dim]), update_dim, update_rank)
        coords.append(np.broadcast_to(coord, update_shape).ravel()[mask])
    if rank == 0:
        return np.zeros(int(mask.sum()), np.int64), mask
    return np.ravel_multi_index(coords, operand_shape), mask


def _fast_ufunc(comp, count: int, dtype: np.dtype):
    """The ufunc equal to a combiner `op(p0, p1)`, 'assign' for `p1`, or None."""
    root = comp.root
    if count != 1 or dtype.kind not in "biufc":
        return None
    if root.opcode == "parameter":
        return "assign" if root.parameter_number == 1 else "keep"
    params = [o.parameter_number if o.opcode == "parameter" else None for o in root.operands]
    if len(params) != 2 or set(params) != {0, 1}:
        return None
    if root.opcode in _UFUNCS:
        return _UFUNCS[root.opcode]
    return _INT_UFUNCS.get(root.opcode) if dtype.kind in "biu" else None


def _occurrence_rank(positions: np.ndarray) -> np.ndarray:
    """For each entry, how many earlier entries hit the same position."""
    order = np.argsort(positions, kind="stable")
    ordered = positions[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]] if ordered.size else np.zeros(0, bool)
    group_start = np.maximum.accumulate(np.where(first, np.arange(ordered.size), 0))
    rank = np.empty_like(positions)
    rank[order] = np.arange(ordered.size) - group_start
    return rank


def _combine_general(ev, comp, outs, positions, values):
    """Applies the combiner in rounds: round r takes each position's r-th update, so positions
    within a round are distinct and one vector call covers them; sequential order is kept."""
    vectorizable = all(
        i.opcode in _VECTOR_SAFE or i.opdef.kind == ELEMENTWISE for i in comp.post_order()
    )
    if not vectorizable:  # e.g. a combiner with broadcast/reshape: one element at a time
        for k, pos in enumerate(positions):
            _store(
                outs, [pos], ev.apply_scalar(comp, [o[pos] for o in outs] + [v[k] for v in values])
            )
        return
    rank = _occurrence_rank(positions)
    for r in range(int(rank.max(initial=-1)) + 1):
        chosen = rank == r
        pos = positions[chosen]
        result = ev.apply_scalar(comp, [o[pos] for o in outs] + [v[chosen] for v in values])
        _store(outs, pos, result)


def _store(outs, pos, result):
    results = result if isinstance(result, tuple) else (result,)
    for out, value in zip(outs, results):
        out[pos] = np.asarray(value).astype(out.dtype, copy=False)


def _scatter(ev, instr, operands):
    count = (len(operands) - 1) // 2
    inputs, indices, updates = operands[:count], operands[count], operands[count + 1 :]
    shape = inputs[0].shape
    positions, mask = _scatter_targets(instr, shape, indices, updates[0].shape)
    outs = [np.array(x, order="C").reshape(-1) for x in inputs]  # fresh copies
    # updates of another float type (mixed precision) meet the combiner as the operand's type
    values = [u.ravel()[mask].astype(o.dtype, copy=False) for u, o in zip(updates, outs)]
    comp = instr.attrs["to_apply"]
    fast = _fast_ufunc(comp, count, outs[0].dtype)
    if fast == "assign":  # last write wins: keep each position's final update
        last = positions.size - 1 - np.unique(positions[::-1], return_index=True)[1]
        outs[0][positions[last]] = values[0][last]
    elif fast is not None and fast != "keep":
        fast.at(outs[0], positions, values[0].astype(outs[0].dtype, copy=False))
    elif fast is None and positions.size:
        _combine_general(ev, comp, outs, positions, values)
    results = [out.reshape(shape) for out in outs]
    if count == 1:
        return as_dtype(results[0], instr.shape)
    return tuple(as_dtype(r, s) for r, s in zip(results, instr.shape.tuple_shapes))


HANDLERS = {"gather": _gather, "scatter": _scatter}
