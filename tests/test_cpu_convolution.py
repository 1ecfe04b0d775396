"""The cpu backend's convolution thunk against the interpreter (the oracle), both strategies
(shifted GEMMs and im2col) on every case where each applies: 1-, 2- and 3-D windows, dimension
numbers in several orders, strides, padding (negative too), lhs and rhs dilation, reversal,
feature and batch groups, integer and f64 operands, zero sizes.

The thunk is NumPy and BLAS only, so these cases compile nothing; one end-to-end case checks
the driver calls it. Overlap-add (base-dilated convolutions) adds its products in a generated
kernel, compiled here for each case it applies to.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import minixla
from minixla.backends.cpu import FallbackWarning
from minixla.backends.cpu import convolution as conv

CASES = {
    # the dilated 1-D stack of the whole-program benchmark, smaller
    "1d_dilated_same": (
        "f32[2,40,16]",
        "f32[3,16,8]",
        "f32[2,40,8]",
        "window={size=3 pad=4_4 rhs_dilate=4}, dim_labels=b0f_0io->b0f",
    ),
    "1d_feature_major": (
        "f32[3,2,20]",
        "f32[5,4,3]",
        "f32[2,5,15]",
        "window={size=4 pad=1_0 rhs_dilate=2}, dim_labels=fb0_o0i->bf0",
    ),
    "1d_spatial_first": (
        "f32[20,2,3]",
        "f32[3,2,4]",
        "f32[17,4,2]",
        "window={size=2 pad=-1_1 rhs_dilate=3}, dim_labels=0bf_i0o->0fb",
    ),
    "1d_groups": (
        "f32[2,30,8]",
        "f32[3,2,8]",
        "f32[2,28,8]",
        "window={size=3 pad=0_2 rhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=4",
    ),
    "1d_depthwise": (
        "f32[2,25,6]",
        "f32[3,1,6]",
        "f32[2,25,6]",
        "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f, feature_group_count=6",
    ),
    "1d_reversed_lhs_dilated": (
        "f32[2,9,5]",
        "f32[3,5,4]",
        "f32[2,19,4]",
        "window={size=3 pad=2_2 lhs_dilate=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f",
    ),
    "1d_strided": (
        "f32[2,33,4]",
        "f32[3,4,5]",
        "f32[2,15,5]",
        "window={size=3 stride=2 pad=1_0 rhs_dilate=2}, dim_labels=b0f_0io->b0f",
    ),
    "1d_batch_groups": (
        "f32[3,5,4]",
        "f32[3,5,6]",
        "f32[2,1,6]",
        "window={size=5}, dim_labels=f0b_i0o->b0f, batch_group_count=2",
    ),
    "1d_batch_groups_features_minor": (
        "f32[4,6,3]",
        "f32[3,3,6]",
        "f32[2,4,6]",
        "window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2",
    ),
    "2d_nchw_groups": (
        "f32[2,6,7,5]",
        "f32[6,3,2,2]",
        "f32[2,6,6,4]",
        "window={size=2x2}, dim_labels=bf01_oi01->bf01, feature_group_count=2",
    ),
    "2d_nhwc_same": (
        "f32[2,9,7,5]",
        "f32[3,3,5,4]",
        "f32[2,9,7,4]",
        "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
    ),
    "2d_nchw_dilated": (
        "f32[2,3,11,8]",
        "f32[4,3,3,2]",
        "f32[2,4,7,7]",
        "window={size=3x2 pad=0_0x0_0 rhs_dilate=2x1}, dim_labels=bf01_oi01->bf01",
    ),
    "2d_nchw_reversed_lhs_dilated": (
        "f32[2,4,5,6]",
        "f32[6,2,3,2]",
        "f32[2,6,11,12]",
        "window={size=3x2 pad=2_2x1_1 lhs_dilate=2x2 rhs_reversal=1x1}, "
        "dim_labels=bf01_oi01->bf01, feature_group_count=2",
    ),
    "2d_nchw_in_nhwc_out": (
        "f32[2,3,9,8]",
        "f32[3,3,3,5]",
        "f32[2,9,8,5]",
        "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_01io->b01f",
    ),
    "2d_fchw_s8": (
        "s8[3,2,9,10]",
        "s8[4,3,3,3]",
        "s32[2,4,9,10]",
        "window={size=3x3 pad=1_1x1_1}, dim_labels=fb01_oi01->bf01",
    ),
    "2d_strided": (
        "f32[2,3,7,6]",
        "f32[4,3,3,2]",
        "f32[2,4,4,6]",
        "window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=bf01_oi01->bf01",
    ),
    "2d_groups_reversed": (
        "f32[1,6,6,4]",
        "f32[2,3,2,6]",
        "f32[1,5,6,6]",
        "window={size=2x3 pad=0_0x1_1 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f, "
        "feature_group_count=2",
    ),
    "2d_lhs_dilated": (
        "f32[1,5,5,4]",
        "f32[3,3,4,8]",
        "f32[1,11,11,8]",
        "window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
    ),
    # transposed convolutions (decoders, input gradients of strided ones): computed as one
    # sub-convolution per output residue class (convolution._phases)
    "2d_transposed_stride2_k4": (
        "f32[2,5,6,8]",
        "f32[4,4,8,6]",
        "f32[2,10,12,6]",
        "window={size=4x4 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
    ),
    "1d_transposed_stride3_uneven": (
        "f32[2,7,4]",
        "f32[5,4,3]",
        "f32[2,19,3]",
        "window={size=5 pad=1_3 lhs_dilate=3}, dim_labels=b0f_0io->b0f",
    ),
    "1d_lhs_dilated_cropped": (
        "f32[2,6,4]",
        "f32[3,4,3]",
        "f32[2,8,3]",
        "window={size=3 pad=-2_1 lhs_dilate=2}, dim_labels=b0f_0io->b0f",
    ),
    "1d_lhs_dilated_tapless_phase": (
        "f32[2,5,4]",
        "f32[1,4,3]",
        "f32[2,9,3]",
        "window={size=1 lhs_dilate=2}, dim_labels=b0f_0io->b0f",
    ),
    "2d_lhs_dilated_and_strided": (
        "f32[2,5,9,4]",
        "f32[3,3,4,6]",
        "f32[2,9,5,6]",
        "window={size=3x3 stride=1x2 pad=1_1x1_1 lhs_dilate=2x1}, dim_labels=b01f_01io->b01f",
    ),
    "2d_lhs_dilated_groups_reversed": (
        "f32[2,5,5,8]",
        "f32[3,3,4,8]",
        "f32[2,9,9,8]",
        "window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2 rhs_reversal=1x0}, "
        "dim_labels=b01f_01io->b01f, feature_group_count=2",
    ),
    "2d_nchw_transposed_stride2": (
        "f32[2,6,5,5]",
        "f32[6,4,4,4]",
        "f32[2,4,10,10]",
        "window={size=4x4 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=bf01_io01->bf01",
    ),
    # weight-gradient forms (features contracted with the kernel's in features, the window
    # larger than the output), reversed and strided, for the per-feature strategy
    "2d_weight_gradient_reversed": (
        "f32[4,3,7,6]",
        "f32[4,5,5,4]",
        "f32[5,3,5,3]",
        "window={size=5x4 pad=1_1x0_0 rhs_reversal=1x0}, dim_labels=fb01_io01->fb01",
    ),
    "2d_weight_gradient_strided": (
        "f32[4,9,8,3]",
        "f32[4,4,3,5]",
        "f32[3,6,3,5]",
        "window={size=4x3 stride=2x1 rhs_reversal=0x1}, dim_labels=f01b_i01o->01bf",
    ),
    "3d": (
        "f32[1,5,4,6,3]",
        "f32[2,2,3,3,2]",
        "f32[1,4,3,4,2]",
        "window={size=2x2x3}, dim_labels=b012f_012io->b012f",
    ),
    "f64": (
        "f64[2,12,3]",
        "f64[3,3,2]",
        "f64[2,12,2]",
        "window={size=3 pad=2_2 rhs_dilate=2}, dim_labels=b0f_0io->b0f",
    ),
    "s8_to_s32": (
        "s8[2,10,3]",
        "s8[3,3,2]",
        "s32[2,10,2]",
        "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f",
    ),
    "f64_lhs_dilated_strided": (
        "f64[2,7,4]",
        "f64[4,4,3]",
        "f64[2,10,3]",
        "window={size=4 stride=2 pad=2_2 lhs_dilate=3}, dim_labels=b0f_0io->b0f",
    ),
    "s8_transposed": (
        "s8[2,5,5,3]",
        "s8[3,3,3,4]",
        "s32[2,11,11,4]",
        "window={size=3x3 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
    ),
    "empty_batch": (
        "f32[0,10,3]",
        "f32[3,3,2]",
        "f32[0,10,2]",
        "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f",
    ),
    "window_past_input": (
        "f32[2,2,3]",
        "f32[3,3,2]",
        "f32[2,0,2]",
        "window={size=3}, dim_labels=b0f_0io->b0f",
    ),
}


def _text(lhs: str, rhs: str, out: str, attrs: str) -> str:
    return (
        f"HloModule m\nENTRY main {{\n  x = {lhs} parameter(0)\n  w = {rhs} parameter(1)\n"
        f"  ROOT c = {out} convolution(x, w), {attrs}\n}}\n"
    )


def _inputs(module):
    from minixla.testing.compare import random_inputs

    return random_inputs(module, seed=1)


def _strategies(instr) -> list[str]:
    found = []
    for strategy in ("shifted", "im2col", "planar", "per-feature"):
        try:
            conv.plan(instr, strategy)
        except ValueError:
            continue
        found.append(strategy)
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_both_strategies_match_the_interpreter(case):
    text = _text(*CASES[case])
    module = minixla.parse_hlo_module(text)
    instr = module.entry.root
    x, w = _inputs(module)
    want = np.asarray(minixla.compile(text, backend="interpreter")(x, w))
    strategies = _strategies(instr)
    assert "im2col" in strategies
    for strategy in strategies:
        run = conv.convolution(instr, strategy)
        out = np.full(instr.shape.dims, 7, want.dtype)  # stale values must be overwritten
        run(out, x, w)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=strategy)
        else:
            np.testing.assert_array_equal(out, want, err_msg=strategy)


def test_the_shifted_strategy_applies_where_strides_and_batch_groups_allow():
    expected = {
        "1d_dilated_same",
        "1d_feature_major",
        "1d_spatial_first",
        "1d_groups",
        "1d_depthwise",
        "1d_reversed_lhs_dilated",
        "2d_nhwc_same",
        "2d_nchw_dilated",
        "2d_groups_reversed",
        "2d_lhs_dilated",
        "2d_transposed_stride2_k4",
        "1d_transposed_stride3_uneven",
        "1d_lhs_dilated_cropped",
        "1d_lhs_dilated_tapless_phase",
        "2d_lhs_dilated_groups_reversed",
        "2d_nchw_transposed_stride2",
        "2d_nchw_groups",
        "2d_nchw_reversed_lhs_dilated",
        "2d_nchw_in_nhwc_out",
        "2d_fchw_s8",
        "2d_weight_gradient_reversed",
        "3d",
        "f64",
        "s8_to_s32",
        "s8_transposed",
        "empty_batch",
        "window_past_input",
    }
    shifting = {
        case
        for case in CASES
        if "shifted" in _strategies(minixla.parse_hlo_module(_text(*CASES[case])).entry.root)
    }
    assert shifting == expected


def test_the_planar_strategy_applies_to_features_first_layouts():
    planar = {
        case
        for case in CASES
        if "planar" in _strategies(minixla.parse_hlo_module(_text(*CASES[case])).entry.root)
    }
    assert planar == {
        "1d_feature_major",
        "2d_nchw_groups",
        "2d_nchw_dilated",
        "2d_nchw_reversed_lhs_dilated",
        "2d_nchw_transposed_stride2",
        "2d_fchw_s8",
        "2d_weight_gradient_reversed",
        "2d_strided",  # strided along the major spatial dim only
    }


@pytest.mark.parametrize(
    "lhs,rhs,out,attrs,strategy",
    [
        # the dilated 1-D stack: 32 features, three taps, stride 1
        (
            "f32[8,1024,32]",
            "f32[3,32,32]",
            "f32[8,1024,32]",
            "window={size=3 pad=8_8 rhs_dilate=8}, dim_labels=b0f_0io->b0f",
            "shifted",
        ),
        # an RGB first layer: three features make each tap's GEMM too thin
        (
            "f32[16,32,32,3]",
            "f32[3,3,3,16]",
            "f32[16,32,32,16]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
            "im2col",
        ),
        # a weight gradient: the window is the whole image (1024 taps)
        (
            "f32[16,32,32,32]",
            "f32[16,32,32,16]",
            "f32[3,3,32,16]",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
            "im2col",
        ),
        # 3x3 on 16x16 images: the padded grid is 1.27x the output
        (
            "f32[16,16,16,16]",
            "f32[3,3,16,32]",
            "f32[16,16,16,32]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
            "im2col",
        ),
        (
            "f32[8,32,32,32]",
            "f32[3,3,32,32]",
            "f32[8,32,32,32]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
            "shifted",
        ),
        (
            "f32[8,64,32]",
            "f32[3,32,32]",
            "f32[8,32,32]",
            "window={size=3 stride=2 pad=1_1}, dim_labels=b0f_0io->b0f",
            "im2col",
        ),
        # PyTorch's NCHW: small images keep their layout
        (
            "f32[8,3,16,16]",
            "f32[16,3,3,3]",
            "f32[8,16,16,16]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
            "planar",
        ),
        # ... unless strided along the minor dim, or with many features per window row
        (
            "f32[8,3,16,16]",
            "f32[16,3,3,3]",
            "f32[8,16,8,8]",
            "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
            "im2col",
        ),
        (
            "f32[8,16,4,4]",
            "f32[16,16,3,3]",
            "f32[8,16,4,4]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
            "im2col",
        ),
        # a torch weight gradient: the window is the whole image
        (
            "f32[8,16,8,8]",
            "f32[8,32,8,8]",
            "f32[32,16,3,3]",
            "window={size=8x8 pad=1_1x1_1}, dim_labels=fb01_io01->fb01",
            "im2col",
        ),
        # ... over a larger image: im2col would transpose the whole image gradient (torch
        # stores its out features before the taps)
        (
            "f32[32,3,32,32]",
            "f32[32,32,32,32]",
            "f32[32,3,3,3]",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=fb01_io01->fb01",
            "per-feature",
        ),
        # an RGB layer's weight gradient in jax's layout: three rows per output position
        (
            "f32[16,32,32,3]",
            "f32[16,32,32,16]",
            "f32[3,3,3,16]",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
            "per-feature",
        ),
    ],
)
def test_the_chosen_strategy(lhs, rhs, out, attrs, strategy):
    instr = minixla.parse_hlo_module(_text(lhs, rhs, out, attrs)).entry.root
    assert conv.plan(instr).strategy == strategy


@pytest.mark.parametrize(
    "case, phases",
    [
        ("2d_transposed_stride2_k4", 4),
        ("2d_nchw_transposed_stride2", 4),
        ("1d_transposed_stride3_uneven", 3),
        ("2d_lhs_dilated_and_strided", 2),  # dilated along one dim, strided along the other
        ("2d_nchw_reversed_lhs_dilated", 4),
        ("2d_nhwc_same", 0),
    ],
)
def test_base_dilated_convolutions_skip_the_dilation_zeros(case, phases):
    """A transposed convolution runs one sub-convolution per output residue class, each over
    the undilated input with every s-th tap: s^d fewer multiply-adds than over the dilated
    input, which is mostly zeros."""
    instr = minixla.parse_hlo_module(_text(*CASES[case])).entry.root
    spec = conv.plan(instr)
    assert len(spec.phases) == phases
    if phases:
        assert spec.strategy in ("shifted", "im2col")
        done = sum(p.plan.flops for p in spec.phases if p.plan is not None)
        dilation = math.prod(wd.lhs_dilation for wd in spec.window)
        assert done <= spec.flops / dilation * 1.5


def _overlap_add_applies(case: str) -> bool:
    try:
        conv.plan(minixla.parse_hlo_module(_text(*CASES[case])).entry.root, "overlap-add")
    except ValueError:
        return False
    return True


OVERLAP_ADD_CASES = [case for case in sorted(CASES) if _overlap_add_applies(case)]


def _overlap_add(instr):
    """The overlap-add thunk with its kernel compiled here and bound as the driver binds it."""
    from minixla.backends.cpu import jit

    spec = conv.plan(instr, "overlap-add")
    source = conv.overlap_add_kernel(instr, spec)
    dispatcher, _ = jit.obtain(source, None)
    return conv.OverlapAdd(spec, {"kernel": jit.entry_point(dispatcher, source)}, "kernel")


@pytest.mark.parametrize("case", OVERLAP_ADD_CASES)
def test_overlap_add_matches_the_interpreter(case):
    """Every base-dilated case, whatever the plan would pick: strides on a dilated dim,
    cropping, reversal, groups, features-first layouts, integer and f64 operands."""
    text = _text(*CASES[case])
    module = minixla.parse_hlo_module(text)
    x, w = _inputs(module)
    want = np.asarray(minixla.compile(text, backend="interpreter")(x, w))
    out = np.full(want.shape, 7, want.dtype)  # stale values must be overwritten
    _overlap_add(module.entry.root)(out, x, w)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_array_equal(out, want)


def test_overlap_add_covers_the_base_dilated_kinds():
    assert {
        "1d_lhs_dilated_cropped",
        "1d_lhs_dilated_tapless_phase",
        "2d_lhs_dilated_groups_reversed",
        "2d_nchw_transposed_stride2",
        "f64_lhs_dilated_strided",
        "s8_transposed",
    } <= set(OVERLAP_ADD_CASES)
    assert "2d_nhwc_same" not in OVERLAP_ADD_CASES  # no base dilation: nothing to overlap


DECODER = "window={size=4x4 pad=2_2x2_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"


@pytest.mark.parametrize(
    "lhs, rhs, out, attrs, chosen",
    [
        # a decoder's last layer, 16 features to 3: the products are few
        ("f32[2,8,8,16]", "f32[4,4,16,3]", "f32[2,16,16,3]", DECODER, True),
        # more out features than in: the products outweigh the phases' copies
        ("f32[2,8,8,16]", "f32[4,4,16,64]", "f32[2,16,16,64]", DECODER, False),
        # padding crops away most products
        (
            "f32[2,9,8]",
            "f32[3,8,4]",
            "f32[2,3,4]",
            "window={size=3 pad=-6_-6 lhs_dilate=2}, dim_labels=b0f_0io->b0f",
            False,
        ),
    ],
)
def test_overlap_add_is_chosen_where_it_pays(lhs, rhs, out, attrs, chosen):
    instr = minixla.parse_hlo_module(_text(lhs, rhs, out, attrs)).entry.root
    assert (conv.plan(instr, native=True).strategy == "overlap-add") is chosen
    assert conv.plan(instr).strategy != "overlap-add"  # a bare thunk has no kernel to call


def test_the_driver_runs_overlap_add_without_fallback():
    text = _text("f32[2,8,8,16]", "f32[4,4,16,3]", "f32[2,16,16,3]", DECODER)
    module = minixla.parse_hlo_module(text)
    args = _inputs(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        exe = minixla.compile(text, backend="cpu", passes=[], cache=False)
    assert not exe.program.fallbacks
    assert any(isinstance(v, conv.OverlapAdd) for v in exe.program.namespace.values())
    want = minixla.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(np.asarray(exe(*args)), np.asarray(want), rtol=1e-4, atol=1e-4)


def test_the_driver_runs_the_thunk_without_fallback():
    text = _text(*CASES["1d_dilated_same"])
    module = minixla.parse_hlo_module(text)
    args = _inputs(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        exe = minixla.compile(text, backend="cpu", passes=[])
    assert not exe.program.fallbacks
    want = minixla.compile(text, backend="interpreter")(*args)
    np.testing.assert_allclose(np.asarray(exe(*args)), np.asarray(want), rtol=1e-4, atol=1e-4)


def _openblas_threads() -> dict[str, int]:
    """Each OpenBLAS loaded in this process: its current thread count."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    counts = {}
    for path in paths:
        library = ctypes.CDLL(path)
        for symbol in (
            "scipy_openblas_get_num_threads64_",
            "scipy_openblas_get_num_threads",
            "openblas_get_num_threads64_",
            "openblas_get_num_threads",
        ):
            getter = getattr(library, symbol, None)
            if getter is not None:
                counts[path] = getter()
                break
    return counts


