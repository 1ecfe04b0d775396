"""The examples run and agree with straightforward NumPy implementations."""

import importlib.util
import math
import pathlib

import numpy as np
import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _softmax(z, axis=-1):
    e = np.exp(z - z.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _gelu(z):
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z**3)))


def test_mlp_matches_numpy():
    out = load("mlp").main(verbose=False)
    p, x = out["params"], out["x"]
    logits = _gelu(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    np.testing.assert_allclose(out["probs"], _softmax(logits), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(out["labels"], logits.argmax(-1))


def test_attention_matches_numpy():
    out = load("attention").main(verbose=False)
    p, x, h = out["params"], out["x"], out["num_heads"]
    seq, d = x.shape

    def heads(w):
        return (x @ w).reshape(seq, h, d // h).transpose(1, 0, 2)

    q, k, v = heads(p["wq"]), heads(p["wk"]), heads(p["wv"])
    scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // h)
    scores = np.where(np.tril(np.ones((seq, seq), bool)), scores, -1e9)
    weights = _softmax(scores)
    y = x + (weights @ v).transpose(1, 0, 2).reshape(seq, d) @ p["wo"]
    y = (y - y.mean(-1, keepdims=True)) / np.sqrt(y.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["weights"], weights, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out["out"], y, rtol=1e-4, atol=1e-4)


def test_train_loop_matches_numpy_sgd():
    out = load("train_loop").main(epochs=2, steps=20, verbose=False)
    x, y, p = out["x"], out["y"], {k: v.astype(np.float64) for k, v in out["initial"].items()}
    losses = []
    for _ in range(2):
        for _ in range(out["steps"]):
            h = np.tanh(x @ p["w1"] + p["b1"])
            d_pred = 2 * (h @ p["w2"] + p["b2"] - y) / len(x)
            d_h = d_pred @ p["w2"].T * (1 - h * h)
            grads = {"w2": h.T @ d_pred, "b2": d_pred.sum(0), "w1": x.T @ d_h, "b1": d_h.sum(0)}
            p = {k: p[k] - out["lr"] * grads[k] for k in p}
        err = np.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"] - y
        losses.append((err**2).mean())
    np.testing.assert_allclose(out["losses"], losses, rtol=1e-3)
    for k in p:
        np.testing.assert_allclose(out["params"][k], p[k], rtol=1e-3, atol=1e-4)
    assert out["losses"][-1] < out["losses"][0]


@pytest.mark.parametrize("name", ["mlp", "attention", "train_loop"])
def test_examples_print_something(name, capsys):
    load(name).main()
    assert capsys.readouterr().out.strip()


@pytest.mark.parametrize("name", ["cnn_train", "transformer_lm"])
def test_training_examples_decrease_the_loss(name, capsys):
    out = load(name).main(blocks=3, steps=20, backend="interpreter")
    losses = out["losses"]
    assert all(b < a for a, b in zip(losses, losses[1:])), losses
    assert losses[-1] < 0.5 * losses[0]
    assert len(capsys.readouterr().out.strip().splitlines()) == 4
