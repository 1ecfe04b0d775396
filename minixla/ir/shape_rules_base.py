"""Shared helpers of the shape rules, and the rules of elementwise ops.

A rule takes an HloInstruction and returns its result shape without layout, following XLA's
ShapeInference; it raises ShapeError naming the op and the broken constraint. Layouts never
matter here: every comparison is on element types and dims (dynamic-dimension flags ignored,
as XLA's ShapeUtil::Compatible does).

The rules named in shape_inference.MIXED_PRECISION_RULES also take `mixed=True`: then, as in
XLA's ShapeInference, floating-point operands of different widths (f16 and f32, ...) match
and the result takes the widest of them. XLA's verifier rejects such operands unless
allow_mixed_precision is on; minixla's strict rules do the rejecting themselves.
"""

from __future__ import annotations

from ..errors import ShapeError
from .dtypes import ELEMENT_TYPES, FLOAT, UNSIGNED
from .opcodes import OPCODES
from .shapes import Shape


class SignatureError(ShapeError):
    """A called computation takes or returns the wrong shapes."""


# -- helpers --------------------------------------------------------------------------------
def fail(instr, message: str, kind: type[ShapeError] = ShapeError) -> ShapeError:
    return kind(f"{instr.opcode} %{instr.name}: {message}")


def fmt(shape: Shape) -> str:
    return str(shape.without_layout())


def declared(instr) -> Shape | None:
    """The result shape the text gave, or None when the parser is asking for inference."""
    return instr.shape


def require_declared(instr) -> Shape:
    shape = declared(instr)
    if shape is None:
        raise fail(instr, "needs an explicit result shape")
    return shape


def same(a: Shape, b: Shape) -> bool:
    """Same element types and dims, recursively; layouts and dynamic flags are ignored."""
    if a.is_tuple or b.is_tuple:
        return (
            a.is_tuple
            and b.is_tuple
            and len(a.tuple_shapes) == len(b.tuple_shapes)
            and all(same(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes))
        )
    return a.element_type == b.element_type and a.dims == b.dims


def same_ignoring_fp_precision(a: Shape, b: Shape) -> bool:
    """`same`, except that any two floating-point types match (XLA's
    CompatibleIgnoringFpPrecision, which its reducer checks use)."""
    if a.is_tuple or b.is_tuple:
        return (
            a.is_tuple
            and b.is_tuple
            and len(a.tuple_shapes) == len(b.tuple_shapes)
            and all(
                same_ignoring_fp_precision(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)
            )
        )
    both_float = a.is_array and b.is_array and a.element_type.kind == FLOAT == b.element_type.kind
    return (both_float or a.element_type == b.element_type) and a.dims == b.dims


def array(etype, dims, dynamic=None) -> Shape:
    return Shape.array(etype, dims, dynamic=dynamic)


def operand_array(instr, index: int) -> Shape:
    if index >= instr.operand_count:
        raise fail(instr, f"expects an operand {index}")
    shape = instr.operand(index).shape
    if not shape.is_array:
        raise fail(instr, f"operand {index} must be an array, got {fmt(shape)}")
    return shape


def operand_arrays(instr, indices=None) -> list[Shape]:
    indices = range(instr.operand_count) if indices is None else indices
    return [operand_array(instr, i) for i in indices]


def scalar_of(instr, index: int, what: str = "") -> Shape:
    shape = operand_array(instr, index)
    if shape.rank:
        raise fail(instr, f"operand {index}{what} must be a scalar, got {fmt(shape)}")
    return shape


def dim_list(instr, name: str, rank: int, default=None) -> tuple[int, ...]:
    """Attribute `name` as dims of a rank-`rank` shape: each in range, none repeated."""
    dims = instr.attrs.get(name, default)
    if dims is None:
        raise fail(instr, f"missing attribute {name}")
    dims = tuple(dims)
    for d in dims:
        if not 0 <= d < rank:
            raise fail(
                instr, f"{name}={{{','.join(map(str, dims))}}}: {d} is out of range for rank {rank}"
            )
    if len(set(dims)) != len(dims):
        raise fail(instr, f"{name}={{{','.join(map(str, dims))}}} repeats a dimension")
    return dims


def one_dim(instr, rank: int) -> int:
    dims = dim_list(instr, "dimensions", rank)
    if len(dims) != 1:
        raise fail(instr, f"dimensions must name exactly one dimension, got {list(dims)}")
    return dims[0]


def same_dims_all(instr, shapes: list[Shape], what: str = "operands") -> None:
    first = shapes[0]
    for shape in shapes[1:]:
        if shape.dims != first.dims:
            raise fail(
                instr,
                f"{what} must have identical dims: {fmt(first)} and {fmt(shape)} "
                f"(no implicit broadcasting in HLO)",
            )


