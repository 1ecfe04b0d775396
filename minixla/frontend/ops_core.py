"""The elementwise, data-movement, reduction and linear-algebra functions of `minixla.ops`
(re-exported there; see ops.py for the conventions)."""

from __future__ import annotations

from ..ir import HloComputation, Shape, Window, WindowDim
from ..ir.opcodes import ELEMENTWISE, OPCODES
from .builder import Builder, XlaOp, as_op, as_shape
from .errors import FrontendTypeError


def _builder(*ops) -> Builder:
    """The innermost builder among the operands' (enclosing builders' values are captured)."""
    ops = [o for o in ops if isinstance(o, XlaOp)]
    if not ops:
        raise FrontendTypeError("expected at least one XlaOp operand")
    return max(ops, key=lambda o: o.builder.depth).builder


def Op(
    opcode: str, operands, attrs: dict | None = None, shape=None, builder: Builder | None = None
) -> XlaOp:
    """Any opcode: the escape hatch the named functions below are written with."""
    builder = builder or _builder(*operands)
    return builder.emit(
        opcode, list(operands), attrs, shape=None if shape is None else as_shape(shape)
    )


# -- leaves ---------------------------------------------------------------------------------
def Parameter(builder: Builder, number: int, shape, name: str = "") -> XlaOp:
    return builder.parameter(shape, name, number)


def Constant(builder: Builder, value, dtype=None) -> XlaOp:
    return builder.constant(value, dtype)


def Iota(builder: Builder, shape, iota_dimension: int = 0) -> XlaOp:
    return Op("iota", [], {"iota_dimension": iota_dimension}, shape, builder)


def RngBitGenerator(algorithm: str, initial_state: XlaOp, shape) -> XlaOp:
    state = initial_state.shape.without_layout()
    result = Shape.tuple_of([state, as_shape(shape)])
    return Op("rng-bit-generator", [initial_state], {"algorithm": algorithm}, result)


def ReplicaId(builder: Builder) -> XlaOp:
    return Op("replica-id", [], builder=builder)


def PartitionId(builder: Builder) -> XlaOp:
    return Op("partition-id", [], builder=builder)


def AfterAll(builder: Builder, tokens=()) -> XlaOp:
    return Op("after-all", list(tokens), builder=builder)


# -- elementwise ----------------------------------------------------------------------------
def _unary(opcode: str):
    def op(operand: XlaOp) -> XlaOp:
        return Op(opcode, [operand])

    op.__name__ = op.__qualname__ = _camel(opcode)
    op.__doc__ = f"HLO `{opcode}`."
    return op


def _binary(opcode: str):
    def op(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions=None) -> XlaOp:
        lhs, rhs = _implicit_broadcast(lhs, rhs, broadcast_dimensions)
        return Op(opcode, [lhs, rhs])

    op.__name__ = op.__qualname__ = _camel(opcode)
    op.__doc__ = f"HLO `{opcode}` (scalar operands and broadcast_dimensions broadcast)."
    return op


def _camel(opcode: str) -> str:
    return "".join(part.capitalize() for part in opcode.split("-"))


def _implicit_broadcast(lhs: XlaOp, rhs: XlaOp, broadcast_dimensions):
    """XLA's binary-op rule: a scalar broadcasts to the other operand, and with
    broadcast_dimensions the lower-rank operand maps onto those dims of the other."""
    lhs, rhs = as_op(lhs, "a binary op"), as_op(rhs, "a binary op")
    if lhs.dims == rhs.dims and not broadcast_dimensions:
        return lhs, rhs
    small, big = (lhs, rhs) if lhs.rank < rhs.rank else (rhs, lhs)
    if broadcast_dimensions is None:
        if small.rank != 0:
            return lhs, rhs  # let the shape rule report the mismatch
        broadcast_dimensions = ()
    wide = Broadcast(small, tuple(broadcast_dimensions), big.dims)
    return (wide, rhs) if small is lhs else (lhs, wide)