def test_an_openblas_loaded_after_the_first_gemm_gets_the_thread_count_too():
    import sys

    pytest.importorskip("scipy")
    if not sys.platform.startswith("linux"):
        pytest.skip("the thread setters are found through /proc/self/maps")
    from minixla.backends.cpu import blas_threads, libcalls

    libcalls._lapack()  # SciPy's OpenBLAS is in the process from here on
    for setter, _ in blas_threads._find_setters():
        setter(2)
    blas_threads._setters, blas_threads._current = [], None  # as if found before SciPy loaded
    libcalls._lapack()  # what compiling a cholesky or a shifted convolution does
    blas_threads.use_threads(1)
    counts = _openblas_threads()
    if not counts:
        pytest.skip("no OpenBLAS with a thread getter in this process")
    assert set(counts.values()) == {1}, counts


def test_shifted_convolutions_run_without_importing_scipy():
    # Their per-tap GEMMs call NumPy's OpenBLAS directly (host_blas.py), so compiling and
    # running one never pays SciPy's import (most of such a program's warm compile).
    import subprocess
    import sys

    script = """
import sys, numpy as np, minixla
from minixla.backends.cpu.convolution import plan
text = '''HloModule m
ENTRY main {
  x = f32[2,16,16] parameter(0)
  k = f32[3,16,5] parameter(1)
  ROOT c = f32[2,14,5] convolution(x, k), window={size=3}, dim_labels=b0f_0io->b0f
}'''
assert plan(minixla.parse_hlo_module(text).entry.root).strategy == "shifted"
rng = np.random.default_rng(0)
args = [rng.standard_normal(s).astype(np.float32) for s in ((2, 16, 16), (3, 16, 5))]
got = minixla.compile(text, backend="cpu")(*args)
want = minixla.compile(text, backend="interpreter")(*args)
np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
print("scipy" in sys.modules)
"""
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def _traced_peak(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        result = fn()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_windows_past_the_copy_budget_are_copied_in_slices(monkeypatch):
    # a whole-image window (weight-gradient shape): every output position copies 1024 taps.
    # Sliced by the window's first dim, the copy stays near the budget; the sums are equal
    text = _text(
        "f32[8,34,34,16]",
        "f32[32,32,16,4]",
        "f32[8,3,3,4]",
        "window={size=32x32}, dim_labels=b01f_01io->b01f",
    )
    module = minixla.parse_hlo_module(text)
    instr = module.entry.root
    x, w = _inputs(module)
    out = np.empty(instr.shape.dims, np.float32)
    whole_copy = 8 * 9 * 32 * 32 * 16 * 4
    run = conv.convolution(instr, "im2col")
    _, peak_whole = _traced_peak(lambda: run(out, x, w))
    want = out.copy()
    monkeypatch.setattr(conv, "IM2COL_BYTES", whole_copy // 16)
    _, peak_sliced = _traced_peak(lambda: run(out, x, w))
    assert peak_whole > whole_copy
    assert peak_sliced < whole_copy / 4
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-3)  # 16384 terms, another order


def test_overlap_adds_count_of_landing_products_matches_brute_force():
    from minixla.ir import WindowDim

    rng = np.random.default_rng(5)
    for _ in range(500):
        n, k, count = (int(v) for v in rng.integers(1, [12, 6, 30]))
        wd = WindowDim(
            size=k,
            stride=int(rng.integers(1, 3)),
            padding_low=int(rng.integers(-6, 7)),
            lhs_dilation=int(rng.integers(1, 5)),
            rhs_dilation=int(rng.integers(1, 4)),
        )
        reach = [
            wd.lhs_dilation * i + wd.padding_low - wd.rhs_dilation * t
            for i in range(n)
            for t in range(k)
        ]
        want = sum(q % wd.stride == 0 and 0 <= q // wd.stride < count for q in reach)
        assert conv._landing_count(n, k, wd, count) == want, (n, k, wd, count)


def _random_base_dilated(rng) -> str | None:
    """A random 1- or 2-D base-dilated convolution (strides, window dilation, negative
    padding, reversal, groups), or None when its output would be empty."""
    spatial = int(rng.integers(1, 3))
    groups = int(rng.choice([1, 1, 2]))
    features, out_features = groups * int(rng.integers(1, 5)), groups * int(rng.integers(1, 4))
    batch = int(rng.integers(1, 4))
    sizes = [int(rng.integers(1, 9)) for _ in range(spatial)]
    taps = [int(rng.integers(1, 5)) for _ in range(spatial)]
    dims, outputs = [], []
    for n, k in zip(sizes, taps):
        s, d, stride = (int(v) for v in rng.integers(1, [4, 3, 3]))
        low, high = (int(v) for v in rng.integers(-3, 5, size=2))
        padded, extent = (n - 1) * s + 1 + low + high, (k - 1) * d + 1
        outputs.append((padded - extent) // stride + 1 if padded >= extent else 0)
        dims.append((k, stride, f"{low}_{high}", s, d))
    if min(outputs) <= 0 or all(dim[3] == 1 for dim in dims):
        return None
    reversal = [int(v) for v in rng.integers(0, 2, size=spatial)]
    window = {
        "size": taps,
        "stride": [dim[1] for dim in dims],
        "pad": [dim[2] for dim in dims],
        "lhs_dilate": [dim[3] for dim in dims],
        "rhs_dilate": [dim[4] for dim in dims],
        "rhs_reversal": reversal,
    }
    fields = " ".join(f"{key}={'x'.join(map(str, values))}" for key, values in window.items())
    labels = "01"[:spatial]
    return _text(
        f"f32[{batch},{','.join(map(str, sizes))},{features}]",
        f"f32[{','.join(map(str, taps))},{features // groups},{out_features}]",
        f"f32[{batch},{','.join(map(str, outputs))},{out_features}]",
        f"window={{{fields}}}, dim_labels=b{labels}f_{labels}io->b{labels}f, "
        f"feature_group_count={groups}",
    )


def test_overlap_add_matches_the_interpreter_on_random_convolutions():
    """A seeded sample of random base-dilated convolutions (a wider sweep of the same kind,
    70 convolutions, found nothing more)."""
    rng = np.random.default_rng(16)
    done = 0
    while done < 6:
        text = _random_base_dilated(rng)
        if text is None:
            continue
        module = minixla.parse_hlo_module(text)
        x, w = _inputs(module)
        want = np.asarray(minixla.compile(text, backend="interpreter")(x, w))
        out = np.full(want.shape, 7, want.dtype)
        _overlap_add(module.entry.root)(out, x, w)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=text)
        done += 1
