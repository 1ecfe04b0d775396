"""`minixla.numpy`: NumPy's API over traced arrays (elementwise ops, ufuncs and creation here;
shapes, reductions, linear algebra and indexing in the sibling numpy_*.py modules).

Operands broadcast by NumPy's rules and promote by the rules in dtypes.py; an element type an
op does not take raises FrontendTypeError naming the user's line. Outside a trace every
function runs eagerly (eager.py) and returns NumPy arrays.
"""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .tracer import Tracer, current_builder

_SCALARS = (bool, int, float, complex)


# -- conversion -----------------------------------------------------------------------------
def _builder():
    return current_builder()


def typeof(value) -> tuple[np.dtype, bool]:
    """(dtype, weak) of a tracer, Python scalar or NumPy value, without materializing it."""
    if isinstance(value, Tracer):
        return value.dtype, value.weak
    if isinstance(value, _SCALARS):
        return dt.python_scalar_type(value)
    return dt.canonicalize(np.asarray(value).dtype), False


def constant(value, dtype=None, weak: bool = False) -> Tracer:
    """A host value as a constant of the current trace (64-bit types narrowed unless x64)."""
    if isinstance(value, _SCALARS) and dtype is not None:
        array = dt.scalar_constant(value, dt.canonicalize(dtype))
    else:
        array = dt.host_array(value, dtype)
    return Tracer(_builder().constant(array), weak)


def asarray(value, dtype=None) -> Tracer:
    """Any array-like as a Tracer of the current trace, cast to `dtype` if given."""
    if isinstance(value, Tracer):
        tracer = Tracer(_builder().lift(value.op), value.weak)
        return tracer if dtype is None else astype(tracer, dtype)
    if isinstance(value, _SCALARS) and dtype is None:
        dtype, weak = dt.python_scalar_type(value)
        return constant(value, dtype, weak)
    return constant(value, dtype)


array = asarray


def cast(value, dtype, weak: bool = False) -> Tracer:
    """`value` as a Tracer of exactly `dtype` (for operands already promoted to it)."""
    dtype = np.dtype(dtype)
    if not isinstance(value, Tracer):
        return constant(value, dtype, weak)
    tracer = asarray(value)
    if tracer.dtype == dtype:
        return tracer
    return _convert(tracer, dtype, weak)


def _convert(tracer: Tracer, dtype: np.dtype, weak: bool = False) -> Tracer:
    builder = _builder()
    if dtype == np.bool_:  # XLA's convert to pred is not NumPy's truthiness for NaN etc.
        zero = builder.constant(np.zeros((), tracer.dtype))
        zeros = _broadcast_op(zero, tracer.shape)
        return Tracer(builder.emit("compare", [tracer.op, zeros], {"direction": "NE"}))
    from .ops_core import Convert

    return Tracer(Convert(tracer.op, dt.hlo_name(dtype)), weak)


@api
def astype(x, dtype) -> Tracer:
    return cast(x, dt.canonicalize(dtype))


# -- broadcasting ---------------------------------------------------------------------------
def broadcast_shapes(*shapes) -> tuple[int, ...]:
    rank = builtins.max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise FrontendShapeError(
                "operands could not be broadcast together with shapes "
                + " ".join(str(tuple(s)) for s in shapes)
            )
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _broadcast_op(op, shape):
    """HLO broadcast of `op` to `shape` by NumPy's rule (trailing alignment, size-1 dims
    stretch)."""
    shape = tuple(shape)
    if op.dims == shape:
        return op
    lead = len(shape) - op.rank
    if lead < 0:
        raise FrontendShapeError(f"cannot broadcast shape {op.dims} to {shape}")
    keep = [i for i, d in enumerate(op.dims) if d == shape[i + lead]]
    for i, d in enumerate(op.dims):
        if d != 1 and d != shape[i + lead]:
            raise FrontendShapeError(f"cannot broadcast shape {op.dims} to {shape}")
    if len(keep) != op.rank:  # drop the size-1 dims that stretch
        from .ops_core import Reshape

        op = Reshape(op, [op.dims[i] for i in keep])
    from .ops_core import Broadcast

    return Broadcast(op, [i + lead for i in keep], shape)


