"""Eager execution of the NumPy-style API outside any trace, and the default backend.

`minixla.numpy.exp(np_array)` called outside jit traces the one call into a module (NumPy inputs
become constants), compiles it and returns NumPy arrays, so the API works in both worlds.
"""

from __future__ import annotations

import functools

from .builder import Builder
from .pytree import flatten, unflatten
from .tracer import Tracer, current_builder, tracing


def default_backend() -> str:
    """ "cpu" when that backend is usable, else the interpreter."""
    from ..backends import available

    return "cpu" if available().get("cpu") is True else "interpreter"


def api(fn):
    """Runs `fn` inside the current trace, or eagerly when there is none."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if current_builder() is not None:
            return fn(*args, **kwargs)
        return run_eagerly(fn, args, kwargs)

    return wrapper


def run_eagerly(fn, args, kwargs, backend: str | None = None):
    from ..backends.compile import compile

    builder = Builder(f"eager_{fn.__name__}")
    with tracing(builder):
        out = fn(*args, **kwargs)
    leaves, treedef = flatten(out)
    traced = [i for i, leaf in enumerate(leaves) if isinstance(leaf, Tracer)]
    if not traced:
        return out
    module = builder.module([leaves[i].op for i in traced])
    results = compile(module, backend=backend or default_backend())()
    for i, value in zip(traced, results):
        leaves[i] = value
    return unflatten(treedef, leaves)
