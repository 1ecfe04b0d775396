"""dot-sum-merger: a sum of dots becomes one dot over operands concatenated along the
contracting dimension.

    add(dot(a1, b1), dot(a2, b2)) -> dot(concatenate(a1, a2), concatenate(b1, b2))

where both dots have the same dimension numbers, one contracting dimension per side, operands
that differ only in its length, and no other users. An unrolled recurrence's weight gradient
is such a sum, one dot per step with the batch as the contracting length (an LSTM's
[1024, 32] x [32, 256] eight times); one dot over all steps runs BLAS on a deep product and
leaves out the adds. The rewrite applies where it moves fewer bytes: copying the operands
into the concatenations (read and write) against the adds it removes (two reads and a write
of the result).

It reassociates the sum, so float results change by rounding (as BLAS's own blocking does);
the algebraic simplifier, whose rules never change a result, leaves it out.
"""

from __future__ import annotations

from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from .base import Pass, register_pass
from .patterns import RuleSet, m, new, rewrite

DOT_SUMS = RuleSet("dot-sum-merger")


@DOT_SUMS.rule(m.Add(m.Any("x"), m.Any("y")))
def sum_of_dots(root, x, y):
    if not (_merges_into(x, root) and _merges_into(y, root) and _same_form(x, y)):
        return None
    copied = sum(o.shape.numel() for o in (*x.operands, *y.operands))
    if 2 * copied > 3 * root.shape.numel():
        return None
    lhs = _concatenate(x.operand(0), y.operand(0), _contracting(x, "lhs"))
    rhs = _concatenate(x.operand(1), y.operand(1), _contracting(x, "rhs"))
    return new("dot", root.shape, lhs, rhs, **x.attrs)


def _merges_into(dot: HloInstruction, add: HloInstruction) -> bool:
    return (
        dot.opcode == "dot"
        and dot.shape == add.shape
        and all(u is add for u in dot.users)
        and len(dot.attrs.get("lhs_contracting_dims", ())) == 1
        and len(dot.attrs.get("rhs_contracting_dims", ())) == 1
    )


def _contracting(dot: HloInstruction, side: str) -> int:
    return dot.attrs[f"{side}_contracting_dims"][0]


def _same_form(x: HloInstruction, y: HloInstruction) -> bool:
    """Same attributes, and operands equal but for the contracting dimension's length."""
    if _form(x) != _form(y):
        return False
    for number, side in ((0, "lhs"), (1, "rhs")):
        a, b = x.operand(number).shape, y.operand(number).shape
        if a.dtype != b.dtype or a.rank != b.rank:
            return False
        axis = _contracting(x, side)
        if any(p != q for d, (p, q) in enumerate(zip(a.dims, b.dims)) if d != axis):
            return False
    return True


def _form(dot: HloInstruction) -> dict:
    return {k: v for k, v in dot.attrs.items() if k != "metadata"}


def _concatenate(first, second, axis: int) -> HloInstruction:
    """concatenate(first, second) along `axis`, flattening a concatenation that only the dot
    being merged reads (so a chain of sums builds one concatenation, not a nest)."""
    parts = []
    for operand in (first, second):
        if (
            operand.opcode == "concatenate"
            and operand.attrs["dimensions"] == (axis,)
            and len(operand.users) == 1
        ):
            parts.extend(operand.operands)
        else:
            parts.append(operand)
    dims = list(first.shape.dims)
    dims[axis] = sum(p.shape.dims[axis] for p in parts)
    shape = first.shape.with_dims(dims).with_layout(first.shape.layout)
    return new("concatenate", shape, *parts, dimensions=(axis,))


@register_pass
class DotSumMerger(Pass):
    name = "dot-sum-merger"

    def run(self, module: HloModule) -> bool:
        return rewrite(module, DOT_SUMS)