def _elementwise_builders() -> dict:
    """A builder function for every elementwise row of the opcode table that needs no
    attribute and no result shape: `Abs`, `Add`, `Cbrt`, `ShiftRightLogical`, ... A new row
    gets its builder here without an edit."""
    return {
        _camel(row.name): (_unary if row.arity == 1 else _binary)(row.name)
        for row in OPCODES.values()
        if row.kind == ELEMENTWISE
        and row.shape_optional
        and not row.required_attrs
        and row.arity in (1, 2)
    }


globals().update(_elementwise_builders())


def Compare(
    lhs: XlaOp,
    rhs: XlaOp,
    direction: str,
    compare_type: str | None = None,
    broadcast_dimensions=None,
) -> XlaOp:
    lhs, rhs = _implicit_broadcast(lhs, rhs, broadcast_dimensions)
    attrs = {"direction": direction.upper()}
    if compare_type:
        attrs["type"] = compare_type
    return Op("compare", [lhs, rhs], attrs)


def Eq(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "EQ", broadcast_dimensions=broadcast_dimensions)


def Ne(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "NE", broadcast_dimensions=broadcast_dimensions)


def Lt(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "LT", broadcast_dimensions=broadcast_dimensions)


def Le(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "LE", broadcast_dimensions=broadcast_dimensions)


def Gt(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "GT", broadcast_dimensions=broadcast_dimensions)


def Ge(lhs, rhs, broadcast_dimensions=None):
    return Compare(lhs, rhs, "GE", broadcast_dimensions=broadcast_dimensions)


def Select(pred: XlaOp, on_true: XlaOp, on_false: XlaOp) -> XlaOp:
    return Op("select", [pred, on_true, on_false])


def Clamp(low: XlaOp, operand: XlaOp, high: XlaOp) -> XlaOp:
    return Op("clamp", [low, operand, high])


def Convert(operand: XlaOp, dtype) -> XlaOp:
    """Element type conversion; `dtype` is an HLO name ("f32") or a NumPy dtype."""
    return Op("convert", [operand], shape=as_shape((dtype, operand.dims)))


