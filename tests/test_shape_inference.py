"""Shape rules, one or more cases per rule; every expected shape is worked out by hand."""

import pytest

from minixla import HloParseError, ShapeError, parse_hlo_module
from minixla.ir.shape_inference import RULES, infer_shape
from minixla.ir.opcodes import OPCODES

ADD = "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }"
LESS = (
    "less { x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
    " ROOT c = pred[] compare(x, y), direction=LT }"
)


def module(body: str, *computations: str):
    text = "HloModule m\n" + "\n".join(computations) + "\nENTRY main {\n" + body + "\n}\n"
    return parse_hlo_module(text, verify=False)


def infer(body: str, *computations: str) -> str:
    """The inferred shape of the entry root, as text."""
    return str(infer_shape(module(body, *computations).entry.root))


def rejects(body: str, *computations: str, match: str) -> None:
    with pytest.raises(ShapeError, match=match):
        infer(body, *computations)


def test_every_rule_named_in_the_table_exists():
    assert {d.infer for d in OPCODES.values() if d.infer} <= set(RULES)


# -- elementwise ----------------------------------------------------------------------------
def test_binary_keeps_operand_shape():
    assert infer("a = f32[2,3] parameter(0)\nROOT s = f32[2,3] add(a, a)") == "f32[2,3]"


def test_binary_rejects_different_dims_and_names_the_instruction():
    rejects(
        "a = f32[2] parameter(0)\nb = f32[3] parameter(1)\nROOT bad = f32[2] add(a, b)",
        match=r"add %bad: .*identical dims",
    )


def test_binary_rejects_scalar_broadcasting():
    rejects(
        "a = f32[2] parameter(0)\nb = f32[] parameter(1)\nROOT m = f32[2] multiply(a, b)",
        match="no implicit broadcasting",
    )


def test_binary_rejects_mixed_element_types():
    rejects(
        "a = f32[2] parameter(0)\nb = s32[2] parameter(1)\nROOT s = f32[2] add(a, b)",
        match="same element type",
    )


def test_unary_type_constraints():
    rejects("a = s32[2] parameter(0)\nROOT f = s32[2] floor(a)", match="element type s32")
    rejects("a = f32[2] parameter(0)\nROOT n = f32[2] popcnt(a)", match="element type f32")


def test_compare_gives_pred():
    assert (
        infer("a = s32[4] parameter(0)\nROOT c = pred[4] compare(a, a), direction=LT") == "pred[4]"
    )


def test_abs_of_complex_is_real_and_is_finite_is_pred():
    assert infer("a = c64[3] parameter(0)\nROOT r = f32[3] abs(a)") == "f32[3]"
    assert infer("a = c128[3] parameter(0)\nROOT r = f64[3] imag(a)") == "f64[3]"
    assert infer("a = f16[3] parameter(0)\nROOT r = pred[3] is-finite(a)") == "pred[3]"
    assert infer("a = f64[3] parameter(0)\nROOT c = c128[3] complex(a, a)") == "c128[3]"


def test_convert_keeps_dims_and_takes_the_declared_type():
    assert infer("a = f32[2,3] parameter(0)\nROOT c = s8[2,3] convert(a)") == "s8[2,3]"


def test_bitcast_convert_adds_and_removes_a_trailing_dim():
    assert infer("a = f32[2,3] parameter(0)\nROOT c = u8[2,3,4] bitcast-convert(a)") == "u8[2,3,4]"
    assert infer("a = u16[5,2] parameter(0)\nROOT c = f32[5] bitcast-convert(a)") == "f32[5]"
    assert infer("a = f32[5] parameter(0)\nROOT c = s32[5] bitcast-convert(a)") == "s32[5]"
    rejects(
        "a = u8[5,3] parameter(0)\nROOT c = f32[5] bitcast-convert(a)", match="trailing dim of 4"
    )


def test_select_accepts_a_scalar_predicate_and_clamp_scalar_bounds():
    assert (
        infer("p = pred[] parameter(0)\na = f32[4] parameter(1)\nROOT s = f32[4] select(p, a, a)")
        == "f32[4]"
    )
    rejects(
        "p = pred[2] parameter(0)\na = f32[4] parameter(1)\nROOT s = f32[4] select(p, a, a)",
        match="scalar or match",
    )
    assert (
        infer("lo = s32[] parameter(0)\na = s32[4] parameter(1)\nROOT c = s32[4] clamp(lo, a, lo)")
        == "s32[4]"
    )


