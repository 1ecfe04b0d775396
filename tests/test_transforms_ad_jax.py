"""Gradients of whole models against jax.grad (skipped when JAX is not installed)."""

import importlib.util
import pathlib

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_trees_close(got, want, rtol=2e-4, atol=1e-5):
    got_leaves, want_leaves = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def test_cnn_gradient_matches_jax():
    cnn = load("cnn_train")
    rng = np.random.default_rng(0)
    images, labels = cnn.make_data(rng, n=8)
    params = cnn.init_params(rng)

    def jax_loss(p, x, y):
        h = jax.lax.conv_general_dilated(
            x, p["conv"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        h = jax.nn.relu(h + p["bias"])
        h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        logits = h.reshape(h.shape[0], -1) @ p["dense"] + p["out"]
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 2), -1))

    got = minixla.jit(minixla.grad(cnn.loss), backend="cpu")(params, images, labels)
    assert_trees_close(got, jax.grad(jax_loss)(params, images, labels))


def test_transformer_gradient_matches_jax():
    lm = load("transformer_lm")
    rng = np.random.default_rng(0)
    batch = lm.make_data(rng, n=4)
    params = lm.init_params(rng)

    def layer_norm(h):
        mean = h.mean(-1, keepdims=True)
        return (h - mean) / jnp.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5)

    def jax_loss(p, tokens):
        inputs, targets = tokens[:, :-1], tokens[:, 1:]
        h = p["embed"][inputs] + p["pos"]
        x = layer_norm(h)
        b, s, _ = x.shape
        q, k, v = jnp.split(x @ p["qkv"], 3, axis=-1)
        heads = lambda t: t.reshape(b, s, lm.HEADS, -1).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = heads(q), heads(k), heads(v)
        scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(lm.WIDTH // lm.HEADS)
        scores = jnp.where(np.tril(np.ones((s, s), bool)), scores, -1e9)
        att = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, -1), v)
        h = h + att.transpose(0, 2, 1, 3).reshape(b, s, -1) @ p["proj"]
        h = h + jax.nn.gelu(layer_norm(h) @ p["up"]) @ p["down"]
        logits = layer_norm(h) @ p["unembed"]
        return -jnp.mean(
            jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(targets, lm.VOCAB), -1)
        )

    got = minixla.jit(minixla.grad(lm.loss), backend="interpreter")(params, batch)
    assert_trees_close(got, jax.grad(jax_loss)(params, batch), rtol=1e-3, atol=1e-5)


def test_scan_indexing_sort_and_hessian_match_jax():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([2, 0, 3, 3], np.int32)

    def model(xp, lib, scan):
        def step(c, row):
            return lib.tanh(c * row + c[::-1]), c.sum()

        carry, ys = scan(step, xp[0], xp)
        picked = xp[idx] * lib.sort(xp, axis=0)
        return lib.sum(carry) + lib.sum(ys**2) + lib.sum(picked * lib.cumsum(xp, axis=1))

    ours = minixla.jit(minixla.grad(lambda v: model(v, mnp, lax.scan)), backend="interpreter")(x)
    want = jax.grad(lambda v: model(v, jnp, jax.lax.scan))(x)
    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)

    def f(v, lib):
        return lib.sum(lib.sin(v) * v[::-1]) + lib.max(v) ** 2

    v = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(
        minixla.jit(minixla.hessian(lambda a: f(a, mnp)), backend="interpreter")(v),
        jax.hessian(lambda a: f(a, jnp))(v),
        rtol=1e-4,
        atol=1e-5,
    )


def test_grouped_strided_convolution_gradients_match_jax():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    kwargs = dict(
        window_strides=(2, 1), padding=((1, 1), (0, 1)), rhs_dilation=(1, 2), feature_group_count=2
    )

    def f(lib_conv, a, b):
        return (lib_conv(a, b, **kwargs) ** 2).sum()

    ours = minixla.jit(
        minixla.grad(lambda a, b: f(lax.conv_general_dilated, a, b), (0, 1)), backend="cpu"
    )(x, w)
    want = jax.grad(lambda a, b: f(jax.lax.conv_general_dilated, a, b), (0, 1))(x, w)
    assert_trees_close(ours, want, rtol=1e-4, atol=1e-4)


def test_per_example_gradients_by_a_python_loop_match_jax_vmap():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(3).astype(np.float32)
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    loss = lambda lib: lambda p, x: lib.tanh(x @ p) ** 2  # noqa: E731
    ours = np.stack([minixla.jit(minixla.grad(loss(mnp)), backend="interpreter")(w, x) for x in xs])
    want = jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0))(w, xs)

    np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-5)
