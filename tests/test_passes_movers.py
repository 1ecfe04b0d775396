"""reshape-mover, transpose-folding, broadcast-canonicalizer, movement-converts,
reduction-converts, and the CPU pipeline's makeup."""

import pytest

from conformance_reference import case_dirs, check_passes_keep_values, requires_corpus
from minixla.passes import FixedPoint, Pipeline
from minixla.passes.pipelines import cpu_pipeline
from minixla.testing import check_pass


def test_equal_reshapes_sink_below_an_elementwise_op():
    check_pass(
        "reshape-mover",
        """
    HloModule rm
    ENTRY main {
      x = f32[4,6] parameter(0)
      y = f32[4,6] parameter(1)
      rx = f32[24] reshape(x)
      ry = f32[24] reshape(y)
      c = f32[] constant(3)
      cs = f32[24] broadcast(c), dimensions={}
      s = f32[24] add(rx, ry)
      ROOT m = f32[24] multiply(s, cs)
    }""",
        """
    // CHECK: %[[S:.*]] = f32[4,6]{1,0} add(%x, %y)
    // CHECK: %[[C:.*]] = f32[4,6]{1,0} broadcast(%c), dimensions={}
    // CHECK: %[[M:.*]] = f32[4,6]{1,0} multiply(%[[S]], %[[C]])
    // CHECK: ROOT %{{.*}} = f32[24]{0} reshape(%[[M]])
    """,
    )


def test_different_reshapes_stay():
    check_pass(
        "reshape-mover",
        """
    HloModule rm
    ENTRY main {
      x = f32[4,6] parameter(0)
      y = f32[6,4] parameter(1)
      rx = f32[24] reshape(x)
      ry = f32[24] reshape(y)
      ROOT s = f32[24] add(rx, ry)
    }""",
        expected=None,
    )


def test_transposes_sink_too():
    check_pass(
        "reshape-mover",
        """
    HloModule tm
    ENTRY main {
      x = f32[4,6] parameter(0)
      tx = f32[6,4] transpose(x), dimensions={1,0}
      ROOT e = f32[6,4] exponential(tx)
    }""",
        """
    // CHECK: %[[E:.*]] = f32[4,6]{1,0} exponential(%x)
    // CHECK: ROOT %{{.*}} = f32[6,4]{1,0} transpose(%[[E]]), dimensions={1,0}
    """,
    )


def test_transpose_folds_into_dot_contracting_dims():
    check_pass(
        "transpose-folding",
        """
    HloModule tf
    ENTRY main {
      a = f32[6,4] parameter(0)
      b = f32[6,5] parameter(1)
      ta = f32[4,6] transpose(a), dimensions={1,0}
      ROOT d = f32[4,5] dot(ta, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }""",
        """
    // CHECK-NOT: transpose
    // CHECK: ROOT %d = f32[4,5]{1,0} dot(%a, %b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
    """,
    )


def test_transpose_that_reorders_result_dims_stays():
    check_pass(
        "transpose-folding",
        """
    HloModule tf
    ENTRY main {
      a = f32[2,3,6] parameter(0)
      b = f32[6] parameter(1)
      ta = f32[3,2,6] transpose(a), dimensions={1,0,2}
      ROOT d = f32[3,2] dot(ta, b), lhs_contracting_dims={2}, rhs_contracting_dims={0}
    }""",
        expected=None,
    )


def test_broadcast_dimensions_are_sorted_through_a_transpose():
    check_pass(
        "broadcast-canonicalizer",
        """
    HloModule bc
    ENTRY main {
      x = f32[3,2] parameter(0)
      ROOT b = f32[2,5,3] broadcast(x), dimensions={2,0}
    }""",
        """
    // CHECK: %[[T:.*]] = f32[2,3]{1,0} transpose(%x), dimensions={1,0}
    // CHECK: ROOT %b = f32[2,5,3]{2,1,0} broadcast(%[[T]]), dimensions={0,2}
    """,
    )


def test_cpu_pipeline_runs_every_pass_in_xla_order():
    def names(item):
        if isinstance(item, (Pipeline, FixedPoint)):
            return [n for p in item.passes for n in names(p)]
        return [item.name]

    order = names(cpu_pipeline())
    for name in (
        "call-inliner",
        "movement-converts",
        "reduction-converts",
        "algsimp",
        "dce",
        "cse",
        "constant-folding",
        "tuple-simplifier",
        "while-loop-simplifier",
        "conditional-simplifier",
        "reshape-mover",
    ):
        assert name in order
    tail = [
        "float-normalization",
        "broadcast-canonicalizer",
        "transpose-folding",
        "dot-sum-merger",
        "dot-strength-reduction",
        "layout-assignment",
        "fusion",
        "row-fusion",
        "copy-insertion",
        "scheduling",
    ]
    assert order[-len(tail) :] == tail


def test_a_movement_op_that_changes_the_float_type_reads_a_convert():
    check_pass(
        "movement-converts",
        """
    HloModule mc
    ENTRY main {
      x = f64[3,4] parameter(0)
      v = f32[] parameter(1)
      r = bf16[12] reshape(x)
      p = bf16[14] pad(r, v), padding=1_1
      i = s32[] parameter(2)
      ROOT d = bf16[2] dynamic-slice(p, i), dynamic_slice_sizes={2}
    }""",
        """
    // CHECK: %[[C:.*]] = bf16[3,4]{1,0} convert(%x)
    // CHECK: %r = bf16[12]{0} reshape(%[[C]])
    // CHECK: %[[V:.*]] = bf16[] convert(%v)
    // CHECK: %p = bf16[14]{0} pad(%r, %[[V]])
    // CHECK: dynamic-slice(%p, %i)
    """,
    )


