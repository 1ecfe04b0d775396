"""One test per algsimp arithmetic rule (it fires, with CHECK lines on the result) and one where
it must not fire. Each runs that rule alone; values are also compared on the interpreter."""

import pytest

from minixla.passes.algsimp import ALGSIMP
from minixla.passes.algsimp_rules_arith import ARITH
from minixla.testing import check_pass, rule_pass


def module(body: str) -> str:
    return "HloModule m\nENTRY main {\n" + body.strip("\n") + "\n}\n"


F8, S8 = "f32[8] parameter(0)", "s32[8] parameter(0)"

FIRES = {
    "add_zero": (
        """
  x = s32[8] parameter(0)
  z = s32[8] broadcast(s32[] constant(0)), dimensions={}
  ROOT r = s32[8] add(z, x)""",
        "CHECK: ROOT %x = s32[8]{0} parameter(0)",
    ),
    "add_negative_zero": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] add(x, f32[] constant(-0.0))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "subtract_zero": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] subtract(x, f32[] constant(0))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "subtract_self": (
        f"""
  x = {S8}
  ROOT r = s32[8] subtract(x, x)""",
        """
  CHECK: %[[Z:.*]] = s32[] constant(0)
  CHECK: ROOT %r = s32[8]{0} broadcast(%[[Z]]), dimensions={}""",
    ),
    "zero_minus": (
        f"""
  x = {S8}
  z = s32[8] broadcast(s32[] constant(0)), dimensions={{}}
  ROOT r = s32[8] subtract(z, x)""",
        "CHECK: ROOT %r = s32[8]{0} negate(%x)",
    ),
    "subtract_negate": (
        """
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  n = f32[] negate(y)
  ROOT r = f32[] subtract(x, n)""",
        "CHECK: ROOT %r = f32[] add(%x, %y)",
    ),
    "add_negate": (
        """
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  n = f32[] negate(y)
  ROOT r = f32[] add(n, x)""",
        "CHECK: ROOT %r = f32[] subtract(%x, %y)",
    ),
    "multiply_one": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] multiply(x, f32[] constant(1))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "multiply_zero": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] multiply(x, s32[] constant(0))""",
        "CHECK: ROOT %{{.*}} = s32[] constant(0)",
    ),
    "multiply_negates": (
        """
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] multiply(f32[] negate(x), f32[] negate(y))""",
        "CHECK: ROOT %r = f32[] multiply(%x, %y)",
    ),
    "divide_one": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] divide(x, s32[] constant(1))""",
        "CHECK: ROOT %x = s32[] parameter(0)",
    ),
    "divide_by_power_of_two": (
        f"""
  x = {F8}
  c = f32[8] broadcast(f32[] constant(-4)), dimensions={{}}
  ROOT r = f32[8] divide(x, c)""",
        """
  CHECK: %[[C:.*]] = f32[] constant(-0.25)
  CHECK: %[[B:.*]] = f32[8]{0} broadcast(%[[C]]), dimensions={}
  CHECK: ROOT %r = f32[8]{0} multiply(%x, %[[B]])""",
    ),
    "power_one": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] power(x, f32[] constant(1))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "power_zero": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] power(x, f32[] constant(0))""",
        "CHECK: ROOT %r = f32[] constant(1)",
    ),
    "negate_negate": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] negate(s32[] negate(x))""",
        "CHECK: ROOT %x = s32[] parameter(0)",
    ),
    "not_not": (
        """
  x = pred[] parameter(0)
  ROOT r = pred[] not(pred[] not(x))""",
        "CHECK: ROOT %x = pred[] parameter(0)",
    ),
    "unary_idempotent": (
        f"""
  x = {F8}
  f = f32[8] floor(x)
  ROOT r = f32[8] floor(f)""",
        "CHECK: ROOT %f = f32[8]{0} floor(%x)",
    ),
    "abs_negate": (
        f"""
  x = {F8}
  ROOT r = f32[8] abs(f32[8] negate(x))""",
        "CHECK: ROOT %r = f32[8]{0} abs(%x)",
    ),
    "idempotent_same_operands": (
        f"""
  x = {F8}
  ROOT r = f32[8] maximum(x, x)""",
        "CHECK: ROOT %x = f32[8]{0} parameter(0)",
    ),
    "maximum_lowest": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] maximum(f32[] constant(-inf), x)""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "minimum_highest": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] minimum(x, f32[] constant(inf))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "maximum_highest": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] maximum(x, s32[] constant(2147483647))""",
        "CHECK: ROOT %{{.*}} = s32[] constant(2147483647)",
    ),
    "minimum_lowest": (
        """
  x = u8[] parameter(0)
  ROOT r = u8[] minimum(x, u8[] constant(0))""",
        "CHECK: ROOT %{{.*}} = u8[] constant(0)",
    ),
    "clamp_unbounded": (
        """
  x = f32[] parameter(0)
  ROOT r = f32[] clamp(f32[] constant(-inf), x, f32[] constant(inf))""",
        "CHECK: ROOT %x = f32[] parameter(0)",
    ),
    "and_all_ones": (
        """
  x = pred[] parameter(0)
  ROOT r = pred[] and(x, pred[] constant(true))""",
        "CHECK: ROOT %x = pred[] parameter(0)",
    ),
    "and_zero": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] and(x, s32[] constant(0))""",
        "CHECK: ROOT %{{.*}} = s32[] constant(0)",
    ),
    "or_zero": (
        """
  x = pred[] parameter(0)
  ROOT r = pred[] or(x, pred[] constant(false))""",
        "CHECK: ROOT %x = pred[] parameter(0)",
    ),
    "or_all_ones": (
        """
  x = u8[] parameter(0)
  ROOT r = u8[] or(x, u8[] constant(255))""",
        "CHECK: ROOT %{{.*}} = u8[] constant(255)",
    ),
    "xor_zero": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] xor(x, s32[] constant(0))""",
        "CHECK: ROOT %x = s32[] parameter(0)",
    ),
    "xor_self": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] xor(x, x)""",
        "CHECK: ROOT %r = s32[] constant(0)",
    ),
    "shift_by_zero": (
        """
  x = s32[] parameter(0)
  ROOT r = s32[] shift-right-logical(x, s32[] constant(0))""",
        "CHECK: ROOT %x = s32[] parameter(0)",
    ),
    "select_constant_predicate": (
        f"""
  x = {F8}
  y = f32[8] parameter(1)
  p = pred[8] broadcast(pred[] constant(false)), dimensions={{}}
  ROOT r = f32[8] select(p, x, y)""",
        "CHECK: ROOT %y = f32[8]{0} parameter(1)",
    ),
    "select_same_branches": (
        f"""
  p = pred[8] parameter(1)
  x = {F8}
  ROOT r = f32[8] select(p, x, x)""",
        "CHECK: ROOT %x = f32[8]{0} parameter(0)",
    ),
    "select_not_predicate": (
        f"""
  p = pred[8] parameter(2)
  x = {F8}
  y = f32[8] parameter(1)
  ROOT r = f32[8] select(pred[8] not(p), x, y)""",
        "CHECK: ROOT %r = f32[8]{0} select(%p, %y, %x)",
    ),
    "select_true_false": (
        """
  p = pred[4] parameter(0)
  t = pred[4] broadcast(pred[] constant(true)), dimensions={}
  f = pred[4] broadcast(pred[] constant(false)), dimensions={}
  ROOT r = pred[4] select(p, t, f)""",
        "CHECK: ROOT %p = pred[4]{0} parameter(0)",
    ),
    "select_false_true": (
        """
  p = pred[4] parameter(0)
  t = pred[4] broadcast(pred[] constant(true)), dimensions={}
  f = pred[4] broadcast(pred[] constant(false)), dimensions={}
  ROOT r = pred[4] select(p, f, t)""",
        "CHECK: ROOT %r = pred[4]{0} not(%p)",
    ),
    "compare_same_operands": (
        """
  x = s32[4] parameter(0)
  ROOT r = pred[4] compare(x, x), direction=LE""",
        """
  CHECK: %[[T:.*]] = pred[] constant(true)
  CHECK: ROOT %r = pred[4]{0} broadcast(%[[T]]), dimensions={}""",
    ),
    "not_compare": (
        """
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  ROOT r = pred[4] not(pred[4] compare(x, y), direction=LT)""",
        "CHECK: ROOT %r = pred[4]{0} compare(%x, %y), direction=GE",
    ),
    "compare_constant_to_right": (
        """
  x = f32[] parameter(0)
  c = f32[] constant(2)
  ROOT r = pred[] compare(c, x), direction=LT""",
        "CHECK: ROOT %r = pred[] compare(%x, %c), direction=GT",
    ),
    "compare_pred_identity": (
        """
  x = pred[4] parameter(0)
  t = pred[4] broadcast(pred[] constant(true)), dimensions={}
  ROOT r = pred[4] compare(x, t), direction=EQ""",
        "CHECK: ROOT %x = pred[4]{0} parameter(0)",
    ),
    "convert_same_type": (
        f"""
  x = {F8}
  ROOT r = f32[8] convert(x)""",
        "CHECK: ROOT %x = f32[8]{0} parameter(0)",
    ),
    "convert_of_lossless_convert": (
        """
  x = s8[8] parameter(0)
  w = s32[8] convert(x)
  ROOT r = f32[8] convert(w)""",
        "CHECK: ROOT %r = f32[8]{0} convert(%x)",
    ),
    "bitcast_convert_same_type": (
        """
  x = u32[8] parameter(0)
  ROOT r = u32[8] bitcast-convert(x)""",
        "CHECK: ROOT %x = u32[8]{0} parameter(0)",
    ),
    "reduce_precision_noop": (
        f"""
  x = {F8}
  ROOT r = f32[8] reduce-precision(x), exponent_bits=8, mantissa_bits=23""",
        "CHECK: ROOT %x = f32[8]{0} parameter(0)",
    ),
}

