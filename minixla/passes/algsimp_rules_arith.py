"""Algebraic simplifier rules for elementwise arithmetic, logic, comparisons and conversions.

Every rule keeps results bit-for-bit (NaN stays NaN): an identity that fails for NaN, for
-0.0 or for integer overflow is applied only to the types where it holds. That is stricter
than XLA's AlgebraicSimplifier, which for instance folds `x + 0.0` for floats (wrong for
x = -0.0, since -0.0 + 0.0 = +0.0).
"""

from __future__ import annotations

import numpy as np

from ..ir.opcodes import IDEMPOTENT, opcodes_with
from .patterns import RuleSet, all_ones, filled, highest, lowest, m, new, splat, values_equal
from ..ir.dtypes import finfo

ARITH = RuleSet("algsimp")
X, Y = m.Any("x"), m.Any("y")
_IEEE = ("f16", "bf16", "f32", "f64")  # float types with an ml_dtypes.finfo we trust


def _etype(instr):
    return instr.shape.element_type


def _int(instr) -> bool:
    return _etype(instr).is_integer


def _intlike(instr) -> bool:
    return _etype(instr).is_integer or _etype(instr).kind == "pred"


def _real(instr) -> bool:
    """Integer, pred or real float: the types whose identities below are exact."""
    return not _etype(instr).is_complex


def _is(instr, value) -> bool:
    """A constant (or broadcast of one) whose elements all equal `value`."""
    source = instr.operand(0) if instr.opcode == "broadcast" else instr
    return (
        source.opcode == "constant"
        and not source.elided
        and values_equal(source.literal, value, _etype(source))
    )


# -- add, subtract ------------------------------------------------------------------------------
@ARITH.rule(m.Add(X, splat(0)))
def add_zero(root, x):
    return x if _int(root) else None  # x + 0 -> x (ints; for floats -0.0 + 0.0 is +0.0)


@ARITH.rule(m.Add(X, splat(-0.0)))
def add_negative_zero(root, x):
    return x if _etype(root).is_float else None  # x + (-0.0) -> x, for every float x


@ARITH.rule(m.Subtract(X, splat(0)))
def subtract_zero(root, x):
    return x if _real(root) else None  # x - 0 -> x (floats: -0.0 - 0.0 is -0.0)


@ARITH.rule(m.Subtract(X, X))
def subtract_self(root, x):
    return filled(0, root.shape) if _int(root) else None  # x - x -> 0 (ints; inf - inf = NaN)


@ARITH.rule(m.Subtract(m.Any("zero"), X))
def zero_minus(root, zero, x):
    # 0 - x -> -x for ints; for floats only -0.0 - x is -x (0.0 - 0.0 = +0.0, -(0.0) = -0.0)
    if not ((_int(root) and _is(zero, 0)) or (_etype(root).is_float and _is(zero, -0.0))):
        return None
    return new("negate", root.shape, x)


@ARITH.rule(m.Subtract(X, m.Negate(Y)))
def subtract_negate(root, x, y):
    return new("add", root.shape, x, y) if _real(root) else None  # x - (-y) -> x + y


@ARITH.rule(m.Add(X, m.Negate(Y)))
def add_negate(root, x, y):
    return new("subtract", root.shape, x, y) if _real(root) else None  # x + (-y) -> x - y


# -- multiply, divide, power --------------------------------------------------------------------
@ARITH.rule(m.Multiply(X, splat(1)))
def multiply_one(root, x):
    return x if _real(root) else None  # x * 1 -> x (complex: inf * (1+0j) makes a NaN)


@ARITH.rule(m.Multiply(X, splat(0, name="zero")))
def multiply_zero(root, x, zero):
    return zero if _intlike(root) else None  # x * 0 -> 0 (ints; floats: NaN * 0, inf * 0)


@ARITH.rule(m.Multiply(m.Negate(X), m.Negate(Y)))
def multiply_negates(root, x, y):
    return new("multiply", root.shape, x, y) if _real(root) else None  # (-x)*(-y) -> x*y


@ARITH.rule(m.Divide(X, splat(1)))
def divide_one(root, x):
    return x if _real(root) else None  # x / 1 -> x


@ARITH.rule(m.Divide(X, m.Splat(name="c")))
def divide_by_power_of_two(root, x, c):
    # x / 2^k -> x * 2^-k: exact when 2^-k is a normal number (both round x * 2^-k once)
    if _etype(root).name not in _IEEE:
        return None
    source = c.operand(0) if c.opcode == "broadcast" else c
    value = float(np.asarray(source.literal).reshape(-1)[0])
    if not _is(c, value) or not np.isfinite(value) or value == 0:
        return None
    mantissa, _ = np.frexp(value)
    inverse = 1.0 / value
    info = finfo(root.shape.numpy_dtype)
    if abs(mantissa) != 0.5 or not float(info.tiny) <= abs(inverse) <= float(info.max):
        return None
    return new("multiply", root.shape, x, filled(inverse, root.shape))


