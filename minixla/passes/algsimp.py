"""The algebraic simplifier: XLA's AlgebraicSimplifier as a table of rewrite rules.

The rules live by op family in algsimp_rules_{arith,movement,reduce}.py; each is one small
function named for its identity. This file adds the canonicalization rule and assembles the
table in the order rules are tried: canonical form first, so later patterns see constants on
the right. Rules never change a result: not for NaN, not for -0.0, not for integer overflow
(stricter than XLA where the two differ; see algsimp_rules_arith.py).
"""

from __future__ import annotations

from ..ir.module import HloModule
from ..ir.opcodes import COMMUTATIVE, OPCODES
from .algsimp_rules_arith import ARITH
from .algsimp_rules_movement import MOVEMENT
from .algsimp_rules_reduce import REDUCE
from .base import Pass, register_pass
from .patterns import RuleSet, m, new, rewrite

CANONICAL = RuleSet("algsimp")
_COMMUTATIVE_BINARY = tuple(
    sorted(name for name, row in OPCODES.items() if row.has(COMMUTATIVE) and row.arity == 2)
)


def is_constant_like(instr) -> bool:
    """A constant, or a broadcast of one."""
    return instr.opcode == "constant" or (
        instr.opcode == "broadcast" and instr.operand(0).opcode == "constant"
    )


@CANONICAL.rule(m.Op(_COMMUTATIVE_BINARY))
def constant_to_right(root):
    # op(C, x) -> op(x, C) for commutative op: one canonical form for later rules and for CSE
    lhs, rhs = root.operands
    if not is_constant_like(lhs) or is_constant_like(rhs):
        return None
    return new(root.opcode, root.shape, rhs, lhs, **root.attrs)


ALGSIMP = RuleSet("algsimp").extend(CANONICAL, ARITH, MOVEMENT, REDUCE)


@register_pass
class AlgebraicSimplifier(Pass):
    name = "algsimp"

    def run(self, module: HloModule) -> bool:
        return rewrite(module, ALGSIMP)
