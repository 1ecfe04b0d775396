"""dce, cse, tuple-simplifier, call-inliner and constant-folding: HLO text in, CHECK lines out,
and the cases each pass must leave alone."""

import numpy as np
import pytest

from minixla.passes.base import PASSES, get_pass
from minixla.testing import assert_matches, check_pass, m, run_pass

ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def module(body: str, extra: str = "") -> str:
    return "HloModule m\n" + extra + "ENTRY main {\n" + body.strip("\n") + "\n}\n"


def test_passes_are_registered():
    for name in ("dce", "cse", "tuple-simplifier", "call-inliner", "constant-folding", "algsimp"):
        assert get_pass(name).name == name
    assert "dce" in PASSES


# -- dce ----------------------------------------------------------------------------------------
def test_dce_removes_dead_instructions_and_computations():
    check_pass(
        "dce",
        module(
            """
  x = f32[4] parameter(0)
  unused = f32[4] exponential(x)
  dead = f32[] reduce(unused, f32[] constant(0)), dimensions={0}, to_apply=add
  ROOT r = f32[4] negate(x)""",
            ADD,
        ),
        """
  CHECK-NOT: add
  CHECK-NOT: exponential
  CHECK: ROOT %r = f32[4]{0} negate(%x)""",
    )


def test_dce_keeps_parameters_and_side_effects():
    check_pass(
        "dce",
        module("""
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  token = token[] after-all()
  out = token[] outfeed(y, token), outfeed_shape=f32[4]{0}
  ROOT r = f32[4] negate(x)"""),
        expected=None,
    )


def test_dce_keeps_side_effecting_custom_calls_and_rng():
    check_pass(
        "dce",
        module("""
  x = f32[4] parameter(0)
  c = f32[4] custom-call(x), custom_call_target="log_it", custom_call_has_side_effect=true
  r0 = f32[4] rng(f32[] constant(0), f32[] constant(1)), distribution=rng_uniform
  ROOT r = f32[4] negate(x)"""),
        expected=None,
    )


# -- cse ----------------------------------------------------------------------------------------
def test_cse_merges_equal_instructions_and_constants():
    check_pass(
        "cse",
        module("""
  x = f32[4] parameter(0)
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  m1 = f32[4] multiply(x, b1)
  m2 = f32[4] multiply(x, b2)
  ROOT r = f32[4] add(m1, m2)"""),
        """
  CHECK: %[[M:.*]] = f32[4]{0} multiply(%x, %b1)
  CHECK-NOT: multiply
  CHECK: ROOT %r = f32[4]{0} add(%[[M]], %[[M]])""",
    )


def test_cse_merges_reduces_with_equal_computations():
    second = (
        ADD.replace("add {", "add2 {")
        .replace(" a ", " a2 ")
        .replace("(a", "(a2")
        .replace(" b ", " b2 ")
        .replace(", b)", ", b2)")
        .replace(" s ", " s2 ")
    )
    check_pass(
        "cse",
        module(
            """
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  r1 = f32[] reduce(x, z), dimensions={0}, to_apply=add
  r2 = f32[] reduce(x, z), dimensions={0}, to_apply=add2
  ROOT r = f32[] multiply(r1, r2)""",
            ADD + second,
        ),
        """
  CHECK: ROOT %r = f32[] multiply(%r1, %r1)""",
    )


@pytest.mark.parametrize(
    "body",
    [
        # -0.0 and 0.0 are different constants
        """
  a = f32[] constant(0)
  b = f32[] constant(-0.0)
  ROOT r = (f32[], f32[]) tuple(a, b)""",
        # two draws from a generator are two values
        """
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  a = f32[4] rng(lo, hi), distribution=rng_uniform
  b = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT r = f32[4] add(a, b)""",
        # different attributes
        """
  x = f32[2,2] parameter(0)
  a = f32[2,2] transpose(x), dimensions={1,0}
  b = f32[2,2] transpose(x), dimensions={0,1}
  ROOT r = f32[2,2] add(a, b)""",
    ],
)
def test_cse_leaves_distinct_instructions(body):
    check_pass("cse", module(body), expected=None)


# -- tuple-simplifier ---------------------------------------------------------------------------
def test_tuple_simplifier_forwards_elements():
    check_pass(
        "tuple-simplifier",
        module("""
  x = f32[4] parameter(0)
  y = s32[] parameter(1)
  t = (f32[4], s32[]) tuple(x, y)
  a = f32[4] get-tuple-element(t), index=0
  b = s32[] get-tuple-element(t), index=1
  ROOT r = (f32[4], s32[]) tuple(a, b)"""),
        """
  CHECK: ROOT %r = (f32[4]{0}, s32[]) tuple(%x, %y)""",
    )


def test_tuple_simplifier_rebuilt_tuple_is_the_tuple():
    check_pass(
        "tuple-simplifier",
        module("""
  p = (f32[4], s32[]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = s32[] get-tuple-element(p), index=1
  ROOT r = (f32[4], s32[]) tuple(a, b)"""),
        "CHECK: ROOT %p = (f32[4]{0}, s32[]) parameter(0)",
    )


