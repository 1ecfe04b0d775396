"""winograd-convolution: 3x3 convolutions of stride 1 as Winograd's F(2x2, 3x3)."""

import numpy as np
import pytest

import minixla
from minixla.passes.base import get_pass
from minixla.testing import check_pass, run_pass


def conv_module(
    x="f32[2,32,6,6]",
    w="f32[32,32,3,3]",
    out="f32[2,32,6,6]",
    window="size=3x3 pad=1_1x1_1",
    labels="bf01_oi01->bf01",
    extra="",
):
    return f"""
HloModule conv
ENTRY main {{
  x = {x} parameter(0)
  w = {w} parameter(1)
  ROOT c = {out} convolution(x, w), window={{{window}}}, dim_labels={labels}{extra}
}}"""


def test_a_padded_nchw_convolution_becomes_sixteen_gemms():
    check_pass(
        "winograd-convolution",
        conv_module(),
        """
    // CHECK: ENTRY %main
    // CHECK-DAG: transpose(%x), dimensions={0,2,3,1}
    // CHECK-DAG: pad({{.*}}), padding=0_0x0_0x1_1x1_1x0_0
    // CHECK-DAG: slice({{.*}}), slice={[0:1:1], [0:2:1], [3:8:2], [2:7:2], [0:32:1]}
    // CHECK-DAG: transpose(%w), dimensions={2,3,1,0}
    // CHECK-DAG: %[[V:.*]] = f32[16,2,3,3,32]{4,3,2,1,0} concatenate(
    // CHECK-DAG: %[[U:.*]] = f32[16,32,32]{2,1,0} concatenate(
    // CHECK: f32[16,2,3,3,32]{4,3,2,1,0} dot(%[[V]], %[[U]]), lhs_batch_dims={0}, lhs_contracting_dims={4}, rhs_batch_dims={0}, rhs_contracting_dims={1}
    // CHECK: f32[2,3,2,3,2,32]{5,4,3,2,1,0} concatenate(
    // CHECK: ROOT {{.*}} = f32[2,32,6,6]{3,2,1,0} transpose({{.*}}), dimensions={0,3,1,2}
    // CHECK-NOT: convolution
    """,
        rtol=1e-4,
        atol=1e-4,
    )


def _exact(text: str, inputs) -> np.ndarray:
    wide = text.replace("f32", "f64")
    exe = minixla.compile(wide, backend="interpreter")
    return np.asarray(exe(*[np.asarray(a, np.float64) for a in inputs]))


@pytest.mark.parametrize(
    "case",
    [
        # odd output sizes: the last tile row and column are cropped
        dict(x="f32[2,32,7,5]", out="f32[2,33,7,5]", w="f32[33,32,3,3]"),
        # no padding, uneven padding
        dict(out="f32[2,32,4,4]", window="size=3x3"),
        dict(out="f32[2,32,6,7]", window="size=3x3 pad=0_2x2_1"),
        # channels-last, as jax writes it
        dict(x="f32[2,6,6,24]", w="f32[3,3,24,48]", out="f32[2,6,6,48]", labels="b01f_01io->b01f"),
        # every dim in another place, as a gradient's convolution has them
        dict(x="f32[6,32,2,6]", w="f32[3,32,32,3]", out="f32[6,32,2,6]", labels="0fb1_0io1->0fb1"),
        # a reversed window (the input gradient of a convolution)
        dict(window="size=3x3 pad=1_1x1_1 rhs_reversal=1x0"),
        dict(x="f64[2,32,6,6]", w="f64[32,32,3,3]", out="f64[2,32,6,6]"),
    ],
)
def test_the_rewrite_computes_the_convolution(case):
    _check_computes(conv_module(**case))


def _check_computes(text: str):
    module, changed = run_pass("winograd-convolution", text)
    assert changed
    assert "convolution" not in [i.opcode for i in module.entry.instructions]
    rng = np.random.default_rng(0)
    original = minixla.parse_hlo_module(text)
    inputs = [
        rng.standard_normal(p.shape.dims).astype(p.shape.dtype.replace("f", "float"))
        for p in original.entry.parameters
    ]
    exact = _exact(text, inputs)
    before = np.asarray(minixla.compile(text, backend="interpreter")(*inputs))
    after = np.asarray(minixla.compile(module, backend="interpreter")(*inputs))
    assert after.shape == exact.shape and after.dtype == before.dtype
    # as accurate as the direct sum: within a few of its rounding errors of the exact result
    tol = 8 * max(np.abs(before - exact).max(), np.finfo(before.dtype).eps * np.abs(exact).max())
    np.testing.assert_allclose(after, exact, rtol=0, atol=tol)
    return module


