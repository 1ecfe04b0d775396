"""minixla.lax control flow (while/conditional lowering, captures, pytrees) and minixla.nn,
against plain Python/NumPy, on every available backend."""

import math

import numpy as np
import pytest

import minixla
import minixla.backends
import minixla.numpy as mnp
from minixla import lax, nn

BACKENDS = ["interpreter"] + (["cpu"] if minixla.backends.available().get("cpu") is True else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


rng = np.random.default_rng(1)
X = rng.standard_normal((3, 4)).astype(np.float32)
V = rng.standard_normal((4,)).astype(np.float32)


def test_fori_loop_with_closure(backend):
    def f(x, v):
        return lax.fori_loop(0, 5, lambda i, acc: acc * 0.5 + v * i, x)

    want = X.copy()
    for i in range(5):
        want = want * 0.5 + V * i
    np.testing.assert_allclose(minixla.jit(f, backend=backend)(X, V), want, rtol=1e-5)
    assert "while(" in minixla.jit(f).lower(X, V).as_text()


def test_fori_loop_with_traced_bounds(backend):
    f = minixla.jit(lambda n, x: lax.fori_loop(1, n, lambda i, acc: acc + i, x), backend=backend)
    assert f(np.int32(5), np.int32(100)) == 110
    assert f(np.int32(0), np.int32(100)) == 100


def test_while_loop_with_pytree_state(backend):
    def f(x):
        def cond(state):
            return state["n"] < 10

        def body(state):
            return {"n": state["n"] + 1, "acc": (state["acc"][0] * 1.1, state["acc"][1] + 1)}

        return lax.while_loop(cond, body, {"n": 0, "acc": (x, mnp.zeros((), mnp.int32))})

    out = minixla.jit(f, backend=backend)(X)
    assert out["n"] == 10 and out["acc"][1] == 10
    np.testing.assert_allclose(out["acc"][0], X * np.float32(1.1) ** 10, rtol=1e-5)


def test_nested_loops_capture_through_two_levels(backend):
    def f(x, v):
        def outer(i, acc):
            return lax.fori_loop(0, 3, lambda j, a: a + v * (i + j), acc)

        return lax.fori_loop(0, 2, outer, x)

    want = X.copy()
    for i in range(2):
        for j in range(3):
            want = want + V * (i + j)
    np.testing.assert_allclose(minixla.jit(f, backend=backend)(X, V), want, rtol=1e-5)


def test_cond_and_switch(backend):
    def f(p, k, x):
        a = lax.cond(p > 0, lambda y: y * 2, lambda y: -y, x)
        b = lax.switch(k, [lambda y: y + 1, lambda y: y * y, lambda y: mnp.sum(y) + y], x)
        return a, b

    run = minixla.jit(f, backend=backend)
    for p, k in [(1.0, 0), (-1.0, 1), (2.0, 2), (0.0, 7), (1.0, -3)]:
        a, b = run(np.float32(p), np.int32(k), X)
        np.testing.assert_allclose(a, X * 2 if p > 0 else -X, rtol=1e-6)
        branch = min(max(k, 0), 2)
        want = [X + 1, X * X, X.sum() + X][branch]
        np.testing.assert_allclose(b, want, rtol=1e-5)
    assert "conditional(" in minixla.jit(f).lower(np.float32(1), np.int32(0), X).as_text()


def test_cond_branches_capture_outer_values_and_promote_weak_outputs(backend):
    def f(p, x, v):
        return lax.cond(p, lambda: mnp.sum(x + v).astype(mnp.float16), lambda: 0.0)

    run = minixla.jit(f, backend=backend)
    got = run(True, X, V)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got, (X + V).sum(), rtol=1e-3)
    assert run(False, X, V) == 0


def test_scan_cumulative_and_reverse(backend):
    def f(xs):
        def step(carry, x):
            carry = carry + x
            return carry, (carry, x * 2)

        return lax.scan(step, mnp.zeros(4), xs), lax.scan(step, mnp.zeros(4), xs, reverse=True)

    (c, (ys, doubled)), (rc, (rys, _)) = minixla.jit(f, backend=backend)(X)
    np.testing.assert_allclose(c, X.sum(0), rtol=1e-5)
    np.testing.assert_allclose(ys, np.cumsum(X, 0), rtol=1e-5)
    np.testing.assert_allclose(doubled, X * 2)
    np.testing.assert_allclose(rys, np.cumsum(X[::-1], 0)[::-1], rtol=1e-5)
    np.testing.assert_allclose(rc, X.sum(0), rtol=1e-5)


