"""jit's static_argnames / donate_argnames and arguments from other array libraries."""

import warnings

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp


def test_static_argnames_by_keyword_and_by_position():
    @minixla.jit(backend="interpreter", static_argnames=("power",))
    def raise_to(x, power=2):
        return x**power

    x = np.float32([1, 2, 3])
    np.testing.assert_allclose(raise_to(x, power=3), x**3)
    np.testing.assert_allclose(raise_to(x, 3), x**3)  # the same argument by position
    np.testing.assert_allclose(raise_to(x, power=2), x**2)
    count = raise_to.compile_count
    np.testing.assert_allclose(raise_to(x, power=3), x**3)
    assert raise_to.compile_count == count  # a static value seen before hits the cache
    assert "power" not in raise_to.lower(x, power=3).as_text()


def test_static_argnums_may_be_passed_by_keyword():
    fn = minixla.jit(lambda x, n: mnp.sum(x) * n, backend="interpreter", static_argnums=1)
    assert fn(np.float32([1, 2]), n=4) == 12
    with pytest.raises(minixla.FrontendError, match="hashable"):
        fn(np.float32([1]), n=[1])


def test_unknown_argnames_are_errors():
    with pytest.raises(minixla.FrontendError, match="not a parameter"):
        minixla.jit(lambda x: x, static_argnames="y")
    with pytest.raises(minixla.FrontendError, match="both static and donated"):
        minixla.jit(lambda x: x, static_argnames="x", donate_argnames="x")


def test_donate_argnames_alias_positional_and_keyword_arguments():
    fn = minixla.jit(lambda x, y: (x + y, y * 2), backend="interpreter", donate_argnames=("y",))
    x, y = np.float32([1, 2]), np.float32([3, 4])
    by_position = fn.lower(x, y).module.input_output_alias
    by_keyword = fn.lower(x, y=y).module.input_output_alias
    assert [a.param_number for a in by_position] == [1]
    assert [a.param_number for a in by_keyword] == [1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = fn(x, y=y)
    np.testing.assert_allclose(out[0], x + y)


class ArrayLike:
    """Anything with __array__ (a foreign array type)."""

    def __init__(self, data):
        self.data = data

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.data, dtype)


def test_array_likes_from_other_libraries():
    fn = minixla.jit(lambda a, b: a * b, backend="interpreter")
    np.testing.assert_allclose(fn(ArrayLike([1.0, 2.0]), np.float32(3)), [3, 6])
    torch = pytest.importorskip("torch")
    weights = torch.tensor([1.0, 2.0], requires_grad=True)
    np.testing.assert_allclose(fn(torch.arange(2, dtype=torch.float32), weights), [0, 2])


def test_jax_arrays():
    jnp = pytest.importorskip("jax.numpy")
    fn = minixla.jit(lambda a: a + 1, backend="interpreter")
    np.testing.assert_allclose(fn(jnp.arange(3.0)), [1, 2, 3])
