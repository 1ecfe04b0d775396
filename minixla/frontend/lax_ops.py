"""jax.lax's direct ops: convolution, reduce_window and the elementwise primitives, with JAX's
signatures (see docs/frontend.md). Operands of the elementwise primitives must agree in
shape, as in jax.lax; Python scalars are allowed."""

from __future__ import annotations

import builtins

import numpy as np

from . import dtypes as dt
from . import numpy_api as mnp
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import _builder, asarray, cast, typeof
from .ops_core import make_window
from .tracer import Tracer, tracing


# -- convolution ----------------------------------------------------------------------------
def _dim_labels(lhs_rank: int, dimension_numbers) -> str:
    """HLO dim_labels from JAX's dimension_numbers: None (NCHW, OIHW, NCHW), three layout
    strings like ("NHWC", "HWIO", "NHWC"), or three (batch|out, feature|in, spatial...)
    index tuples."""
    if dimension_numbers is None:
        spatial = "HWDXYZ"[: lhs_rank - 2]
        dimension_numbers = ("NC" + spatial, "OI" + spatial, "NC" + spatial)
    if len(dimension_numbers) != 3:
        raise FrontendTypeError(
            f"dimension_numbers must have three parts, got {dimension_numbers!r}"
        )
    lhs, rhs, out = dimension_numbers
    if isinstance(lhs, str):
        for spec, name in ((lhs, "lhs"), (rhs, "rhs"), (out, "out")):
            if len(spec) != lhs_rank:
                raise FrontendShapeError(
                    f"dimension_numbers {name} spec {spec!r} does not have rank {lhs_rank}"
                )
        spatial = [c for c in rhs if c not in "OI"]
        try:
            return (
                "_".join([_labels(lhs, "NC", "bf", spatial), _labels(rhs, "OI", "oi", spatial)])
                + "->"
                + _labels(out, "NC", "bf", spatial)
            )
        except ValueError:
            raise FrontendTypeError(f"bad dimension_numbers {dimension_numbers!r}") from None
    specs = [tuple(s) for s in (lhs, rhs, out)]
    return (
        "_".join([_index_labels(specs[0], "bf"), _index_labels(specs[1], "oi")])
        + "->"
        + _index_labels(specs[2], "bf")
    )


def _labels(spec: str, pair: str, letters: str, spatial) -> str:
    chars = []
    for c in spec:
        if c in pair:
            chars.append(letters[pair.index(c)])
        else:
            chars.append(str(spatial.index(c)))
    return "".join(chars)


def _index_labels(spec, letters: str) -> str:
    chars = [""] * len(spec)
    chars[spec[0]], chars[spec[1]] = letters
    for k, d in enumerate(spec[2:]):
        chars[d] = str(k)
    return "".join(chars)


def padtype_to_pads(in_shape, window_shape, strides, padding):
    """Explicit (low, high) pairs for "SAME", "SAME_LOWER" or "VALID" (or pairs as given)."""
    if not isinstance(padding, str):
        pads = [tuple(int(v) for v in p) for p in padding]
        if len(pads) != len(in_shape):
            raise FrontendShapeError(
                f"padding needs {len(in_shape)} (low, high) pairs, got {len(pads)}"
            )
        return pads
    mode = padding.upper()
    if mode == "VALID":
        return [(0, 0)] * len(in_shape)
    if mode not in ("SAME", "SAME_LOWER"):
        raise FrontendTypeError(
            f"unknown padding {padding!r} (SAME, SAME_LOWER, VALID or (low, high) pairs)"
        )
    pads = []
    for size, window, stride in zip(in_shape, window_shape, strides):
        out = -(-size // stride)
        total = builtins.max((out - 1) * stride + window - size, 0)
        low = total // 2 if mode == "SAME" else total - total // 2
        pads.append((low, total - low))
    return pads


@api
def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    feature_group_count=1,
    batch_group_count=1,
    precision=None,
    preferred_element_type=None,
):
    """jax.lax.conv_general_dilated."""
    from ..ir import parse_dim_labels

    dtype, weak = dt.result_type(typeof(lhs), typeof(rhs))
    lhs, rhs = cast(lhs, dtype, weak), cast(rhs, dtype, weak)
    if lhs.ndim != rhs.ndim or lhs.ndim < 3:
        raise FrontendShapeError(
            f"conv_general_dilated needs operands of equal rank >= 3, got "
            f"{lhs.shape} and {rhs.shape}"
        )
    labels = _dim_labels(lhs.ndim, dimension_numbers)
    dims = parse_dim_labels(labels)
    n = lhs.ndim - 2
    strides = tuple(window_strides) if window_strides is not None else (1,) * n
    lhs_dil = tuple(lhs_dilation or (1,) * n)
    rhs_dil = tuple(rhs_dilation or (1,) * n)
    if isinstance(padding, str) and any(d != 1 for d in lhs_dil):
        raise FrontendTypeError(
            "conv_general_dilated: string padding with lhs_dilation is "
            "ambiguous (as in JAX); give explicit (low, high) pairs"
        )
    kernel = [rhs.shape[d] for d in dims.kernel_spatial]
    dilated_kernel = [(k - 1) * d + 1 for k, d in zip(kernel, rhs_dil)]
    in_spatial = [(lhs.shape[d] - 1) * f + 1 for d, f in zip(dims.input_spatial, lhs_dil)]
    pads = padtype_to_pads(in_spatial, dilated_kernel, strides, padding)
    attrs = {
        "window": make_window(kernel, strides, pads, lhs_dil, rhs_dil),
        "dim_labels": labels,
        "feature_group_count": int(feature_group_count),
        "batch_group_count": int(batch_group_count),
    }
    out = Tracer(_builder().emit("convolution", [lhs.op, rhs.op], attrs), weak)
    if preferred_element_type is not None:
        out = cast(out, dt.canonicalize(preferred_element_type))
    return out


