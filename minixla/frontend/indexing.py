"""NumPy indexing of traced arrays, and functional updates `x.at[idx].set/add/mul/min/max`.

Basic indices (ints, slices with any step, None, Ellipsis) become reverse + slice + reshape; a
traced integer scalar becomes a dynamic-slice. Integer arrays (and static boolean masks) are
advanced indices lowered to one gather, placed as NumPy places them: where the first advanced
index was if they are adjacent, else in front. Updates scatter into the flattened array at the
positions `arange(x.size).reshape(x.shape)[idx]` (computed on the host when the index is
static), so every index form `getitem` accepts works for `.at[]` too. Traced out-of-range
indices are clamped (HLO gather/dynamic-slice semantics); static ones raise.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .errors import FrontendIndexError, FrontendTypeError
from .numpy_api import (
    _builder,
    add,
    asarray,
    broadcast_arrays,
    broadcast_to,
    cast,
    constant,
    less,
    where,
)
from .numpy_creation import iota
from .numpy_shape import reshape, transpose
from .ops_core import DynamicSlice, Gather, Reverse, Scatter, Slice
from .pytree import flatten
from .tracer import Tracer


def _is_array_index(item) -> bool:
    if isinstance(item, Tracer):
        return item.ndim > 0 or item.dtype == np.bool_
    return isinstance(item, (np.ndarray, list))


def _normalize(index, ndim: int) -> list:
    """The index as a list of items covering every dim: Ellipsis expanded, lists and static
    masks turned into integer arrays, trailing full slices added."""
    items = list(index) if isinstance(index, tuple) else [index]
    out = []
    for item in items:
        if isinstance(item, list) or (isinstance(item, np.ndarray) and item.ndim > 0):
            item = np.asarray(item)
            if item.dtype == np.bool_:
                out.extend(np.nonzero(item))
                continue
            if item.dtype.kind not in "iu":
                raise FrontendIndexError(
                    f"arrays used as indices must be of integer type, got {item.dtype}"
                )
        elif isinstance(item, Tracer):
            if item.dtype == np.bool_:
                raise FrontendIndexError(
                    "a traced boolean mask gives a data-dependent shape; use mnp.where instead"
                )
            if dt.kind(item.dtype) != dt.INT:
                raise FrontendIndexError(f"traced indices must be integers, got {item.dtype}")
        elif isinstance(item, (bool, np.bool_)):
            raise FrontendIndexError("boolean scalar indices are not supported")
        elif isinstance(item, (np.integer, np.ndarray)):
            item = int(item)
        elif not (item is None or item is Ellipsis or isinstance(item, (int, slice))):
            raise FrontendIndexError(
                f"unsupported index {item!r:.60} of type {type(item).__name__}"
            )
        out.append(item)
    if sum(item is Ellipsis for item in out) > 1:
        raise FrontendIndexError("an index can only have a single ellipsis ('...')")
    used = sum(item is not None and item is not Ellipsis for item in out)
    if used > ndim:
        raise FrontendIndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed"
        )
    fill = [slice(None)] * (ndim - used)
    at = next((k for k, item in enumerate(out) if item is Ellipsis), None)
    return out + fill if at is None else out[:at] + fill + out[at + 1 :]


def _static_int(i: int, n: int, axis: int) -> int:
    if not -n <= i < n:
        raise FrontendIndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
    return i % n


def getitem(x, index) -> Tracer:
    tracer = asarray(x)
    items = _normalize(index, tracer.ndim)
    if any(_is_array_index(i) for i in items):
        return _advanced(tracer, items)
    return _basic(tracer, items)


def _basic(tracer: Tracer, items: list) -> Tracer:
    starts, limits, strides, reverse, dynamic = [], [], [], [], {}
    out_shape, axis = [], 0
    for item in items:
        if item is None:
            out_shape.append(1)
            continue
        n = tracer.shape[axis]
        start, limit, step = 0, n, 1
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            count = len(range(start, stop, step))
            if step < 0:  # read the reversed dim forwards
                reverse.append(axis)
                start, step = n - 1 - start, -step
            limit = start + (count - 1) * step + 1 if count else start
            out_shape.append(count)
        elif isinstance(item, Tracer):
            dynamic[axis] = item
        else:
            start = _static_int(item, n, axis)
            limit = start + 1
        starts.append(start)
        limits.append(limit)
        strides.append(step)
        axis += 1
    op = tracer.op
    if reverse:
        op = Reverse(op, reverse)
    if (starts, limits, strides) != ([0] * len(starts), list(tracer.shape), [1] * len(starts)):
        op = Slice(op, starts, limits, strides)
    if dynamic:
        op = _dynamic_slice(op, dynamic)
    return reshape(Tracer(op, tracer.weak), out_shape)


def _dynamic_slice(op, dynamic: dict):
    index_dtype = dt.default_dtype(dt.INT)
    starts, sizes = [], []
    for axis, n in enumerate(op.dims):
        if axis in dynamic:
            i = cast(dynamic[axis], index_dtype)
            starts.append(where(less(i, 0), add(i, n), i).op)
            sizes.append(1)
        else:
            starts.append(_builder().constant(np.zeros((), index_dtype)))
            sizes.append(n)
    return DynamicSlice(op, starts, sizes)


def _advanced(tracer: Tracer, items: list) -> Tracer:
    # None becomes a size-1 dim indexed by a full slice
    if any(item is None for item in items):
        shape, dims = [], iter(tracer.shape)
        for item in items:
            shape.append(1 if item is None else next(dims))
        tracer = reshape(tracer, shape)
        items = [slice(None) if item is None else item for item in items]
    # apply slices first; then every remaining non-slice item is an advanced index
    sliced = [item if isinstance(item, slice) else slice(None) for item in items]
    tracer = _basic(tracer, sliced)
    positions = [k for k, item in enumerate(items) if not isinstance(item, slice)]
    index_dtype = np.dtype(np.int32)
    arrays = []
    for k in positions:
        n, item = tracer.shape[k], items[k]
        if isinstance(item, Tracer):
            i = cast(item, index_dtype)
            arrays.append(where(less(i, 0), add(i, n), i))
        else:
            host = np.asarray(item)
            if host.size and (host.min() < -n or host.max() >= n):
                bad = host.min() if host.min() < -n else host.max()
                raise FrontendIndexError(f"index {bad} is out of bounds for axis {k} with size {n}")
            arrays.append(constant(np.where(host < 0, host + n, host), index_dtype))
    arrays = broadcast_arrays(*arrays)
    batch = arrays[0].shape
    indices = reshape_stack(arrays)
    rest = [k for k in range(tracer.ndim) if k not in positions]
    moved = transpose(tracer, positions + rest)
    nb, k = len(batch), len(positions)
    op = Gather(
        moved.op,
        indices.op,
        offset_dims=range(nb, nb + len(rest)),
        collapsed_slice_dims=range(k),
        start_index_map=range(k),
        index_vector_dim=nb,
        slice_sizes=[1] * k + [tracer.shape[r] for r in rest],
    )
    out = Tracer(op, tracer.weak)
    if positions == list(range(positions[0], positions[0] + k)) and positions[0] > 0:
        p = positions[0]  # adjacent advanced indices keep their place
        perm = list(range(nb, nb + p)) + list(range(nb)) + list(range(nb + p, out.ndim))
        out = transpose(out, perm)
    return out


def reshape_stack(arrays: list[Tracer]) -> Tracer:
    """Index arrays of one shape B stacked into B + (k,): the gather's index vectors."""
    from .numpy_shape import concatenate, expand_dims

    return concatenate([expand_dims(a, -1) for a in arrays], -1)


