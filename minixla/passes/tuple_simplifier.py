"""Tuple simplification: take tuple elements straight from the tuple that built them.

Two local rules, run by the pattern engine:
    get-tuple-element(tuple(a0, ..., an), index=i)        -> ai
    tuple(gte(t, 0), gte(t, 1), ..., gte(t, n-1)), |t| = n -> t
"""

from __future__ import annotations

from ..ir.module import HloModule
from .base import Pass, register_pass
from .patterns import RuleSet, m, rewrite

TUPLE_RULES = RuleSet("tuple-simplifier")


@TUPLE_RULES.rule(m.GetTupleElement(m.Tuple(name="t")))
def gte_of_tuple(root, t):
    return t.operand(root.attrs["index"])  # gte(tuple(a0..an), i) -> ai


@TUPLE_RULES.rule(m.Tuple())
def tuple_of_gtes(root):
    # tuple(gte(t, 0), ..., gte(t, n-1)) -> t when t has exactly n elements
    if root.operand_count == 0 or any(o.opcode != "get-tuple-element" for o in root.operands):
        return None
    source = root.operand(0).operand(0)
    if len(source.shape.tuple_shapes) != root.operand_count:
        return None
    for i, operand in enumerate(root.operands):
        if operand.operand(0) is not source or operand.attrs["index"] != i:
            return None
    return source


@register_pass
class TupleSimplifier(Pass):
    name = "tuple-simplifier"

    def run(self, module: HloModule) -> bool:
        return rewrite(module, TUPLE_RULES)