# -- reduce_window --------------------------------------------------------------------------
def _reducer_opcode(computation) -> str | None:
    known = {
        add: "add",
        mul: "multiply",
        max: "maximum",
        min: "minimum",
        mnp.add: "add",
        mnp.multiply: "multiply",
        mnp.maximum: "maximum",
        mnp.minimum: "minimum",
    }
    return known.get(computation)


def _traced_reducer(builder, computation, dtype: str):
    from ..ir import Shape

    sub = builder._root().child("reducer")
    params = [sub.parameter(Shape.array(dtype, ()), f"p{i}") for i in range(2)]
    with tracing(sub):
        out = asarray(computation(Tracer(params[0]), Tracer(params[1])))
        if out.shape != ():
            raise FrontendShapeError(
                f"the reduce_window computation must return a scalar, got shape {out.shape}"
            )
        root = cast(out, Shape.array(dtype).numpy_dtype).op
    return sub.build(root)


@api
def reduce_window(
    operand,
    init_value,
    computation,
    window_dimensions,
    window_strides=None,
    padding="VALID",
    base_dilation=None,
    window_dilation=None,
):
    """jax.lax.reduce_window for one operand; computation is lax.add / lax.max / lax.min /
    lax.mul (or any scalar function of two values)."""
    x = asarray(operand)
    init = cast(init_value, x.dtype)
    if init.shape != ():
        raise FrontendShapeError("reduce_window's init_value must be a scalar")
    n = x.ndim
    if len(window_dimensions) != n:
        raise FrontendShapeError(
            f"window_dimensions {tuple(window_dimensions)} do not match the operand's rank {n}"
        )
    strides = tuple(window_strides or (1,) * n)
    base = tuple(base_dilation or (1,) * n)
    win = tuple(window_dilation or (1,) * n)
    dilated = [(s - 1) * d + 1 for s, d in zip(x.shape, base)]
    windows = [(w - 1) * d + 1 for w, d in zip(window_dimensions, win)]
    pads = padtype_to_pads(dilated, windows, strides, padding)
    builder = _builder()
    opcode = _reducer_opcode(computation)
    hlo_dtype = dt.hlo_name(x.dtype)
    reducer = (
        builder.reducer(opcode, hlo_dtype)
        if opcode
        else _traced_reducer(builder, computation, hlo_dtype)
    )
    attrs = {
        "window": make_window(window_dimensions, strides, pads, base, win),
        "to_apply": reducer,
    }
    return Tracer(builder.emit("reduce-window", [x.op, init.op], attrs), x.weak)


# -- elementwise primitives (jax.lax spellings) ---------------------------------------------
def _same_shapes(name: str, *values) -> None:
    shapes = {
        tuple(np.shape(v)) if not isinstance(v, Tracer) else v.shape
        for v in values
        if not isinstance(v, (int, float, bool))
    }
    if len(shapes) > 1:
        raise FrontendShapeError(
            f"lax.{name} needs operands of one shape, got "
            f"{sorted(shapes)} (lax does not broadcast; use minixla.numpy)"
        )


def _lax_binary(name: str, fn):
    @api
    def op(x, y):
        _same_shapes(name, x, y)
        return fn(x, y)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"jax.lax.{name}: elementwise, operands of one shape."
    return op


add = _lax_binary("add", mnp.add)
sub = _lax_binary("sub", mnp.subtract)
mul = _lax_binary("mul", mnp.multiply)
div = _lax_binary("div", mnp.divide)
rem = _lax_binary("rem", mnp.remainder)
pow = _lax_binary("pow", mnp.power)  # noqa: A001 - jax.lax's name
max = _lax_binary("max", mnp.maximum)  # noqa: A001
min = _lax_binary("min", mnp.minimum)  # noqa: A001
atan2 = _lax_binary("atan2", mnp.arctan2)
(
    neg,
    exp,
    log,
    log1p,
    expm1,
    sqrt,
    cbrt,
    sin,
    cos,
    tan,
    tanh,
    abs,
    sign,
    floor,
    ceil,
    round,
    square,
    reciprocal,
) = (
    mnp.negative,
    mnp.exp,
    mnp.log,
    mnp.log1p,
    mnp.expm1,
    mnp.sqrt,
    mnp.cbrt,
    mnp.sin,
    mnp.cos,
    mnp.tan,
    mnp.tanh,
    mnp.abs,
    mnp.sign,
    mnp.floor,
    mnp.ceil,
    mnp.round,
    mnp.square,
    mnp.reciprocal,
)


@api
def rsqrt(x):
    return mnp.reciprocal(mnp.sqrt(x))


@api
def logistic(x):
    from .nn_api import sigmoid

    return sigmoid(x)


@api
def integer_pow(x, y: int):
    return mnp.power(x, int(y))


@api
def convert_element_type(x, new_dtype):
    return mnp.astype(x, new_dtype)
