"""`minixla.nn`: common activation and normalization functions over the NumPy-style API."""

from __future__ import annotations

import numpy as np

from .eager import api
from .numpy_api import (
    _emit,
    _promoted,
    add,
    asarray,
    divide,
    erf,
    exp,
    isfinite,
    log,
    multiply,
    sqrt,
    subtract,
    tanh,
    where,
)
from .numpy_reduce import max as _max
from .numpy_reduce import mean, var
from .numpy_reduce import sum as _sum


@api
def relu(x):
    """max(x, 0), written as a select so that its derivative at 0 is 0, as jax.nn.relu's
    (maximum would split the tie); NaN propagates."""
    x = asarray(x)
    return where(x > 0, x, where(x != x, x, 0))


@api
def sigmoid(x):
    (operand,), weak = _promoted("sigmoid", [x], to_float=True)
    return _emit("logistic", [operand], weak)


@api
def silu(x):
    return multiply(x, sigmoid(x))


@api
def gelu(x, approximate: bool = True):
    """The tanh approximation (default, as JAX) or the exact erf form."""
    x = asarray(x)
    if approximate:
        cube = multiply(x, multiply(x, x))
        inner = multiply(np.sqrt(2 / np.pi), add(x, multiply(0.044715, cube)))
        return multiply(multiply(0.5, x), add(1, tanh(inner)))
    return multiply(multiply(0.5, x), add(1, erf(divide(x, np.sqrt(2)))))


@api
def logsumexp(x, axis=None, keepdims: bool = False):
    """log(sum(exp(x))) computed stably by shifting by the (finite) maximum."""
    x = asarray(x)
    peak = _max(x, axis, keepdims=True)
    peak = where(isfinite(peak), peak, 0)
    total = _sum(exp(subtract(x, peak)), axis, keepdims=True)
    out = add(log(total), peak)
    if keepdims:
        return out
    from .numpy_shape import normalize_axes, squeeze

    return squeeze(out, normalize_axes(axis, x.ndim))


@api
def log_softmax(x, axis=-1):
    return subtract(x, logsumexp(x, axis, keepdims=True))


@api
def softmax(x, axis=-1):
    x = asarray(x)
    shifted = exp(subtract(x, _max(x, axis, keepdims=True)))
    return divide(shifted, _sum(shifted, axis, keepdims=True))


@api
def layer_norm(x, gamma=None, beta=None, axis=-1, eps: float = 1e-5):
    """(x - mean) / sqrt(var + eps) over `axis`, then scaled by gamma and shifted by beta."""
    x = asarray(x)
    centered = subtract(x, mean(x, axis, keepdims=True))
    out = divide(centered, sqrt(add(var(x, axis, keepdims=True), eps)))
    if gamma is not None:
        out = multiply(out, gamma)
    if beta is not None:
        out = add(out, beta)
    return out


@api
def one_hot(x, num_classes: int, dtype=np.float32, axis: int = -1):
    """x's integers as one-hot vectors along a new axis (out-of-range values give zeros)."""
    from .numpy_api import astype, equal
    from .numpy_creation import arange
    from .numpy_shape import expand_dims, moveaxis

    labels = asarray(x)
    hot = astype(equal(expand_dims(labels, -1), arange(num_classes)), dtype)
    return hot if axis == -1 else moveaxis(hot, -1, axis)