def broadcast_arrays(*values, dtype=None) -> list[Tracer]:
    tracers = [asarray(v) if dtype is None else cast(v, dtype) for v in values]
    shape = broadcast_shapes(*(t.shape for t in tracers))
    return [Tracer(_broadcast_op(t.op, shape), t.weak) for t in tracers]


@api
def broadcast_to(x, shape) -> Tracer:
    tracer = asarray(x)
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return Tracer(_broadcast_op(tracer.op, shape), tracer.weak)


# -- elementwise ----------------------------------------------------------------------------
KIND_NAMES = {dt.BOOL: "bool", dt.INT: "integer", dt.FLOAT: "floating", dt.COMPLEX: "complex"}


def _check_kinds(name: str, dtype, kinds) -> None:
    if dt.kind(dtype) not in kinds:
        allowed = " or ".join(KIND_NAMES[k] for k in sorted(kinds))
        raise FrontendTypeError(
            f"{name} does not accept {np.dtype(dtype)} operands (expects {allowed})"
        )


def _promoted(name, values, kinds=None, to_float=False):
    dtype, weak = dt.result_type(*(typeof(v) for v in values))
    if to_float and dt.kind(dtype) < dt.FLOAT:
        dtype = dt.default_dtype(dt.FLOAT)
    if kinds is not None:
        _check_kinds(name, dtype, kinds)
    return broadcast_arrays(*values, dtype=dtype), weak


def _emit(opcode: str, operands, weak: bool = False, attrs=None) -> Tracer:
    return Tracer(_builder().emit(opcode, [t.op for t in operands], attrs), weak)


_NUMBER = {dt.INT, dt.FLOAT, dt.COMPLEX}
_BITS = {dt.BOOL, dt.INT}


def _binary(name: str, opcode: str, kinds=None, to_float=False):
    @api
    def op(x, y):
        operands, weak = _promoted(name, [x, y], kinds, to_float)
        return _emit(opcode, operands, weak)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"numpy.{name} (HLO `{opcode}`)."
    return op


def _unary(name: str, opcode: str, kinds=None, to_float=False):
    @api
    def op(x):
        (operand,), weak = _promoted(name, [x], kinds, to_float)
        return _emit(opcode, [operand], weak)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"numpy.{name} (HLO `{opcode}`)."
    return op


add = _binary("add", "add")
subtract = _binary("subtract", "subtract", _NUMBER)
multiply = _binary("multiply", "multiply")
divide = true_divide = _binary("divide", "divide", to_float=True)
_float_power = _binary("power", "power", {dt.FLOAT, dt.COMPLEX})
maximum = _binary("maximum", "maximum")
minimum = _binary("minimum", "minimum")
arctan2 = _binary("arctan2", "atan2", {dt.FLOAT}, to_float=True)
bitwise_and = _binary("bitwise_and", "and", _BITS)
bitwise_or = _binary("bitwise_or", "or", _BITS)
bitwise_xor = _binary("bitwise_xor", "xor", _BITS)
left_shift = _binary("left_shift", "shift-left", {dt.INT})

