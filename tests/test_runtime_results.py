"""What executables hand back: exactly the declared shapes, never the caller's own arrays."""

import os
import subprocess
import sys

import numpy as np
import pytest

import minixla
from minixla.ir.opcodes import OPCODES
from minixla.runtime.executable import check_results

BACKENDS = ["interpreter", "cpu"]

SCALAR_GATHER = """HloModule m
ENTRY e {
  x = f32[5] parameter(0)
  i = s32[1] parameter(1)
  ROOT g = f32[] gather(x, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0},
    index_vector_dim=0, slice_sizes={1}
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gather_with_a_scalar_result_returns_a_scalar(backend):
    out = minixla.compile(SCALAR_GATHER, backend=backend)(
        np.arange(5, dtype=np.float32), np.array([3], np.int32)
    )
    assert out.shape == () and out == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_scalar_dot_and_transpose_keep_rank_zero(backend):
    text = """HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  d = f32[] dot(x, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = f32[] transpose(d), dimensions={}
}"""
    out = minixla.compile(text, backend=backend)(np.arange(3, dtype=np.float32))
    assert out.shape == () and out == 5


@pytest.mark.parametrize("backend", BACKENDS)
def test_pass_through_results_are_copies(backend):
    text = (
        "HloModule m\nENTRY e {\n  x = f32[4] parameter(0)\n  ROOT t = (f32[4], f32[4]) "
        "tuple(x, x)\n}"
    )
    x = np.arange(4, dtype=np.float32)
    a, b = minixla.compile(text, backend=backend)(x)
    assert a is not x and b is not x and not np.shares_memory(a, x)
    a[0] = 42
    assert x[0] == 0


def test_check_results_names_the_wrong_part():
    shape = minixla.parse_shape("(f32[2], s32[])")
    check_results((np.zeros(2, np.float32), np.array(1, np.int32)), shape, "m")
    with pytest.raises(
        minixla.ExecutionError, match=r"result\[1\] should be s32\[\].*got int32\[1\]"
    ):
        check_results((np.zeros(2, np.float32), np.array([1], np.int32)), shape, "m")
    with pytest.raises(minixla.ExecutionError, match=r"result\[0\] should be f32\[2\].*float64"):
        check_results((np.zeros(2), np.array(1, np.int32)), shape, "m")


def test_the_environment_turns_the_check_on_at_run_time():
    # a backend whose result has the wrong shape: caught only when the check is on
    script = """
import numpy as np, minixla
exe = minixla.compile("HloModule m\\nENTRY e {\\n  ROOT x = f32[2] parameter(0)\\n}")
exe._run = lambda args: np.zeros(3, np.float32)
try:
    exe(np.ones(2, np.float32))
    print("unchecked")
except minixla.ExecutionError as exc:
    print(exc)
"""

    def run(flag: str) -> str:
        env = dict(os.environ, MINIXLA_CHECK_RESULTS=flag)
        done = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
        )
        return done.stdout.strip()

    assert run("0") == "unchecked"
    assert "should be f32[2]" in run("1")


def test_masked_arrays_are_refused():
    exe = minixla.compile(
        "HloModule m\nENTRY e {\n  ROOT x = f32[3] parameter(0)\n}", backend="interpreter"
    )
    masked = np.ma.masked_array(np.ones(3, np.float32), mask=[0, 1, 0])
    with pytest.raises(minixla.ExecutionError, match="masked arrays are not supported"):
        exe(masked)


NAN_SIGNS = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  l = f32[4] log(x)
  l1 = f32[4] log-plus-one(x)
  p = f32[4] power(x, f32[4] constant({0.5, 0.5, 0.5, 0.5}))
  ROOT t = (f32[4], f32[4], f32[4]) tuple(l, l1, p)
}"""


def test_invalid_operations_give_the_same_nan_on_every_backend():
    """x86's default NaN has its sign bit set; a TOTALORDER sort sees the difference."""
    x = np.array([2, -1, 1, -3], np.float32)
    signs = {
        b: [np.signbit(r).tolist() for r in minixla.compile(NAN_SIGNS, backend=b)(x)]
        for b in BACKENDS
    }
    assert signs["interpreter"] == signs["cpu"]
    assert signs["cpu"][0] == [False, True, False, True]


@pytest.mark.parametrize(
    "op",
    sorted(
        op
        for op, row in OPCODES.items()
        if row.kind == "elementwise"
        and row.arity == 1
        and row.shape_optional
        and "float" in row.kinds
        and not row.required_attrs
        and op not in ("is-finite", "real", "imag")  # not NaN in, NaN out
    ),
)
def test_a_nan_operand_keeps_its_sign_through_unary_ops(op):
    """Found by the fuzzer: NumPy's log(-nan) is +nan; hardware (and XLA) pass the NaN on."""
    text = f"HloModule m\nENTRY e {{\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] {op}(x)\n}}"
    x = np.array([np.nan, -np.nan], np.float32)
    results = {b: minixla.compile(text, backend=b)(x) for b in BACKENDS}
    signs = {b: np.signbit(r).tolist() for b, r in results.items()}
    assert all(np.isnan(r).all() for r in results.values())
    expected = {"abs": [False, False], "negate": [True, False]}.get(op, [False, True])
    assert signs == {b: expected for b in BACKENDS}
