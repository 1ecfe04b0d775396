"""`minixla.numpy` array creation: zeros, ones, full, arange, linspace, eye, iota (static
sizes; values that can be are iota-based so the HLO stays small)."""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendTypeError
from .numpy_api import (
    _builder,
    add,
    asarray,
    astype,
    broadcast_to,
    cast,
    constant,
    equal,
    multiply,
    typeof,
)
from .tracer import Tracer


def _shape_arg(shape) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)


@api
def full(shape, fill_value, dtype=None) -> Tracer:
    if dtype is None:
        value = asarray(fill_value)
    else:
        value = cast(fill_value, dt.canonicalize(dtype))
    return broadcast_to(value, _shape_arg(shape))


@api
def zeros(shape, dtype=float) -> Tracer:
    return full(shape, 0, dtype)


@api
def ones(shape, dtype=float) -> Tracer:
    return full(shape, 1, dtype)


def _like_dtype(x, dtype):
    return typeof(x)[0] if dtype is None else dtype


@api
def zeros_like(x, dtype=None) -> Tracer:
    return full(np.shape(x) if not isinstance(x, Tracer) else x.shape, 0, _like_dtype(x, dtype))


@api
def ones_like(x, dtype=None) -> Tracer:
    return full(np.shape(x) if not isinstance(x, Tracer) else x.shape, 1, _like_dtype(x, dtype))


@api
def full_like(x, fill_value, dtype=None) -> Tracer:
    shape = np.shape(x) if not isinstance(x, Tracer) else x.shape
    return full(shape, fill_value, _like_dtype(x, dtype))


def iota(dtype, shape, dimension: int = 0) -> Tracer:
    from ..ir import Shape

    shape = Shape.array(dt.hlo_name(dt.canonicalize(dtype)), _shape_arg(shape))
    return Tracer(_builder().emit("iota", [], {"iota_dimension": dimension}, shape=shape))


@api
def arange(start, stop=None, step=1, dtype=None) -> Tracer:
    """Static bounds only (the length must be known while tracing)."""
    if stop is None:
        start, stop = 0, start
    for bound in (start, stop, step):
        if isinstance(bound, Tracer):
            raise FrontendTypeError(
                "arange needs static bounds; the result length must be known while tracing"
            )
    length = builtins.max(int(np.ceil((stop - start) / step)), 0)
    if dtype is None:
        dtype = np.result_type(*(type(b) for b in (start, stop, step)))
    dtype = dt.canonicalize(dtype)
    if start == 0 and step == 1:
        return iota(dtype, (length,))
    return add(multiply(iota(dtype, (length,)), cast(step, dtype)), cast(start, dtype))


@api
def linspace(start, stop, num: int = 50, endpoint: bool = True, dtype=None) -> Tracer:
    """Static bounds only: the values are NumPy's (computed in float64, then cast)."""
    if isinstance(start, Tracer) or isinstance(stop, Tracer):
        raise FrontendTypeError("linspace needs static start and stop")
    values = np.linspace(start, stop, num, endpoint=endpoint)
    return constant(values, dtype if dtype is not None else dt.default_dtype(dt.FLOAT))


@api
def eye(N: int, M: int | None = None, k: int = 0, dtype=float) -> Tracer:
    rows = iota(np.int32, (N, M or N), 0)
    cols = iota(np.int32, (N, M or N), 1)
    return astype(equal(add(rows, k), cols), dtype)


identity = eye