UNCHANGED = {
    # -0.0 + 0.0 = +0.0, so x + 0.0 is not x for floats
    "add_zero": f"""
  x = {F8}
  z = f32[8] broadcast(f32[] constant(0)), dimensions={{}}
  ROOT r = f32[8] add(x, z)""",
    "add_negative_zero": """
  x = f32[] parameter(0)
  ROOT r = f32[] add(x, f32[] constant(0))""",
    # x - (-0.0) is x + 0.0: -0.0 becomes +0.0
    "subtract_zero": """
  x = f32[] parameter(0)
  ROOT r = f32[] subtract(x, f32[] constant(-0.0))""",
    "subtract_self": f"""
  x = {F8}
  ROOT r = f32[8] subtract(x, x)""",
    "zero_minus": """
  x = f32[] parameter(0)
  ROOT r = f32[] subtract(f32[] constant(0), x)""",
    "subtract_negate": """
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] subtract(f32[] negate(x), y)""",
    "add_negate": """
  x = c64[] parameter(0)
  y = c64[] parameter(1)
  ROOT r = c64[] add(x, c64[] negate(y))""",
    "multiply_one": """
  x = c64[1] parameter(0)
  ROOT r = c64[1] multiply(x, c64[1] constant({(1, 0)}))""",
    # NaN * 0 and inf * 0 are NaN
    "multiply_zero": """
  x = f32[] parameter(0)
  ROOT r = f32[] multiply(x, f32[] constant(0))""",
    "multiply_negates": """
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] multiply(f32[] negate(x), y)""",
    "divide_one": """
  x = s32[] parameter(0)
  ROOT r = s32[] divide(s32[] constant(1), x)""",
    "divide_by_power_of_two": """
  x = f32[] parameter(0)
  ROOT r = f32[] divide(x, f32[] constant(3))""",
    "power_one": """
  x = f32[] parameter(0)
  ROOT r = f32[] power(x, f32[] constant(2))""",
    "power_zero": """
  x = f32[] parameter(0)
  ROOT r = f32[] power(f32[] constant(0), x)""",
    "negate_negate": """
  x = s32[] parameter(0)
  ROOT r = s32[] negate(s32[] not(x))""",
    "not_not": """
  x = pred[] parameter(0)
  ROOT r = pred[] not(x)""",
    "unary_idempotent": f"""
  x = {F8}
  ROOT r = f32[8] floor(f32[8] ceil(x))""",
    "abs_negate": f"""
  x = {F8}
  ROOT r = f32[8] negate(f32[8] abs(x))""",
    "idempotent_same_operands": """
  x = f32[] parameter(0)
  ROOT r = f32[] add(x, x)""",
    "maximum_lowest": """
  x = f32[] parameter(0)
  ROOT r = f32[] maximum(x, f32[] constant(inf))""",
    "minimum_highest": """
  x = f32[] parameter(0)
  ROOT r = f32[] minimum(x, f32[] constant(-inf))""",
    # max(NaN, +inf) is NaN, not +inf
    "maximum_highest": """
  x = f32[] parameter(0)
  ROOT r = f32[] maximum(x, f32[] constant(inf))""",
    "minimum_lowest": """
  x = f32[] parameter(0)
  ROOT r = f32[] minimum(x, f32[] constant(-inf))""",
    "clamp_unbounded": """
  x = f32[] parameter(0)
  ROOT r = f32[] clamp(f32[] constant(0), x, f32[] constant(inf))""",
    "and_all_ones": """
  x = s32[] parameter(0)
  ROOT r = s32[] and(x, s32[] constant(1))""",
    "and_zero": """
  x = s32[] parameter(0)
  ROOT r = s32[] and(x, s32[] constant(2))""",
    "or_zero": """
  x = pred[] parameter(0)
  ROOT r = pred[] or(x, pred[] parameter(1))""",
    "or_all_ones": """
  x = u8[] parameter(0)
  ROOT r = u8[] or(x, u8[] constant(254))""",
    "xor_zero": """
  x = s32[] parameter(0)
  ROOT r = s32[] xor(x, s32[] constant(1))""",
    "xor_self": """
  x = s32[] parameter(0)
  ROOT r = s32[] xor(x, s32[] parameter(1))""",
    "shift_by_zero": """
  x = s32[] parameter(0)
  ROOT r = s32[] shift-left(s32[] constant(0), x)""",
    "select_constant_predicate": f"""
  p = pred[8] parameter(2)
  x = {F8}
  y = f32[8] parameter(1)
  ROOT r = f32[8] select(p, x, y)""",
    "select_same_branches": f"""
  p = pred[8] parameter(2)
  x = {F8}
  y = f32[8] parameter(1)
  ROOT r = f32[8] select(p, x, y)""",
    "select_not_predicate": """
  p = pred[8] parameter(0)
  ROOT r = pred[8] not(pred[8] select(p, p, p))""",
    "select_true_false": """
  p = pred[4] parameter(0)
  x = pred[4] parameter(1)
  f = pred[4] broadcast(pred[] constant(false)), dimensions={}
  ROOT r = pred[4] select(p, x, f)""",
    "select_false_true": """
  p = pred[4] parameter(0)
  t = pred[4] broadcast(pred[] constant(true)), dimensions={}
  ROOT r = pred[4] select(p, t, t)""",
    # NaN == NaN is false
    "compare_same_operands": f"""
  x = {F8}
  ROOT r = pred[8] compare(x, x), direction=EQ""",
    # with NaN, x < y and x >= y are both false
    "not_compare": """
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT r = pred[4] not(pred[4] compare(x, y), direction=LT)""",
    "compare_constant_to_right": """
  x = f32[] parameter(0)
  ROOT r = pred[] compare(x, f32[] constant(2)), direction=LT""",
    "compare_pred_identity": """
  x = pred[4] parameter(0)
  t = pred[4] broadcast(pred[] constant(true)), dimensions={}
  ROOT r = pred[4] compare(x, t), direction=NE""",
    "convert_same_type": f"""
  x = {F8}
  ROOT r = s32[8] convert(x)""",
    # f32 -> f16 rounds, so the round trip is not the identity
    "convert_of_lossless_convert": f"""
  x = {F8}
  h = f16[8] convert(x)
  ROOT r = f32[8] convert(h)""",
    "bitcast_convert_same_type": f"""
  x = {F8}
  ROOT r = s32[8] bitcast-convert(x)""",
    "reduce_precision_noop": f"""
  x = {F8}
  ROOT r = f32[8] reduce-precision(x), exponent_bits=8, mantissa_bits=10""",
}


