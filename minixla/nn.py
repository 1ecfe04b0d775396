"""`minixla.nn`: activations and normalization for traced arrays; see docs/frontend.md."""

from .frontend.nn_api import (
    gelu,
    layer_norm,
    log_softmax,
    logsumexp,
    one_hot,
    relu,
    sigmoid,
    silu,
    softmax,
)

__all__ = [
    "gelu",
    "layer_norm",
    "log_softmax",
    "logsumexp",
    "one_hot",
    "relu",
    "sigmoid",
    "silu",
    "softmax",
]
