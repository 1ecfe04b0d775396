"""One test per algsimp data-movement, reduction, dot and canonicalization rule (it fires, with
CHECK lines on the result) and one where it must not fire; each runs that rule alone."""

import pytest

from minixla.passes.algsimp import ALGSIMP
from minixla.testing import check_pass, rule_pass


def module(body: str, extra: str = "") -> str:
    return "HloModule m\n" + extra + "ENTRY main {\n" + body.strip("\n") + "\n}\n"


ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
MAX = """max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
"""

FIRES = {
    "reshape_noop": (
        """
  x = f32[2,3] parameter(0)
  ROOT r = f32[2,3] reshape(x)""",
        "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
    ),
    "reshape_of_reshape": (
        """
  x = f32[6] parameter(0)
  y = f32[2,3] reshape(x)
  ROOT r = f32[3,2] reshape(y)""",
        "CHECK: ROOT %r = f32[3,2]{1,0} reshape(%x)",
    ),
    "broadcast_noop": (
        """
  x = f32[2,3] parameter(0)
  ROOT r = f32[2,3] broadcast(x), dimensions={0,1}""",
        "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
    ),
    "broadcast_of_broadcast": (
        """
  x = f32[3] parameter(0)
  y = f32[2,3] broadcast(x), dimensions={1}
  ROOT r = f32[4,2,3] broadcast(y), dimensions={1,2}""",
        "CHECK: ROOT %r = f32[4,2,3]{2,1,0} broadcast(%x), dimensions={2}",
    ),
    "broadcast_of_scalar_reshape": (
        """
  s = f32[] parameter(0)
  y = f32[1] reshape(s)
  ROOT r = f32[1,4] broadcast(y), dimensions={0}""",
        "CHECK: ROOT %r = f32[1,4]{1,0} broadcast(%s), dimensions={}",
    ),
    "broadcast_is_reshape": (
        """
  x = f32[3] parameter(0)
  ROOT r = f32[1,3] broadcast(x), dimensions={1}""",
        "CHECK: ROOT %r = f32[1,3]{1,0} reshape(%x)",
    ),
    "movement_of_scalar_broadcast": (
        """
  s = f32[] parameter(0)
  b = f32[2,3] broadcast(s), dimensions={}
  ROOT r = f32[3,2] transpose(b), dimensions={1,0}""",
        "CHECK: ROOT %r = f32[3,2]{1,0} broadcast(%s), dimensions={}",
    ),
    "transpose_identity": (
        """
  x = f32[2,3] parameter(0)
  ROOT r = f32[2,3] transpose(x), dimensions={0,1}""",
        "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
    ),
    "transpose_of_transpose": (
        """
  x = f32[2,3,4] parameter(0)
  y = f32[4,2,3] transpose(x), dimensions={2,0,1}
  ROOT r = f32[3,2,4] transpose(y), dimensions={2,1,0}""",
        "CHECK: ROOT %r = f32[3,2,4]{2,1,0} transpose(%x), dimensions={1,0,2}",
    ),
    "transpose_is_reshape": (
        """
  x = f32[1,3] parameter(0)
  ROOT r = f32[3,1] transpose(x), dimensions={1,0}""",
        "CHECK: ROOT %r = f32[3,1]{1,0} reshape(%x)",
    ),
    "slice_full": (
        """
  x = f32[4,3] parameter(0)
  ROOT r = f32[4,3] slice(x), slice={[0:4], [0:3]}""",
        "CHECK: ROOT %x = f32[4,3]{1,0} parameter(0)",
    ),
    "slice_of_slice": (
        """
  x = f32[10] parameter(0)
  y = f32[4] slice(x), slice={[2:10:2]}
  ROOT r = f32[2] slice(y), slice={[1:3]}""",
        "CHECK: ROOT %r = f32[2]{0} slice(%x), slice={[4:7:2]}",
    ),
    "slice_of_concatenate": (
        """
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[8] concatenate(a, b), dimensions={0}
  ROOT r = f32[2] slice(c), slice={[5:7]}""",
        "CHECK: ROOT %r = f32[2]{0} slice(%b), slice={[1:3]}",
    ),
    # an RNN's outputs stacked by step, transposed to batch-major, last step taken
    "slice_of_transpose": (
        """
  x = f32[4,2,3] parameter(0)
  t = f32[2,4,3] transpose(x), dimensions={1,0,2}
  ROOT r = f32[2,1,2] slice(t), slice={[0:2], [3:4], [1:3]}""",
        """
CHECK: %[[S:.*]] = f32[1,2,2]{2,1,0} slice(%x), slice={[3:4], [0:2], [1:3]}
CHECK: ROOT %r = f32[2,1,2]{2,1,0} transpose(%[[S]]), dimensions={1,0,2}""",
    ),
    "concatenate_single": (
        """
  a = f32[4] parameter(0)
  ROOT r = f32[4] concatenate(a), dimensions={0}""",
        "CHECK: ROOT %a = f32[4]{0} parameter(0)",
    ),
    "concatenate_drop_empty": (
        """
  a = f32[4] parameter(0)
  e = f32[0] parameter(1)
  b = f32[4] parameter(2)
  ROOT r = f32[8] concatenate(a, e, b), dimensions={0}""",
        "CHECK: ROOT %r = f32[8]{0} concatenate(%a, %b), dimensions={0}",
    ),
    "concatenate_adjacent_slices": (
        """
  x = f32[6,2] parameter(0)
  s1 = f32[2,2] slice(x), slice={[0:2], [0:2]}
  s2 = f32[3,2] slice(x), slice={[2:5], [0:2]}
  ROOT r = f32[5,2] concatenate(s1, s2), dimensions={0}""",
        "CHECK: ROOT %r = f32[5,2]{1,0} slice(%x), slice={[0:5], [0:2]}",
    ),
    "pad_zero_widths": (
        """
  x = f32[4,3] parameter(0)
  ROOT r = f32[4,3] pad(x, f32[] constant(0)), padding=0_0x0_0""",
        "CHECK: ROOT %x = f32[4,3]{1,0} parameter(0)",
    ),
    "reverse_of_reverse": (
        """
  x = f32[4,3] parameter(0)
  y = f32[4,3] reverse(x), dimensions={0,1}
  ROOT r = f32[4,3] reverse(y), dimensions={0}""",
        "CHECK: ROOT %r = f32[4,3]{1,0} reverse(%x), dimensions={1}",
    ),
    "reverse_degenerate_dims": (
        """
  x = f32[1,3] parameter(0)
  ROOT r = f32[1,3] reverse(x), dimensions={0}""",
        "CHECK: ROOT %x = f32[1,3]{1,0} parameter(0)",
    ),
    # start 6 is clamped to 8 - 4 = 4, as at run time
    "dynamic_slice_constant_starts": (
        """
  x = f32[8] parameter(0)
  ROOT r = f32[4] dynamic-slice(x, s32[] constant(6)), dynamic_slice_sizes={4}""",
        "CHECK: ROOT %r = f32[4]{0} slice(%x), slice={[4:8]}",
    ),
    "dynamic_slice_full": (
        """
  x = f32[8] parameter(0)
  i = s32[] parameter(1)
  ROOT r = f32[8] dynamic-slice(x, i), dynamic_slice_sizes={8}""",
        "CHECK: ROOT %x = f32[8]{0} parameter(0)",
    ),
    "dynamic_update_slice_full": (
        """
  x = f32[4] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  ROOT r = f32[4] dynamic-update-slice(x, u, i)""",
        "CHECK: ROOT %u = f32[4]{0} parameter(1)",
    ),
    "dynamic_update_slice_empty": (
        """
  x = f32[4] parameter(0)
  u = f32[0] parameter(1)
  i = s32[] parameter(2)
  ROOT r = f32[4] dynamic-update-slice(x, u, i)""",
        "CHECK: ROOT %x = f32[4]{0} parameter(0)",
    ),
    "copy_same_layout": (
        """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{1,0} copy(x)""",
        "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
    ),
    "memory_space_annotation": (
        """
  x = f32[2,3]{1,0} parameter(0)
  h = f32[2,3]{0,1} custom-call(x), custom_call_target="MoveToHost"
  ROOT r = f32[2,3]{1,0} custom-call(h), custom_call_target="MoveToDevice\"""",
        """
    CHECK: %h = f32[2,3]{0,1} copy(%x)
    CHECK: ROOT %r = f32[2,3]{1,0} copy(%h)""",
    ),
    "builder_math": (
        """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{1,0} custom-call(x), custom_call_target="xla_builder.math.Acos\"""",
        "CHECK: ROOT %r = f32[2,3]{1,0} acos(%x)",
    ),
    "bitcast_noop": (
        """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{1,0} bitcast(x)""",
        "CHECK: ROOT %x = f32[2,3]{1,0} parameter(0)",
    ),
    "get_dimension_size_static": (
        """
  x = f32[2,3] parameter(0)
  ROOT r = s32[] get-dimension-size(x), dimensions={1}""",
        "CHECK: ROOT %r = s32[] constant(3)",
    ),
    "reduce_of_reduce": (
        """
  x = f32[2,3,4] parameter(0)
  z = f32[] constant(0)
  y = f32[2,4] reduce(x, z), dimensions={1}, to_apply=add
  ROOT r = f32[2] reduce(y, z), dimensions={1}, to_apply=add""",
        """
  CHECK: ROOT %r = f32[2]{0} reduce(%x, %z), dimensions={1,2}, to_apply=%add""",
        ADD,
    ),
    # -0.0 is the exact identity of float add (+0.0 would turn -0.0 into +0.0)
    "reduce_trivial": (
        """
  x = f32[1,3] parameter(0)
  ROOT r = f32[3] reduce(x, f32[] constant(-0.0)), dimensions={0}, to_apply=add""",
        "CHECK: ROOT %r = f32[3]{0} reshape(%x)",
        ADD,
    ),
    "dot_of_transposed_lhs": (
        """
  a = f32[3,2] parameter(0)
  b = f32[3,4] parameter(1)
  t = f32[2,3] transpose(a), dimensions={1,0}
  ROOT r = f32[2,4] dot(t, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
        "CHECK: ROOT %r = f32[2,4]{1,0} dot(%a, %b), lhs_contracting_dims={0}, "
        "rhs_contracting_dims={0}",
    ),
    "dot_of_transposed_rhs": (
        """
  a = f32[5,2,3] parameter(0)
  b = f32[5,4,3] parameter(1)
  t = f32[5,3,4] transpose(b), dimensions={0,2,1}
  ROOT r = f32[5,2,4] dot(a, t), lhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_batch_dims={0}, rhs_contracting_dims={1}""",
        "CHECK: ROOT %r = f32[5,2,4]{2,1,0} dot(%a, %b), lhs_batch_dims={0}, "
        "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}",
    ),
    "transpose_of_dot": (
        """
  a = f32[5,2,3] parameter(0)
  b = f32[5,3,4] parameter(1)
  d = f32[5,2,4] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2},
    rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,default}
  ROOT r = f32[5,4,2] transpose(d), dimensions={0,2,1}""",
        "CHECK: ROOT %r = f32[5,4,2]{2,1,0} dot(%b, %a), lhs_batch_dims={0}, "
        "lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}, "
        "operand_precision={default,highest}",
    ),
    "constant_to_right": (
        """
  x = s32[4] parameter(0)
  c = s32[4] constant({1, 2, 3, 4})
  ROOT r = s32[4] multiply(c, x)""",
        "CHECK: ROOT %r = s32[4]{0} multiply(%x, %c)",
    ),
}

UNCHANGED = {
    "reshape_noop": """
  x = f32[2,3] parameter(0)
  ROOT r = f32[3,2] reshape(x)""",
    "reshape_of_reshape": """
  x = f32[2,3] parameter(0)
  y = f32[3,2] transpose(x), dimensions={1,0}
  ROOT r = f32[6] reshape(y)""",
    "broadcast_noop": """
  x = f32[2,3] parameter(0)
  ROOT r = f32[3,2] broadcast(x), dimensions={1,0}""",
    "broadcast_of_broadcast": """
  x = f32[2] parameter(0)
  y = f32[2,1] reshape(x)
  ROOT r = f32[2,1,3] broadcast(y), dimensions={0,1}""",
    "broadcast_of_scalar_reshape": """
  x = f32[2] parameter(0)
  y = f32[2,1] reshape(x)
  ROOT r = f32[2,1,3] broadcast(y), dimensions={0,1}""",
    "broadcast_is_reshape": """
  x = f32[3] parameter(0)
  ROOT r = f32[2,3] broadcast(x), dimensions={1}""",
    "movement_of_scalar_broadcast": """
  x = f32[3] parameter(0)
  b = f32[2,3] broadcast(x), dimensions={1}
  ROOT r = f32[3,2] transpose(b), dimensions={1,0}""",
    "transpose_identity": """
  x = f32[2,3] parameter(0)
  ROOT r = f32[3,2] transpose(x), dimensions={1,0}""",
    "transpose_of_transpose": """
  x = f32[6] parameter(0)
  y = f32[2,3] reshape(x)
  ROOT r = f32[3,2] transpose(y), dimensions={1,0}""",
    "transpose_is_reshape": """
  x = f32[2,3] parameter(0)
  ROOT r = f32[3,2] transpose(x), dimensions={1,0}""",
    "slice_full": """
  x = f32[4,3] parameter(0)
  ROOT r = f32[2,3] slice(x), slice={[0:4:2], [0:3]}""",
    "slice_of_slice": """
  x = f32[2,5] parameter(0)
  y = f32[10] reshape(x)
  ROOT r = f32[2] slice(y), slice={[1:3]}""",
    # the slice straddles both operands
    "slice_of_concatenate": """
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[8] concatenate(a, b), dimensions={0}
  ROOT r = f32[3] slice(c), slice={[3:6]}""",
    # the transpose has a reader besides slices: it stays, so slicing before it would not
    # save its work
    "slice_of_transpose": """
  x = f32[4,3] parameter(0)
  t = f32[3,4] transpose(x), dimensions={1,0}
  s = f32[1,4] slice(t), slice={[2:3], [0:4]}
  ROOT r = (f32[3,4], f32[1,4]) tuple(t, s)""",
    "concatenate_single": """
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT r = f32[8] concatenate(a, b), dimensions={0}""",
    "concatenate_drop_empty": """
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT r = f32[8] concatenate(a, b), dimensions={0}""",
    "concatenate_adjacent_slices": """
  x = f32[6] parameter(0)
  s1 = f32[2] slice(x), slice={[0:2]}
  s2 = f32[2] slice(x), slice={[3:5]}
  ROOT r = f32[4] concatenate(s1, s2), dimensions={0}""",
    "pad_zero_widths": """
  x = f32[4,3] parameter(0)
  ROOT r = f32[5,3] pad(x, f32[] constant(0)), padding=1_0x0_0""",
    "reverse_of_reverse": """
  x = f32[12] parameter(0)
  y = f32[4,3] reshape(x)
  ROOT r = f32[4,3] reverse(y), dimensions={0}""",
    "reverse_degenerate_dims": """
  x = f32[1,3] parameter(0)
  ROOT r = f32[1,3] reverse(x), dimensions={1}""",
    "dynamic_slice_constant_starts": """
  x = f32[8] parameter(0)
  i = s32[] parameter(1)
  ROOT r = f32[4] dynamic-slice(x, i), dynamic_slice_sizes={4}""",
    "dynamic_slice_full": """
  x = f32[8] parameter(0)
  i = s32[] parameter(1)
  ROOT r = f32[4] dynamic-slice(x, i), dynamic_slice_sizes={4}""",
    "dynamic_update_slice_full": """
  x = f32[4] parameter(0)
  u = f32[2] parameter(1)
  i = s32[] parameter(2)
  ROOT r = f32[4] dynamic-update-slice(x, u, i)""",
    "dynamic_update_slice_empty": """
  x = f32[4] parameter(0)
  u = f32[2] parameter(1)
  i = s32[] parameter(2)
  ROOT r = f32[4] dynamic-update-slice(x, u, i)""",
    "copy_same_layout": """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{0,1} copy(x)""",
    "memory_space_annotation": """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{1,0} custom-call(x), custom_call_target="Foo\"""",
    "builder_math": """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[2,3]{1,0} custom-call(x), custom_call_target="xla_builder.math.Polygamma\"""",
    "bitcast_noop": """
  x = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[3,2]{1,0} bitcast(x)""",
    "get_dimension_size_static": """
  x = f32[<=4] parameter(0)
  ROOT r = s32[] get-dimension-size(x), dimensions={0}""",
    "reduce_of_reduce": (
        """
  x = f32[2,3,4] parameter(0)
  z = f32[] constant(0)
  y = f32[2,4] reduce(x, z), dimensions={1}, to_apply=add
  ROOT r = f32[2] reduce(y, f32[] constant(-inf)), dimensions={1}, to_apply=max""",
        ADD + MAX,
    ),
    "reduce_trivial": (
        """
  x = f32[1,3] parameter(0)
  ROOT r = f32[3] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add""",
        ADD,
    ),
    # folding would put free dims 2, 0 of %a in the wrong order
    "dot_of_transposed_lhs": """
  a = f32[2,3,5] parameter(0)
  b = f32[3,4] parameter(1)
  t = f32[5,2,3] transpose(a), dimensions={2,0,1}
  ROOT r = f32[5,2,4] dot(t, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}""",
    "dot_of_transposed_rhs": """
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT r = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
    # the dot's result is also used as it is
    "transpose_of_dot": """
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,2] transpose(d), dimensions={1,0}
  ROOT r = (f32[2,4], f32[4,2]) tuple(d, t)""",
    "constant_to_right": """
  c = s32[4] constant({1, 2, 3, 4})
  ROOT r = s32[4] multiply(c, c)""",
}


def _case(entry):
    return entry if isinstance(entry, tuple) else (entry, "")


@pytest.mark.parametrize("rule", sorted(FIRES))
def test_rule_fires(rule):
    body, checks, *extra = FIRES[rule]
    check_pass(rule_pass(ALGSIMP, rule), module(body, *extra), checks, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rule", sorted(UNCHANGED))
def test_rule_does_not_fire(rule):
    body, extra = _case(UNCHANGED[rule])
    check_pass(rule_pass(ALGSIMP, rule), module(body, extra), expected=None)


@pytest.mark.parametrize(
    "rule,body",
    [
        (
            "dynamic_slice_full",
            """
  x = f32[<=4] parameter(0)
  ROOT r = f32[4] dynamic-slice(x, s32[] constant(0)), dynamic_slice_sizes={4}""",
        ),
        (
            "dynamic_update_slice_full",
            """
  x = f32[<=4] parameter(0)
  u = f32[4] parameter(1)
  ROOT r = f32[<=4] dynamic-update-slice(x, u, s32[] constant(0))""",
        ),
    ],
    ids=["dynamic-slice", "dynamic-update-slice"],
)
def test_whole_size_slices_of_a_dynamic_dimension_stay(rule, body):
    # the static value is not the dynamic one (a RuleError on XLA's
    # dynamic_dimension_inference_test.002)
    check_pass(rule_pass(ALGSIMP, rule), module(body), expected=None)


def test_every_rule_has_both_tests():
    from test_passes_algsimp_arith import FIRES as ARITH_FIRES
    from test_passes_algsimp_arith import UNCHANGED as ARITH_UNCHANGED

    names = {r.name for r in ALGSIMP.rules}
    assert names == set(FIRES) | set(ARITH_FIRES)
    assert names == set(UNCHANGED) | set(ARITH_UNCHANGED)
    assert len(names) == len(ALGSIMP.rules), "rule names must be unique"