@pytest.mark.parametrize(
    "case",
    [
        # weight gradients of 3x3 convolutions: the window is the output gradient
        dict(
            x="f32[2,32,6,6]",
            w="f32[2,32,6,6]",
            out="f32[32,32,3,3]",
            window="size=6x6 pad=1_1x1_1",
            labels="fb01_io01->fb01",
        ),
        # odd window sizes: the kernel tiles are completed with zeros
        dict(
            x="f32[3,32,7,5]",
            w="f32[3,33,7,5]",
            out="f32[33,32,3,3]",
            window="size=7x5 pad=1_1x1_1",
            labels="fb01_io01->fb01",
        ),
        # channels-last, as jax's gradient of an HWIO kernel
        dict(
            x="f32[2,6,5,24]",
            w="f32[2,4,3,48]",
            out="f32[3,3,24,48]",
            window="size=4x3",
            labels="f01b_i01o->01bf",
        ),
    ],
)
def test_a_3x3_output_becomes_sixteen_gemms_over_kernel_tiles(case):
    module = _check_computes(conv_module(**case))
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    # contracting over the features and the tiles: [16, features, tiles, tiles, batch]
    assert dot.shape.dims[0] == 16 and dot.attrs["lhs_contracting_dims"] == (1, 2, 3)


@pytest.mark.parametrize(
    "case",
    [
        dict(window="size=3x3 stride=2x2 pad=1_1x1_1", out="f32[2,32,3,3]"),
        dict(window="size=3x3 pad=2_2x2_2 rhs_dilate=2x2"),
        dict(window="size=3x3 pad=1_1x1_1 lhs_dilate=2x2", out="f32[2,32,11,11]"),
        dict(window="size=3x3 pad=-1_3x1_1"),
        dict(w="f32[32,16,3,3]", extra=", feature_group_count=2"),
        dict(w="f32[32,32,5,5]", window="size=5x5 pad=2_2x2_2"),
        # too few features for the GEMMs to pay for the transforms: an RGB first layer, and
        # 16 -> 32 features (measured slower)
        dict(x="f32[2,3,6,6]", w="f32[32,3,3,3]"),
        dict(x="f32[2,16,6,6]", w="f32[32,16,3,3]"),
        # narrow floats would round every transform step
        dict(x="bf16[2,32,6,6]", w="bf16[32,32,3,3]", out="bf16[2,32,6,6]"),
        # a one-row output has no 2x2 tiles
        dict(x="f32[2,32,3,6]", out="f32[2,32,1,6]", window="size=3x3 pad=0_0x1_1"),
        # a 3x3 output with too few rows or columns in its GEMMs (the gradient of an RGB layer)
        dict(
            x="f32[2,3,6,6]",
            w="f32[2,32,6,6]",
            out="f32[32,3,3,3]",
            window="size=6x6 pad=1_1x1_1",
            labels="fb01_io01->fb01",
        ),
        # a 3x3 output from a one-column window
        dict(x="f32[2,32,3,5]", w="f32[32,32,1,3]", out="f32[2,32,3,3]", window="size=1x3"),
    ],
)
def test_other_convolutions_are_left_alone(case):
    check_pass("winograd-convolution", conv_module(**case), None)


def test_the_cpu_pipeline_runs_it_and_agrees_with_the_interpreter():
    text = conv_module(x="f32[4,32,9,8]", w="f32[40,32,3,3]", out="f32[4,40,9,8]")
    rng = np.random.default_rng(1)
    inputs = [
        rng.standard_normal((4, 32, 9, 8), np.float32),
        rng.standard_normal((40, 32, 3, 3), np.float32),
    ]
    exact = _exact(text, inputs)
    exe = minixla.compile(text, backend="cpu")
    opcodes = {i.opcode for c in exe.module.computations for i in c.instructions}
    assert "convolution" not in opcodes
    got = np.asarray(exe(*inputs))
    np.testing.assert_allclose(got, exact, rtol=0, atol=1e-4 * np.abs(exact).max())


def test_the_pass_is_registered_by_name():
    assert get_pass("winograd-convolution").name == "winograd-convolution"


def test_backends_choose_whether_their_pipeline_has_it():
    from minixla.passes.pipelines import cpu_pipeline

    def names(pipeline):
        return [p.name for p in pipeline.passes]

    assert "winograd-convolution" in names(cpu_pipeline())
    assert "winograd-convolution" not in names(cpu_pipeline(winograd=False))
