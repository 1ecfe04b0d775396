"""`minixla.numpy` shape manipulation: reshape, transpose, concatenate, pad, flip, roll, ...

All of these are static: sizes, axes and shifts must be Python values while tracing.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import asarray, broadcast_to, cast, typeof
from .ops_core import Concatenate, Pad, Reshape, Reverse, Slice, Transpose
from .tracer import Tracer


def normalize_axis(axis: int, ndim: int, name: str = "axis") -> int:
    if not -ndim <= axis < builtins.max(ndim, 1):
        raise FrontendShapeError(f"{name} {axis} is out of bounds for an array of dimension {ndim}")
    return axis % builtins.max(ndim, 1)


def normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """Sorted, unique axes; None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = tuple(sorted({normalize_axis(int(a), ndim) for a in axes}))
    if len(out) != len(axes):
        raise FrontendShapeError(f"repeated axis in {axis}")
    return out


def _wrap(op, like: Tracer) -> Tracer:
    return Tracer(op, like.weak)


@api
def reshape(x, shape, order: str = "C") -> Tracer:
    if order != "C":
        raise FrontendTypeError("only C-order reshapes are supported")
    tracer = asarray(x)
    shape = [shape] if isinstance(shape, (int, np.integer)) else [int(s) for s in shape]
    if shape.count(-1) > 1:
        raise FrontendShapeError("can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = int(np.prod([s for s in shape if s != -1]))
        if known == 0 or tracer.size % known:
            raise FrontendShapeError(
                f"cannot reshape array of size {tracer.size} into shape {tuple(shape)}"
            )
        shape[shape.index(-1)] = tracer.size // known
    if int(np.prod(shape)) != tracer.size:
        raise FrontendShapeError(
            f"cannot reshape array of size {tracer.size} into shape {tuple(shape)}"
        )
    if tuple(shape) == tracer.shape:
        return tracer
    return _wrap(Reshape(tracer.op, shape), tracer)


@api
def ravel(x) -> Tracer:
    return reshape(x, -1)


@api
def transpose(x, axes=None) -> Tracer:
    tracer = asarray(x)
    if axes is None:
        axes = tuple(reversed(range(tracer.ndim)))
    axes = tuple(normalize_axis(int(a), tracer.ndim) for a in axes)
    if sorted(axes) != list(range(tracer.ndim)):
        raise FrontendShapeError(f"axes {axes} are not a permutation of {tracer.ndim} dims")
    if axes == tuple(range(tracer.ndim)):
        return tracer
    return _wrap(Transpose(tracer.op, axes), tracer)


@api
def swapaxes(x, axis1: int, axis2: int) -> Tracer:
    tracer = asarray(x)
    perm = list(range(tracer.ndim))
    a, b = normalize_axis(axis1, tracer.ndim), normalize_axis(axis2, tracer.ndim)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(tracer, perm)


@api
def moveaxis(x, source: int, destination: int) -> Tracer:
    tracer = asarray(x)
    perm = list(range(tracer.ndim))
    perm.insert(
        normalize_axis(destination, tracer.ndim), perm.pop(normalize_axis(source, tracer.ndim))
    )
    return transpose(tracer, perm)


@api
def expand_dims(x, axis) -> Tracer:
    tracer = asarray(x)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    rank = tracer.ndim + len(axes)
    new = normalize_axes(axes, rank)
    dims = iter(tracer.shape)
    return reshape(tracer, [1 if i in new else next(dims) for i in range(rank)])


@api
def squeeze(x, axis=None) -> Tracer:
    tracer = asarray(x)
    if axis is None:
        axes = tuple(i for i, d in enumerate(tracer.shape) if d == 1)
    else:
        axes = normalize_axes(axis, tracer.ndim)
        if any(tracer.shape[a] != 1 for a in axes):
            raise FrontendShapeError(
                f"cannot squeeze axis {axis} of shape {tracer.shape}: its size is not 1"
            )
    return reshape(tracer, [d for i, d in enumerate(tracer.shape) if i not in axes])


@api
def atleast_1d(x) -> Tracer:
    tracer = asarray(x)
    return reshape(tracer, (1,)) if tracer.ndim == 0 else tracer


@api
def concatenate(arrays, axis: int = 0) -> Tracer:
    if not arrays:
        raise FrontendShapeError("need at least one array to concatenate")
    dtype, weak = dt.result_type(*(typeof(a) for a in arrays))
    tracers = [cast(a, dtype, weak) for a in arrays]
    if axis is None:
        tracers, axis = [ravel(t) for t in tracers], 0
    if any(t.ndim == 0 for t in tracers):
        raise FrontendShapeError("zero-dimensional arrays cannot be concatenated")
    axis = normalize_axis(axis, tracers[0].ndim)
    if len(tracers) == 1:
        return tracers[0]
    return Tracer(Concatenate([t.op for t in tracers], axis), weak)


@api
def stack(arrays, axis: int = 0) -> Tracer:
    if not arrays:
        raise FrontendShapeError("need at least one array to stack")
    shapes = {asarray(a).shape for a in arrays}
    if len(shapes) != 1:
        raise FrontendShapeError(f"all input arrays must have the same shape, got {sorted(shapes)}")
    rank = len(shapes.pop()) + 1
    axis = normalize_axis(axis, rank)
    return concatenate([expand_dims(a, axis) for a in arrays], axis)


@api
def hstack(arrays) -> Tracer:
    tracers = [atleast_1d(a) for a in arrays]
    return concatenate(tracers, 0 if tracers[0].ndim == 1 else 1)


@api
def vstack(arrays) -> Tracer:
    return concatenate([reshape(a, (1, -1)) if asarray(a).ndim < 2 else a for a in arrays], 0)


def _pad_widths(pad_width, ndim: int) -> list[tuple[int, int]]:
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (ndim, 2))
    if (widths < 0).any():
        raise FrontendShapeError(f"negative pad widths {pad_width}")
    return [(int(lo), int(hi)) for lo, hi in widths]