@ARITH.rule(m.Power(X, splat(1)))
def power_one(root, x):
    return x if _real(root) else None  # x ** 1 -> x


@ARITH.rule(m.Power(X, splat(0)))
def power_zero(root, x):
    return filled(1, root.shape) if _real(root) else None  # x ** 0 -> 1 (also NaN ** 0 = 1)


# -- unary --------------------------------------------------------------------------------------
@ARITH.rule(m.Negate(m.Negate(X)))
def negate_negate(x):
    return x  # -(-x) -> x (ints wrap both ways)


@ARITH.rule(m.Not(m.Not(X)))
def not_not(x):
    return x  # not(not(x)) -> x


_IDEMPOTENT_UNARY = tuple(sorted(opcodes_with(IDEMPOTENT, arity=1)))


@ARITH.rule(m.Op(_IDEMPOTENT_UNARY, m.Op(_IDEMPOTENT_UNARY, name="inner")))
def unary_idempotent(root, inner):
    # f(f(x)) -> f(x) for f = abs, sign, floor, ceil, rounding (complex sign(sign(z)) rounds)
    if inner.opcode != root.opcode or (root.opcode == "sign" and _etype(root).is_complex):
        return None
    return inner


@ARITH.rule(m.Abs(m.Negate(X)))
def abs_negate(root, x):
    # |-x| -> |x| (not unsigned: abs is the identity there, and -x wraps)
    return None if _etype(x).kind == "unsigned" else new("abs", root.shape, x)


# -- maximum, minimum, clamp --------------------------------------------------------------------
@ARITH.rule(m.Op(("maximum", "minimum", "and", "or"), X, X))
def idempotent_same_operands(x):
    return x  # max(x, x), min(x, x), x & x, x | x -> x (NaN: max(NaN, NaN) is NaN)


@ARITH.rule(m.Maximum(X, splat(lowest)))
def maximum_lowest(x):
    return x  # max(x, -inf) -> x (max propagates NaN, max(-0.0, -inf) = -0.0)


@ARITH.rule(m.Minimum(X, splat(highest)))
def minimum_highest(x):
    return x  # min(x, +inf) -> x


@ARITH.rule(m.Maximum(X, splat(highest, name="top")))
def maximum_highest(root, top):
    return top if _intlike(root) else None  # max(x, INT_MAX) -> INT_MAX (floats: NaN wins)


@ARITH.rule(m.Minimum(X, splat(lowest, name="bottom")))
def minimum_lowest(root, bottom):
    return bottom if _intlike(root) else None  # min(x, INT_MIN) -> INT_MIN


@ARITH.rule(m.Clamp(splat(lowest), X, splat(highest)))
def clamp_unbounded(x):
    return x  # clamp(-inf, x, +inf) -> x


# -- logic and shifts ---------------------------------------------------------------------------
@ARITH.rule(m.And(X, splat(all_ones)))
def and_all_ones(x):
    return x  # x & true -> x, x & ~0 -> x


@ARITH.rule(m.And(X, splat(0, name="zero")))
def and_zero(zero):
    return zero  # x & false -> false


@ARITH.rule(m.Or(X, splat(0)))
def or_zero(x):
    return x  # x | false -> x


@ARITH.rule(m.Or(X, splat(all_ones, name="ones")))
def or_all_ones(ones):
    return ones  # x | true -> true


@ARITH.rule(m.Xor(X, splat(0)))
def xor_zero(x):
    return x  # x ^ 0 -> x


@ARITH.rule(m.Xor(X, X))
def xor_self(root):
    return filled(0, root.shape)  # x ^ x -> 0


@ARITH.rule(m.Op(("shift-left", "shift-right-arithmetic", "shift-right-logical"), X, splat(0)))
def shift_by_zero(x):
    return x  # x << 0 -> x, x >> 0 -> x


# -- select -------------------------------------------------------------------------------------
@ARITH.rule(m.Select(m.Splat(name="p"), X, Y))
def select_constant_predicate(p, x, y):
    # select(true, x, y) -> x; select(false, x, y) -> y
    if _is(p, True):
        return x
    return y if _is(p, False) else None


@ARITH.rule(m.Select(m.Any(), X, X))
def select_same_branches(x):
    return x  # select(p, x, x) -> x


@ARITH.rule(m.Select(m.Not(m.Any("p")), X, Y))
def select_not_predicate(root, p, x, y):
    return new("select", root.shape, p, y, x)  # select(!p, x, y) -> select(p, y, x)