negative = _unary("negative", "negate", _NUMBER)
sign = _unary("sign", "sign", _NUMBER)
floor = _unary("floor", "floor", {dt.FLOAT}, to_float=True)
ceil = _unary("ceil", "ceil", {dt.FLOAT}, to_float=True)
rint = _unary("rint", "round-nearest-even", {dt.FLOAT}, to_float=True)
exp = _unary("exp", "exponential", to_float=True)
expm1 = _unary("expm1", "exponential-minus-one", to_float=True)
log = _unary("log", "log", to_float=True)
log1p = _unary("log1p", "log-plus-one", to_float=True)
sqrt = _unary("sqrt", "sqrt", to_float=True)
cbrt = _unary("cbrt", "cbrt", {dt.FLOAT}, to_float=True)
sin = _unary("sin", "sine", to_float=True)
cos = _unary("cos", "cosine", to_float=True)
tan = _unary("tan", "tan", to_float=True)
tanh = _unary("tanh", "tanh", to_float=True)
sinh = _unary("sinh", "sinh", to_float=True)
cosh = _unary("cosh", "cosh", to_float=True)
arcsin = _unary("arcsin", "asin", to_float=True)
arccos = _unary("arccos", "acos", to_float=True)
arctan = _unary("arctan", "atan", to_float=True)
arcsinh = _unary("arcsinh", "asinh", to_float=True)
arccosh = _unary("arccosh", "acosh", to_float=True)
arctanh = _unary("arctanh", "atanh", to_float=True)
isfinite = _unary("isfinite", "is-finite", {dt.FLOAT}, to_float=True)
erf = _unary("erf", "erf", {dt.FLOAT}, to_float=True)  # not NumPy's; lax.erf and nn.gelu
invert = bitwise_not = _unary("invert", "not", _BITS)


@api
def abs(x) -> Tracer:  # noqa: A001 - NumPy's name
    (operand,), weak = _promoted("abs", [x], {dt.BOOL, *_NUMBER})
    return operand if operand.dtype == np.bool_ else _emit("abs", [operand], weak)


absolute = abs


@api
def positive(x) -> Tracer:
    return asarray(x)


@api
def square(x) -> Tracer:
    return multiply(x, x)


@api
def reciprocal(x) -> Tracer:
    return divide(1, x) if dt.kind(typeof(x)[0]) >= dt.FLOAT else floor_divide(1, x)


@api
def log2(x) -> Tracer:
    return divide(log(x), np.log(2.0))


@api
def log10(x) -> Tracer:
    return divide(log(x), np.log(10.0))


@api
def exp2(x) -> Tracer:
    return exp(multiply(x, np.log(2.0)))


@api
def trunc(x) -> Tracer:
    return where(less(x, 0), ceil(x), floor(x))


@api
def round(x, decimals: int = 0) -> Tracer:  # noqa: A001 - NumPy's name
    if dt.kind(typeof(x)[0]) < dt.FLOAT:
        return asarray(x)
    if decimals == 0:
        return rint(x)
    scale = 10.0**decimals
    return divide(rint(multiply(x, scale)), scale)


@api
def right_shift(x, y) -> Tracer:
    """Arithmetic for signed integers, logical for unsigned ones (NumPy's >>)."""
    operands, weak = _promoted("right_shift", [x, y], {dt.INT})
    signed = operands[0].dtype.kind == "i"
    return _emit("shift-right-arithmetic" if signed else "shift-right-logical", operands, weak)


def _compare(name: str, direction: str):
    @api
    def op(x, y):
        operands, _ = _promoted(name, [x, y])
        return _emit("compare", operands, attrs={"direction": direction})

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"numpy.{name} (HLO `compare`, direction={direction})."
    return op


equal = _compare("equal", "EQ")
not_equal = _compare("not_equal", "NE")
less = _compare("less", "LT")
less_equal = _compare("less_equal", "LE")
greater = _compare("greater", "GT")
greater_equal = _compare("greater_equal", "GE")


@api
def isnan(x) -> Tracer:
    return not_equal(x, x)  # never true for integers


@api
def isinf(x) -> Tracer:
    return logical_and(logical_not(isfinite(x)), logical_not(isnan(x)))


@api
def logical_not(x) -> Tracer:
    return invert(astype(x, bool))


@api
def logical_and(x, y) -> Tracer:
    return bitwise_and(astype(x, bool), astype(y, bool))


@api
def logical_or(x, y) -> Tracer:
    return bitwise_or(astype(x, bool), astype(y, bool))


@api
def logical_xor(x, y) -> Tracer:
    return bitwise_xor(astype(x, bool), astype(y, bool))


