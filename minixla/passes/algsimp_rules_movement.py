"""Algebraic simplifier rules for data movement: reshape, broadcast, transpose, slices,
concatenate, pad, reverse, dynamic slices, copy and bitcast.

These only move elements, so each rule is exact for every element type.
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.instruction import HloInstruction
from ..reference.custom_call import MEMORY_SPACE_ANNOTATIONS, registered_for_any_backend
from ..reference.xla_custom_calls import BUILDER_MATH
from .graph_utils import same_layout
from .patterns import RuleSet, m, new

MOVEMENT = RuleSet("algsimp")
X = m.Any("x")


def _is_scalar_broadcast(instr) -> bool:
    return instr.opcode == "broadcast" and instr.operand(0).shape.rank == 0


# -- reshape and broadcast ----------------------------------------------------------------------
@MOVEMENT.rule(m.Reshape(X))
def reshape_noop(root, x):
    return x if x.shape.dims == root.shape.dims else None  # reshape(x) to x's dims -> x


@MOVEMENT.rule(m.Reshape(m.Reshape(X, name="inner")))
def reshape_of_reshape(root, x):
    return new("reshape", root.shape, x)  # reshape(reshape(x)) -> reshape(x)


@MOVEMENT.rule(m.Broadcast(X))
def broadcast_noop(root, x):
    # broadcast(x) onto x's own dims in order -> x
    dims = tuple(root.attrs.get("dimensions", ()))
    if x.shape.dims != root.shape.dims or dims != tuple(range(x.shape.rank)):
        return None
    return x


@MOVEMENT.rule(m.Broadcast(m.Broadcast(X, name="inner")))
def broadcast_of_broadcast(root, inner, x):
    # broadcast(broadcast(x, d1), d2) -> broadcast(x, d2[d1])
    outer_dims = root.attrs.get("dimensions", ())
    dims = tuple(outer_dims[d] for d in inner.attrs.get("dimensions", ()))
    return new("broadcast", root.shape, x, dimensions=dims)


@MOVEMENT.rule(m.Broadcast(m.Reshape(X)))
def broadcast_of_scalar_reshape(root, x):
    # broadcast(reshape(s)) -> broadcast(s), s a scalar
    if x.shape.rank != 0:
        return None
    return new("broadcast", root.shape, x, dimensions=())


@MOVEMENT.rule(m.Broadcast(X))
def broadcast_is_reshape(root, x):
    # a broadcast that only inserts size-1 dims, in order, is a reshape
    dims = tuple(root.attrs.get("dimensions", ()))
    if x.shape.rank == 0 or list(dims) != sorted(dims) or x.shape.dims == root.shape.dims:
        return None
    if math.prod(x.shape.dims) != math.prod(root.shape.dims):
        return None
    return new("reshape", root.shape, x)


@MOVEMENT.rule(m.Op(("reshape", "transpose", "reverse", "slice", "dynamic-slice", "copy")))
def movement_of_scalar_broadcast(root):
    # reshape/transpose/reverse/slice/copy of broadcast(scalar) -> broadcast(scalar)
    splat = root.operand(0)
    if not _is_scalar_broadcast(splat) or splat.users != [root]:
        return None
    return new("broadcast", root.shape, splat.operand(0), dimensions=())


# -- transpose ----------------------------------------------------------------------------------
@MOVEMENT.rule(m.Transpose(X))
def transpose_identity(root, x):
    dims = root.attrs["dimensions"]
    return x if tuple(dims) == tuple(range(len(dims))) else None  # transpose(x, id) -> x


@MOVEMENT.rule(m.Transpose(m.Transpose(X, name="inner")))
def transpose_of_transpose(root, inner, x):
    # transpose(transpose(x, p1), p2) -> transpose(x, p1[p2])
    first, second = inner.attrs["dimensions"], root.attrs["dimensions"]
    dims = tuple(first[d] for d in second)
    if dims == tuple(range(len(dims))):
        return x
    return new("transpose", root.shape, x, dimensions=dims)


@MOVEMENT.rule(m.Transpose(X))
def transpose_is_reshape(root, x):
    # a transpose that keeps the order of every dim larger than 1 is a reshape
    dims = root.attrs["dimensions"]
    moved = [d for d in dims if x.shape.dims[d] != 1]
    if moved != sorted(moved) or tuple(dims) == tuple(range(len(dims))):
        return None
    return new("reshape", root.shape, x)


# -- slice, concatenate, pad, reverse -----------------------------------------------------------
@MOVEMENT.rule(m.Slice(X))
def slice_full(root, x):
    # slice(x) that takes everything -> x
    whole = all(
        s == 0 and stride == 1 and limit == d
        for (s, limit, stride), d in zip(root.attrs["slice"], x.shape.dims)
    )
    return x if whole else None


@MOVEMENT.rule(m.Slice(m.Slice(X, name="inner")))
def slice_of_slice(root, inner, x):
    # slice(slice(x, s1:l1:t1), s2:l2:t2) -> slice(x, s1+s2*t1 : ... : t1*t2)
    spec = []
    for (s1, _, t1), (s2, _, t2), size in zip(
        inner.attrs["slice"], root.attrs["slice"], root.shape.dims
    ):
        start, stride = s1 + s2 * t1, t1 * t2
        spec.append((start, start + (size - 1) * stride + 1 if size else start, stride))
    return new("slice", root.shape, x, slice=tuple(spec))


@MOVEMENT.rule(m.Slice(m.Concatenate(name="concat")))
def slice_of_concatenate(root, concat):
    # slice(concat(a, b, ...)) inside one operand -> slice of that operand
    axis = concat.attrs["dimensions"][0]
    start, limit, stride = root.attrs["slice"][axis]
    offset = 0
    for operand in concat.operands:
        size = operand.shape.dims[axis]
        if offset <= start and limit <= offset + size and size:
            spec = list(root.attrs["slice"])
            spec[axis] = (start - offset, limit - offset, stride)
            return new("slice", root.shape, operand, slice=tuple(spec))
        offset += size
    return None


@MOVEMENT.rule(m.Slice(m.Transpose(X, name="transposed")))
def slice_of_transpose(root, transposed, x):
    # slice(transpose(x)) -> transpose(slice(x)) where only slices read the transpose: they
    # then move only what they keep, and the new slice may meet a concatenate or a slice
    if any(user.opcode != "slice" for user in transposed.users):
        return None
    perm = transposed.attrs["dimensions"]
    spec, dims = [None] * len(perm), [0] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        spec[in_dim], dims[in_dim] = root.attrs["slice"][out_dim], root.shape.dims[out_dim]
    shape = x.shape.with_dims(dims).with_layout(x.shape.layout)
    sliced = new("slice", shape, x, slice=tuple(spec))
    return new("transpose", root.shape, sliced, dimensions=tuple(perm))


@MOVEMENT.rule(m.Concatenate(X))
def concatenate_single(x):
    return x  # concatenate(x) -> x


@MOVEMENT.rule(m.Concatenate())
def concatenate_drop_empty(root):
    # concatenate(a, empty, b) -> concatenate(a, b)
    kept = [o for o in root.operands if math.prod(o.shape.dims) != 0]
    if len(kept) == root.operand_count or not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return new("concatenate", root.shape, *kept, dimensions=root.attrs["dimensions"])


def _adjacent(first, second, axis: int) -> bool:
    """slice(x, a:b) then slice(x, b:c) along `axis`, equal elsewhere, unit strides."""
    if first.opcode != "slice" or second.opcode != "slice":
        return False
    if first.operand(0) is not second.operand(0):
        return False
    a, b = first.attrs["slice"], second.attrs["slice"]
    if any(stride != 1 for _, _, stride in a + b):
        return False
    return a[axis][1] == b[axis][0] and all(a[d] == b[d] for d in range(len(a)) if d != axis)


@MOVEMENT.rule(m.Concatenate())
def concatenate_adjacent_slices(root):
    # concatenate(slice(x, a:b), slice(x, b:c)) -> slice(x, a:c), along the concat dim
    axis = root.attrs["dimensions"][0]
    merged: list[HloInstruction] = []
    changed = False
    for operand in root.operands:
        if merged and _adjacent(merged[-1], operand, axis):
            spec = list(merged[-1].attrs["slice"])
            spec[axis] = (spec[axis][0], operand.attrs["slice"][axis][1], 1)
            dims = list(operand.shape.dims)
            dims[axis] = spec[axis][1] - spec[axis][0]
            shape = operand.shape.with_dims(dims).with_layout(operand.shape.layout)
            merged[-1] = new("slice", shape, operand.operand(0), slice=tuple(spec))
            changed = True
        else:
            merged.append(operand)
    if not changed:
        return None
    if len(merged) == 1:
        return merged[0]
    return new("concatenate", root.shape, *merged, dimensions=root.attrs["dimensions"])


@MOVEMENT.rule(m.Pad(X, m.Any()))
def pad_zero_widths(root, x):
    # pad(x, v) with no edge or interior padding -> x
    return x if all(w == (0, 0, 0) for w in root.attrs["padding"]) else None


@MOVEMENT.rule(m.Reverse(m.Reverse(X, name="inner")))
def reverse_of_reverse(root, inner, x):
    # reverse(reverse(x, d1), d2) -> reverse(x, d1 xor d2), or x
    dims = tuple(sorted(set(inner.attrs["dimensions"]) ^ set(root.attrs["dimensions"])))
    return new("reverse", root.shape, x, dimensions=dims) if dims else x


@MOVEMENT.rule(m.Reverse(X))
def reverse_degenerate_dims(root, x):
    # reversing a dim of size 0 or 1 does nothing: drop it (and the reverse, if none is left)
    dims = root.attrs["dimensions"]
    kept = tuple(d for d in dims if x.shape.dims[d] > 1)
    if len(kept) == len(dims):
        return None
    return new("reverse", root.shape, x, dimensions=kept) if kept else x


# -- dynamic slices -----------------------------------------------------------------------------
def _constant_starts(instr, first: int) -> list[int] | None:
    """The start indices at operands[first:] when all are constants, else None."""
    index_operands = instr.operands[first:]
    if not all(o.opcode == "constant" for o in index_operands):
        return None
    values = [np.asarray(o.literal).reshape(-1) for o in index_operands]
    return [int(v) for array in values for v in array]


@MOVEMENT.rule(m.DynamicSlice(X, ...))
def dynamic_slice_constant_starts(root, x):
    # dynamic-slice(x, constant starts) -> slice(x), with the starts clamped as XLA does
    starts = _constant_starts(root, 1)
    if starts is None or len(starts) != x.shape.rank:
        return None
    sizes = root.attrs["dynamic_slice_sizes"]
    clamped = [min(max(s, 0), d - n) for s, d, n in zip(starts, x.shape.dims, sizes)]
    spec = tuple((s, s + n, 1) for s, n in zip(clamped, sizes))
    return new("slice", root.shape, x, slice=spec)


@MOVEMENT.rule(m.DynamicSlice(X, ...))
def dynamic_slice_full(root, x):
    # dynamic-slice(x, ...) of x's whole size -> x (every start clamps to 0); not of a dynamic
    # dimension, whose size at run time may be below its bound
    return x if root.shape.compatible(x.shape) else None


@MOVEMENT.rule(m.DynamicUpdateSlice(X, m.Any("update"), ...))
def dynamic_update_slice_full(root, x, update):
    # dynamic-update-slice(x, u, ...) with u as big as x -> u (starts clamp to 0); a static u
    # does not stand for a dynamic x
    return update if update.shape.compatible(x.shape) else None


@MOVEMENT.rule(m.DynamicUpdateSlice(X, m.Any("update"), ...))
def dynamic_update_slice_empty(root, x, update):
    # dynamic-update-slice(x, u, ...) with an empty u -> x
    return x if math.prod(update.shape.dims) == 0 else None


# -- copy, bitcast, dimension sizes -------------------------------------------------------------
@MOVEMENT.rule(m.Copy(X))
def copy_same_layout(root, x):
    return x if same_layout(x.shape, root.shape) else None  # copy(x) to x's layout -> x


@MOVEMENT.rule(m.CustomCall(X))
def memory_space_annotation(root, x):
    # custom-call(x), custom_call_target="MoveToHost" (one memory space) -> copy(x), which
    # copy_same_layout drops where the layouts agree
    if root.attrs.get("custom_call_target") not in MEMORY_SPACE_ANNOTATIONS:
        return None
    return new("copy", root.shape, x) if x.shape.compatible(root.shape) else None


@MOVEMENT.rule(m.CustomCall(X))
def builder_math(root, x):
    # custom-call(x), custom_call_target="xla_builder.math.Acos" -> acos(x), unless the user
    # registered the target (a registration wins)
    target = root.attrs.get("custom_call_target")
    opcode = BUILDER_MATH.get(target)
    if opcode is None or not x.shape.compatible(root.shape) or registered_for_any_backend(target):
        return None
    return new(opcode, root.shape, x)


@MOVEMENT.rule(m.Bitcast(X))
def bitcast_noop(root, x):
    # bitcast(x) to x's own shape and layout -> x
    return x if x.shape.compatible(root.shape) and same_layout(x.shape, root.shape) else None


@MOVEMENT.rule(m.GetDimensionSize(X))
def get_dimension_size_static(root, x):
    # get-dimension-size of a static dim -> constant
    dim = root.attrs["dimensions"][0]
    if x.shape.dynamic and x.shape.dynamic[dim]:
        return None
    return HloInstruction.constant(x.shape.dims[dim], root.shape)
