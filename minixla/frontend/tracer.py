"""Tracers: abstract arrays whose operations are recorded into a Builder.

While `jit` (or a `lax` body) runs the user's function, every array is a Tracer: a shape, a
NumPy dtype and a weak-type flag over an XlaOp. Operators dispatch to `minixla.numpy`, so they
follow NumPy's broadcasting and the promotion rules of dtypes.py. Anything that needs a
concrete value (`if x > 0:`, `int(x)`, `np.asarray(x)`) raises an error naming the user's line.

The trace stack says which builder new constants and ops go into: the innermost body being
traced. Values of enclosing traces are captured into it by `Builder.lift`.
"""

from __future__ import annotations

import contextlib
import threading

import numpy as np

from .builder import Builder, XlaOp
from .errors import ConcretizationError, TracerBoolConversionError

_local = threading.local()


def _stack() -> list[Builder]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def current_builder() -> Builder | None:
    stack = _stack()
    return stack[-1] if stack else None


@contextlib.contextmanager
def tracing(builder: Builder):
    stack = _stack()
    stack.append(builder)
    try:
        yield builder
    finally:
        stack.pop()


def _np():
    from .. import numpy as mnp  # the facade; imported late because it imports this module

    return mnp


class Tracer:
    """An abstract array inside a trace."""

    __slots__ = ("op", "weak")
    __array_ufunc__ = None  # NumPy operators defer to ours (np_array + tracer -> __radd__)

    def __init__(self, op: XlaOp, weak: bool = False):
        self.op = op
        self.weak = weak

    # -- array attributes -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.dims

    @property
    def dtype(self) -> np.dtype:
        return self.op.shape.numpy_dtype

    @property
    def ndim(self) -> int:
        return self.op.rank

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def T(self) -> "Tracer":
        return _np().transpose(self)

    @property
    def at(self):
        from .indexing import AtIndexer

        return AtIndexer(self)

    def __repr__(self) -> str:
        weak = ", weak" if self.weak else ""
        return f"Tracer<{self.op.shape.without_layout()}{weak}>"

    def __len__(self) -> int:
        if not self.ndim:
            raise TypeError("len() of a 0-d traced array")
        return self.shape[0]

    def __iter__(self):
        if not self.ndim:
            raise TypeError("iteration over a 0-d traced array")
        return (self[i] for i in range(self.shape[0]))

    # -- no concrete values at trace time ---------------------------------------------------
    def __bool__(self):
        raise TracerBoolConversionError(
            f"the truth value of a traced array ({self._describe()}) is not known while "
            f"tracing; Python `if`/`while`/`and`/`or` cannot branch on it. Use "
            f"minixla.lax.cond / lax.while_loop, mnp.where, or mark the argument static "
            f"(static_argnums)"
        )

    def _concrete(self, what: str):
        raise ConcretizationError(
            f"{what} needs a concrete value, but {self._describe()} is traced; keep it an "
            f"array or mark the argument static (static_argnums)"
        )

    def __int__(self):
        self._concrete("int()")

    def __float__(self):
        self._concrete("float()")

    def __complex__(self):
        self._concrete("complex()")

    def __index__(self):
        self._concrete("using an array as a Python index")

    def __array__(self, *args, **kwargs):
        self._concrete("converting to a NumPy array")

    def item(self):
        self._concrete(".item()")

    def tolist(self):
        self._concrete(".tolist()")

    def _describe(self) -> str:
        return f"{self.dtype}{list(self.shape)}"

    __hash__ = None  # mutable-looking arrays are not hashable, as in NumPy

    # -- operators (NumPy semantics) ------------------------------------------------------
    def __add__(self, other):
        return _np().add(self, other)

    def __radd__(self, other):
        return _np().add(other, self)

    def __sub__(self, other):
        return _np().subtract(self, other)

    def __rsub__(self, other):
        return _np().subtract(other, self)

    def __mul__(self, other):
        return _np().multiply(self, other)

    def __rmul__(self, other):
        return _np().multiply(other, self)

    def __truediv__(self, other):
        return _np().divide(self, other)

    def __rtruediv__(self, other):
        return _np().divide(other, self)

    def __floordiv__(self, other):
        return _np().floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _np().floor_divide(other, self)

    def __mod__(self, other):
        return _np().remainder(self, other)

    def __rmod__(self, other):
        return _np().remainder(other, self)

    def __pow__(self, other):
        return _np().power(self, other)

    def __rpow__(self, other):
        return _np().power(other, self)

    def __matmul__(self, other):
        return _np().matmul(self, other)

    def __rmatmul__(self, other):
        return _np().matmul(other, self)

    def __and__(self, other):
        return _np().bitwise_and(self, other)

    def __rand__(self, other):
        return _np().bitwise_and(other, self)

    def __or__(self, other):
        return _np().bitwise_or(self, other)

    def __ror__(self, other):
        return _np().bitwise_or(other, self)

    def __xor__(self, other):
        return _np().bitwise_xor(self, other)

    def __rxor__(self, other):
        return _np().bitwise_xor(other, self)

    def __lshift__(self, other):
        return _np().left_shift(self, other)

    def __rlshift__(self, other):
        return _np().left_shift(other, self)

    def __rshift__(self, other):
        return _np().right_shift(self, other)

    def __rrshift__(self, other):
        return _np().right_shift(other, self)

    def __eq__(self, other):
        return _np().equal(self, other)

    def __ne__(self, other):
        return _np().not_equal(self, other)

    def __lt__(self, other):
        return _np().less(self, other)

    def __le__(self, other):
        return _np().less_equal(self, other)

    def __gt__(self, other):
        return _np().greater(self, other)

    def __ge__(self, other):
        return _np().greater_equal(self, other)

    def __neg__(self):
        return _np().negative(self)

    def __pos__(self):
        return _np().positive(self)

    def __abs__(self):
        return _np().abs(self)

    def __invert__(self):
        return _np().invert(self)

    def __getitem__(self, index):
        from .indexing import getitem

        return getitem(self, index)

    # -- methods ----------------------------------------------------------------------------
    def astype(self, dtype):
        return _np().astype(self, dtype)

    def reshape(self, *shape, order="C"):
        return _np().reshape(self, shape[0] if len(shape) == 1 else shape, order=order)

    def transpose(self, *axes):
        return _np().transpose(self, axes[0] if len(axes) == 1 else (axes or None))

    def swapaxes(self, a, b):
        return _np().swapaxes(self, a, b)

    def squeeze(self, axis=None):
        return _np().squeeze(self, axis)

    def flatten(self):
        return _np().ravel(self)

    def ravel(self):
        return _np().ravel(self)

    def sum(self, axis=None, dtype=None, keepdims=False):
        return _np().sum(self, axis, dtype=dtype, keepdims=keepdims)

    def prod(self, axis=None, dtype=None, keepdims=False):
        return _np().prod(self, axis, dtype=dtype, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return _np().mean(self, axis, keepdims=keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        return _np().var(self, axis, ddof=ddof, keepdims=keepdims)

    def std(self, axis=None, ddof=0, keepdims=False):
        return _np().std(self, axis, ddof=ddof, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return _np().max(self, axis, keepdims=keepdims)

    def min(self, axis=None, keepdims=False):
        return _np().min(self, axis, keepdims=keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _np().argmax(self, axis, keepdims=keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _np().argmin(self, axis, keepdims=keepdims)

    def any(self, axis=None, keepdims=False):
        return _np().any(self, axis, keepdims=keepdims)

    def all(self, axis=None, keepdims=False):
        return _np().all(self, axis, keepdims=keepdims)

    def cumsum(self, axis=None, dtype=None):
        return _np().cumsum(self, axis, dtype=dtype)

    def cumprod(self, axis=None, dtype=None):
        return _np().cumprod(self, axis, dtype=dtype)

    def clip(self, min=None, max=None):
        return _np().clip(self, min, max)

    def dot(self, other):
        return _np().dot(self, other)

    def sort(self, axis=-1):
        return _np().sort(self, axis)

    def argsort(self, axis=-1):
        return _np().argsort(self, axis)

    def round(self, decimals=0):
        return _np().round(self, decimals)
