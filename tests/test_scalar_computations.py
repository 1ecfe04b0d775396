"""Called scalar computations (reducers, comparators, combiners) holding ops that are not
elementwise at array scale: XLA reads a dot of scalars as a multiply; every backend must too."""

import numpy as np
import pytest

import minixla
from minixla.backends import get as get_backend
from minixla.backends.cpu import driver
from minixla.passes.base import run_pipeline

# A scalar multiply written as a dot, and one written through a reshape to f32[1] and back.
MULTIPLY = {
    "dot": "ROOT m = f32[] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}",
    "reshape": (
        "ra = f32[1] reshape(a)\n  rb = f32[1] reshape(b)\n"
        "  p = f32[1] multiply(ra, rb)\n  ROOT m = f32[] reshape(p)"
    ),
}


def module(body: str, entry: str) -> str:
    return f"""HloModule m
mul {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  {body}
}}
ENTRY e {{
  {entry}
}}"""


CASES = {
    "reduce": (
        "x = f32[4,6] parameter(0)\n  ROOT r = f32[4] reduce(x, f32[] constant(1)), "
        "dimensions={1}, to_apply=mul",
        lambda x: np.prod(x, axis=1),
    ),
    "reduce-window": (
        "x = f32[4,6] parameter(0)\n  ROOT r = f32[4,3] reduce-window(x, f32[] "
        "constant(1)), window={size=1x2 stride=1x2}, to_apply=mul",
        lambda x: x[:, 0::2] * x[:, 1::2],
    ),
    "map": (
        "x = f32[4,6] parameter(0)\n  ROOT r = f32[4,6] map(x, x), dimensions={0,1}, to_apply=mul",
        lambda x: x * x,
    ),
    "scatter": (
        "x = f32[4,6] parameter(0)\n  i = s32[2,1] constant({{1},{3}})\n"
        "  u = f32[2,6] slice(x), slice={[0:2], [0:6]}\n"
        "  ROOT r = f32[4,6] scatter(x, i, u), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
        "index_vector_dim=1, to_apply=mul",
        lambda x: np.concatenate([x[:1], x[1:2] * x[0:1], x[2:3], x[3:4] * x[1:2]]),
    ),
}


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("form", sorted(MULTIPLY))
@pytest.mark.parametrize("case", sorted(CASES))
def test_non_elementwise_scalar_computation_applies_per_element(case, form, backend):
    entry, expected = CASES[case]
    exe = minixla.compile(module(MULTIPLY[form], entry), backend=backend)
    x = np.linspace(0.5, 2.0, 24, dtype=np.float32).reshape(4, 6)
    np.testing.assert_allclose(exe(x), expected(x), rtol=1e-6)


def test_sort_comparator_with_a_dot():
    text = """HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  na = f32[] dot(a, f32[] constant(-1)), lhs_contracting_dims={}, rhs_contracting_dims={}
  nb = f32[] dot(b, f32[] constant(-1)), lhs_contracting_dims={}, rhs_contracting_dims={}
  ROOT lt = pred[] compare(na, nb), direction=LT
}
ENTRY e {
  x = f32[8] parameter(0)
  ROOT s = f32[8] sort(x), dimensions={0}, to_apply=less
}"""
    x = np.array([3, -1, 4, 1, -5, 9, 2, 6], np.float32)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(minixla.compile(text, backend=backend)(x), -np.sort(-x))


def cpu_fallbacks(text: str) -> list:
    module = minixla.parse_hlo_module(text)
    run_pipeline(get_backend("cpu").pipeline(), module)
    return driver.build_program(module, {}).fallback_reasons


@pytest.mark.parametrize("form", sorted(MULTIPLY))
@pytest.mark.parametrize("case", sorted(CASES))
def test_cpu_compiles_them_natively(case, form):
    assert not cpu_fallbacks(module(MULTIPLY[form], CASES[case][0]))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(
    "narrow,wide,values",
    [
        ("bf16", "f32", [1.0078125, 3.015625, -255.0]),  # products exact in f32, not in bf16
        ("s8", "s32", [100, -128, 127]),  # products that wrap in s8
    ],
)
def test_a_widening_scalar_dot_multiplies_in_the_wide_type(backend, narrow, wide, values):
    text = f"""HloModule m
mul {{
  a = {narrow}[] parameter(0)
  b = {narrow}[] parameter(1)
  ROOT m = {wide}[] dot(a, b), lhs_contracting_dims={{}}, rhs_contracting_dims={{}}
}}
ENTRY e {{
  x = {narrow}[3] parameter(0)
  ROOT r = {wide}[3] map(x, x), dimensions={{0}}, to_apply=mul
}}"""
    exe = minixla.compile(text, backend=backend)
    x = np.array(values, minixla.parse_shape(f"{narrow}[3]").numpy_dtype)
    np.testing.assert_array_equal(exe(x), x.astype(np.float64) ** 2)
    if backend == "cpu":
        assert not cpu_fallbacks(text)
