"""`minixla.ops`: one function per HLO opcode, in the style of XLA's client library.

Functions are named after the opcode (`get-tuple-element` -> GetTupleElement); the common XLA
client spellings (Exp, Neg, Sub, Mul, Div, Max, ...) are aliases. `OPCODE_FUNCTIONS` maps each
opcode to its function. Operands must be XlaOps (make constants with `Constant`); shapes are
inferred and checked when the op is added. Binary ops broadcast nothing implicitly except a
scalar operand, or the lower-rank operand along explicit `broadcast_dimensions` (XLA's rule).
Computation arguments (reducers, comparators, bodies) are HloComputations or Python callables
that receive one XlaOp per parameter.
"""

from __future__ import annotations

from .ops_control import *  # noqa: F401,F403 - this module is the public facade
from .ops_core import *  # noqa: F401,F403
from ..ir.opcodes import OPCODES
from ..reference.evaluator import DECLINED
from .ops_core import _camel

# XLA client spellings.
Neg, Exp, Expm1, Log1p, Sin, Cos = (
    Negate,
    Exponential,
    ExponentialMinusOne,
    LogPlusOne,
    Sine,
    Cosine,
)
Round, PopulationCount, Clz = RoundNearestAfz, Popcnt, CountLeadingZeros
Sub, Mul, Div, Rem, Max, Min, Pow = Subtract, Multiply, Divide, Remainder, Maximum, Minimum, Power
ConvertElementType, BitcastConvertType, Rev, ConcatInDim = (
    Convert,
    BitcastConvert,
    Reverse,
    Concatenate,
)
DotGeneral, ConvGeneralDilated, OptimizationBarrier, TopK = Dot, Convolution, OptBarrier, Topk

# Opcodes the builder has no function for, and why: the ones no backend runs.
NO_FUNCTION = {
    op: f"no backend runs it: {why}" for op, why in DECLINED.items() if _camel(op) not in globals()
}

OPCODE_FUNCTIONS = {op: globals()[_camel(op)] for op in OPCODES if op not in NO_FUNCTION}