@pytest.mark.parametrize("rule", sorted(FIRES))
def test_rule_fires(rule):
    body, checks = FIRES[rule]
    check_pass(rule_pass(ALGSIMP, rule), module(body), checks)


@pytest.mark.parametrize("rule", sorted(UNCHANGED))
def test_rule_does_not_fire(rule):
    check_pass(rule_pass(ALGSIMP, rule), module(UNCHANGED[rule]), expected=None)


def test_every_arith_rule_has_both_tests():
    names = {r.name for r in ARITH.rules}
    assert names == set(FIRES) == set(UNCHANGED)


def test_true_and_false_match_only_preds():
    # found by the property test: select(p, 1.0, 0.0) is not p
    check_pass(
        "algsimp",
        module("""
  p = pred[4] parameter(0)
  one = f32[4] broadcast(f32[] constant(1)), dimensions={}
  zero = f32[4] broadcast(f32[] constant(0)), dimensions={}
  ROOT r = f32[4] select(p, one, zero)"""),
        expected=None,
    )


def test_abs_of_negate_is_kept_for_unsigned():
    # abs is the identity on unsigned ints and -x wraps, so |-x| is -x, not x
    check_pass(
        "algsimp",
        module("""
  x = u8[4] parameter(0)
  ROOT r = u8[4] abs(u8[4] negate(x))"""),
        expected=None,
    )


@pytest.mark.parametrize(
    "body, checks",
    [
        (
            """
  x = f16[4] parameter(0)
  ROOT r = f32[4] minimum(f32[4] broadcast(f32[] constant(inf)), dimensions={}, x)""",
            "CHECK: ROOT %r = f32[4]{0} convert(%x)",
        ),
        (
            """
  y = f32[4] parameter(0)
  ROOT r = f16[4] maximum(y, f16[4] broadcast(f16[] constant(-inf)), dimensions={})""",
            "CHECK: ROOT %r = f16[4]{0} convert(%y)",
        ),
        (
            """
  x = bf16[4] parameter(0)
  n = f32[4] negate(x)
  ROOT r = f32[4] negate(n)""",
            "CHECK: ROOT %r = f32[4]{0} convert(%x)",
        ),
    ],
    ids=["minimum_highest", "maximum_lowest", "negate_negate"],
)
def test_identities_on_mixed_precision_operands_convert_to_the_result_type(body, checks):
    # The rule leaves an operand of another float type; the engine converts it (values are
    # compared on the interpreter: widening is exact, narrowing rounds like the op).
    check_pass("algsimp", module(body), checks)
