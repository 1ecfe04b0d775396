"""`minixla.numpy` reductions, cumulative ops and sorting, lowered to reduce, reduce-window and
sort with small scalar computations (cached per module by `Builder.reducer`).

Accumulation types follow JAX: sum/prod of bool or of integers narrower than the default int
accumulate in the default int (int32, or int64 with x64; unsigned ones in uint32); mean, var
and std of integers are floating point.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError
from .numpy_api import (
    _builder,
    asarray,
    astype,
    cast,
    divide,
    not_equal,
    sqrt,
    square,
    subtract,
    typeof,
)
from .numpy_creation import iota
from .numpy_shape import normalize_axes, normalize_axis, ravel, reshape
from .ops_core import And, Compare, GetTupleElement, Or, Select, make_window
from .tracer import Tracer


def _identity(opcode: str, dtype: np.dtype):
    """The value that `opcode` leaves unchanged: reduce's initial value."""
    if opcode in ("add", "or"):
        return 0
    if opcode in ("multiply", "and"):
        return 1
    low = opcode == "maximum"
    if dtype == np.bool_:
        return not low
    if dt.kind(dtype) == dt.INT:
        info = np.iinfo(dtype)
        return info.min if low else info.max
    return -np.inf if low else np.inf


def reduce(x, axis, opcode: str, dtype=None, keepdims: bool = False) -> Tracer:
    tracer = asarray(x)
    dtype = tracer.dtype if dtype is None else dt.canonicalize(dtype)
    tracer = cast(tracer, dtype, tracer.weak)
    axes = normalize_axes(axis, tracer.ndim)
    builder = _builder()
    init = builder.constant(np.asarray(_identity(opcode, dtype), dtype))
    comp = builder.reducer(opcode, dt.hlo_name(dtype))
    out = Tracer(
        builder.emit("reduce", [tracer.op, init], {"dimensions": axes, "to_apply": comp}),
        tracer.weak,
    )
    return _keep(out, tracer.shape, axes) if keepdims else out


def _keep(out: Tracer, shape, axes) -> Tracer:
    return reshape(out, [1 if i in axes else d for i, d in enumerate(shape)])


def _accumulator(dtype: np.dtype) -> np.dtype:
    default = dt.default_dtype(dt.INT)
    if dtype == np.bool_:
        return default
    if dt.kind(dtype) == dt.INT and dtype.itemsize < default.itemsize:
        return default if dtype.kind == "i" else np.dtype(f"uint{default.itemsize * 8}")
    return dtype


@api
def sum(x, axis=None, dtype=None, keepdims: bool = False) -> Tracer:  # noqa: A001
    dtype = dtype if dtype is not None else _accumulator(typeof(x)[0])
    return reduce(x, axis, "add", dtype, keepdims)


@api
def prod(x, axis=None, dtype=None, keepdims: bool = False) -> Tracer:
    dtype = dtype if dtype is not None else _accumulator(typeof(x)[0])
    return reduce(x, axis, "multiply", dtype, keepdims)


def _extremum(x, axis, keepdims, opcode: str, name: str) -> Tracer:
    tracer = asarray(x)
    axes = normalize_axes(axis, tracer.ndim)
    if builtins.any(tracer.shape[a] == 0 for a in axes):
        raise FrontendShapeError(
            f"zero-size array to reduction operation {name} which has no identity"
        )
    return reduce(
        tracer,
        axes,
        "or"
        if tracer.dtype == np.bool_ and opcode == "maximum"
        else "and"
        if tracer.dtype == np.bool_
        else opcode,
        None,
        keepdims,
    )


