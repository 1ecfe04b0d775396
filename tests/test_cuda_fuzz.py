"""The differential fuzzer on the cuda backend, in numba's simulator: a sample of random modules
and mutants agrees with the interpreter (or is refused with a MinixlaError), and one-op
regressions for what the fuzzer found. The 10,000-module sweeps are run outside pytest:
`NUMBA_ENABLE_CUDASIM=1 python -m minixla.testing.fuzz --backends cuda [--mutants]`."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_simulator import use_simulator

import minixla
from minixla.testing import fuzz

use_simulator()

pytestmark = [
    pytest.mark.filterwarnings("ignore::minixla.backends.codegen.driver.FallbackWarning"),
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # NumPy scalar overflow (wrapping)
]


def run_both(text, *args):
    want = minixla.compile(text, backend="interpreter")(*args)
    got = minixla.compile(text, backend="cuda")(*args)
    return got, want


def test_random_modules_agree_with_the_interpreter():
    for seed in range(30_000, 30_150):
        module = fuzz.random_module(seed)
        problems = fuzz.check_module(module, fuzz.random_inputs(module, seed), backends=("cuda",))
        assert not problems, f"seed {seed}:\n" + "\n".join(problems) + "\n" + module.to_text()


def test_mutants_are_refused_cleanly_or_agree():
    for seed in range(30_000, 30_150):
        text = fuzz.mutate(fuzz.random_module(seed).to_text(), seed)
        outcome, detail = fuzz.run_case(text, seed, backends=("cuda",))
        assert outcome in ("agree", "rejected"), f"seed {seed} {outcome}: {detail}\n{text}"


def assert_identical(got, want):
    assert isinstance(got, np.ndarray)
    assert (got.dtype, got.shape) == (want.dtype, want.shape)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32", "s32"])
def test_scalar_parameter_keeps_its_shape_through_a_host_fallback(dtype):
    # A scalar argument was uploaded as a 1-element array, so ops run on the host (f16
    # converts) returned shape (1,) and writing one into a scalar buffer raised ValueError.
    text = f"HloModule m\nENTRY e {{ p = {dtype}[] parameter(0) ROOT y = {dtype}[] negate(p) }}"
    arg = np.asarray(3, dtype=minixla.parse_hlo_module(text).entry.root.shape.numpy_dtype)
    got, want = run_both(text, arg)
    assert_identical(got, want)


def test_f16_scalar_exponential_is_a_scalar():
    text = "HloModule m\nENTRY e { p = f16[] parameter(0) ROOT y = f16[] exponential(p) }"
    got, want = run_both(text, np.float16(1.5))
    assert got.shape == () and got.dtype == np.float16
    assert_identical(got, want)


def test_block_reduce_combines_a_non_identity_init_once():
    # Every thread of the team started from the init: (-96)^8 wraps to 0 in s32.
    text = """HloModule m
mul { a = s32[] parameter(0) b = s32[] parameter(1) ROOT m = s32[] multiply(a, b) }
ENTRY e {
  x = s32[5] parameter(0)
  init = s32[] constant(-96)
  ROOT r = s32[] reduce(x, init), dimensions={0}, to_apply=mul
}"""
    x = np.array([25, 33, -1, -26, -2], np.int32)
    got, want = run_both(text, x)
    assert int(want) == 25 * 33 * -1 * -26 * -2 * -96
    assert_identical(got, want)


def test_block_reduce_with_non_identity_init_along_columns():
    text = """HloModule m
add { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] add(a, b) }
ENTRY e {
  x = s32[3,4] parameter(0)
  init = s32[] constant(100)
  ROOT r = s32[4] reduce(x, init), dimensions={0}, to_apply=add
}"""
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    got, want = run_both(text, x)
    np.testing.assert_array_equal(want, 100 + x.sum(axis=0))
    assert_identical(got, want)


def test_reduce_with_non_associative_to_apply_folds_in_index_order():
    # subtract does not reassociate: a team's strided partial sums and tree gave another value.
    text = """HloModule m
