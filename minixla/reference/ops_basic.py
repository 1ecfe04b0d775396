"""Interpreter handlers: elementwise ops (semantics in elementwise.py/convert.py) and data
movement (broadcast, reshape, transpose, slices, pad, concatenate, iota, bitcast, ...)."""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ..ir import layout_math
from ..ir.dtypes import FLOAT
from .convert import bitcast_convert, convert, element_type, reduce_precision
from .elementwise import BINARY, UNARY, clamp, compare, select
from .evaluator import as_dtype


def _unary(ev, instr, ops):
    operand = ops[0]
    if instr.shape.is_tuple:  # copy of a tuple
        return UNARY[instr.opcode](operand)
    result = instr.shape.numpy_dtype
    if _mixed_float(operand.dtype, result) and result.itemsize >= operand.dtype.itemsize:
        # a mixed-precision op computes in the wider type (f64 = cbrt(bf16 x) is cbrt of x
        # converted to f64; bf16 = cbrt(f32 x) rounds cbrt in f32; f16 and bf16 meet in f32),
        # as the cpu pipeline's normalization of narrow floats assumes
        operand = convert(operand, result if result.itemsize > 2 else np.float32)
    return UNARY[instr.opcode](operand)


def _mixed_float(source, result) -> bool:
    return source != result and element_type(source).kind == element_type(result).kind == FLOAT


def _binary(ev, instr, ops):
    return BINARY[instr.opcode](ops[0], ops[1])


def _compare(ev, instr, ops):
    return compare(ops[0], ops[1], instr.attrs["direction"], instr.attrs.get("type"))


def _convert(ev, instr, ops):
    return convert(ops[0], instr.shape.numpy_dtype)


def _bitcast_convert(ev, instr, ops):
    return bitcast_convert(ops[0], instr.shape.numpy_dtype)


def _reduce_precision(ev, instr, ops):
    return reduce_precision(ops[0], instr.attrs["exponent_bits"], instr.attrs["mantissa_bits"])


def _map(ev, instr, ops):
    result = ev.apply_scalar(instr.attrs["to_apply"], list(ops))
    return as_dtype(np.broadcast_to(result, instr.shape.dims).copy(), instr.shape)


def _broadcast(ev, instr, ops):
    operand = ops[0]
    dims = instr.attrs.get("dimensions", ())
    order = sorted(range(len(dims)), key=lambda i: dims[i])  # operand dims in result order
    operand = np.transpose(operand, order) if order != list(range(len(dims))) else operand
    expanded = [1] * instr.shape.rank
    for i, d in enumerate(sorted(dims)):
        expanded[d] = operand.shape[i]
    return np.broadcast_to(operand.reshape(expanded), instr.shape.dims).copy()


def _reshape(ev, instr, ops):
    return ops[0].reshape(instr.shape.dims)


def _transpose(ev, instr, ops):
    return np.asarray(np.transpose(ops[0], instr.attrs["dimensions"]), order="C")


def _bitcast(ev, instr, ops):
    """Reinterprets the operand's physical buffer with the result's dims and layout.

    As in XLA after layout assignment, the element type may change to one of the same width
    (XLA:CPU's sort comparators bitcast f32 to s32).
    """
    source, src_shape, dst_shape = ops[0], instr.operand(0).shape, instr.shape
    if layout_math.shape_bytes(src_shape) != layout_math.shape_bytes(dst_shape):
        raise ExecutionError(
            f"bitcast %{instr.name} reinterprets {src_shape} as {dst_shape}, "
            f"a buffer of another byte size"
        )
    if src_shape.element_type.bits != dst_shape.element_type.bits:
        raise ExecutionError(
            f"bitcast %{instr.name} changes the element width "
            f"({src_shape.dtype} to {dst_shape.dtype}); that is "
            f"bitcast-convert's job"
        )
    if not src_shape.dims and not dst_shape.dims:  # also when sort evaluates a comparator
        # over whole arrays; np.array keeps a scalar 0-d (ascontiguousarray made it shape (1,))
        return np.array(source, order="C").view(dst_shape.numpy_dtype)
    buffer = layout_math.logical_to_physical(source, src_shape.minor_to_major(), _tiles(src_shape))
    if source.dtype != dst_shape.numpy_dtype:
        buffer = np.ascontiguousarray(buffer).view(dst_shape.numpy_dtype)
    return layout_math.physical_to_logical(
        buffer, dst_shape.dims, dst_shape.minor_to_major(), _tiles(dst_shape)
    )


