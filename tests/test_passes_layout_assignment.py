"""layout-assignment: entry layouts, free transposes as bitcasts, copies only where needed.

More cases are HLO text tests in tests/hlo/layout-assignment/."""

import numpy as np
import pytest

import minixla
from conformance_reference import (
    assert_bit_identical,
    case_dirs,
    check_passes_keep_values,
    flatten,
    requires_corpus,
)
from minixla.passes import get_pass
from minixla.testing import check_pass


def test_transpose_matching_the_result_layout_becomes_a_bitcast():
    check_pass(
        "layout-assignment",
        """
    HloModule t, entry_computation_layout={(f32[2,3,4]{2,1,0})->f32[4,2,3]{0,2,1}}
    ENTRY main {
      x = f32[2,3,4] parameter(0)
      ROOT t = f32[4,2,3] transpose(x), dimensions={2,0,1}
    }""",
        """
    // CHECK: ROOT %{{.*}} = f32[4,2,3]{0,2,1} bitcast(%x)
    // CHECK-NOT: copy
    """,
    )


def test_ops_needing_row_major_operands_get_copies():
    check_pass(
        "layout-assignment",
        """
    HloModule d, entry_computation_layout={(f32[4,5]{0,1}, f32[5,3]{1,0})->f32[4,3]{1,0}}
    ENTRY main {
      x = f32[4,5] parameter(0)
      y = f32[5,3] parameter(1)
      ROOT d = f32[4,3] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }""",
        """
    // CHECK: %[[C:.*]] = f32[4,5]{1,0} copy(%x)
    // CHECK: ROOT %d = f32[4,3]{1,0} dot(%[[C]], %y)
    """,
    )


def test_custom_call_operand_constraints_are_honoured():
    check_pass(
        "layout-assignment",
        """
    HloModule cc
    ENTRY main {
      x = f32[4,5] parameter(0)
      ROOT c = f32[4,5] custom-call(x), custom_call_target="foo", operand_layout_constraints={f32[4,5]{0,1}}
    }""",
        """
    // CHECK: %[[C:.*]] = f32[4,5]{0,1} copy(%x)
    // CHECK: custom-call(%[[C]])
    """,
        check_values=False,
    )


def test_bitcasts_reinterpret_the_assigned_layouts_correctly():
    text = """
    HloModule b, entry_computation_layout={(f32[2,3,4]{2,1,0}, f32[4,3,2]{2,1,0})->(f32[4,2,3]{2,1,0}, f32[3,4,2]{0,2,1})}
    ENTRY main {
      x = f32[2,3,4] parameter(0)
      y = f32[4,3,2] parameter(1)
      t = f32[4,2,3] transpose(x), dimensions={2,0,1}
      e = f32[4,2,3] exponential(t)
      u = f32[3,4,2] transpose(y), dimensions={1,0,2}
      v = f32[3,4,2] transpose(x), dimensions={1,2,0}
      s = f32[3,4,2] add(u, v)
      ROOT r = (f32[4,2,3], f32[3,4,2]) tuple(e, s)
    }"""
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((2, 3, 4), np.float32), rng.standard_normal((4, 3, 2), np.float32)]
    want = flatten(minixla.compile(minixla.parse_hlo_module(text), backend="interpreter")(*args))
    module = minixla.parse_hlo_module(text)
    assert get_pass("layout-assignment").run(module)
    assert sum(i.opcode == "bitcast" for i in module.entry.instructions) == 3
    got = minixla.compile(minixla.parse_hlo_module(module.to_text()), backend="interpreter")(*args)
    assert_bit_identical(got, want, "layout-assignment")


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_layout_assignment_keeps_conformance_values(case):
    check_passes_keep_values(case, [["layout-assignment"]])