def test_the_pipeline_keeps_the_rounding_of_a_mixed_precision_reshape():
    # reshape-mover turned convert(bf16 reshape(f64 x)) into an f64 reshape: no bf16 rounding
    # (fuzz mutant seed 864)
    import numpy as np

    import minixla
    from minixla.passes.base import run_pipeline

    text = """HloModule m
ENTRY e {
  x = f64[2,2] parameter(0)
  r = bf16[4] reshape(x)
  ROOT c = f64[4] convert(r)
}"""
    module = minixla.parse_hlo_module(text)
    run_pipeline(cpu_pipeline(), module)
    x = np.array([[0.546302, 1.0], [3.14159, -2.0]])
    got = minixla.compile(module, backend="interpreter", passes=[])(x)
    np.testing.assert_array_equal(got, [0.546875, 1.0, 3.140625, -2.0])


def test_a_reduction_reads_its_inputs_and_inits_in_its_reducers_types():
    check_pass(
        "reduction-converts",
        """
    HloModule rc
    max_bf16 {
      a = bf16[] parameter(0)
      b = bf16[] parameter(1)
      ROOT m = bf16[] maximum(a, b)
    }
    add_f32 {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    ENTRY main {
      x = bf16[4,3] parameter(0)
      y = f64[4,3] parameter(1)
      low = f64[] constant(-inf)
      zero = bf16[] constant(0.1)
      r = bf16[] reduce(x, low), dimensions={0,1}, to_apply=max_bf16
      w = f32[3,2] reduce-window(y, zero), window={size=2x2}, to_apply=add_f32
      ROOT t = (bf16[], f32[3,2]) tuple(r, w)
    }""",
        """
    // CHECK: %[[LOW:.*]] = bf16[] convert(%low)
    // CHECK: %r = bf16[] reduce(%x, %[[LOW]])
    // CHECK: %[[Y:.*]] = f32[4,3]{1,0} convert(%y)
    // CHECK: %[[ZERO:.*]] = f32[] convert(%zero)
    // CHECK: %w = f32[3,2]{1,0} reduce-window(%[[Y]], %[[ZERO]])
    """,
    )


def test_a_reduction_in_its_reducers_types_is_left_alone():
    check_pass(
        "reduction-converts",
        """
    HloModule rc
    add_bf16 {
      a = bf16[] parameter(0)
      b = bf16[] parameter(1)
      ROOT s = bf16[] add(a, b)
    }
    ENTRY main {
      x = bf16[4,3] parameter(0)
      zero = bf16[] constant(0)
      ROOT r = bf16[4] reduce(x, zero), dimensions={1}, to_apply=add_bf16
    }""",
    )


MIXED_TYPES = [
    ("bf16", "f64", "bf16", "maximum"),  # fuzz mutant seed 902170: a raw TypingError on cpu
    ("bf16", "f64", "f32", "add"),
    ("f32", "f64", "bf16", "add"),
    ("f64", "bf16", "f32", "maximum"),
    ("f32", "f32", "bf16", "add"),  # cpu summed the f32 inputs in bf16 steps
]


@pytest.mark.parametrize("kind", ["reduce", "reduce-window"])
@pytest.mark.parametrize("inputs,init,reducer,op", MIXED_TYPES)
def test_mixed_precision_reductions_agree_on_cpu_and_the_interpreter(
    inputs, init, reducer, op, kind
):
    import numpy as np

    import minixla
    from minixla.runtime.inputs import random_arguments

    result = (
        f"ROOT r = {reducer}[] reduce(x, i), dimensions={{0,1}}, to_apply=red"
        if kind == "reduce"
        else f"ROOT r = {reducer}[3,2] reduce-window(x, i), window={{size=2x2}}, to_apply=red"
    )
    text = f"""HloModule m
red {{
  a = {reducer}[] parameter(0)
  b = {reducer}[] parameter(1)
  ROOT c = {reducer}[] {op}(a, b)
}}
ENTRY e {{
  x = {inputs}[4,3] parameter(0)
  i = {init}[] constant(0.1)
  {result}
}}"""
    module = minixla.parse_hlo_module(text)
    args = random_arguments(module, 0)
    want = minixla.compile(text, backend="interpreter")(*args)
    got = minixla.compile(text, backend="cpu")(*args)
    assert got.dtype == want.dtype == module.entry.root.shape.numpy_dtype
    if op == "maximum":  # exact: the reducer's maximum of the rounded inputs and init
        np.testing.assert_array_equal(got, want)
        init_type = next(i for i in module.entry.instructions if i.name == "i").shape.numpy_dtype
        start = np.asarray(0.1).astype(init_type).astype(want.dtype)
        rounded = np.asarray(args[0]).astype(want.dtype)
        if kind == "reduce":
            assert want == max(start, rounded.max())
    else:  # sums in different orders, each step in the reducer's type or wider
        rtol = 1e-2 if reducer == "bf16" else 1e-6
        np.testing.assert_allclose(np.float64(got), np.float64(want), rtol=rtol)


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_movers_keep_conformance_values(case):
    check_passes_keep_values(
        case, [["reshape-mover", "transpose-folding", "broadcast-canonicalizer"]]
    )
