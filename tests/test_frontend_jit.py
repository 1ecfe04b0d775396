"""minixla.jit: lowering to parseable HLO text, the signature cache, donation, static
arguments, pytrees and argument canonicalization."""

import warnings

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

X = np.arange(6, dtype=np.float32).reshape(2, 3)


def test_lowered_text_parses_back_and_verifies():
    def f(x, y):
        return mnp.tanh(x @ y.T).sum(axis=1), mnp.argmax(x, axis=0)

    lowered = minixla.jit(f).lower(X, X + 1)
    text = lowered.as_text()
    parsed = minixla.parse_hlo_module(text)
    assert parsed.to_text() == text
    minixla.verify(lowered.module)
    assert text.startswith(
        "HloModule jit_f, entry_computation_layout={(f32[2,3]{1,0}, "
        "f32[2,3]{1,0})->(f32[2]{0}, s32[3]{0})}"
    )


def test_parameters_take_the_python_argument_names():
    text = (
        minixla.jit(lambda x, params: x + params["w"] * params["b"])
        .lower(X, {"w": X, "b": X})
        .as_text()
    )
    assert "%x.1 = f32[2,3]{1,0} parameter(0)" in text
    assert "%params_0.2 = f32[2,3]{1,0} parameter(1)" in text


def test_signature_cache_reuses_executables():
    f = minixla.jit(lambda x, y: x * y + 1)
    f(X, X)
    f(X + 1, X * 2)  # same shapes and dtypes: cached
    assert f.compile_count == 1
    f(X[:1], X[:1])  # new shape
    f(X.astype(np.int32), X.astype(np.int32))  # new dtype
    assert f.compile_count == 3
    f(X, 2.0)  # a Python scalar is a weak f32[] argument
    f(X, 3.0)
    assert f.compile_count == 4 and f.cache_size == 4


def test_static_arguments_are_part_of_the_signature():
    f = minixla.jit(
        lambda x, axis, keep: mnp.sum(x, axis=axis, keepdims=keep), static_argnums=(1, 2)
    )
    np.testing.assert_array_equal(f(X, 0, False), X.sum(0))
    np.testing.assert_array_equal(f(X, 1, True), X.sum(1, keepdims=True))
    f(X + 5, 0, False)
    assert f.compile_count == 2


def test_python_control_flow_on_static_arguments_is_fine():
    def f(x, n):
        for _ in range(n):
            x = x * 2 if n > 1 else x
        return x

    np.testing.assert_array_equal(minixla.jit(f, static_argnums=1)(X, 3), X * 8)


def test_pytree_arguments_and_results():
    def f(params, xs):
        w, b = params["w"], params["b"]
        return {"out": [x @ w + b for x in xs], "n": len(xs)}

    params = {"w": np.ones((3, 2), np.float32), "b": np.float32(0.5)}
    out = minixla.jit(f)(params, (X, X * 2))
    assert set(out) == {"out", "n"} and out["n"] == 2
    np.testing.assert_allclose(out["out"][1], (X * 2) @ params["w"] + 0.5)


def test_donation_becomes_input_output_alias():
    def step(w, g):
        return w - 0.1 * g, mnp.sum(g)

    lowered = minixla.jit(step, donate_argnums=0).lower(X, X)
    assert "input_output_alias={ {0}: (0, {}, may-alias) }" in lowered.as_text()
    parsed = minixla.parse_hlo_module(lowered.as_text())
    assert parsed.input_output_alias == lowered.module.input_output_alias
    w, total = minixla.jit(step, donate_argnums=0)(X.copy(), X)
    np.testing.assert_allclose(w, X - 0.1 * X)
    assert total == X.sum()


def test_unusable_donation_warns():
    with pytest.warns(UserWarning, match="donated buffers were not usable"):
        lowered = minixla.jit(lambda x: mnp.sum(x), donate_argnums=(0,)).lower(X)
    assert lowered.module.input_output_alias == []


def test_single_array_result_aliases_the_whole_output():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lowered = minixla.jit(lambda x: x + 1, donate_argnums=0).lower(X)
    assert "input_output_alias={ {}: (0, {}, may-alias) }" in lowered.as_text()


def test_float64_and_int64_inputs_are_narrowed_unless_x64():
    f = minixla.jit(lambda x: x + 1)
    out = f(np.arange(3, dtype=np.float64))
    assert out.dtype == np.float32
    assert f(np.arange(3, dtype=np.int64)).dtype == np.int32
    with pytest.raises(minixla.FrontendTypeError, match="do not fit in int32"):
        f(np.array([2**40]))


def test_python_scalar_outputs_and_constant_outputs():
    out = minixla.jit(lambda x: (x, 1.5, np.arange(2)))(X)
    np.testing.assert_array_equal(out[0], X)
    assert out[1].dtype == np.float32 and out[1] == 1.5
    np.testing.assert_array_equal(out[2], [0, 1])


def test_nested_jit_is_inlined():
    inner = minixla.jit(lambda x: x * 3)
    outer = minixla.jit(lambda x: inner(x) + 1)
    np.testing.assert_array_equal(outer(X), X * 3 + 1)
    assert inner.compile_count == 0 and "call" not in outer.lower(X).as_text()


def test_decorator_form_with_options():
    @minixla.jit(static_argnums=(1,))
    def scale(x, k):
        return x * k

    np.testing.assert_array_equal(scale(X, 4), X * 4)


def test_lowered_compile_runs():
    lowered = minixla.jit(lambda x: mnp.exp(x)).lower(X)
    np.testing.assert_allclose(lowered.compile()(X), np.exp(X), rtol=1e-6)


def test_non_array_arguments_are_rejected():
    with pytest.raises(minixla.FrontendTypeError, match="is not an array"):
        minixla.jit(lambda x: x)("text")
    with pytest.raises(minixla.FrontendTypeError, match="must be hashable"):
        minixla.jit(lambda x, s: x, static_argnums=1)(X, [1, 2])