sub { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] subtract(a, b) }
ENTRY e {
  x = s32[2,11] parameter(0)
  init = s32[] constant(0)
  ROOT r = s32[2] reduce(x, init), dimensions={1}, to_apply=sub
}"""
    x = np.arange(22, dtype=np.int32).reshape(2, 11) ** 2
    got, want = run_both(text, x)
    np.testing.assert_array_equal(want, -x.sum(axis=1))
    assert_identical(got, want)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(
    "opcode", ["exponential", "log", "tanh", "sine", "cosine", "logistic", "acos", "acosh"]
)
def test_a_nan_operand_of_a_math_function_keeps_its_sign(opcode, dtype):
    # NumPy's vector loops, which the simulator's math functions were, return +NaN for -NaN;
    # a TOTALORDER compare then ordered cos(-nan) above every number, not below.
    text = f"HloModule m\nENTRY e {{ p = {dtype}[2] parameter(0) ROOT y = {dtype}[2] {opcode}(p) }}"
    x = np.array([-np.nan, np.nan], np.float32 if dtype == "f32" else np.float64)
    got, want = run_both(text, x)
    assert list(np.signbit(want)) == [True, False]
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("opcode", ["log", "log-plus-one", "sqrt", "acos", "atanh"])
def test_a_nan_made_from_a_number_is_the_default_nan(opcode, dtype):
    # NumPy's scalar f64 log(-1.5) is +NaN here, the interpreter's (and x86's) -NaN, so a
    # TOTALORDER sort of log(x) put the NaNs last on cuda and first on the interpreter
    # (fuzz seed 904491).
    text = f"""HloModule m
cmp {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}}
ENTRY e {{
  p = {dtype}[4] parameter(0)
  y = {dtype}[4] {opcode}(p)
  ROOT s = {dtype}[4] sort(y), dimensions={{0}}, to_apply=cmp
}}"""
    x = np.array([0.5, -1.5, -3.0, 0.25], np.float32 if dtype == "f32" else np.float64)
    got, want = run_both(text, x)
    assert list(np.signbit(want[:2])) == [True, True] and np.isnan(want[:2]).all()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_power_of_minus_infinity_and_minus_zero_to_one_half_follows_c_pow(dtype):
    # NumPy's scalar power, which the simulator's kernels called, is sqrt for x^0.5:
    # NaN for -inf and -0 for -0, where C's pow (and the interpreter) give inf and +0.
    text = f"""HloModule m
ENTRY e {{
  x = {dtype}[2] parameter(0)
  half = {dtype}[] constant(0.5)
  y = {dtype}[2] broadcast(half), dimensions={{}}
  ROOT p = {dtype}[2] power(x, y)
}}"""
    x = np.array([-np.inf, -0.0], np.float32 if dtype == "f32" else np.float64)
    got, want = run_both(text, x)
    assert list(want) == [np.inf, 0.0] and not np.signbit(want[1])
    assert_identical(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dims", [(12,), (4, 300)])
def test_a_bf16_sum_by_a_team_of_threads_is_rounded_once(dims):
    # Block reductions rounded every step to bf16 where the interpreter (and XLA, and the
    # one-thread loop) accumulate in f32: 0.359375 against 0.363281 for 12 elements.
    shape = ",".join(map(str, dims))
    text = f"""HloModule m
add {{
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}}
ENTRY e {{
  x = bf16[{shape}] parameter(0)
  zero = bf16[] constant(0.1)
  ROOT r = bf16[{dims[0] if len(dims) == 2 else ""}] reduce(x, zero), dimensions={{{len(dims) - 1}}}, to_apply=add
}}"""
    x = np.random.default_rng(0).normal(size=dims).astype(np.float32)
    x = x.astype(minixla.parse_hlo_module(text).entry.root.shape.numpy_dtype)
    got, want = run_both(text, x)
    exact = x.astype(np.float64).sum(axis=-1) + np.float64(want.dtype.type(0.1))
    np.testing.assert_allclose(np.float64(want), exact, rtol=2**-8)
    assert_identical(got, want)