def same_type(a: Shape, b: Shape, mixed: bool = False) -> bool:
    """One element type; with `mixed`, any two floating-point types."""
    return a.element_type == b.element_type or (
        mixed and a.element_type.kind == FLOAT == b.element_type.kind
    )


def widest(shapes: list[Shape]):
    """The element type of the first shape, or of the widest float among them (XLA's
    HigherPrecisionElementType)."""
    floats = [s.element_type for s in shapes if s.element_type.kind == FLOAT]
    return max(floats, key=lambda t: t.bits) if floats else shapes[0].element_type


def same_type_all(
    instr, shapes: list[Shape], what: str = "operands", *, mixed: bool = False
) -> None:
    first = shapes[0]
    for shape in shapes[1:]:
        if not same_type(shape, first, mixed):
            raise fail(
                instr, f"{what} must have the same element type: {fmt(first)} and {fmt(shape)}"
            )


def check_signature(
    instr, attr: str, params: list[Shape], result: Shape | None = None, *, match=same
):
    """The computation in attribute `attr` must take `params` (and return `result`), shapes
    compared by `match`; returns it."""
    comp = instr.attrs.get(attr)
    if comp is None:
        raise fail(instr, f"missing called computation {attr}", SignatureError)
    got = comp.parameter_shapes
    if len(got) != len(params):
        raise fail(
            instr,
            f"{attr}=%{comp.name} takes {len(got)} parameters, expected {len(params)}",
            SignatureError,
        )
    for i, (have, want) in enumerate(zip(got, params)):
        if not match(have, want):
            raise fail(
                instr,
                f"{attr}=%{comp.name} parameter {i} is {fmt(have)}, expected {fmt(want)}",
                SignatureError,
            )
    if not comp.has_root:
        raise fail(instr, f"{attr}=%{comp.name} has no root", SignatureError)
    if result is not None and not same(comp.root.shape, result):
        raise fail(
            instr,
            f"{attr}=%{comp.name} returns {fmt(comp.root.shape)}, expected {fmt(result)}",
            SignatureError,
        )
    return comp


def check_reducer(
    instr, attr: str, acc: list, values: list, *, ignore_fp_precision: bool = False
) -> None:
    """A reducer takes N accumulators then N values (scalars) and returns N scalars; a
    1-tuple stands for a scalar when N == 1 (XLA accepts both). With `ignore_fp_precision`
    (XLA's VerifyReducerShape, all its verifier checks for scatter, select-and-scatter and
    the collectives; reduce and reduce-window also need the same types unless mixed precision
    is allowed) its parameters may be floats of other widths than the operands: the reducer
    works in its own types, and its result must match its own accumulators."""
    params = [array(t, ()) for t in acc] + [array(t, ()) for t in values]
    match = same_ignoring_fp_precision if ignore_fp_precision else same
    comp = check_signature(instr, attr, params, match=match)
    root = comp.root.shape
    want = [array(s.element_type, ()) for s in comp.parameter_shapes[: len(acc)]]
    ok = (len(want) == 1 and same(root, want[0])) or same(root, Shape.tuple_of(want))
    if not ok:
        expected = fmt(want[0]) if len(want) == 1 else fmt(Shape.tuple_of(want))
        raise fail(
            instr, f"{attr}=%{comp.name} returns {fmt(root)}, expected {expected}", SignatureError
        )


def component_type(etype):
    """The float type of a complex type's parts (c64 -> f32, c128 -> f64)."""
    return ELEMENT_TYPES["f32" if etype.bits == 64 else "f64"]


# -- elementwise ----------------------------------------------------------------------------
def _check_kind(instr, shape: Shape) -> None:
    if shape.element_type.kind not in OPCODES[instr.opcode].kinds:
        raise fail(instr, f"does not accept element type {shape.dtype}")


def elementwise(instr, mixed: bool = False) -> Shape:
    # copy (and only copy) may also copy a tuple
    if instr.opcode == "copy" and instr.operand_count == 1 and instr.operand(0).shape.is_tuple:
        return instr.operand(0).shape.without_layout()
    shapes = operand_arrays(instr)
    same_dims_all(instr, shapes)
    same_type_all(instr, shapes, mixed=mixed)
    _check_kind(instr, shapes[0])
    return shapes[0].with_dtype(widest(shapes)).without_layout()


def abs_(instr) -> Shape:
    shape = elementwise(instr)
    if shape.element_type.is_complex:
        return shape.with_dtype(component_type(shape.element_type))
    return shape


def is_finite(instr) -> Shape:
    shape = operand_array(instr, 0)
    _check_kind(instr, shape)
    return shape.with_dtype("pred").without_layout()


def complex_part(instr) -> Shape:
    shape = operand_array(instr, 0)
    _check_kind(instr, shape)  # real/imag of a real number: XLA allows it
    if shape.element_type.is_complex:
        return shape.with_dtype(component_type(shape.element_type)).without_layout()
    return shape.without_layout()