def take_static(tracer: Tracer, indices: np.ndarray, axis: int) -> Tracer:
    return getitem(tracer, (slice(None),) * axis + (np.asarray(indices),))


def take(x, indices, axis=None) -> Tracer:
    tracer = asarray(x)
    if axis is None:
        tracer, axis = reshape(tracer, -1), 0
    return getitem(tracer, (slice(None),) * (axis % tracer.ndim) + (indices,))


# -- functional updates ---------------------------------------------------------------------
class AtIndexer:
    """`x.at[idx]`: the NumPy index of a functional update."""

    def __init__(self, array: Tracer):
        self.array = array

    def __getitem__(self, index) -> "_AtRef":
        return _AtRef(self.array, index)


class _AtRef:
    def __init__(self, array: Tracer, index):
        self.array, self.index = array, index

    def get(self) -> Tracer:
        return getitem(self.array, self.index)

    def set(self, values) -> Tracer:
        return _scatter(self.array, self.index, values, "set")

    def add(self, values) -> Tracer:
        return _scatter(self.array, self.index, values, "add")

    def multiply(self, values) -> Tracer:
        return _scatter(self.array, self.index, values, "multiply")

    mul = multiply

    def min(self, values) -> Tracer:
        return _scatter(self.array, self.index, values, "minimum")

    def max(self, values) -> Tracer:
        return _scatter(self.array, self.index, values, "maximum")


def _positions(tracer: Tracer, index) -> Tracer:
    """Flat positions of the elements `index` selects, shaped like tracer[index]."""
    index_dtype = np.int32
    leaves, _ = flatten(index if isinstance(index, tuple) else (index,))
    if not any(isinstance(leaf, Tracer) for leaf in leaves):
        flat = np.arange(tracer.size, dtype=index_dtype).reshape(tracer.shape)
        try:
            return constant(flat[index])
        except IndexError as exc:
            raise FrontendIndexError(str(exc)) from None
    return getitem(reshape(iota(index_dtype, (tracer.size,)), tracer.shape), index)


def _combiner(builder, update: str, dtype: str):
    if update != "set":
        return builder.reducer(update, dtype)
    key = ("set", dtype)
    if key not in builder._reducers:
        from ..ir import Shape

        scalar = Shape.array(dtype, ())
        builder._reducers[key] = builder._root().computation(
            lambda old, new: new, [scalar, scalar], f"set_{dtype}"
        )
    return builder._reducers[key]


def _scatter(x, index, values, update: str) -> Tracer:
    tracer = asarray(x)
    if update != "set" and tracer.dtype == np.bool_ and update in ("add", "multiply"):
        raise FrontendTypeError(f"at[].{update} does not accept bool arrays")
    positions = _positions(tracer, index)
    updates = broadcast_to(cast(values, tracer.dtype), positions.shape)
    flat = reshape(tracer, (-1,))
    builder = _builder()
    combiner = _combiner(builder, update, dt.hlo_name(tracer.dtype))
    op = Scatter(
        flat.op,
        reshape(positions, (-1, 1)).op,
        reshape(updates, (-1,)).op,
        combiner,
        update_window_dims=(),
        inserted_window_dims=(0,),
        scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1,
    )
    return reshape(Tracer(op, tracer.weak), tracer.shape)
