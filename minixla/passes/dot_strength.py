"""dot-strength-reduction: a batched dot whose one operand has only batch and contracting
dims (a vector per batch element) becomes a multiply and a sum, as XLA's algebraic
simplifier strength-reduces such dots.

    dot(v[b, k], m[b, k, n]) -> reduce(multiply(broadcast(v), m), dims={k}, add)

`einsum('bi,bi->b')` (a row-wise dot), `einsum('bij,bj->bi')` (a batched matrix-vector
product) and a bilinear form's batch sum are such dots. BLAS runs them as one tiny GEMV per
batch element, or, where the batch is not the major dim, after a transposing copy: 3-5x
jax.jit's time. As one fused multiply-and-sum they read each operand once. Dots without a
batch dim stay dots (BLAS's GEMV reads its matrix once too).

The sum is taken in the result's type (f32 or f64; operands of a narrower float type are
converted first, as the dot computes them); it may round differently from BLAS's order, as
any change of summation order does, so the algebraic simplifier (whose rules never change a
result) leaves it out.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule, NameUniquer
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .hlo_utils import add_computation
from .patterns import RuleSet, filled, m, new, rewrite

_SUM_TYPES = ("f32", "f64")
_NARROWER = {"f32": ("bf16", "f16", "f32"), "f64": ("bf16", "f16", "f32", "f64")}


def vector_side(dot: HloInstruction) -> str | None:
    """The side ("lhs" or "rhs") whose operand has only batch and contracting dims, where the
    dot has a batch dim, a contracting dim and a type the sum can be taken in; else None."""
    attrs = dot.attrs
    if not attrs.get("lhs_batch_dims") or not attrs.get("lhs_contracting_dims"):
        return None  # no batch: BLAS's GEMV; nothing contracted: an outer product
    if dot.shape.dtype not in _SUM_TYPES:
        return None
    if attrs.get("algorithm") is not None:
        return None
    if any(o.shape.dtype not in _NARROWER[dot.shape.dtype] for o in dot.operands):
        return None
    for number, side in ((0, "lhs"), (1, "rhs")):
        operand = dot.operand(number)
        used = len(attrs.get(f"{side}_batch_dims", ())) + len(
            attrs.get(f"{side}_contracting_dims", ())
        )
        if used == operand.shape.rank:
            return side
    return None


def _as(operand: HloInstruction, dtype: str) -> HloInstruction:
    if operand.shape.dtype == dtype:
        return operand
    return new("convert", operand.shape.with_dtype(dtype).with_default_layout(), operand)


def strength_reduced(dot: HloInstruction, side: str, adder: HloComputation) -> HloInstruction:
    """The multiply-and-sum that computes `dot`, whose `side` operand is the vector."""
    other = "rhs" if side == "lhs" else "lhs"
    vector, matrix = (dot.operand(0), dot.operand(1))[:: 1 if side == "lhs" else -1]
    attrs = dot.attrs
    # each vector dim is one of the matrix's dims: its batch or contracting partner
    partner = dict(
        zip(
            tuple(attrs[f"{side}_batch_dims"]) + tuple(attrs[f"{side}_contracting_dims"]),
            tuple(attrs[f"{other}_batch_dims"]) + tuple(attrs[f"{other}_contracting_dims"]),
        )
    )
    dtype = dot.shape.dtype
    vector, matrix = _as(vector, dtype), _as(matrix, dtype)
    order = sorted(range(vector.shape.rank), key=lambda d: partner[d])
    if order != list(range(vector.shape.rank)):
        dims = [vector.shape.dims[d] for d in order]
        vector = new(
            "transpose",
            vector.shape.with_dims(dims).with_default_layout(),
            vector,
            dimensions=tuple(order),
        )
    target = matrix.shape.with_default_layout()
    if vector.shape.dims != target.dims:
        vector = new("broadcast", target, vector, dimensions=tuple(sorted(partner.values())))
    product = new("multiply", target, vector, matrix)
    summed = tuple(sorted(attrs[f"{other}_contracting_dims"]))
    kept = [d for d in range(matrix.shape.rank) if d not in summed]
    # the dot's result: its batch dims in order, then the matrix's free dims in order
    batch = tuple(attrs[f"{other}_batch_dims"])
    wanted = [kept.index(d) for d in batch] + [i for i, d in enumerate(kept) if d not in batch]
    in_order = wanted == list(range(len(kept)))
    reduced = Shape.array(dtype, tuple(matrix.shape.dims[d] for d in kept)).with_default_layout()
    total = new(
        "reduce",
        dot.shape if in_order else reduced,
        product,
        filled(0, Shape.array(dtype, ())),
        dimensions=summed,
        to_apply=adder,
    )
    return total if in_order else new("transpose", dot.shape, total, dimensions=tuple(wanted))


@register_pass
class DotStrengthReduction(Pass):
    name = "dot-strength-reduction"

    def run(self, module: HloModule) -> bool:
        adders: dict[str, HloComputation] = {}

        def adder(dtype: str) -> HloComputation:
            if dtype not in adders:
                names = NameUniquer(module)
                adders[dtype] = add_computation(module, dtype, names, f"dot_sum_{dtype}")
            return adders[dtype]

        rules = RuleSet("dot-strength-reduction")

        @rules.rule(m.Dot(m.Any("a"), m.Any("b")))
        def dot_with_a_vector(root, a, b):
            side = vector_side(root)
            return None if side is None else strength_reduced(root, side, adder(root.shape.dtype))

        return rewrite(module, rules)
