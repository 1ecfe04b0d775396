"""Convolution, reduce-window and control flow under differentiation, against finite
differences."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax

from ad_check import check_grads

R = np.random.default_rng(1)

CONVS = {  # name: (lhs shape, rhs shape, keyword arguments)
    "nhwc_same": (
        (2, 5, 5, 3),
        (3, 3, 3, 4),
        dict(window_strides=(1, 1), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
    ),
    "nchw_stride2": (
        (1, 2, 6, 5),
        (3, 2, 3, 2),
        dict(window_strides=(2, 1), padding=((1, 0), (0, 2))),
    ),
    "rhs_dilation": (
        (1, 7, 6, 2),
        (2, 2, 2, 3),
        dict(
            window_strides=(1, 2),
            padding="VALID",
            rhs_dilation=(2, 1),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        ),
    ),
    "lhs_dilation": (
        (1, 4, 4, 2),
        (3, 3, 2, 2),
        dict(
            window_strides=(1, 1),
            padding=((2, 2), (1, 1)),
            lhs_dilation=(2, 2),
            dimension_numbers=("NHWC", "HWIO", "NHWC"),
        ),
    ),
    "groups": (
        (2, 4, 5, 5),
        (6, 2, 3, 3),
        dict(window_strides=(1, 1), padding="SAME", feature_group_count=2),
    ),
    "conv1d": (
        (2, 9, 3),
        (3, 3, 4),
        dict(window_strides=(2,), padding="SAME", dimension_numbers=("NWC", "WIO", "NWC")),
    ),
}


@pytest.mark.parametrize("name", sorted(CONVS))
def test_convolution(name):
    lhs_shape, rhs_shape, kwargs = CONVS[name]
    with minixla.config.x64():
        check_grads(
            lambda x, w: lax.conv_general_dilated(x, w, **kwargs),
            [R.standard_normal(lhs_shape), R.standard_normal(rhs_shape)],
        )


WINDOWS = {
    "sum_pool": lambda x: lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
    "sum_overlap_pad": lambda x: lax.reduce_window(
        x, 0.0, lax.add, (1, 3, 2, 1), (1, 2, 1, 1), "SAME"
    ),
    "max_pool": lambda x: lax.reduce_window(
        x, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"
    ),
    "max_overlap": lambda x: lax.reduce_window(
        x, -np.inf, lax.max, (1, 3, 3, 1), (1, 1, 2, 1), "SAME"
    ),
    "min_pool": lambda x: lax.reduce_window(
        x, np.inf, lax.min, (1, 2, 1, 1), (1, 2, 1, 1), "VALID"
    ),
    "dilated_sum": lambda x: lax.reduce_window(
        x, 0.0, lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID", window_dilation=(1, 2, 1, 1)
    ),
}


@pytest.mark.parametrize("name", sorted(WINDOWS))
def test_reduce_window(name):
    with minixla.config.x64():
        check_grads(WINDOWS[name], [R.standard_normal((2, 4, 5, 2))])


def _fori(x, w):
    return lax.fori_loop(0, 4, lambda i, c: mnp.tanh(c @ w) + x * i, x)


def _scan(x, w):
    def step(carry, row):
        new = mnp.sin(carry * row) + carry @ w
        return new, new * 2

    carry, ys = lax.scan(step, x[0], x)
    return mnp.sum(ys, axis=0) + carry


def _scan_reverse_with_int_carry(x, w):
    def step(carry, row):
        h, n = carry
        return (h * mnp.cos(row) + w[0], n + 1), h

    (h, _), ys = lax.scan(step, (x[0], mnp.int32(0)), x, reverse=True)
    return h + mnp.sum(ys * ys, axis=0)


def _nested_loops(x, w):
    def outer(i, c):
        return lax.fori_loop(0, 3, lambda j, d: d * mnp.cos(w[0]) + 0.1 * d * d, c) + x[0]

    return lax.fori_loop(1, 3, outer, x[1])


def _cond(x, w):
    return lax.cond(mnp.sum(x) > 0, lambda a: mnp.sin(a) * w[0], lambda a: a @ w, x[0])


def _switch(x, w):
    branches = [lambda a: a * 2, lambda a: mnp.exp(a) * w[1], lambda a: a @ w]
    return sum(lax.switch(k, branches, x[1]) for k in range(3))


def _cond_in_loop(x, w):
    def step(i, c):
        return lax.cond(i % 2 == 0, lambda a: mnp.tanh(a @ w), lambda a: a * x[0], c)

    return lax.fori_loop(0, 3, step, x[1])


LOOPS = {
    "fori_loop": _fori,
    "scan": _scan,
    "scan_reverse": _scan_reverse_with_int_carry,
    "nested": _nested_loops,
    "cond": _cond,
    "switch": _switch,
    "cond_in_loop": _cond_in_loop,
}


@pytest.mark.parametrize("name", sorted(LOOPS))
def test_control_flow(name):
    with minixla.config.x64():
        check_grads(LOOPS[name], [R.uniform(-1, 1, (3, 3)), R.uniform(-1, 1, (3, 3)) / 2])


def test_forward_mode_through_a_dynamic_while_loop():
    def f(x):
        return lax.while_loop(
            lambda c: c[0] < 5.0, lambda c: (c[0] + mnp.abs(c[1]) + 1, c[1] * 1.5), (x[0], x[1])
        )[1]

    with minixla.config.x64():
        check_grads(f, [np.array([0.3, 0.7])], modes=("fwd",))


def _buffer_read_back(x, w):
    """A carried buffer that is updated and then read: its values must be saved."""

    def step(i, carry):
        buffer, h = carry
        buffer = lax.dynamic_update_slice(buffer, (h * w[0])[None], (i, mnp.int32(0)))
        return buffer, h + mnp.sin(buffer[i] * buffer[0])

    buffer, h = lax.fori_loop(0, 3, step, (x, x[0]))
    return mnp.sum(buffer * 2) + h


def test_a_loop_buffer_that_is_read_after_its_update():
    with minixla.config.x64():
        check_grads(_buffer_read_back, [R.uniform(-1, 1, (3, 3)), R.uniform(-1, 1, (3, 3))])


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_second_derivatives_through_max_pooling(backend):
    def net(x, w):
        h = lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        )
        return mnp.sum(
            lax.reduce_window(mnp.tanh(h), -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            ** 2
        )

    # inputs of its own: with the shared generator's draws (which depend on the tests run
    # before) a finite-difference step could cross a kink of the max
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 4, 4, 1)).astype(np.float32)
    w = rng.standard_normal((2, 2, 1, 2)).astype(np.float32)
    forward_over_reverse = minixla.jit(minixla.hessian(net, argnums=1), backend=backend)
    reverse_over_reverse = minixla.jit(
        minixla.jacrev(minixla.grad(net, argnums=1), argnums=1), backend=backend
    )
    hess = forward_over_reverse(x, w)
    np.testing.assert_allclose(reverse_over_reverse(x, w), hess, rtol=1e-4, atol=1e-5)
    grad = minixla.jit(minixla.grad(net, argnums=1), backend=backend)
    eps, flat = 1e-3, hess.reshape(w.size, w.size)
    for k in range(w.size):
        step = np.zeros(w.size, np.float32)
        step[k] = eps
        column = grad(x, w + step.reshape(w.shape)) - grad(x, w - step.reshape(w.shape))
        np.testing.assert_allclose(column.reshape(-1) / (2 * eps), flat[:, k], rtol=2e-2, atol=2e-2)