@ARITH.rule(m.Select(m.Any("p"), splat(True), splat(False)))
def select_true_false(root, p):
    return p if p.shape.compatible(root.shape) else None  # select(p, true, false) -> p


@ARITH.rule(m.Select(m.Any("p"), splat(False), splat(True)))
def select_false_true(root, p):
    # select(p, false, true) -> !p
    return new("not", root.shape, p) if p.shape.compatible(root.shape) else None


# -- compare ------------------------------------------------------------------------------------
_SWAPPED = {"EQ": "EQ", "NE": "NE", "LT": "GT", "LE": "GE", "GT": "LT", "GE": "LE"}
_NEGATED = {"EQ": "NE", "NE": "EQ", "LT": "GE", "LE": "GT", "GT": "LE", "GE": "LT"}


def _total_order(compare) -> bool:
    """Integer, pred or TOTALORDER float comparisons: a total order, so x == x and
    !(x < y) == (x >= y) hold (with IEEE floats NaN breaks both)."""
    operand = compare.operand(0)
    return _intlike(operand) or compare.attrs.get("type") == "TOTALORDER"


@ARITH.rule(m.Compare(X, X))
def compare_same_operands(root):
    # x == x, x <= x, x >= x -> true; x != x, x < x, x > x -> false (total orders only)
    if not _total_order(root):
        return None
    return filled(root.attrs["direction"] in ("EQ", "LE", "GE"), root.shape)


@ARITH.rule(m.Not(m.Compare(X, Y, name="cmp")))
def not_compare(root, cmp, x, y):
    # !(x < y) -> x >= y, etc. (total orders only: with NaN both sides of x < y are false)
    if not _total_order(cmp) or cmp.users != [root]:
        return None
    attrs = dict(cmp.attrs, direction=_NEGATED[cmp.attrs["direction"]])
    return new("compare", root.shape, cmp.operand(0), cmp.operand(1), **attrs)


@ARITH.rule(m.Compare(m.Op(("constant", "broadcast"), name="c"), X))
def compare_constant_to_right(root, c, x):
    # compare(C, x, LT) -> compare(x, C, GT): constants go right, as for commutative ops
    if not _is_constant_like(c) or _is_constant_like(x):
        return None
    attrs = dict(root.attrs, direction=_SWAPPED[root.attrs["direction"]])
    return new("compare", root.shape, x, c, **attrs)


def _is_constant_like(instr) -> bool:
    return instr.opcode == "constant" or (
        instr.opcode == "broadcast" and instr.operand(0).opcode == "constant"
    )


@ARITH.rule(m.Compare(X, m.Splat(name="c")))
def compare_pred_identity(root, x, c):
    # (p == true) -> p, (p != false) -> p
    if _etype(x).kind != "pred" or x.shape.dims != root.shape.dims:
        return None
    direction = root.attrs["direction"]
    if (direction == "EQ" and _is(c, True)) or (direction == "NE" and _is(c, False)):
        return x
    return None


# -- conversions --------------------------------------------------------------------------------
@ARITH.rule(m.Convert(X))
def convert_same_type(root, x):
    return x if x.shape.dtype == root.shape.dtype else None  # convert(x: T) to T -> x


def lossless(source, target) -> bool:
    """Every value of element type `source` is exactly representable in `target`."""
    if source.kind == "pred":
        return target.kind != "pred" or target == source
    if source.is_integer and target.is_integer:
        if source.is_signed and not target.is_signed:
            return False
        return target.bits >= source.bits + (not source.is_signed and target.is_signed)
    if source.is_integer and target.name in _IEEE:
        precision = finfo(target.numpy).nmant + 1
        return source.bits - source.is_signed <= precision
    if source.name in _IEEE and target.name in _IEEE:
        a, b = finfo(source.numpy), finfo(target.numpy)
        return b.nmant >= a.nmant and b.maxexp >= a.maxexp and b.minexp <= a.minexp
    return False


@ARITH.rule(m.Convert(m.Convert(X, name="inner")))
def convert_of_lossless_convert(root, inner, x):
    # convert(convert(x: A -> B) -> C) -> convert(x -> C) when A -> B loses nothing
    if inner.users != [root] or not lossless(_etype(x), _etype(inner)):
        return None
    if x.shape.dtype == root.shape.dtype:
        return x
    return new("convert", root.shape, x)


@ARITH.rule(m.BitcastConvert(X))
def bitcast_convert_same_type(root, x):
    return x if x.shape.compatible(root.shape) else None  # bitcast-convert to the same type


@ARITH.rule(m.ReducePrecision(X))
def reduce_precision_noop(root, x):
    # reduce-precision to at least the type's own exponent and mantissa bits -> x
    info = finfo(root.shape.numpy_dtype)
    if root.attrs["exponent_bits"] < info.nexp or root.attrs["mantissa_bits"] < info.nmant:
        return None
    return x
