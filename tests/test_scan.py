"""XLA's `scan`: the interpreter's values, the shape rule and its errors, the builder's Scan,
and scan-expander, which gives backends a while loop instead."""

import warnings

import numpy as np
import pytest

import minixla
from minixla import Builder, ops
from minixla.backends.cpu import FallbackWarning
from minixla.errors import MinixlaError
from minixla.testing import check_pass

# (running sum, running product) over two inputs along dim 1 of [2, 5]; outputs are
# (sum, product) at each step, carries the same
SUM_AND_PRODUCT = """
HloModule scan_sum_product
step {
  x = f32[2] parameter(0)
  y = f32[2] parameter(1)
  sum = f32[2] parameter(2)
  product = f32[2] parameter(3)
  s = f32[2] add(sum, x)
  p = f32[2] multiply(product, y)
  ROOT t = (f32[2], f32[2], f32[2], f32[2]) tuple(s, p, s, p)
}
ENTRY main {
  xs = f32[2,5] parameter(0)
  ys = f32[2,5] parameter(1)
  zero = f32[2] parameter(2)
  one = f32[2] parameter(3)
  ROOT scan = (f32[2,5], f32[2,5], f32[2], f32[2]) scan(xs, ys, zero, one), dimensions={1}, num_carries=2, %s to_apply=step
}"""

XS = np.arange(10, dtype=np.float32).reshape(2, 5) - 3
YS = (np.arange(10, dtype=np.float32).reshape(2, 5) % 3) + 0.5
INITS = (np.array([1, -2], np.float32), np.array([2, 0.5], np.float32))


def _expected(reverse: bool):
    xs, ys = (XS[:, ::-1], YS[:, ::-1]) if reverse else (XS, YS)
    sums = INITS[0][:, None] + np.cumsum(xs, axis=1)
    products = INITS[1][:, None] * np.cumprod(ys, axis=1)
    if reverse:  # each step's output sits at the index it read
        sums, products = sums[:, ::-1], products[:, ::-1]
    last = 0 if reverse else -1
    return sums, products, sums[:, last], products[:, last]


@pytest.mark.parametrize("reverse", [False, True])
def test_interpreter_scans_with_two_carries(reverse):
    text = SUM_AND_PRODUCT % ("is_reverse=true," if reverse else "")
    got = minixla.compile(text, backend="interpreter")(XS, YS, *INITS)
    for value, want in zip(got, _expected(reverse)):
        np.testing.assert_allclose(value, want, rtol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_expander_writes_a_while_loop(reverse):
    # check_pass also compares the interpreter's values before and after
    text = SUM_AND_PRODUCT % ("is_reverse=true," if reverse else "")
    check_pass(
        "scan-expander",
        text,
        """
    // CHECK: %scan_body
    // CHECK: dynamic-slice(
    // CHECK: call(
    // CHECK: dynamic-update-slice(
    // CHECK: ENTRY %main
    // CHECK: while(
    // CHECK-NOT: scan(
    """,
    )


@pytest.mark.parametrize("reverse", [False, True])
def test_cpu_runs_scan_natively(reverse):
    text = SUM_AND_PRODUCT % ("is_reverse=true," if reverse else "")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        exe = minixla.compile(text, backend="cpu")
    for value, want in zip(exe(XS, YS, *INITS), _expected(reverse)):
        np.testing.assert_allclose(value, want, rtol=1e-6)


def test_outputs_of_another_shape_stack_along_the_scanned_dim():
    # each step reduces its [2, 2] sum to [2]: the outputs stack to [2, 2] along dim 0
    text = """
HloModule disagreeing
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
step {
  x = f32[2] parameter(0)
  c = f32[2,2] parameter(1)
  bx = f32[2,2] broadcast(x), dimensions={1}
  n = f32[2,2] add(bx, c)
  zero = f32[] constant(0)
  r = f32[2] reduce(n, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[2], f32[2,2]) tuple(r, n)
}
ENTRY main {
  xs = f32[2,2] parameter(0)
  c0 = f32[2,2] parameter(1)
  ROOT s = (f32[2,2], f32[2,2]) scan(xs, c0), dimensions={0}, num_carries=1, to_apply=step
}"""
    xs = np.array([[1, 2], [3, 4]], np.float32)
    outputs, carry = minixla.compile(text, backend="interpreter")(xs, np.zeros((2, 2), np.float32))
    np.testing.assert_array_equal(outputs, [[2, 4], [8, 12]])
    np.testing.assert_array_equal(carry, [[4, 6], [4, 6]])


@pytest.mark.parametrize(
    "attrs, message",
    [
        ("dimensions={1}, num_carries=4,", "num_carries=4"),
        ("dimensions={2}, num_carries=2,", "dimensions="),
        ("dimensions={0}, num_carries=1,", "parameter"),
    ],
)
def test_the_shape_rule_names_what_is_wrong(attrs, message):
    text = SUM_AND_PRODUCT.replace("dimensions={1}, num_carries=2, %s", attrs)
    with pytest.raises(MinixlaError, match=message):
        minixla.compile(text, backend="interpreter")


def test_a_declared_shape_that_disagrees_is_an_error():
    text = (SUM_AND_PRODUCT % "").replace(
        "ROOT scan = (f32[2,5], f32[2,5], f32[2], f32[2])",
        "ROOT scan = (f32[5,2], f32[2,5], f32[2], f32[2])",
    )
    with pytest.raises(MinixlaError, match="scan"):
        minixla.compile(text, backend="interpreter")


def test_builder_scan_is_a_cumulative_sum():
    b = Builder("cumsum")
    xs = b.parameter("f32[6,3]", "xs")
    out = ops.Scan([xs], [b.constant(np.zeros(3, np.float32))], lambda x, c: (ops.Add(x, c),) * 2)
    module = b.module(out)
    minixla.verify(module)
    values = np.arange(18, dtype=np.float32).reshape(6, 3)
    for backend in ("interpreter", "cpu"):
        sums, last = minixla.compile(module, backend=backend)(values)
        np.testing.assert_array_equal(sums, np.cumsum(values, axis=0))
        np.testing.assert_array_equal(last, values.sum(0))


def test_a_body_returning_one_carry_gives_an_array():
    # XLA's bfloat16-propagation test: no outputs, one carry, so the result is the carry
    text = """
HloModule scan_no_outputs
combine {
  carry = f32[4,4] parameter(0)
  slice = f32[4,4] parameter(1)
  ROOT add = f32[4,4] add(carry, slice)
}
ENTRY main {
  arg = f32[3,4,4] parameter(0)
  zero = f32[] constant(0)
  init = f32[4,4] broadcast(zero), dimensions={}
  ROOT scan = f32[4,4] scan(arg, init), dimensions={0}, num_carries=1, is_associative=true,
      to_apply=combine
}"""
    arg = np.arange(48, dtype=np.float32).reshape(3, 4, 4)
    for backend in ("interpreter", "cpu"):
        np.testing.assert_array_equal(minixla.compile(text, backend=backend)(arg), arg.sum(0))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_scan_of_length_zero_returns_empty_outputs_and_the_initial_carries(backend):
    text = (SUM_AND_PRODUCT % "").replace("f32[2,5]", "f32[2,0]")
    empty = np.zeros((2, 0), np.float32)
    sums, products, sum_carry, product_carry = minixla.compile(text, backend=backend)(
        empty, empty, *INITS
    )
    assert sums.shape == products.shape == (2, 0) and sums.dtype == np.float32
    np.testing.assert_array_equal(sum_carry, INITS[0])
    np.testing.assert_array_equal(product_carry, INITS[1])
