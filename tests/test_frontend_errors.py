"""Bad programs raise MinixlaError subclasses whose message names the user's file:line (here:
the line of this file marked with the matching `# line:` comment)."""

import pathlib

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

X = np.ones((3, 4), np.float32)
SOURCE = pathlib.Path(__file__).read_text().splitlines()


def where(tag: str) -> str:
    """`test_frontend_errors.py:N` for the line carrying `# line: tag`."""
    line = next(i for i, text in enumerate(SOURCE, 1) if text.endswith(f"# line: {tag}"))
    return f"test_frontend_errors.py:{line}:"


def raises(error, fn, *args, match=None, **jit_kw):
    with pytest.raises(error, match=match) as info:
        minixla.jit(fn, **jit_kw).lower(*args)
    assert isinstance(info.value, minixla.MinixlaError)
    return str(info.value)


def test_python_if_on_a_traced_value():
    def f(x):
        if mnp.sum(x) > 0:  # line: if
            return x
        return -x

    message = raises(minixla.TracerBoolConversionError, f, X)
    assert where("if") in message and "lax.cond" in message


def test_python_while_and_boolean_operators_on_traced_values():
    def f(x):
        return x > 0 and x < 1  # line: and

    assert where("and") in raises(minixla.TracerBoolConversionError, f, X)


def test_concrete_conversions():
    def f(x):
        return np.zeros(int(mnp.sum(x)))  # line: int

    assert where("int") in raises(minixla.ConcretizationError, f, X)

    def g(x):
        return np.asarray(x) + 1  # line: asarray

    assert where("asarray") in raises(minixla.ConcretizationError, g, X)


def test_broadcasting_mismatch():
    def f(x, y):
        return x * y  # line: mul

    message = raises(minixla.FrontendShapeError, f, X, np.ones(5, np.float32))
    assert where("mul") in message and "(3, 4) (5,)" in message


def test_matmul_mismatch():
    def f(x):
        return x @ x  # line: matmul

    message = raises(minixla.FrontendShapeError, f, X)
    assert where("matmul") in message and "not aligned" in message


def test_reshape_mismatch():
    def f(x):
        return x.reshape(5, -1)  # line: reshape

    assert where("reshape") in raises(minixla.FrontendShapeError, f, X, match="cannot reshape")


def test_dtype_an_op_does_not_take():
    def f(x):
        return x & 1  # line: and-float

    message = raises(minixla.FrontendTypeError, f, X)
    assert where("and-float") in message and "bitwise_and does not accept float32" in message

    def g(x):
        return ~x  # line: invert

    assert where("invert") in raises(minixla.FrontendTypeError, g, X)


def test_python_int_out_of_range_for_the_array_type():
    def f(x):
        return x + 1000  # line: overflow

    message = raises(minixla.FrontendTypeError, f, X.astype(np.int8))
    assert where("overflow") in message and "out of range for int8" in message


def test_loop_body_that_changes_structure():
    def f(x):
        return lax.while_loop(lambda s: s[0] < 3, lambda s: s[0] + 1, (0, x))  # line: loop

    assert where("loop") in raises(minixla.FrontendTypeError, f, X, match="structure")


def test_escaped_tracer():
    leaked = []

    def f(x):
        leaked.append(x)
        return x

    minixla.jit(f).lower(X)

    def g(x):
        return x + leaked[0]  # line: escaped

    assert where("escaped") in raises(minixla.EscapedTracerError, g, X)


def test_axis_out_of_range():
    def f(x):
        return mnp.sum(x, axis=2)  # line: axis

    assert where("axis") in raises(minixla.FrontendShapeError, f, X, match="out of bounds")
