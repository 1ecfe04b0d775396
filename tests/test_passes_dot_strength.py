"""dot-strength-reduction: a batched dot of a vector per batch element becomes a multiply and
a sum (checked on the printed module, then on the interpreter's values before and after)."""

import numpy as np
import pytest

import minixla
from minixla.testing import check_pass


def _module(lhs: str, rhs: str, out: str, dims: str) -> str:
    return f"""HloModule m
ENTRY main {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  ROOT d = {out} dot(a, b), {dims}
}}"""


def test_a_row_wise_dot_becomes_a_multiply_and_a_row_sum():
    # einsum('bi,bi->b'): BLAS ran one 1x1 GEMM per row (6.6 ms for 65536 rows of 64)
    check_pass(
        "dot-strength-reduction",
        _module(
            "f32[64,16]",
            "f32[64,16]",
            "f32[64]",
            "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        """
    // CHECK: %[[SUM:.*]] (x: f32[], y: f32[]) -> f32[]
    // CHECK: ENTRY %main
    // CHECK: %[[P:.*]] = f32[64,16]{1,0} multiply(%a, %b)
    // CHECK: ROOT %{{.*}} = f32[64]{0} reduce(%[[P]], %{{.*}}), dimensions={1}, to_apply=%[[SUM]]
    // CHECK-NOT: dot(
    """,
        rtol=1e-5,
        atol=1e-5,
    )


def test_a_vector_on_the_right_is_broadcast_across_the_matrix_rows():
    # einsum('bij,bj->bi'): a batched matrix-vector product
    check_pass(
        "dot-strength-reduction",
        _module(
            "f32[8,5,6]",
            "f32[8,6]",
            "f32[8,5]",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        """
    // CHECK: %[[V:.*]] = f32[8,5,6]{2,1,0} broadcast(%b), dimensions={0,2}
    // CHECK: %[[P:.*]] = f32[8,5,6]{2,1,0} multiply(%[[V]], %a)
    // CHECK: ROOT %{{.*}} = f32[8,5]{1,0} reduce(%[[P]], %{{.*}}), dimensions={2}
    """,
        rtol=1e-5,
        atol=1e-5,
    )


def test_a_batch_dim_that_is_not_major_gives_a_transposed_sum():
    # a bilinear form's second step: the batch is the matrix's minor dim (out[b, o] =
    # sum_j y[b, j] r[o, j, b]); the vector is transposed into the matrix's dim order
    check_pass(
        "dot-strength-reduction",
        _module(
            "f32[7,3]",
            "f32[4,3,7]",
            "f32[7,4]",
            "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={2}, "
            "rhs_contracting_dims={1}",
        ),
        """
    // CHECK: %[[T:.*]] = f32[3,7]{1,0} transpose(%a), dimensions={1,0}
    // CHECK: %[[V:.*]] = f32[4,3,7]{2,1,0} broadcast(%[[T]]), dimensions={1,2}
    // CHECK: %[[P:.*]] = f32[4,3,7]{2,1,0} multiply(%[[V]], %b)
    // CHECK: %[[R:.*]] = f32[4,7]{1,0} reduce(%[[P]], %{{.*}}), dimensions={1}
    // CHECK: ROOT %{{.*}} = f32[7,4]{1,0} transpose(%[[R]]), dimensions={1,0}
    """,
        rtol=1e-5,
        atol=1e-5,
    )


def test_narrow_operands_are_summed_in_the_result_type():
    check_pass(
        "dot-strength-reduction",
        _module(
            "bf16[6,32]",
            "bf16[6,32]",
            "f32[6]",
            "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        """
    // CHECK-DAG: f32[6,32]{1,0} convert(%a)
    // CHECK-DAG: f32[6,32]{1,0} convert(%b)
    // CHECK: ROOT %{{.*}} = f32[6]{0} reduce(
    """,
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize(
    "lhs, rhs, out, dims",
    [
        # no batch dim: BLAS's GEMV reads the matrix once too
        ("f32[16]", "f32[16,8]", "f32[8]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
        # both operands have free dims: a batched GEMM
        (
            "f32[4,3,16]",
            "f32[4,16,5]",
            "f32[4,3,5]",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        # nothing contracted: a batched outer product
        (
            "f32[4,16]",
            "f32[4,8]",
            "f32[4,16,8]",
            "lhs_batch_dims={0}, rhs_batch_dims={0}",
        ),
        # a bf16 result would be summed in bf16
        (
            "bf16[4,16]",
            "bf16[4,16]",
            "bf16[4]",
            "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        # integers keep the dot's wrapping products
        (
            "s32[4,16]",
            "s32[4,16]",
            "s32[4]",
            "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
    ],
)
def test_other_dots_are_left_alone(lhs, rhs, out, dims):
    check_pass("dot-strength-reduction", _module(lhs, rhs, out, dims), None)


def test_the_cpu_pipeline_runs_a_row_wise_dot_as_one_fused_loop():
    text = _module(
        "f32[1024,64]",
        "f32[1024,64]",
        "f32[1024]",
        "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}",
    )
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 64)).astype(np.float32) for _ in range(2))
    exe = minixla.compile(text, backend="cpu")
    assert len(exe.program.kernels) == 1
    np.testing.assert_allclose(exe(a, b), np.einsum("bi,bi->b", a, b), rtol=1e-4, atol=1e-4)