@api
def max(x, axis=None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return _extremum(x, axis, keepdims, "maximum", "maximum")


@api
def min(x, axis=None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return _extremum(x, axis, keepdims, "minimum", "minimum")


amax, amin = max, min


@api
def any(x, axis=None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return reduce(astype(x, bool), axis, "or", None, keepdims)


@api
def all(x, axis=None, keepdims: bool = False) -> Tracer:  # noqa: A001
    return reduce(astype(x, bool), axis, "and", None, keepdims)


def _float(x) -> Tracer:
    tracer = asarray(x)
    if dt.kind(tracer.dtype) < dt.FLOAT:
        return astype(tracer, dt.default_dtype(dt.FLOAT))
    return tracer


def _count(shape, axis) -> int:
    axes = normalize_axes(axis, len(shape))
    return int(np.prod([shape[a] for a in axes], dtype=np.int64))


@api
def mean(x, axis=None, keepdims: bool = False) -> Tracer:
    tracer = _float(x)
    return divide(sum(tracer, axis, keepdims=keepdims), _count(tracer.shape, axis))


@api
def var(x, axis=None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    tracer = _float(x)
    centered = subtract(tracer, mean(tracer, axis, keepdims=True))
    total = sum(square(centered), axis, keepdims=keepdims)
    return divide(total, builtins.max(_count(tracer.shape, axis) - ddof, 0))


@api
def std(x, axis=None, ddof: int = 0, keepdims: bool = False) -> Tracer:
    return sqrt(var(x, axis, ddof=ddof, keepdims=keepdims))


@api
def count_nonzero(x, axis=None, keepdims: bool = False) -> Tracer:
    return sum(not_equal(x, 0), axis, keepdims=keepdims)


# -- argmax / argmin ------------------------------------------------------------------------
def _arg_reducer(builder, dtype: str, index_dtype: str, direction: str):
    """(value, index) pairs -> the winner: the larger (GT) or smaller (LT) value, NaN beating
    numbers, the lower index on ties; so the first extremum (or first NaN) wins, as NumPy's."""

    def body(va, ia, vb, ib):
        better = Compare(va, vb, direction)
        tie = Compare(va, vb, "EQ")
        if dtype[0] in "fb":  # floats: NaN wins
            a_nan, b_nan = Compare(va, va, "NE"), Compare(vb, vb, "NE")
            not_b_nan = Compare(vb, vb, "EQ")
            better = Or(better, And(a_nan, not_b_nan))
            tie = Or(tie, And(a_nan, b_nan))
        take_a = Or(better, And(tie, Compare(ia, ib, "LT")))
        return Select(take_a, va, vb), Select(take_a, ia, ib)

    from ..ir import Shape

    key = ("arg" + direction, dtype, index_dtype)
    if key not in builder._reducers:
        value, index = Shape.array(dtype, ()), Shape.array(index_dtype, ())
        builder._reducers[key] = builder._root().computation(
            body, [value, index, value, index], f"arg{direction.lower()}_{dtype}"
        )
    return builder._reducers[key]


def _argext(x, axis, keepdims: bool, direction: str, name: str) -> Tracer:
    tracer = asarray(x)
    if tracer.dtype == np.bool_:
        tracer = astype(tracer, np.int32)
    if axis is None:
        flat = ravel(tracer)
        out = _argext(flat, 0, False, direction, name)
        return reshape(out, (1,) * tracer.ndim) if keepdims else out
    axis = normalize_axis(axis, tracer.ndim)
    if tracer.shape[axis] == 0:
        raise FrontendShapeError(f"attempt to get {name} of an empty sequence")
    index_dtype = dt.default_dtype(dt.INT)
    indices = iota(index_dtype, tracer.shape, axis)
    builder = _builder()
    low = "maximum" if direction == "GT" else "minimum"
    inits = [
        builder.constant(np.asarray(_identity(low, tracer.dtype), tracer.dtype)),
        builder.constant(np.zeros((), index_dtype)),
    ]
    comp = _arg_reducer(builder, dt.hlo_name(tracer.dtype), dt.hlo_name(index_dtype), direction)
    both = builder.emit(
        "reduce", [tracer.op, indices.op, *inits], {"dimensions": (axis,), "to_apply": comp}
    )
    out = Tracer(GetTupleElement(both, 1))
    return _keep(out, tracer.shape, (axis,)) if keepdims else out


@api
def argmax(x, axis=None, keepdims: bool = False) -> Tracer:
    return _argext(x, axis, keepdims, "GT", "argmax")


@api
def argmin(x, axis=None, keepdims: bool = False) -> Tracer:
    return _argext(x, axis, keepdims, "LT", "argmin")


# -- cumulative (reduce-window over a window as long as the axis, padded in front) ----------
def _cumulative(x, axis, dtype, opcode: str) -> Tracer:
    tracer = asarray(x)
    if axis is None:
        tracer, axis = ravel(tracer), 0
    axis = normalize_axis(axis, tracer.ndim)
    tracer = cast(
        tracer, dt.canonicalize(dtype) if dtype is not None else tracer.dtype, tracer.weak
    )
    if tracer.dtype == np.bool_:
        opcode = {"maximum": "or", "minimum": "and"}.get(opcode, opcode)
    n = tracer.shape[axis]
    if n == 0:
        return tracer
    sizes = [n if i == axis else 1 for i in range(tracer.ndim)]
    padding = [(n - 1, 0) if i == axis else (0, 0) for i in range(tracer.ndim)]
    builder = _builder()
    init = builder.constant(np.asarray(_identity(opcode, tracer.dtype), tracer.dtype))
    attrs = {
        "window": make_window(sizes, None, padding),
        "to_apply": builder.reducer(opcode, dt.hlo_name(tracer.dtype)),
    }
    return Tracer(builder.emit("reduce-window", [tracer.op, init], attrs), tracer.weak)


@api
def cumsum(x, axis=None, dtype=None) -> Tracer:
    dtype = dtype if dtype is not None else _accumulator(typeof(x)[0])
    return _cumulative(x, axis, dtype, "add")


@api
def cumprod(x, axis=None, dtype=None) -> Tracer:
    dtype = dtype if dtype is not None else _accumulator(typeof(x)[0])
    return _cumulative(x, axis, dtype, "multiply")


@api
def cummax(x, axis=None) -> Tracer:
    return _cumulative(x, axis, None, "maximum")


@api
def cummin(x, axis=None) -> Tracer:
    return _cumulative(x, axis, None, "minimum")


# -- sorting --------------------------------------------------------------------------------
def _less_than(builder, dtype: str, operands: int):
    """Comparator on operand 0 only: ascending, NaNs last (NumPy's order)."""
    key = ("sort",) + tuple(p.dtype for p in operands)
    if key not in builder._reducers:
        from ..ir import Shape

        def body(*params):
            a, b = params[0], params[1]
            less = Compare(a, b, "LT")
            if dtype[0] in "fb":
                less = Or(less, And(Compare(b, b, "NE"), Compare(a, a, "EQ")))
            return less

        scalars = [Shape.array(p.dtype, ()) for p in operands for _ in range(2)]
        builder._reducers[key] = builder._root().computation(body, scalars, f"less_{dtype}")
    return builder._reducers[key]


def _sort(tracer: Tracer, axis, with_indices: bool):
    if axis is None:
        tracer, axis = ravel(tracer), 0
    axis = normalize_axis(axis, tracer.ndim)
    operands = [tracer.op]
    if with_indices:
        operands.append(iota(dt.default_dtype(dt.INT), tracer.shape, axis).op)
    builder = _builder()
    comp = _less_than(builder, tracer.op.dtype, operands)
    attrs = {"dimensions": (axis,), "to_apply": comp, "is_stable": True}
    return builder.emit("sort", operands, attrs)


@api
def sort(x, axis=-1) -> Tracer:
    tracer = asarray(x)
    if tracer.ndim == 0:
        return tracer
    return Tracer(_sort(tracer, axis, False), tracer.weak)


@api
def argsort(x, axis=-1) -> Tracer:
    tracer = asarray(x)
    return Tracer(GetTupleElement(_sort(tracer, axis, True), 1))
