"""while-loop-simplifier and conditional-simplifier."""

import pytest

from conformance_reference import case_dirs, check_passes_keep_values, requires_corpus
from minixla.testing import check_pass

LOOP = """
HloModule loops
cond {
  st = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(1)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  st = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  x = f32[8] get-tuple-element(st), index=1
  nx = f32[8] negate(x)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT out = (s32[], f32[8]) tuple(j, nx)
}
ENTRY main {
  x = f32[8] parameter(0)
  start = s32[] constant(START)
  init = (s32[], f32[8]) tuple(start, x)
  w = (s32[], f32[8]) while(init), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def test_loop_that_never_runs_is_its_init():
    check_pass(
        "while-loop-simplifier",
        LOOP.replace("START", "5"),
        """
    // CHECK-NOT: while(
    // CHECK: ROOT %r = f32[8]{0} get-tuple-element(%init), index=1
    """,
    )


def test_loop_that_runs_once_is_its_body_inlined():
    check_pass(
        "while-loop-simplifier",
        LOOP.replace("START", "0"),
        """
    // CHECK-NOT: while(
    // CHECK: negate(
    """,
    )


def test_loop_with_unknown_trip_count_stays():
    text = LOOP.replace("start = s32[] constant(START)", "start = s32[] parameter(1)")
    check_pass("while-loop-simplifier", text.replace("ENTRY main {", "ENTRY main {"), expected=None)


def test_unused_loop_is_removed():
    text = LOOP.replace("START", "-3").replace(
        "ROOT r = f32[8] get-tuple-element(w), index=1", "ROOT r = f32[8] negate(x)"
    )
    check_pass(
        "while-loop-simplifier",
        text,
        """
    // CHECK-NOT: while(
    // CHECK: ROOT %r = f32[8]{0} negate(%{{x.*}})
    """,
    )


def test_invariant_code_is_hoisted_out_of_the_loop():
    check_pass(
        "while-loop-simplifier",
        """
    HloModule licm
    cond {
      st = (s32[], f32[8], f32[8]) parameter(0)
      i = s32[] get-tuple-element(st), index=0
      n = s32[] constant(5)
      ROOT lt = pred[] compare(i, n), direction=LT
    }
    body {
      st = (s32[], f32[8], f32[8]) parameter(0)
      i = s32[] get-tuple-element(st), index=0
      acc = f32[8] get-tuple-element(st), index=1
      w = f32[8] get-tuple-element(st), index=2
      e = f32[8] exponential(w)
      two = f32[] constant(2)
      twos = f32[8] broadcast(two), dimensions={}
      scaled = f32[8] multiply(e, twos)
      next = f32[8] add(acc, scaled)
      one = s32[] constant(1)
      j = s32[] add(i, one)
      ROOT out = (s32[], f32[8], f32[8]) tuple(j, next, w)
    }
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8] parameter(1)
      zero = s32[] constant(0)
      init = (s32[], f32[8], f32[8]) tuple(zero, x, y)
      w = (s32[], f32[8], f32[8]) while(init), condition=cond, body=body
      ROOT r = f32[8] get-tuple-element(w), index=1
    }""",
        """
    // CHECK: %body
    // CHECK-NOT: exponential
    // CHECK: ROOT {{.*}} tuple(
    // CHECK: ENTRY %main
    // CHECK: exponential(%y)
    // CHECK: while(
    """,
    )


def test_a_gather_with_iota_indices_leaves_the_loop_and_keeps_its_values():
    # jnp.diag(a) in a Jacobi iteration: the indices come from an iota, the matrix is passed
    # through; check_pass also compares the interpreter's results before and after
    check_pass(
        "while-loop-simplifier",
        """
    HloModule diag
    cond {
      st = (s32[], f32[6], f32[6,6]) parameter(0)
      ROOT lt = pred[] compare(s32[] get-tuple-element(st), index=0, s32[] constant(3)), direction=LT
    }
    body {
      st = (s32[], f32[6], f32[6,6]) parameter(0)
      i = s32[] get-tuple-element(st), index=0
      x = f32[6] get-tuple-element(st), index=1
      a = f32[6,6] get-tuple-element(st), index=2
      iota = s32[6] iota(), iota_dimension=0
      shifted = s32[6] add(iota, s32[6] broadcast(s32[] constant(0)), dimensions={})
      column = s32[6,1] reshape(shifted)
      idx = s32[6,2] concatenate(column, column), dimensions={1}
      diag = f32[6] gather(a, idx), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
      next = f32[6] add(x, diag)
      ROOT out = (s32[], f32[6], f32[6,6]) tuple(s32[] add(i, s32[] constant(1)), next, a)
    }
    ENTRY main {
      x = f32[6] parameter(0)
      a = f32[6,6] parameter(1)
      init = (s32[], f32[6], f32[6,6]) tuple(s32[] constant(0), x, a)
      w = (s32[], f32[6], f32[6,6]) while(init), condition=cond, body=body
      ROOT r = f32[6] get-tuple-element(w), index=1
    }""",
        """
    // CHECK: %body
    // CHECK-NOT: gather
    // CHECK: ROOT {{.*}} tuple(
    // CHECK: ENTRY %main
    // CHECK: iota()
    // CHECK: gather(
    // CHECK: while(
    """,
    )


CONDITIONAL = """
HloModule cond
t {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
f {
  p = f32[8] parameter(0)
  ROOT e = f32[8] exponential(p)
}
ENTRY main {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  SELECTOR
  ROOT c = f32[8] conditional(k, x, y), BRANCHES
}
"""


@pytest.mark.parametrize(
    "selector,branches,expected",
    [
        ("k = pred[] constant(true)", "true_computation=t, false_computation=f", "negate(%x)"),
        (
            "k = pred[] constant(false)",
            "true_computation=t, false_computation=f",
            "exponential(%y)",
        ),
        ("k = s32[] constant(1)", "branch_computations={t, f}", "exponential(%y)"),
        ("k = s32[] constant(7)", "branch_computations={t, f}", "exponential(%y)"),
        ("k = s32[] constant(-1)", "branch_computations={t, f}", "exponential(%y)"),
    ],
)
def test_constant_selector_inlines_the_taken_branch(selector, branches, expected):
    text = CONDITIONAL.replace("SELECTOR", selector).replace("BRANCHES", branches)
    check_pass(
        "conditional-simplifier",
        text,
        f"""
    // CHECK-NOT: conditional(
    // CHECK: ROOT %{{{{.*}}}} = f32[8]{{0}} {expected}
    """,
    )


def test_unknown_selector_stays():
    text = CONDITIONAL.replace("SELECTOR", "k = pred[] parameter(2)").replace(
        "BRANCHES", "true_computation=t, false_computation=f"
    )
    check_pass("conditional-simplifier", text, expected=None)


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_control_flow_simplifiers_keep_conformance_values(case):
    check_passes_keep_values(
        case,
        [
            ["while-loop-simplifier", "conditional-simplifier"],
            ["constant-folding", "while-loop-simplifier"],
        ],
    )