def test_scan_over_pytrees(backend):
    def f(xs):
        def step(carry, x):
            return carry + x["a"].sum(), {"doubled": x["a"] * 2, "before": carry}

        return lax.scan(step, 0.0, xs)

    total, ys = minixla.jit(f, backend=backend)({"a": X})
    np.testing.assert_allclose(total, X.sum(), rtol=1e-5)
    np.testing.assert_allclose(ys["doubled"], X * 2)
    np.testing.assert_allclose(
        ys["before"], np.concatenate([[0], np.cumsum(X.sum(1))[:-1]]), rtol=1e-5
    )


def test_cond_inside_a_loop_captures_from_both_levels(backend):
    def f(x, v):
        def body(i, acc):
            return lax.cond(i % 2 == 0, lambda a: a + v, lambda a: a - x.sum(), acc)

        return lax.fori_loop(0, 4, body, mnp.zeros(4))

    want = np.zeros(4, np.float32)
    for i in range(4):
        want = want + V if i % 2 == 0 else want - X.sum()
    np.testing.assert_allclose(minixla.jit(f, backend=backend)(X, V), want, rtol=1e-5)


def test_scan_with_length_and_no_xs(backend):
    def f(x):
        return lax.scan(lambda c, _: (c * 2, c), x, None, length=4)

    carry, ys = minixla.jit(f, backend=backend)(np.float32(1.5))
    assert carry == 24.0
    np.testing.assert_array_equal(ys, [1.5, 3.0, 6.0, 12.0])


def test_loop_carry_type_mismatch_is_an_error():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, acc: acc.astype(mnp.int32), x)

    with pytest.raises(minixla.FrontendTypeError, match="dtype int32, but the carry has float32"):
        minixla.jit(f).lower(X)


def test_lax_runs_eagerly_outside_jit():
    assert lax.fori_loop(0, 4, lambda i, acc: acc + i, 0) == 6
    np.testing.assert_allclose(lax.cond(True, lambda y: y + 1, lambda y: y, X), X + 1)


# -- nn ---------------------------------------------------------------------------------------
def _softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _erf(x):
    return np.vectorize(math.erf)(x).astype(np.float32)


NN = [
    ("relu", lambda x: nn.relu(x), lambda x: np.maximum(x, 0)),
    ("sigmoid", nn.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    ("silu", nn.silu, lambda x: x / (1 + np.exp(-x))),
    (
        "gelu_tanh",
        nn.gelu,
        lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))),
    ),
    (
        "gelu_exact",
        lambda x: nn.gelu(x, approximate=False),
        lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    ),
    ("softmax", nn.softmax, _softmax),
    ("softmax_axis0", lambda x: nn.softmax(x, axis=0), lambda x: _softmax(x, 0)),
    ("log_softmax", nn.log_softmax, lambda x: np.log(_softmax(x))),
    (
        "logsumexp",
        lambda x: (nn.logsumexp(x), nn.logsumexp(x, axis=1, keepdims=True)),
        lambda x: (np.log(np.exp(x).sum()), np.log(np.exp(x).sum(1, keepdims=True))),
    ),
    (
        "layer_norm",
        lambda x: nn.layer_norm(x, V, 0.5),
        lambda x: (
            (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * V + 0.5
        ),
    ),
]


@pytest.mark.parametrize("name,fn,ref", NN, ids=[n[0] for n in NN])
def test_nn_matches_numpy(name, fn, ref, backend):
    got, want = minixla.jit(fn, backend=backend)(X * 3), ref(X * 3)
    for g, w in zip(
        got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]
    ):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_logsumexp_is_stable_for_large_inputs():
    x = np.array([1000.0, 1000.0, -np.inf], np.float32)
    np.testing.assert_allclose(minixla.jit(nn.logsumexp)(x), 1000 + np.log(2), rtol=1e-6)