def test_map_uses_the_computation_result_type():
    cmp = (
        "lt2 { x = f32[] parameter(0)\n y = f32[] parameter(1)\n"
        " ROOT c = pred[] compare(x, y), direction=LT }"
    )
    assert (
        infer(
            "a = f32[3] parameter(0)\nROOT m = pred[3] map(a, a), dimensions={0}, to_apply=lt2", cmp
        )
        == "pred[3]"
    )


# -- movement -------------------------------------------------------------------------------
def test_broadcast_uses_declared_dims_and_checks_the_mapped_ones():
    assert (
        infer("a = f32[3] parameter(0)\nROOT b = f32[2,3,4] broadcast(a), dimensions={1}")
        == "f32[2,3,4]"
    )
    rejects(
        "a = f32[3] parameter(0)\nROOT b = f32[2,5] broadcast(a), dimensions={1}",
        match="maps to result dim 1 of size 5",
    )


def test_broadcast_without_a_shape_is_a_permutation():
    text = (
        "HloModule m\nENTRY e {\na = f32[2,3] parameter(0)\n"
        "ROOT b = broadcast(a), dimensions={1,0}\n}"
    )
    assert str(parse_hlo_module(text).entry.root.shape) == "f32[3,2]{1,0}"


def test_reshape_checks_element_count():
    assert infer("a = f32[2,6] parameter(0)\nROOT r = f32[3,4] reshape(a)") == "f32[3,4]"
    rejects("a = f32[2,6] parameter(0)\nROOT r = f32[5] reshape(a)", match="12 elements")


def test_transpose_permutes_dims():
    assert (
        infer("a = f32[2,3,4] parameter(0)\nROOT t = f32[4,2,3] transpose(a), dimensions={2,0,1}")
        == "f32[4,2,3]"
    )


def test_slice_rounds_strided_extents_up_and_checks_bounds():
    # dim 0: ceil((8-1)/3) = 3; dim 1: 7
    assert (
        infer("a = f32[10,7] parameter(0)\nROOT s = f32[3,7] slice(a), slice={[1:8:3], [0:7]}")
        == "f32[3,7]"
    )
    rejects(
        "a = f32[10,7] parameter(0)\nROOT s = f32[3,8] slice(a), slice={[0:3], [0:8]}",
        match="out of bounds for dim 1",
    )


def test_dynamic_slice_and_update():
    body = "a = f32[5,6] parameter(0)\ni = s32[] parameter(1)\n"
    assert (
        infer(body + "ROOT d = f32[2,6] dynamic-slice(a, i, i), dynamic_slice_sizes={2,6}")
        == "f32[2,6]"
    )
    rejects(
        body + "ROOT d = f32[2,6] dynamic-slice(a, i), dynamic_slice_sizes={2,6}",
        match="needs 2 scalar start indices",
    )
    assert (
        infer(
            body + "u = f32[2,3] parameter(2)\nROOT d = f32[5,6] dynamic-update-slice(a, u, i, i)"
        )
        == "f32[5,6]"
    )


def test_concatenate_sums_the_joined_dim():
    assert (
        infer(
            "a = f32[2,3] parameter(0)\nb = f32[4,3] parameter(1)\n"
            "ROOT c = f32[6,3] concatenate(a, b), dimensions={0}"
        )
        == "f32[6,3]"
    )
    rejects(
        "a = f32[2,3] parameter(0)\nb = f32[4,2] parameter(1)\n"
        "ROOT c = f32[6,3] concatenate(a, b), dimensions={0}",
        match="cannot be joined",
    )


def test_pad_with_interior_and_negative_edges():
    # dim 0: 1 + 2 + 3 + 1*(3-1) = 8; dim 1: 0 - 1 + 4 = 3
    assert (
        infer(
            "a = f32[3,4] parameter(0)\nz = f32[] constant(0)\n"
            "ROOT p = f32[8,3] pad(a, z), padding=1_2_1x0_-1"
        )
        == "f32[8,3]"
    )