def BitcastConvert(operand: XlaOp, dtype) -> XlaOp:
    target = as_shape((dtype, ())).element_type
    old, new = operand.shape.element_type.bits, target.bits
    dims = (
        operand.dims
        if old == new
        else operand.dims + (old // new,)
        if old > new
        else operand.dims[:-1]
    )
    return Op("bitcast-convert", [operand], shape=Shape.array(target, dims))


def ReducePrecision(operand: XlaOp, exponent_bits: int, mantissa_bits: int) -> XlaOp:
    return Op(
        "reduce-precision",
        [operand],
        {"exponent_bits": exponent_bits, "mantissa_bits": mantissa_bits},
    )


def Map(builder: Builder, operands, computation, dimensions=None) -> XlaOp:
    scalars = [Shape.array(o.dtype, ()) for o in operands]
    comp = builder.computation(computation, scalars, "map")
    rank = operands[0].rank
    dims = tuple(range(rank)) if dimensions is None else tuple(dimensions)
    return Op("map", list(operands), {"dimensions": dims, "to_apply": comp}, builder=builder)


# -- data movement --------------------------------------------------------------------------
def Broadcast(operand: XlaOp, dimensions, shape) -> XlaOp:
    """HLO broadcast: operand dim i becomes result dim dimensions[i] of `shape` (dims or a
    Shape); the other result dims replicate."""
    dims = shape.dims if isinstance(shape, Shape) else tuple(shape)
    return Op(
        "broadcast", [operand], {"dimensions": tuple(dimensions)}, Shape.array(operand.dtype, dims)
    )


def BroadcastInDim(operand: XlaOp, out_dims, broadcast_dimensions) -> XlaOp:
    return Broadcast(operand, broadcast_dimensions, out_dims)


def Reshape(operand: XlaOp, dims) -> XlaOp:
    return Op("reshape", [operand], shape=Shape.array(operand.dtype, dims))


def Transpose(operand: XlaOp, permutation) -> XlaOp:
    return Op("transpose", [operand], {"dimensions": tuple(permutation)})


def Bitcast(operand: XlaOp, shape) -> XlaOp:
    return Op("bitcast", [operand], shape=as_shape(shape))


def Slice(operand: XlaOp, start_indices, limit_indices, strides=None) -> XlaOp:
    strides = strides or [1] * len(start_indices)
    spec = tuple(zip(start_indices, limit_indices, strides))
    return Op("slice", [operand], {"slice": tuple(tuple(int(v) for v in s) for s in spec)})


def DynamicSlice(operand: XlaOp, start_indices, slice_sizes) -> XlaOp:
    return Op(
        "dynamic-slice", [operand, *start_indices], {"dynamic_slice_sizes": tuple(slice_sizes)}
    )


def DynamicUpdateSlice(operand: XlaOp, update: XlaOp, start_indices) -> XlaOp:
    return Op("dynamic-update-slice", [operand, update, *start_indices])


def Concatenate(operands, dimension: int) -> XlaOp:
    return Op("concatenate", list(operands), {"dimensions": (dimension,)})


def Pad(operand: XlaOp, padding_value: XlaOp, padding_config) -> XlaOp:
    """padding_config: one (low, high, interior) per dim."""
    config = tuple(tuple(int(v) for v in p) for p in padding_config)
    return Op("pad", [operand, padding_value], {"padding": config})


def Reverse(operand: XlaOp, dimensions) -> XlaOp:
    return Op("reverse", [operand], {"dimensions": tuple(dimensions)})


def Gather(
    operand: XlaOp,
    start_indices: XlaOp,
    *,
    offset_dims,
    collapsed_slice_dims,
    start_index_map,
    index_vector_dim: int,
    slice_sizes,
    operand_batching_dims=(),
    start_indices_batching_dims=(),
    indices_are_sorted: bool = False,
) -> XlaOp:
    attrs = {
        "offset_dims": tuple(offset_dims),
        "collapsed_slice_dims": tuple(collapsed_slice_dims),
        "start_index_map": tuple(start_index_map),
        "operand_batching_dims": tuple(operand_batching_dims),
        "start_indices_batching_dims": tuple(start_indices_batching_dims),
        "index_vector_dim": index_vector_dim,
        "slice_sizes": tuple(slice_sizes),
        "indices_are_sorted": indices_are_sorted,
    }
    return Op("gather", [operand, start_indices], attrs)


def Scatter(
    operands,
    scatter_indices: XlaOp,
    updates,
    computation,
    *,
    update_window_dims,
    inserted_window_dims,
    scatter_dims_to_operand_dims,
    index_vector_dim: int,
    input_batching_dims=(),
    scatter_indices_batching_dims=(),
    indices_are_sorted: bool = False,
    unique_indices: bool = False,
) -> XlaOp:
    operands = [operands] if isinstance(operands, XlaOp) else list(operands)
    updates = [updates] if isinstance(updates, XlaOp) else list(updates)
    builder = _builder(*operands, scatter_indices, *updates)
    scalars = [Shape.array(o.dtype, ()) for o in operands + updates]
    attrs = {
        "update_window_dims": tuple(update_window_dims),
        "inserted_window_dims": tuple(inserted_window_dims),
        "scatter_dims_to_operand_dims": tuple(scatter_dims_to_operand_dims),
        "input_batching_dims": tuple(input_batching_dims),
        "scatter_indices_batching_dims": tuple(scatter_indices_batching_dims),
        "index_vector_dim": index_vector_dim,
        "indices_are_sorted": indices_are_sorted,
        "unique_indices": unique_indices,
        "to_apply": builder.computation(computation, scalars, "scatter"),
    }
    return Op("scatter", operands + [scatter_indices] + updates, attrs, builder=builder)


def Tuple(builder: Builder, elements) -> XlaOp:
    return Op("tuple", list(elements), builder=builder)


def GetTupleElement(operand: XlaOp, index: int) -> XlaOp:
    return Op("get-tuple-element", [operand], {"index": index})


def GetDimensionSize(operand: XlaOp, dimension: int) -> XlaOp:
    return Op("get-dimension-size", [operand], {"dimensions": (dimension,)})


def SetDimensionSize(operand: XlaOp, size: XlaOp, dimension: int) -> XlaOp:
    return Op("set-dimension-size", [operand, size], {"dimensions": (dimension,)})


# -- reductions, windows, sorting -----------------------------------------------------------
def _reducer(builder: Builder, computation, inits, values, name: str) -> HloComputation:
    scalars = [Shape.array(o.dtype, ()) for o in list(inits) + list(values)]
    return builder.computation(computation, scalars, name)


def Reduce(builder: Builder, operands, init_values, computation, dimensions) -> XlaOp:
    operands = [operands] if isinstance(operands, XlaOp) else list(operands)
    inits = [init_values] if isinstance(init_values, XlaOp) else list(init_values)
    comp = _reducer(builder, computation, inits, operands, "reducer")
    return Op(
        "reduce",
        operands + inits,
        {"dimensions": tuple(dimensions), "to_apply": comp},
        builder=builder,
    )


def make_window(
    window_dimensions, window_strides=None, padding=None, base_dilations=None, window_dilations=None
) -> Window:
    n = len(window_dimensions)
    strides = window_strides or [1] * n
    padding = padding or [(0, 0)] * n
    base = base_dilations or [1] * n
    win = window_dilations or [1] * n
    return Window(
        tuple(
            WindowDim(int(size), int(stride), int(lo), int(hi), int(b), int(w))
            for size, stride, (lo, hi), b, w in zip(window_dimensions, strides, padding, base, win)
        )
    )


def ReduceWindow(
    builder: Builder,
    operands,
    init_values,
    computation,
    window_dimensions,
    window_strides=None,
    padding=None,
    base_dilations=None,
    window_dilations=None,
) -> XlaOp:
    operands = [operands] if isinstance(operands, XlaOp) else list(operands)
    inits = [init_values] if isinstance(init_values, XlaOp) else list(init_values)
    comp = _reducer(builder, computation, inits, operands, "reducer")
    window = make_window(
        window_dimensions, window_strides, padding, base_dilations, window_dilations
    )
    return Op(
        "reduce-window", operands + inits, {"window": window, "to_apply": comp}, builder=builder
    )


def SelectAndScatter(
    operand: XlaOp,
    select,
    window_dimensions,
    window_strides,
    padding,
    source: XlaOp,
    init_value: XlaOp,
    scatter,
) -> XlaOp:
    builder = _builder(operand, source, init_value)
    element = Shape.array(operand.dtype, ())
    attrs = {
        "window": make_window(window_dimensions, window_strides, padding),
        "select": builder.computation(select, [element, element], "select"),
        "scatter": _reducer(builder, scatter, [init_value], [source], "scatter"),
    }
    return Op("select-and-scatter", [operand, source, init_value], attrs, builder=builder)


def Sort(operands, comparator=None, dimension: int = -1, is_stable: bool = False) -> XlaOp:
    """Sorts along `dimension`; the comparator gets (lhs_0, rhs_0, lhs_1, rhs_1, ...) and
    returns pred "less than". The default compares operand 0 ascending."""
    operands = [operands] if isinstance(operands, XlaOp) else list(operands)
    builder = _builder(*operands)
    if comparator is None:

        def comparator(*params):
            return Lt(params[0], params[1])

    scalars = [Shape.array(o.dtype, ()) for o in operands for _ in range(2)]
    comp = builder.computation(comparator, scalars, "compare")
    dim = dimension % max(operands[0].rank, 1)
    attrs = {"dimensions": (dim,), "to_apply": comp}
    if is_stable:
        attrs["is_stable"] = True
    return Op("sort", operands, attrs, builder=builder)


def Topk(operand: XlaOp, k: int, largest: bool = True) -> XlaOp:
    return Op("topk", [operand], {"k": k, "largest": largest})


# -- linear algebra -------------------------------------------------------------------------
def Dot(
    lhs: XlaOp,
    rhs: XlaOp,
    *,
    lhs_contracting=None,
    rhs_contracting=None,
    lhs_batch=(),
    rhs_batch=(),
    preferred_element_type=None,
) -> XlaOp:
    """dot_general; without contracting dims, lhs's last dim contracts with rhs's first."""
    attrs = _dot_dims(lhs, rhs, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch)
    lhs_contracting, rhs_contracting = attrs["lhs_contracting_dims"], attrs["rhs_contracting_dims"]
    shape = None
    if preferred_element_type is not None:  # the result type XLA would otherwise pick
        free_l = [d for i, d in enumerate(lhs.dims) if i not in (*lhs_batch, *lhs_contracting)]
        free_r = [d for i, d in enumerate(rhs.dims) if i not in (*rhs_batch, *rhs_contracting)]
        dims = [lhs.dims[d] for d in lhs_batch] + free_l + free_r
        shape = as_shape((preferred_element_type, dims))
    return Op("dot", [lhs, rhs], attrs, shape)


def ScaledDot(
    lhs: XlaOp,
    rhs: XlaOp,
    lhs_scale: XlaOp,
    rhs_scale: XlaOp,
    *,
    lhs_contracting=None,
    rhs_contracting=None,
    lhs_batch=(),
    rhs_batch=(),
) -> XlaOp:
    """A dot of block-scaled operands: each scale has its operand's rank, and its dims divide
    the operand's; dimensions as `Dot`."""
    attrs = _dot_dims(lhs, rhs, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch)
    return Op("scaled-dot", [lhs, rhs, lhs_scale, rhs_scale], attrs)


def _dot_dims(lhs, rhs, lhs_contracting, rhs_contracting, lhs_batch, rhs_batch) -> dict:
    if lhs_contracting is None:
        lhs_contracting = (lhs.rank - 1,) if lhs.rank else ()
    if rhs_contracting is None:
        rhs_contracting = (len(rhs_batch),) if rhs.rank > len(rhs_batch) else ()
    return {
        "lhs_batch_dims": tuple(lhs_batch),
        "lhs_contracting_dims": tuple(lhs_contracting),
        "rhs_batch_dims": tuple(rhs_batch),
        "rhs_contracting_dims": tuple(rhs_contracting),
    }


def Convolution(
    lhs: XlaOp,
    rhs: XlaOp,
    window_strides=None,
    padding=None,
    lhs_dilation=None,
    rhs_dilation=None,
    dim_labels: str | None = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
) -> XlaOp:
    """ConvGeneralDilated; the default dim_labels are NHWC input, HWIO kernel, NHWC output."""
    spatial = lhs.rank - 2
    digits = "".join(str(i) for i in range(spatial))
    labels = dim_labels or f"b{digits}f_{digits}io->b{digits}f"
    from ..ir import parse_dim_labels

    sizes = [rhs.dims[d] for d in parse_dim_labels(labels).kernel_spatial]
    window = make_window(sizes, window_strides, padding, lhs_dilation, rhs_dilation)
    attrs = {
        "window": window,
        "dim_labels": labels,
        "feature_group_count": feature_group_count,
        "batch_group_count": batch_group_count,
    }
    return Op("convolution", [lhs, rhs], attrs)


def Fft(operand: XlaOp, fft_type: str, fft_length) -> XlaOp:
    return Op("fft", [operand], {"fft_type": fft_type, "fft_length": tuple(fft_length)})


def TriangularSolve(
    a: XlaOp,
    b: XlaOp,
    left_side: bool,
    lower: bool,
    unit_diagonal: bool,
    transpose_a: str = "NO_TRANSPOSE",
) -> XlaOp:
    return Op(
        "triangular-solve",
        [a, b],
        {
            "left_side": left_side,
            "lower": lower,
            "unit_diagonal": unit_diagonal,
            "transpose_a": transpose_a,
        },
    )


def Cholesky(a: XlaOp, lower: bool = True) -> XlaOp:
    return Op("cholesky", [a], {"lower": lower})


def BatchNormTraining(operand, scale, offset, epsilon: float, feature_index: int) -> XlaOp:
    return Op(
        "batch-norm-training",
        [operand, scale, offset],
        {"epsilon": epsilon, "feature_index": feature_index},
    )


def BatchNormInference(
    operand, scale, offset, mean, variance, epsilon: float, feature_index: int
) -> XlaOp:
    return Op(
        "batch-norm-inference",
        [operand, scale, offset, mean, variance],
        {"epsilon": epsilon, "feature_index": feature_index},
    )


def BatchNormGrad(
    operand, scale, mean, variance, grad_output, epsilon: float, feature_index: int
) -> XlaOp:
    return Op(
        "batch-norm-grad",
        [operand, scale, mean, variance, grad_output],
        {"epsilon": epsilon, "feature_index": feature_index},
    )
