"""dot-sum-merger: a sum of dots becomes one dot over concatenated operands."""

import numpy as np
import pytest

import minixla
from minixla.testing import check_pass
from minixla.testing.compare import random_inputs

STEPS = """
HloModule steps
ENTRY main {
  g1 = f32[4,64] parameter(0)
  h1 = f32[4,16] parameter(1)
  g2 = f32[4,64] parameter(2)
  h2 = f32[4,16] parameter(3)
  g3 = f32[4,64] parameter(4)
  h3 = f32[4,16] parameter(5)
  d1 = f32[64,16] dot(g1, h1), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  d2 = f32[64,16] dot(g2, h2), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  d3 = f32[64,16] dot(g3, h3), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s12 = f32[64,16] add(d1, d2)
  ROOT s = f32[64,16] add(s12, d3)
}
"""


def test_an_unrolled_weight_gradient_becomes_one_dot():
    # one concatenation per side, not a nest of them
    module = check_pass(
        "dot-sum-merger",
        STEPS,
        """
    // CHECK: ENTRY %main
    // CHECK-DAG: %[[G:.*]] = f32[12,64]{1,0} concatenate(%g1, %g2, %g3), dimensions={0}
    // CHECK-DAG: %[[H:.*]] = f32[12,16]{1,0} concatenate(%h1, %h2, %h3), dimensions={0}
    // CHECK: ROOT {{.*}} = f32[64,16]{1,0} dot(%[[G]], %[[H]]), lhs_contracting_dims={0}, rhs_contracting_dims={0}
    """,
        rtol=1e-5,
        atol=1e-5,
    )
    assert [i.opcode for i in module.entry.instructions].count("add") == 0


def test_a_sum_of_deep_dots_is_left_alone():
    # copying [64, 512] operands costs more than adding [8, 8] results
    check_pass(
        "dot-sum-merger",
        """
    HloModule deep
    ENTRY main {
      a = f32[8,512] parameter(0)
      b = f32[512,8] parameter(1)
      c = f32[8,512] parameter(2)
      d = f32[512,8] parameter(3)
      x = f32[8,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      y = f32[8,8] dot(c, d), lhs_contracting_dims={1}, rhs_contracting_dims={0}
      ROOT s = f32[8,8] add(x, y)
    }""",
        None,
    )


OTHER_DOT = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"


@pytest.mark.parametrize(
    "second,root",
    [
        # d2 is read elsewhere too
        (f"d2 = f32[64,16] dot(g2, h2), {OTHER_DOT}", "tuple(s, d2)"),
        # other attributes
        (f'd2 = f32[64,16] dot(g2, h2), {OTHER_DOT}, frontend_attributes={{x="1"}}', "tuple(s)"),
        # the same product of operands stored transposed: other dimension numbers
        (
            "d2 = f32[64,16] dot(g3, h3), lhs_contracting_dims={1}, rhs_contracting_dims={1}",
            "tuple(s)",
        ),
    ],
)
def test_dots_read_elsewhere_or_of_other_forms_are_left_alone(second, root):
    shapes = "(f32[64,16], f32[64,16])" if "d2)" in root else "(f32[64,16])"
    text = f"""
    HloModule other
    ENTRY main {{
      g1 = f32[4,64] parameter(0)
      h1 = f32[4,16] parameter(1)
      g2 = f32[4,64] parameter(2)
      h2 = f32[4,16] parameter(3)
      g3 = f32[64,4] parameter(4)
      h3 = f32[16,4] parameter(5)
      d1 = f32[64,16] dot(g1, h1), {OTHER_DOT}
      {second}
      s = f32[64,16] add(d1, d2)
      ROOT t = {shapes} {root}
    }}"""
    check_pass("dot-sum-merger", text, None)


def test_the_cpu_pipeline_merges_and_keeps_values():
    exe = minixla.compile(STEPS, backend="cpu")
    ref = minixla.compile(STEPS, backend="interpreter")
    args = random_inputs(minixla.parse_hlo_module(STEPS), seed=5)
    np.testing.assert_allclose(exe(*args), ref(*args), rtol=1e-5, atol=1e-5)
    dots = [i for i in exe.module.entry.instructions if i.opcode == "dot"]
    assert len(dots) == 1