def test_gather_rows_with_an_implicit_index_vector_dim():
    assert (
        infer(
            "a = f32[5,6] parameter(0)\ni = s32[3] parameter(1)\n"
            "ROOT g = f32[3,6] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, "
            "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}"
        )
        == "f32[3,6]"
    )


def test_gather_with_batching_dims():
    # index batch dims (2,3) then the one uncollapsed window dim (6)
    assert (
        infer(
            "a = f32[2,5,6] parameter(0)\ni = s32[2,3,1] parameter(1)\n"
            "ROOT g = f32[2,3,6] gather(a, i), offset_dims={2}, collapsed_slice_dims={1}, "
            "start_index_map={1}, operand_batching_dims={0}, "
            "start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,6}"
        )
        == "f32[2,3,6]"
    )


def test_gather_rejects_slice_sizes_larger_than_the_operand():
    rejects(
        "a = f32[5,6] parameter(0)\ni = s32[3] parameter(1)\n"
        "ROOT g = f32[3,7] gather(a, i), offset_dims={1}, collapsed_slice_dims={0}, "
        "start_index_map={0}, index_vector_dim=1, slice_sizes={1,7}",
        match="slice_sizes",
    )


SCATTER_ATTRS = (
    "update_window_dims={1}, inserted_window_dims={0}, "
    "scatter_dims_to_operand_dims={0}, index_vector_dim=1"
)


def test_scatter_returns_the_operand_shape():
    assert (
        infer(
            "a = f32[5,3] parameter(0)\ni = s32[2] parameter(1)\nu = f32[2,3] parameter(2)\n"
            f"ROOT s = f32[5,3] scatter(a, i, u), {SCATTER_ATTRS}, to_apply=add",
            ADD,
        )
        == "f32[5,3]"
    )


def test_variadic_scatter_returns_a_tuple():
    pair = (
        "add2 { a = f32[] parameter(0)\n b = s32[] parameter(1)\n c = f32[] parameter(2)\n"
        " d = s32[] parameter(3)\n e = f32[] add(a, c)\n f = s32[] add(b, d)\n"
        " ROOT t = (f32[], s32[]) tuple(e, f) }"
    )
    assert (
        infer(
            "a = f32[5,3] parameter(0)\nb = s32[5,3] parameter(1)\ni = s32[2] parameter(2)\n"
            "u = f32[2,3] parameter(3)\nv = s32[2,3] parameter(4)\n"
            f"ROOT s = (f32[5,3], s32[5,3]) scatter(a, b, i, u, v), {SCATTER_ATTRS}, "
            "to_apply=add2",
            pair,
        )
        == "(f32[5,3], s32[5,3])"
    )


def test_scatter_checks_the_combiner():
    rejects(
        "a = s32[5,3] parameter(0)\ni = s32[2] parameter(1)\nu = s32[2,3] parameter(2)\n"
        f"ROOT s = s32[5,3] scatter(a, i, u), {SCATTER_ATTRS}, to_apply=add",
        ADD,
        match=r"to_apply=%add parameter 0 is f32\[\], expected s32\[\]",
    )


def test_tuple_and_get_tuple_element():
    body = "a = f32[2] parameter(0)\nb = s32[] parameter(1)\nt = (f32[2], s32[]) tuple(a, b)\n"
    assert infer(body + "ROOT r = (f32[2], s32[]) tuple(a, b)") == "(f32[2], s32[])"
    assert infer(body + "ROOT g = s32[] get-tuple-element(t), index=1") == "s32[]"
    rejects(body + "ROOT g = s32[] get-tuple-element(t), index=2", match="index=2")


def test_iota_checks_its_dimension():
    assert infer("ROOT i = s32[3,4] iota(), iota_dimension=1") == "s32[3,4]"
    rejects("ROOT i = s32[3,4] iota(), iota_dimension=2", match="iota_dimension=2")


# -- reductions, windows, sorting -----------------------------------------------------------
def test_reduce_removes_the_reduced_dims():
    assert (
        infer(
            "a = f32[2,3,4] parameter(0)\nz = f32[] constant(0)\n"
            "ROOT r = f32[3] reduce(a, z), dimensions={0,2}, to_apply=add",
            ADD,
        )
        == "f32[3]"
    )


