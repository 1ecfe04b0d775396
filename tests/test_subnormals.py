"""Subnormals: kept by default (IEEE gradual underflow); with flush_denormals (compile option or
MINIXLA_FLAGS=--flush_denormals) arguments, constants and every op's result are flushed to
zero with their sign on the interpreter and cpu, as XLA:CPU's FTZ/DAZ do."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import minixla
from minixla.reference.denormals import flushed

BACKENDS = ["interpreter", "cpu"]

COMPARE = """
HloModule compare
ENTRY main {
  x = f32[4] parameter(0)
  zero = f32[] constant(0)
  zeros = f32[4] broadcast(zero), dimensions={}
  ROOT eq = pred[4] compare(x, zeros), direction=EQ
}"""

TINY_F32 = np.array([1e-40, -1e-40, 1e-30, 0.0], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compare_of_a_subnormal_with_zero(backend):
    keep = minixla.compile(COMPARE, backend=backend)(TINY_F32)
    flush = minixla.compile(COMPARE, backend=backend, flush_denormals=True)(TINY_F32)
    np.testing.assert_array_equal(keep, [False, False, False, True])
    np.testing.assert_array_equal(flush, [True, True, False, True])


# A fused chain: x * 1e-20 underflows to a subnormal for x = 1e-20, which flushing makes 0
# before the multiply by 1e20 (parameters, so that algsimp cannot fold the two scales); the
# negate keeps the sign of a flushed -1e-40 argument.
CHAIN = """
HloModule chain
ENTRY main {
  x = f32[3] parameter(0)
  small = f32[] parameter(1)
  big = f32[] parameter(2)
  smalls = f32[3] broadcast(small), dimensions={}
  bigs = f32[3] broadcast(big), dimensions={}
  under = f32[3] multiply(x, smalls)
  back = f32[3] multiply(under, bigs)
  n = f32[3] negate(x)
  ROOT t = (f32[3], f32[3]) tuple(back, n)
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_of_arithmetic_and_arguments_are_flushed_with_their_sign(backend):
    x = (np.array([1e-20, -1e-40, 1e-40], np.float32), np.float32(1e-20), np.float32(1e20))
    back, negated = minixla.compile(CHAIN, backend=backend, flush_denormals=True)(*x)
    np.testing.assert_array_equal(back, [0, 0, 0])
    np.testing.assert_array_equal(np.signbit(negated), [True, False, True])
    assert negated[0] == np.float32(-1e-20) and negated[1] == 0
    kept = minixla.compile(CHAIN, backend=backend)(*x)
    want = minixla.compile(CHAIN, backend="interpreter")(*x)
    for got, expected in zip(kept, want):
        np.testing.assert_array_equal(got, expected)
    assert kept[0][0] != 0 and kept[1][1] == np.float32(1e-40)


SUM = """
HloModule sum
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

ENTRY main {
  x = f32[3] parameter(0)
  zero = f32[] constant(0)
  ROOT s = f32[] reduce(x, zero), dimensions={0}, to_apply=add
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sum_of_subnormals(backend):
    x = np.full(3, 1e-40, np.float32)
    assert minixla.compile(SUM, backend=backend, flush_denormals=True)(x) == 0
    kept = minixla.compile(SUM, backend=backend)(x)
    assert kept == minixla.compile(SUM, backend="interpreter")(x) and kept > 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_f64_and_bf16_are_flushed_at_their_own_smallest_normal(backend):
    text = """
    HloModule wide
    ENTRY main {
      x = f64[2] parameter(0)
      y = bf16[2] parameter(1)
      a = f64[2] add(x, x)
      b = bf16[2] add(y, y)
      ROOT t = (f64[2], bf16[2]) tuple(a, b)
    }"""
    x = np.array([1e-310, 1e-300])
    y = np.array([1e-39, 1e-30], ml_dtypes.bfloat16)
    wide, narrow = minixla.compile(text, backend=backend, flush_denormals=True)(x, y)
    np.testing.assert_array_equal(wide, [0, 2e-300])
    np.testing.assert_array_equal(
        narrow.astype(np.float32), [0, np.float32(ml_dtypes.bfloat16(1e-30)) * 2]
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_f16_subnormals_are_kept_as_xla_cpu_keeps_them(backend):
    # XLA:CPU computes f16 in f32, where an f16 subnormal is normal: log(-1e-5) is NaN in
    # jax.jit, not log(-0) = -inf
    text = """
    HloModule half
    ENTRY main {
      x = f16[2] parameter(0)
      zero = pred[2] compare(x, f16[2] constant({0, 0})), direction=EQ
      ROOT t = (pred[2], f16[2]) tuple(zero, f16[2] log(x))
    }"""
    x = np.array([1e-5, -1e-5], np.float16)
    zero, logs = minixla.compile(text, backend=backend, flush_denormals=True)(x)
    np.testing.assert_array_equal(zero, [False, False])
    assert np.isnan(logs[1]) and logs[0] == np.float16(np.log(np.float32(x[0])))


def test_the_flag_comes_from_minixla_flags_and_the_option_wins(monkeypatch):
    monkeypatch.setenv("MINIXLA_FLAGS", "--flush_denormals")
    for backend in BACKENDS:
        assert minixla.compile(COMPARE, backend=backend)(TINY_F32)[0]
        assert not minixla.compile(COMPARE, backend=backend, flush_denormals=False)(TINY_F32)[0]


def test_flushing_next_to_an_infinity_does_not_warn():
    import warnings

    from minixla.reference.denormals import flush_in_place

    values = np.array([np.inf, -1e-40, 2.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf * 0 would be an invalid-value RuntimeWarning
        out = flushed(values)
        flush_in_place(values)
    assert np.isinf(out[0]) and out[1] == 0 and np.signbit(out[1])
    np.testing.assert_array_equal(values, out)


def test_flushed_leaves_clean_values_alone_and_keeps_signs():
    clean = np.array([1.0, 0.0, np.nan, np.inf], np.float32)
    assert flushed(clean) is clean
    out = flushed(np.array([-1e-40, 1e-40, -2.0], np.float32))
    np.testing.assert_array_equal(out, [0, 0, -2])
    assert list(np.signbit(out)) == [True, False, True]
    ints = np.array([1, 0], np.int32)
    assert flushed((ints, clean))[0] is ints