@api
def floor_divide(x, y) -> Tracer:
    """Rounds toward -inf like NumPy (HLO divide truncates integers toward zero)."""
    (a, b), weak = _promoted("floor_divide", [x, y], {dt.BOOL, dt.INT, dt.FLOAT})
    if dt.kind(a.dtype) == dt.FLOAT:
        return _float_divmod(a, b, weak)[0]
    quotient = _emit("divide", [a, b], weak)
    if a.dtype.kind == "u" or a.dtype == np.bool_:
        return quotient
    remainder = _emit("remainder", [a, b])
    adjust = logical_and(not_equal(remainder, 0), not_equal(less(a, 0), less(b, 0)))
    return where(adjust, subtract(quotient, 1), quotient)


@api
def remainder(x, y) -> Tracer:
    """Takes the divisor's sign like NumPy (HLO remainder takes the dividend's)."""
    (a, b), weak = _promoted("remainder", [x, y], {dt.BOOL, dt.INT, dt.FLOAT})
    if dt.kind(a.dtype) == dt.FLOAT:
        return _float_divmod(a, b, weak)[1]
    mod = _emit("remainder", [a, b], weak)
    if a.dtype.kind == "u" or a.dtype == np.bool_:
        return mod
    fix = logical_and(not_equal(mod, 0), not_equal(less(mod, 0), less(b, 0)))
    return where(fix, add(mod, b), mod)


mod = remainder


def _float_divmod(a: Tracer, b: Tracer, weak: bool):
    """NumPy's npy_divmod: fmod, sign fix-up, then a floor of the exact quotient."""
    mod = _emit("remainder", [a, b], weak)
    div = divide(subtract(a, mod), b)
    fix = logical_and(not_equal(mod, 0), not_equal(less(b, 0), less(mod, 0)))
    mod = where(fix, add(mod, b), mod)
    div = where(fix, subtract(div, 1), div)
    floor_div = floor(div)
    floor_div = where(greater(subtract(div, floor_div), 0.5), add(floor_div, 1), floor_div)
    return floor_div, mod


@api
def power(x, y) -> Tracer:
    """Float powers are HLO power; a static integer exponent multiplies by repeated squaring
    (as JAX's integer_pow), and an integer base with a traced integer exponent runs
    square-and-multiply over the exponent's bits."""
    if isinstance(y, int) and not isinstance(y, bool) and not isinstance(x, _SCALARS):
        base = asarray(x)
        if y < 0 and dt.kind(base.dtype) < dt.FLOAT:
            raise FrontendTypeError("integers to negative integer powers are not allowed")
        out = _integer_pow(base, builtins.abs(y))
        return reciprocal(out) if y < 0 else out
    dtype, weak = dt.result_type(typeof(x), typeof(y))
    if dt.kind(dtype) in (dt.FLOAT, dt.COMPLEX):
        return _float_power(x, y)
    _check_kinds("power", dtype, {dt.INT})
    base, exponent = broadcast_arrays(x, y, dtype=dtype)
    from .lax_api import fori_loop

    def step(_, carry):
        acc, b, e = carry
        acc = where(not_equal(bitwise_and(e, 1), 0), multiply(acc, b), acc)
        return acc, multiply(b, b), right_shift(e, 1)

    one = broadcast_to(cast(1, dtype), base.shape)
    acc = fori_loop(0, dtype.itemsize * 8, step, (one, base, exponent))[0]
    return acc if not weak else Tracer(acc.op, True)


def _integer_pow(base: Tracer, n: int) -> Tracer:
    out = None
    while n:
        if n & 1:
            out = base if out is None else multiply(out, base)
        n >>= 1
        if n:
            base = multiply(base, base)
    return out if out is not None else broadcast_to(cast(1, base.dtype), base.shape)


@api
def where(condition, x=None, y=None) -> Tracer:
    if x is None or y is None:
        raise FrontendTypeError(
            "where(condition) with one argument has a data-dependent shape; pass x and y"
        )
    dtype, weak = dt.result_type(typeof(x), typeof(y))
    pred = astype(condition, bool)
    pred, a, b = broadcast_arrays(pred, cast(x, dtype, weak), cast(y, dtype, weak))
    return _emit("select", [pred, a, b], weak)


@api
def clip(x, a_min=None, a_max=None) -> Tracer:
    out = asarray(x)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out