def complex_(instr) -> Shape:
    shapes = operand_arrays(instr)
    same_dims_all(instr, shapes)
    same_type_all(instr, shapes)
    _check_kind(instr, shapes[0])
    if shapes[0].dtype not in ("f32", "f64"):  # no complex type of narrower parts
        raise fail(instr, f"needs f32 or f64 operands, got {shapes[0].dtype}")
    return shapes[0].with_dtype("c64" if shapes[0].dtype == "f32" else "c128").without_layout()


def compare(instr, mixed: bool = False) -> Shape:
    shapes = operand_arrays(instr)
    same_dims_all(instr, shapes)
    same_type_all(instr, shapes, mixed=mixed)
    return shapes[0].with_dtype("pred").without_layout()


def convert(instr) -> Shape:
    """convert and stochastic-convert: the declared element type over the operand's dims."""
    target = require_declared(instr)
    shape = operand_array(instr, 0)
    if instr.opcode == "stochastic-convert":
        bits = operand_array(instr, 1)
        if (
            bits.dims != shape.dims
            or bits.element_type.kind != UNSIGNED
            or bits.element_type.bits != shape.element_type.bits
        ):
            raise fail(
                instr,
                f"random bits must be unsigned, of the operand's dims and bit "
                f"width ({shape.element_type.bits}), got {fmt(bits)}",
            )
    if not target.is_array:
        raise fail(instr, f"result must be an array, got {fmt(target)}")
    return shape.with_dtype(target.element_type).without_layout()


def bitcast_convert(instr) -> Shape:
    """Same bits; a narrower result type adds a trailing dim of the width ratio, a wider one
    consumes it."""
    target = require_declared(instr)
    shape = operand_array(instr, 0)
    old, new = shape.element_type.bits, target.element_type.bits
    if not target.is_array or not new:
        raise fail(instr, f"result must be an array, got {fmt(target)}")
    if old == new:
        dims = shape.dims
    elif old > new:
        if old % new:
            raise fail(instr, f"{shape.dtype} does not split evenly into {target.dtype}")
        dims = shape.dims + (old // new,)
    else:
        if new % old or not shape.rank or shape.dims[-1] != new // old:
            raise fail(
                instr,
                f"converting {fmt(shape)} to the wider {target.dtype} needs a "
                f"trailing dim of {new // old if new % old == 0 else '?'}",
            )
        dims = shape.dims[:-1]
    return array(target.element_type, dims)


def select(instr, mixed: bool = False) -> Shape:
    pred = operand_array(instr, 0)
    on_true, on_false = instr.operand(1).shape, instr.operand(2).shape
    if pred.dtype != "pred":
        raise fail(instr, f"the selector must be pred, got {fmt(pred)}")
    if not (same_ignoring_fp_precision if mixed else same)(on_true, on_false):
        raise fail(instr, f"branches differ: {fmt(on_true)} and {fmt(on_false)}")
    if pred.rank and (on_true.is_tuple or pred.dims != on_true.dims):
        raise fail(instr, f"the selector {fmt(pred)} must be a scalar or match {fmt(on_true)}")
    if on_true.is_tuple:
        return on_true.without_layout()
    return on_true.with_dtype(widest([on_true, on_false])).without_layout()


def clamp(instr, mixed: bool = False) -> Shape:
    low, operand, high = operand_arrays(instr)
    for bound in (low, high):
        if not same_type(bound, operand, mixed):
            raise fail(
                instr,
                f"bounds must have the operand's element type: {fmt(bound)} vs {fmt(operand)}",
            )
        if bound.rank and bound.dims != operand.dims:
            raise fail(instr, f"bound {fmt(bound)} must be a scalar or match {fmt(operand)}")
    return operand.without_layout()


def map_(instr, mixed: bool = False) -> Shape:
    shapes = operand_arrays(instr)
    if not shapes:
        raise fail(instr, "needs at least one operand")
    same_dims_all(instr, shapes)
    rank = shapes[0].rank
    dims = dim_list(instr, "dimensions", rank, default=tuple(range(rank)))
    if dims != tuple(range(rank)):
        raise fail(instr, f"dimensions must be {{0..{rank - 1}}} in order, got {list(dims)}")
    comp = check_signature(
        instr,
        "to_apply",
        [array(s.element_type, ()) for s in shapes],
        match=same_ignoring_fp_precision if mixed else same,
    )
    root = comp.root.shape
    if not root.is_array or root.rank:
        raise fail(
            instr, f"to_apply=%{comp.name} must return a scalar, got {fmt(root)}", SignatureError
        )
    return array(root.element_type, shapes[0].dims)


def same_as_operand(instr) -> Shape:
    if not instr.operand_count:
        raise fail(instr, "needs an operand")
    return instr.operand(0).shape.without_layout()