@api
def pad(x, pad_width, mode: str = "constant", constant_values=0) -> Tracer:
    """Constant, edge and reflect modes, with static widths."""
    tracer = asarray(x)
    widths = _pad_widths(pad_width, tracer.ndim)
    if mode == "constant":
        value = cast(constant_values, tracer.dtype)
        if value.ndim:
            raise FrontendTypeError("pad: constant_values must be a scalar")
        return Tracer(Pad(tracer.op, value.op, [(lo, hi, 0) for lo, hi in widths]), tracer.weak)
    if mode not in ("edge", "reflect"):
        raise FrontendTypeError(f"pad mode {mode!r} is not supported (constant, edge, reflect)")
    for axis, (lo, hi) in enumerate(widths):
        tracer = _pad_axis(tracer, axis, lo, hi, mode)
    return tracer


def _pad_axis(tracer: Tracer, axis: int, lo: int, hi: int, mode: str) -> Tracer:
    from .indexing import take_static

    n = tracer.shape[axis]
    if mode == "edge":
        before, after = [0] * lo, [n - 1] * hi
    else:
        if n < 2 and (lo or hi):
            raise FrontendShapeError("reflect padding needs at least 2 elements")
        before = [_reflect(i, n) for i in range(lo, 0, -1)]
        after = [_reflect(n - 1 + i, n) for i in range(1, hi + 1)]
    index = np.array(before + list(range(n)) + after, dtype=np.int64)
    return take_static(tracer, index, axis)


def _reflect(i: int, n: int) -> int:
    period = 2 * (n - 1)
    i = abs(i) % period
    return i if i < n else period - i


@api
def flip(x, axis=None) -> Tracer:
    tracer = asarray(x)
    axes = normalize_axes(axis, tracer.ndim)
    return _wrap(Reverse(tracer.op, axes), tracer) if axes else tracer


@api
def fliplr(x) -> Tracer:
    return flip(x, 1)


@api
def flipud(x) -> Tracer:
    return flip(x, 0)


@api
def roll(x, shift, axis=None) -> Tracer:
    tracer = asarray(x)
    if axis is None:
        return reshape(roll(ravel(tracer), shift, 0), tracer.shape)
    shifts = (shift,) if isinstance(shift, int) else tuple(shift)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    shifts, axes = np.broadcast_arrays(np.asarray(shifts), np.asarray(axes))
    for s, a in zip(shifts.ravel(), axes.ravel()):
        a = normalize_axis(int(a), tracer.ndim)
        n = tracer.shape[a]
        s = int(s) % n if n else 0
        if s:
            tracer = concatenate(
                [slice_axis(tracer, a, n - s, n), slice_axis(tracer, a, 0, n - s)], a
            )
    return tracer


def slice_axis(tracer: Tracer, axis: int, start: int, stop: int, step: int = 1) -> Tracer:
    starts = [0] * tracer.ndim
    limits = list(tracer.shape)
    strides = [1] * tracer.ndim
    starts[axis], limits[axis], strides[axis] = start, stop, step
    return _wrap(Slice(tracer.op, starts, limits, strides), tracer)


@api
def split(x, indices_or_sections, axis: int = 0) -> list[Tracer]:
    tracer = asarray(x)
    axis = normalize_axis(axis, tracer.ndim)
    n = tracer.shape[axis]
    if isinstance(indices_or_sections, int):
        if n % indices_or_sections:
            raise FrontendShapeError("array split does not result in an equal division")
        step = n // indices_or_sections
        bounds = list(range(0, n + 1, step))
    else:
        bounds = [0] + [builtins.min(int(i), n) for i in indices_or_sections] + [n]
    return [slice_axis(tracer, axis, a, builtins.max(a, b)) for a, b in zip(bounds, bounds[1:])]


@api
def tile(x, reps) -> Tracer:
    tracer = asarray(x)
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    rank = builtins.max(len(reps), tracer.ndim)
    reps = (1,) * (rank - len(reps)) + reps
    tracer = reshape(tracer, (1,) * (rank - tracer.ndim) + tracer.shape)
    # interleave a repeat axis before each axis, broadcast, then merge the pairs
    expanded = reshape(tracer, [d for s in tracer.shape for d in (1, s)])
    target = [d for r, s in zip(reps, tracer.shape) for d in (r, s)]
    return reshape(broadcast_to(expanded, target), [r * s for r, s in zip(reps, tracer.shape)])


@api
def repeat(x, repeats: int, axis=None) -> Tracer:
    tracer = asarray(x)
    if axis is None:
        tracer, axis = ravel(tracer), 0
    axis = normalize_axis(axis, tracer.ndim)
    shape = tracer.shape
    expanded = expand_dims(tracer, axis + 1)
    target = shape[: axis + 1] + (int(repeats),) + shape[axis + 1 :]
    out = shape[:axis] + (shape[axis] * int(repeats),) + shape[axis + 1 :]
    return reshape(broadcast_to(expanded, target), out)


def shape(x) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tracer) else np.shape(x)


def ndim(x) -> int:
    return len(shape(x))


def size(x) -> int:
    return int(np.prod(shape(x), dtype=np.int64))