def test_variadic_reduce_gives_a_tuple():
    argmax = (
        "am { a = f32[] parameter(0)\n b = s32[] parameter(1)\n c = f32[] parameter(2)\n"
        " d = s32[] parameter(3)\n ROOT t = (f32[], s32[]) tuple(a, b) }"
    )
    assert (
        infer(
            "x = f32[4,5] parameter(0)\ni = s32[4,5] parameter(1)\n"
            "z = f32[] constant(0)\nk = s32[] constant(0)\n"
            "ROOT r = (f32[4], s32[4]) reduce(x, i, z, k), dimensions={1}, to_apply=am",
            argmax,
        )
        == "(f32[4], s32[4])"
    )


def test_reduce_rejects_a_wrong_reducer():
    rejects(
        "a = s32[4] parameter(0)\nz = s32[] constant(0)\n"
        "ROOT r = s32[] reduce(a, z), dimensions={0}, to_apply=add",
        ADD,
        match="to_apply=%add parameter 0",
    )
    rejects(
        "a = f32[4] parameter(0)\nz = f32[] constant(0)\n"
        "ROOT r = pred[] reduce(a, z), dimensions={0}, to_apply=less",
        LESS,
        match=r"to_apply=%less returns pred\[\], expected f32\[\]",
    )


def test_reduce_window_with_padding_and_dilation():
    assert (
        infer(
            "a = f32[4,6] parameter(0)\nz = f32[] constant(0)\n"
            "ROOT r = f32[2,2] reduce-window(a, z), window={size=2x3 stride=2x3}, "
            "to_apply=add",
            ADD,
        )
        == "f32[2,2]"
    )
    # dim 0: base-dilated 15, padded 19, window span 5 -> 15 positions
    assert (
        infer(
            "a = f32[8,1] parameter(0)\nz = f32[] constant(0)\n"
            "ROOT r = f32[15,1] reduce-window(a, z), window={size=3x1 pad=2_2x0_0 "
            "lhs_dilate=2x1 rhs_dilate=2x1}, to_apply=add",
            ADD,
        )
        == "f32[15,1]"
    )


def test_select_and_scatter():
    ge = LESS.replace("less", "ge").replace("LT", "GE")
    body = (
        "a = f32[4,4] parameter(0)\ns = f32[2,2] parameter(1)\nz = f32[] constant(0)\n"
        "ROOT r = f32[4,4] select-and-scatter(a, s, z), window={size=2x2 stride=2x2}, "
        "select=ge, scatter=add"
    )
    assert infer(body, ge, ADD) == "f32[4,4]"
    rejects(body.replace("select=ge", "select=add"), ge, ADD, match="select=%add returns")


def test_sort_single_and_multiple_operands():
    assert (
        infer(
            "a = f32[6,5] parameter(0)\nROOT s = f32[6,5] sort(a), dimensions={0}, to_apply=less",
            LESS,
        )
        == "f32[6,5]"
    )
    two = (
        "lt2 { a = f32[] parameter(0)\n b = f32[] parameter(1)\n c = s32[] parameter(2)\n"
        " d = s32[] parameter(3)\n ROOT r = pred[] compare(a, b), direction=LT }"
    )
    assert (
        infer(
            "a = f32[6] parameter(0)\nb = s32[6] parameter(1)\n"
            "ROOT s = (f32[6], s32[6]) sort(a, b), dimensions={0}, to_apply=lt2",
            two,
        )
        == "(f32[6], s32[6])"
    )
    rejects(
        "a = f32[6] parameter(0)\nROOT s = f32[6] sort(a), dimensions={0}, to_apply=add",
        ADD,
        match="returns f32",
    )


def test_topk_returns_values_and_s32_indices():
    assert (
        infer("a = f32[4,10] parameter(0)\nROOT t = (f32[4,3], s32[4,3]) topk(a), k=3")
        == "(f32[4,3], s32[4,3])"
    )


# -- contractions ---------------------------------------------------------------------------
def test_batched_dot():
    assert (
        infer(
            "a = f32[2,3,4] parameter(0)\nb = f32[2,4,5] parameter(1)\n"
            "ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, "
            "lhs_contracting_dims={2}, rhs_contracting_dims={1}"
        )
        == "f32[2,3,5]"
    )


