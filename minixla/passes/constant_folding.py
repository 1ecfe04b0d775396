"""Constant folding: evaluate instructions whose operands are all constants.

One rule, run by the pattern engine, that calls the interpreter's handler for the opcode, so
folding means exactly what running the program means. Not folded:
  * iota and broadcast: a big literal costs more than recomputing it;
  * results over MAX_ELEMENTS elements, unless smaller than the operands together;
  * side effects and random numbers, control flow, calls, collectives and other ops
    (custom-call, rng-bit-generator, batch-norm...), and fft (slow to evaluate).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import MinixlaError
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import CONTRACTION, ELEMENTWISE, MOVEMENT, REDUCTION
from .base import Pass, register_pass
from .graph_utils import has_side_effect
from .patterns import RuleSet, m, rewrite

MAX_ELEMENTS = 1024
_FOLDABLE_KINDS = (ELEMENTWISE, MOVEMENT, REDUCTION, CONTRACTION)
_NEVER = frozenset({"iota", "broadcast", "fft", "rng", "rng-bit-generator", "constant"})

FOLDING_RULES = RuleSet("constant-folding")


def _elements(shape) -> int:
    return sum(math.prod(s.dims) for _, s in shape.leaves() if s.is_array)


def foldable(instr: HloInstruction) -> bool:
    if instr.opcode in _NEVER or not all(
        o.opcode == "constant" and not o.elided for o in instr.operands
    ):  # an elided constant (`{...}`) has no values to fold
        return False
    if instr.opdef.kind not in _FOLDABLE_KINDS and instr.opcode != "get-tuple-element":
        return False
    if has_side_effect(instr) or any(not s.is_array for _, s in instr.shape.leaves()):
        return False
    size = _elements(instr.shape)
    return size <= MAX_ELEMENTS or size < sum(_elements(o.shape) for o in instr.operands)


@FOLDING_RULES.rule(m.Any().where(foldable, "an instruction with constant operands"))
def fold(root: HloInstruction) -> HloInstruction | None:
    # op(constants...) -> constant(op evaluated by the interpreter)
    from ..reference.evaluator import Evaluator

    evaluator = Evaluator(root.computation.module)
    handler = evaluator.table.get(root.opcode)
    if handler is None:
        return None
    try:
        with np.errstate(all="ignore"):
            value = handler(evaluator, root, [o.literal for o in root.operands])
    except (MinixlaError, ArithmeticError, ValueError):
        return None  # leave it for run time, where the error is reported properly
    return HloInstruction.constant(_to_literal(value, root.shape), root.shape)


def _to_literal(value, shape):
    if shape.is_tuple:
        return tuple(_to_literal(v, s) for v, s in zip(value, shape.tuple_shapes))
    return np.asarray(value, dtype=shape.numpy_dtype).reshape(shape.dims)


@register_pass
class ConstantFolding(Pass):
    name = "constant-folding"

    def run(self, module: HloModule) -> bool:
        return rewrite(module, FOLDING_RULES)
