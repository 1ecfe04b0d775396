"""Small HLO emitters the differentiation rules are written with.

Everything is emitted into the current trace (`current_builder()`), which lifts values of
enclosing computations, so a rule may mix primal values of an outer computation with
cotangents of a loop body.
"""

from __future__ import annotations

import numpy as np

from ..frontend.builder import XlaOp
from ..frontend.tracer import Tracer, current_builder
from ..ir import Shape

FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})


def is_float(shape: Shape) -> bool:
    return shape.is_array and shape.dtype in FLOAT_TYPES


def emit(opcode: str, operands, attrs: dict | None = None, shape: Shape | None = None) -> XlaOp:
    return current_builder().emit(opcode, list(operands), attrs, shape=shape)


def scalar(value, dtype: str) -> XlaOp:
    return current_builder().constant(np.asarray(value, Shape.array(dtype).numpy_dtype))


def full(shape: Shape, value) -> XlaOp:
    fill = scalar(value, shape.dtype)
    if not shape.dims:
        return fill
    return emit("broadcast", [fill], {"dimensions": ()}, Shape.array(shape.dtype, shape.dims))


def zeros(shape: Shape) -> XlaOp:
    return full(shape, 0)


def add(a: XlaOp | None, b: XlaOp | None) -> XlaOp | None:
    """Sum of two cotangents, where None is a symbolic zero."""
    if a is None:
        return b
    if b is None:
        return a
    return emit("add", [a, b])


def binary(opcode: str, a: XlaOp, b: XlaOp) -> XlaOp:
    return emit(opcode, [a, b])


def reduce_sum(value: XlaOp, dims) -> XlaOp:
    dims = tuple(sorted(dims))
    if not dims:
        return value
    builder = current_builder()
    attrs = {"dimensions": dims, "to_apply": builder.reducer("add", value.dtype)}
    return emit("reduce", [value, scalar(0, value.dtype)], attrs)


def broadcast_in_dim(value: XlaOp, shape: Shape, dims) -> XlaOp:
    out = Shape.array(value.dtype, shape.dims)
    if value.dims == out.dims and tuple(dims) == tuple(range(value.rank)):
        return value
    return emit("broadcast", [value], {"dimensions": tuple(dims)}, out)


def reshape(value: XlaOp, dims) -> XlaOp:
    if value.dims == tuple(dims):
        return value
    return emit("reshape", [value], shape=Shape.array(value.dtype, dims))


def transpose(value: XlaOp, perm) -> XlaOp:
    if tuple(perm) == tuple(range(value.rank)):
        return value
    return emit("transpose", [value], {"dimensions": tuple(perm)})


def convert(value: XlaOp, dtype: str) -> XlaOp:
    if value.dtype == dtype:
        return value
    return emit("convert", [value], shape=Shape.array(dtype, value.dims))


def fit(ct: XlaOp, shape: Shape) -> XlaOp:
    """A cotangent for an operand of `shape`: a scalar operand that the op broadcast (clamp's
    bounds) gets the sum; a type change (dot's preferred element type) is converted back."""
    if ct.dims != shape.dims and shape.rank == 0:
        ct = reduce_sum(ct, range(ct.rank))
    return convert(ct, shape.dtype)


def iota(shape: Shape, dim: int) -> XlaOp:
    return emit("iota", [], {"iota_dimension": dim}, shape)


def take_along(value: XlaOp, index: XlaOp, axis: int) -> XlaOp:
    """`value` re-ordered along `axis` by `index` (same shape): out[..i..] = value[..index..]."""
    from ..frontend.numpy_more import take_along_gather

    return take_along_gather(value, index, axis)


def T(op: XlaOp) -> Tracer:
    return Tracer(op)


def op_of(value) -> XlaOp:
    from ..frontend.numpy_api import asarray

    return asarray(value).op