def _tiles(shape):
    return shape.layout.tiles if shape.layout is not None else ()


def _slice(ev, instr, ops):
    index = tuple(slice(start, limit, stride) for start, limit, stride in instr.attrs["slice"])
    return ops[0][index].copy()


def _clamped_starts(starts, operand_dims, sizes) -> list[int]:
    """XLA clamps each start so the whole window fits: 0 <= start <= dim - size."""
    out = []
    for start, dim, size in zip(starts, operand_dims, sizes):
        out.append(int(min(max(int(start), 0), dim - size)))
    return out


def _start_indices(ops) -> list[int]:
    if len(ops) == 1 and np.ndim(ops[0]) == 1:  # legacy form: one 1-D index operand
        return [int(v) for v in ops[0]]
    return [int(np.asarray(v).reshape(())) for v in ops]


def _dynamic_slice(ev, instr, ops):
    operand = ops[0]
    sizes = instr.attrs["dynamic_slice_sizes"]
    starts = _clamped_starts(_start_indices(ops[1:]), operand.shape, sizes)
    return operand[tuple(slice(s, s + n) for s, n in zip(starts, sizes))].copy()


def _dynamic_update_slice(ev, instr, ops):
    operand, update = ops[0], ops[1]
    starts = _clamped_starts(_start_indices(ops[2:]), operand.shape, update.shape)
    result = operand.copy()
    result[tuple(slice(s, s + n) for s, n in zip(starts, update.shape))] = update
    return result


def _concatenate(ev, instr, ops):
    return np.concatenate(ops, axis=instr.attrs["dimensions"][0])


def _pad(ev, instr, ops):
    operand, value = ops[0], ops[1]
    result = np.full(instr.shape.dims, value.reshape(()), dtype=operand.dtype)
    src, dst = [], []
    for (low, _high, interior), size, out_size in zip(
        instr.attrs["padding"], operand.shape, instr.shape.dims
    ):
        positions = low + np.arange(size) * (interior + 1)  # where each element lands
        keep = (positions >= 0) & (positions < out_size)  # negative padding crops
        src.append(np.nonzero(keep)[0])
        dst.append(positions[keep])
    if all(len(s) for s in src) or operand.ndim == 0:
        result[np.ix_(*dst)] = operand[np.ix_(*src)]
    return result


def _reverse(ev, instr, ops):
    return np.flip(ops[0], axis=tuple(instr.attrs["dimensions"])).copy()


def _iota(ev, instr, ops):
    dim = instr.attrs["iota_dimension"]
    dims = instr.shape.dims
    line = np.arange(dims[dim]).astype(instr.shape.numpy_dtype)
    shape = [1] * len(dims)
    shape[dim] = dims[dim]
    return np.broadcast_to(line.reshape(shape), dims).copy()


def _constant(ev, instr, ops):
    return instr.literal


def _select(ev, instr, ops):
    return select(*ops)


def _clamp(ev, instr, ops):
    return clamp(*ops)


def _get_dimension_size(ev, instr, ops):
    return np.array(ops[0].shape[instr.attrs["dimensions"][0]], instr.shape.numpy_dtype)


HANDLERS = {
    **{name: _unary for name in UNARY},
    **{name: _binary for name in BINARY},
    "compare": _compare,
    "convert": _convert,
    "bitcast-convert": _bitcast_convert,
    "reduce-precision": _reduce_precision,
    "map": _map,
    "select": _select,
    "clamp": _clamp,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "transpose": _transpose,
    "bitcast": _bitcast,
    "slice": _slice,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "reverse": _reverse,
    "iota": _iota,
    "constant": _constant,
    "get-dimension-size": _get_dimension_size,
}
