"""float-normalization: narrow-float arithmetic in f32 with converts, bit-identical results."""

import ml_dtypes
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
from minixla.passes.float_normalization import FloatNormalization
from minixla.testing import check_pass


def test_bf16_add_computes_in_f32_and_rounds_back():
    check_pass(
        "float-normalization",
        """
    HloModule add
    ENTRY main {
      x = bf16[8] parameter(0)
      y = bf16[8] parameter(1)
      ROOT s = bf16[8] add(x, y)
    }""",
        """
    // CHECK-DAG: %[[X:.*]] = f32[8]{0} convert(%x)
    // CHECK-DAG: %[[Y:.*]] = f32[8]{0} convert(%y)
    // CHECK: %[[S:.*]] = f32[8]{0} add(%[[X]], %[[Y]])
    // CHECK: ROOT %{{.*}} = bf16[8]{0} convert(%[[S]])
    """,
    )


def test_compare_reads_f32_and_keeps_its_pred_result():
    check_pass(
        "float-normalization",
        """
    HloModule cmp
    ENTRY main {
      x = f16[8] parameter(0)
      y = f16[8] parameter(1)
      ROOT c = pred[8] compare(x, y), direction=LT
    }""",
        """
    // CHECK: ROOT %{{.*}} = pred[8]{0} compare(%{{.*}}, %{{.*}}), direction=LT
    // CHECK-NOT: convert(%c
    """,
    )


def test_data_movement_and_f32_ops_are_left_alone():
    check_pass(
        "float-normalization",
        """
    HloModule move
    ENTRY main {
      x = bf16[8] parameter(0)
      t = bf16[2,4] reshape(x)
      b = bf16[3,2,4] broadcast(t), dimensions={1,2}
      f = f32[3,2,4] convert(b)
      ROOT n = f32[3,2,4] negate(f)
    }""",
        expected=None,
    )


def test_backend_supported_ops_stay_narrow():
    module = minixla.parse_hlo_module("""
    HloModule native
    ENTRY main {
      x = bf16[8] parameter(0)
      ROOT n = bf16[8] multiply(x, x)
    }""")
    assert not FloatNormalization(supported={("multiply", "bf16")}).run(module)


def test_reduction_combiners_keep_their_narrow_type():
    module = check_pass(
        "float-normalization",
        """
    HloModule red
    add {
      a = bf16[] parameter(0)
      b = bf16[] parameter(1)
      ROOT s = bf16[] add(a, b)
    }
    ENTRY main {
      x = bf16[64] parameter(0)
      e = bf16[64] exponential(x)
      zero = bf16[] constant(0)
      ROOT r = bf16[] reduce(e, zero), dimensions={0}, to_apply=add
    }""",
        """
    // CHECK: ROOT %s = bf16[] add(%a, %b)
    // CHECK: f32[64]{0} exponential(
    """,
    )
    assert module.entry.root.opcode == "reduce"


def test_chain_of_narrow_ops_is_bit_identical():
    text = """
    HloModule chain
    ENTRY main {
      x = bf16[256] parameter(0)
      y = bf16[256] parameter(1)
      m = bf16[256] multiply(x, y)
      e = bf16[256] exponential(m)
      d = bf16[256] divide(e, y)
      s = bf16[256] sqrt(d)
      l = bf16[256] log-plus-one(s)
      c = pred[256] compare(l, x), direction=GT
      sel = bf16[256] select(c, l, d)
      h = f16[256] convert(sel)
      t = f16[256] tanh(h)
      ROOT r = (bf16[256], f16[256]) tuple(sel, t)
    }"""
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(256).astype(ml_dtypes.bfloat16) for _ in range(2)]
    want = flatten(minixla.compile(minixla.parse_hlo_module(text), backend="interpreter")(*args))
    module = minixla.parse_hlo_module(text)
    assert FloatNormalization().run(module)
    narrow = [
        i
        for i in module.entry.instructions
        if i.opcode not in ("convert", "parameter", "tuple", "select")
        and i.shape.is_array
        and i.shape.dtype in ("bf16", "f16")
    ]
    assert narrow == []
    got = minixla.compile(module, backend="interpreter")(*args)
    assert_bit_identical(got, want, "float-normalization")


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_float_normalization_keeps_conformance_values(case):
    check_passes_keep_values(case, [["float-normalization"]])