def test_dot_free_dims_order_and_mismatch():
    # no contraction: lhs free dims then rhs free dims
    assert (
        infer("a = f32[3] parameter(0)\nb = f32[4] parameter(1)\nROOT d = f32[3,4] dot(a, b)")
        == "f32[3,4]"
    )
    rejects(
        "a = f32[3,4] parameter(0)\nb = f32[5,6] parameter(1)\n"
        "ROOT d = f32[3,6] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        match="contracting dims differ",
    )


def test_dot_accepts_a_declared_preferred_type():
    assert (
        infer(
            "a = s8[3,4] parameter(0)\nb = s8[4] parameter(1)\n"
            "ROOT d = s32[3] dot(a, b), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}"
        )
        == "s32[3]"
    )


def test_convolution_with_lhs_dilation():
    # spatial: base-dilated (4-1)*2+1 = 7, padded 9, window 3 -> 7
    assert (
        infer(
            "x = f32[1,4,4,2] parameter(0)\nw = f32[3,3,2,3] parameter(1)\n"
            "ROOT c = f32[1,7,7,3] convolution(x, w), window={size=3x3 pad=1_1x1_1 "
            "lhs_dilate=2x2}, dim_labels=b01f_01io->b01f"
        )
        == "f32[1,7,7,3]"
    )


def test_convolution_nchw_strided_and_grouped():
    # padded 8, window 3, stride 2 -> (8-3)//2+1 = 3
    assert (
        infer(
            "x = f32[1,2,6,6] parameter(0)\nw = f32[3,2,3,3] parameter(1)\n"
            "ROOT c = f32[1,3,3,3] convolution(x, w), window={size=3x3 stride=2x2 "
            "pad=1_1x1_1}, dim_labels=bf01_oi01->bf01"
        )
        == "f32[1,3,3,3]"
    )
    # depthwise: 4 groups of 1 input feature
    assert (
        infer(
            "x = f32[1,8,8,4] parameter(0)\nw = f32[3,3,1,4] parameter(1)\n"
            "ROOT c = f32[1,6,6,4] convolution(x, w), window={size=3x3}, "
            "dim_labels=b01f_01io->b01f, feature_group_count=4"
        )
        == "f32[1,6,6,4]"
    )
    rejects(
        "x = f32[1,8,8,4] parameter(0)\nw = f32[3,3,2,4] parameter(1)\n"
        "ROOT c = f32[1,6,6,4] convolution(x, w), window={size=3x3}, "
        "dim_labels=b01f_01io->b01f",
        match="input features",
    )


def test_fft_real_forms():
    assert (
        infer(
            "a = f32[4,16] parameter(0)\nROOT f = c64[4,9] fft(a), fft_type=RFFT, fft_length={16}"
        )
        == "c64[4,9]"
    )
    assert (
        infer(
            "a = c64[4,9] parameter(0)\nROOT f = f32[4,16] fft(a), fft_type=IRFFT, fft_length={16}"
        )
        == "f32[4,16]"
    )


def test_triangular_solve_and_batch_norm():
    assert (
        infer(
            "a = f32[3,3] parameter(0)\nb = f32[3,5] parameter(1)\n"
            "ROOT t = f32[3,5] triangular-solve(a, b), left_side=true, lower=true, "
            "transpose_a=NO_TRANSPOSE"
        )
        == "f32[3,5]"
    )
    assert (
        infer(
            "x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\n"
            "ROOT b = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, s), "
            "epsilon=0.001, feature_index=1"
        )
        == "(f32[2,3,4], f32[3], f32[3])"
    )


# -- control flow, calls, leaves ------------------------------------------------------------
COND = "cond { p = (s32[], f32[2]) parameter(0)\n ROOT t = pred[] constant(true) }"
BODY = "body { p = (s32[], f32[2]) parameter(0)\n ROOT q = (s32[], f32[2]) copy(p) }"
LOOP = (
    "i = s32[] parameter(0)\nv = f32[2] parameter(1)\nt = (s32[], f32[2]) tuple(i, v)\n"
    "ROOT w = (s32[], f32[2]) while(t), condition=cond, body=body"
)