def test_tuple_simplifier_keeps_partial_or_reordered_tuples():
    check_pass(
        "tuple-simplifier",
        module("""
  p = (f32[4], f32[4]) parameter(0)
  a = f32[4] get-tuple-element(p), index=0
  b = f32[4] get-tuple-element(p), index=1
  ROOT r = (f32[4], f32[4]) tuple(b, a)"""),
        expected=None,
    )


# -- call-inliner -------------------------------------------------------------------------------
CALLEE = """callee {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  s = f32[4] add(a, b)
  ROOT e = f32[4] exponential(s)
}
"""


def test_call_inliner_inlines_and_drops_the_callee():
    check_pass(
        "call-inliner",
        module(
            """
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT r = f32[4] call(x, y), to_apply=callee""",
            CALLEE,
        ),
        """
  CHECK-NOT: callee
  CHECK: %[[S:.*]] = f32[4]{0} add(%x, %y)
  CHECK: ROOT %{{.*}} = f32[4]{0} exponential(%[[S]])""",
    )


def test_call_inliner_handles_nested_calls_and_shared_callees():
    outer = """outer {
  p = f32[4] parameter(0)
  ROOT c = f32[4] call(p, p), to_apply=callee
}
"""
    result = check_pass(
        "call-inliner",
        module(
            """
  x = f32[4] parameter(0)
  c1 = f32[4] call(x), to_apply=outer
  ROOT r = f32[4] call(c1, x), to_apply=callee""",
            CALLEE + outer,
        ),
        "CHECK-NOT: call(",
    )
    assert [c.name for c in result.computations] == ["main"]


def test_call_inliner_without_calls_changes_nothing():
    check_pass(
        "call-inliner",
        module(
            """
  x = f32[4] parameter(0)
  ROOT r = f32[] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add""",
            ADD,
        ),
        expected=None,
    )


# -- constant-folding ---------------------------------------------------------------------------
def test_constant_folding_folds_arithmetic_and_reductions():
    check_pass(
        "constant-folding",
        module(
            """
  x = f32[3] parameter(0)
  c = f32[3] constant({1, 2, 3})
  d = f32[3] multiply(c, c)
  total = f32[] reduce(d, f32[] constant(0)), dimensions={0}, to_apply=add
  splat = f32[3] broadcast(total), dimensions={}
  ROOT r = f32[3] add(x, splat)""",
            ADD,
        ),
        """
  CHECK: %total = f32[] constant(14)
  CHECK: %splat = f32[3]{0} broadcast(%total), dimensions={}
  CHECK: ROOT %r = f32[3]{0} add(%x, %splat)""",
    )


def test_constant_folding_keeps_iota_broadcast_and_random_numbers():
    check_pass(
        "constant-folding",
        module("""
  i = s32[4] iota(), iota_dimension=0
  b = s32[4] broadcast(s32[] constant(3)), dimensions={}
  r = f32[4] rng(f32[] constant(0), f32[] constant(1)), distribution=rng_uniform
  ROOT t = (s32[4], s32[4], f32[4]) tuple(i, b, r)"""),
        expected=None,
    )


def test_constant_folding_skips_big_results():
    check_pass(
        "constant-folding",
        module("""
  c = f32[64] constant({...})
  ROOT r = f32[64,64] reshape(f32[4096] broadcast(f32[] constant(1)), dimensions={})"""),
        expected=None,
    )
    module_, changed = run_pass(
        "constant-folding",
        module("""
  c = f32[2048] parameter(0)
  ROOT r = f32[2048] negate(f32[2048] constant({...}))"""),
    )
    assert not changed


def test_constant_folding_keeps_nan_and_negative_zero():
    result, changed = run_pass(
        "constant-folding",
        module("""
  c = f32[3] constant({nan, -0.0, 1})
  ROOT r = f32[3] multiply(c, f32[3] constant({1, 1, -0.0}))"""),
    )
    assert changed
    value = result.entry.root.literal
    assert np.isnan(value[0]) and value[1] == 0 and np.signbit(value[1]) and np.signbit(value[2])


# -- the matcher on pass output -----------------------------------------------------------------
def test_matcher_on_algsimp_output():
    result, changed = run_pass(
        "algsimp",
        module("""
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  n = f32[4] negate(f32[4] negate(y))
  ROOT r = f32[4] multiply(f32[4] broadcast(f32[] constant(1)), n)"""),
    )
    assert changed
    assert_matches(result.entry.root, m.Parameter(1))


def test_trace_rules_names_each_firing(monkeypatch, capsys):
    monkeypatch.setenv("MINIXLA_TRACE_RULES", "1")
    run_pass(
        "algsimp",
        module("""
  x = s32[4] parameter(0)
  ROOT sum = s32[4] add(x, s32[4] broadcast(s32[] constant(0)), dimensions={})"""),
    )
    assert "algsimp.add_zero fired on %sum" in capsys.readouterr().err


def test_cse_ignores_metadata():
    check_pass(
        "cse",
        module("""
  x = f32[4] parameter(0)
  a = f32[4] exponential(x), metadata={op_name="first"}
  b = f32[4] exponential(x), metadata={op_name="second"}
  ROOT r = f32[4] add(a, b)"""),
        "CHECK: ROOT %r = f32[4]{0} add(%a, %a)",
    )
