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
from .ops_core import _camel

# XLA client spellings.
Neg, Exp, Expm1, Log1p, Sin, Cos = Negate, Exponential, ExponentialMinusOne, LogPlusOne, \
    Sine, Cosine
Round, PopulationCount, Clz = RoundNearestAfz, Popcnt, CountLeadingZeros
Sub, Mul, Div, Rem, Max, Min, Pow = Subtract, Multiply, Divide, Remainder, Maximum, Minimum, \
    Power
ConvertElementType, BitcastConvertType, Rev, ConcatInDim = Convert, BitcastConvert, Reverse, \
    Concatenate
DotGeneral, ConvGeneralDilated, OptimizationBarrier, TopK = Dot, Convolution, OptBarrier, Topk

OPCODE_FUNCTIONS = {
    "parameter": Parameter, "constant": Constant, "iota": Iota,
    "rng-bit-generator": RngBitGenerator, "replica-id": ReplicaId,
    "partition-id": PartitionId, "after-all": AfterAll,
    **{op: globals()[_camel(op)] for op in [
        "abs", "negate", "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
        "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt",
        "rsqrt", "cbrt", "sine", "cosine", "tan", "tanh", "sinh", "cosh", "asin", "acos",
        "atan", "asinh", "acosh", "atanh", "erf", "erf-inv", "lgamma", "digamma", "not",
        "popcnt", "count-leading-zeros", "is-finite", "real", "imag", "copy", "convert",
        "bitcast-convert", "reduce-precision", "add", "subtract", "multiply", "divide",
        "remainder", "maximum", "minimum", "power", "atan2", "complex", "and", "or", "xor",
        "shift-left", "shift-right-arithmetic", "shift-right-logical", "mulhi", "compare",
        "select", "clamp", "map", "broadcast", "reshape", "transpose", "bitcast", "slice",
        "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "reverse", "gather",
        "scatter", "tuple", "get-tuple-element", "get-dimension-size", "set-dimension-size",
        "reduce", "reduce-window", "select-and-scatter", "sort", "topk", "dot", "convolution",
        "fft", "triangular-solve", "cholesky", "batch-norm-training", "batch-norm-inference",
        "batch-norm-grad", "while", "conditional", "call", "custom-call", "add-dependency",
        "domain", "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
        "collective-broadcast", "collective-permute", "all-reduce-start", "all-gather-start",
        "collective-permute-start", "all-reduce-done", "all-gather-done",
        "collective-permute-done", "copy-start", "copy-done", "async-start", "async-update",
        "async-done", "rng", "fusion"]},
    "opt-barrier": OptBarrier,
}