def test_while_result_is_the_loop_state():
    assert infer(LOOP, COND, BODY) == "(s32[], f32[2])"
    bad_body = (
        "body { p = (s32[], f32[2]) parameter(0)\n ROOT q = s32[] get-tuple-element(p), index=0 }"
    )
    rejects(LOOP, COND, bad_body, match=r"body=%body returns s32\[\]")


def test_conditional_with_pred_and_index_selectors():
    neg = "neg { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }"
    same = "same { p = f32[2] parameter(0)\n ROOT n = f32[2] copy(p) }"
    body = "v = f32[2] parameter(0)\n"
    assert (
        infer(
            body + "c = pred[] constant(true)\nROOT r = f32[2] conditional(c, v, v), "
            "true_computation=neg, false_computation=same",
            neg,
            same,
        )
        == "f32[2]"
    )
    assert (
        infer(
            body + "c = s32[] constant(1)\nROOT r = f32[2] conditional(c, v, v, v), "
            "branch_computations={neg, same, neg}",
            neg,
            same,
        )
        == "f32[2]"
    )
    other = "other { p = f32[2] parameter(0)\n ROOT n = f32[] constant(0) }"
    rejects(
        body + "c = s32[] constant(1)\nROOT r = f32[2] conditional(c, v, v), "
        "branch_computations={neg, other}",
        neg,
        other,
        match=r"branch_computations\[1\]=%other returns f32\[\]",
    )


def test_call_and_fusion_take_the_callee_root():
    double = "dbl { p = f32[3] parameter(0)\n ROOT a = f32[3] add(p, p) }"
    body = "v = f32[3] parameter(0)\n"
    assert infer(body + "ROOT c = f32[3] call(v), to_apply=dbl", double) == "f32[3]"
    assert infer(body + "ROOT f = f32[3] fusion(v), kind=kLoop, calls=dbl", double) == "f32[3]"
    rejects(
        "v = f32[4] parameter(0)\nROOT f = f32[3] fusion(v), kind=kLoop, calls=dbl",
        double,
        match=r"calls=%dbl takes \(f32\[3\]\), given \(f32\[4\]\)",
    )


def test_leaves_and_collectives():
    assert infer("ROOT r = replica-id()") == "u32[]"
    assert infer("a = token[] after-all()\nROOT b = token[] after-all(a, a)") == "token[]"
    assert (
        infer(
            "s = u64[2] parameter(0)\nROOT r = (u64[2], u32[8]) rng-bit-generator(s), "
            "algorithm=rng_default"
        )
        == "(u64[2], u32[8])"
    )
    assert (
        infer("a = f32[4] parameter(0)\nROOT r = f32[4] all-reduce(a), to_apply=add", ADD)
        == "f32[4]"
    )
    assert (
        infer("a = f32[4,5] parameter(0)\nROOT r = s32[] get-dimension-size(a), dimensions={1}")
        == "s32[]"
    )


def test_parser_infers_omitted_shapes_with_default_layouts():
    text = (
        "HloModule m\n" + ADD + "\nENTRY e {\na = f32[2,3] parameter(0)\n"
        "z = f32[] constant(0)\ns = add(a, a)\nc = compare(s, a), direction=GT\n"
        "t = transpose(s), dimensions={1,0}\n"
        "r = reduce(t, z), dimensions={1}, to_apply=add\nROOT out = tuple(r, c)\n}"
    )
    root = parse_hlo_module(text).entry.root
    assert str(root.shape) == "(f32[3]{0}, pred[2,3]{1,0})"


def test_parser_reports_a_failed_inference():
    text = (
        "HloModule m\nENTRY e {\na = f32[2] parameter(0)\nb = f32[3] parameter(1)\n"
        "ROOT s = add(a, b)\n}"
    )
    with pytest.raises(HloParseError, match="cannot infer the shape of add"):
        parse_hlo_module(text)


def test_integer_power_is_allowed():
    import minixla

    module = minixla.parse_hlo_module(
        "HloModule m\nENTRY e {\n a = s32[3] parameter(0)\n ROOT p = s32[3] power(a, a)\n}\n"
    )
    import numpy as np

    out = minixla.compile(module, backend="interpreter")(np.array([2, 3, -2], np.int32))
    np.testing.assert_array_equal(out, [4, 27, 0])  # (-2)^-2 truncates to 0 in integers
