"""Per-element code: one Numba expression per elementwise opcode and element type.

`SCALAR[opcode](ctx, instr, args)` returns Python source for the instruction's value given
source for its operands' values. Every expression has exactly the instruction's element type
(integers are cast back with `T(...)`, which wraps like two's complement), so the kernel's
variables are type-stable and LLVM sees no hidden widening. The semantics follow the
interpreter's tables (elementwise.py, convert.py); the corner cases live in helpers.py.

An opcode/type pair that is not here raises `NotEmittable`; the driver then runs that
instruction through the reference implementation instead (reported as `fallback.<opcode>`).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

from ...errors import UnsupportedError
from ...ir.dtypes import element_type
from ...ir.opcodes import ELEMENTWISE, EXACT, EXPENSIVE, OPCODES, opcodes_with


class NotEmittable(UnsupportedError):
    """The instruction has no kernel code for its element types."""


# HLO element type -> NumPy scalar type the kernel computes in. bf16 values are computed in
# f32 and rounded back after every op that can leave the bf16 grid (as the interpreter does);
# arrays hold their 16-bit patterns. Complex numbers are Numba's complex64/complex128, for the
# ops in COMPLEX_RULES only. f16, f8 and sub-byte ints are absent: Numba cannot represent
# them, so they fall back.
KERNEL_TYPES = {
    "pred": "bool_",
    "s8": "int8",
    "s16": "int16",
    "s32": "int32",
    "s64": "int64",
    "u8": "uint8",
    "u16": "uint16",
    "u32": "uint32",
    "u64": "uint64",
    "f32": "float32",
    "f64": "float64",
    "bf16": "float32",
    "c64": "complex64",
    "c128": "complex128",
}
BITS = {
    "pred": 8,
    "s8": 8,
    "s16": 16,
    "s32": 32,
    "s64": 64,
    "u8": 8,
    "u16": 16,
    "u32": 32,
    "u64": 64,
    "f32": 32,
    "f64": 64,
    "bf16": 16,
}
# Ops whose result is exactly representable in its (bf16) type without rounding.
EXACT_OPS = opcodes_with(EXACT)


def kernel_type(dtype: str) -> str:
    if dtype not in KERNEL_TYPES:
        raise NotEmittable(f"element type {dtype} has no kernel representation")
    return "np." + KERNEL_TYPES[dtype]


def signed_of(dtype: str) -> str:
    return "s" + str(BITS[dtype])


def unsigned_of(dtype: str) -> str:
    return "u" + str(BITS[dtype])


def kind(dtype: str) -> str:
    return {
        "p": "pred",
        "s": "signed",
        "u": "unsigned",
        "f": "float",
        "b": "float",
        "c": "complex",
    }[dtype[0]]


Emit = Callable[..., str]
SCALAR: dict[str, Emit] = {}


def rule(*opcodes: str):
    def register(fn: Emit) -> Emit:
        for opcode in opcodes:
            SCALAR[opcode] = fn
        return fn

    return register


def _no(instr, dtype: str) -> NotEmittable:
    return NotEmittable(f"{instr.opcode} on {dtype} has no kernel code")


# ---- arithmetic --------------------------------------------------------------------------------

_ARITH = {"add": "+", "subtract": "-", "multiply": "*"}
_PRED_ARITH = {"add": "|", "multiply": "&", "maximum": "|", "minimum": "&"}


@rule("add", "subtract", "multiply")
def _arith(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    if dtype == "pred":
        if instr.opcode not in _PRED_ARITH:
            raise _no(instr, dtype)
        return f"({a} {_PRED_ARITH[instr.opcode]} {b})"
    if dtype == "s64":
        return _wrapped(ctx, f"{ctx.cast(a, 'u64')} {_ARITH[instr.opcode]} {ctx.cast(b, 'u64')}")
    return ctx.cast(f"{a} {_ARITH[instr.opcode]} {b}", dtype)


@rule("mulhi")
def _mulhi(ctx, instr, args):
    """The high half of the double-width product: exact in 64 bits up to 32-bit types."""
    a, b = args
    dtype = instr.shape.dtype
    if kind(dtype) not in ("signed", "unsigned"):
        raise _no(instr, dtype)
    signed, bits = kind(dtype) == "signed", BITS[dtype]
    if bits <= 32:
        wide = "s64" if signed else "u64"
        product = f"({ctx.cast(a, wide)} * {ctx.cast(b, wide)})"
        return ctx.cast(f"({product} >> {ctx.const(bits, wide)})", dtype)
    high = f"h.mulhi64({ctx.cast(a, 'u64')}, {ctx.cast(b, 'u64')}, {signed})"
    return ctx.cast(high, dtype)


def _wrapped(ctx, unsigned_expr: str) -> str:
    """An s64 result computed in u64: Numba marks int64 add/sub/mul `nsw`, so LLVM may assume
    they never overflow and fold (x * c) / x to c even where the product wraps; the other
    signed types are widened to 64 bits first, where they cannot overflow."""
    return ctx.cast(unsigned_expr, "s64")


def _negated(ctx, a: str, dtype: str) -> str:
    if dtype == "s64":
        return _wrapped(ctx, f"{ctx.const(0, 'u64')} - {ctx.cast(a, 'u64')}")
    return ctx.cast(f"-{a}", dtype)


@rule("divide")
def _divide(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        return f"({a} / {b})"
    if kind(dtype) == "signed":
        low = -(1 << (BITS[dtype] - 1))
        return ctx.cast(f"h.sdiv({a}, {b}, {ctx.const(low, dtype)}, {ctx.const(-1, dtype)})", dtype)
    if kind(dtype) == "unsigned":
        ones = (1 << BITS[dtype]) - 1
        return ctx.cast(f"h.udiv({a}, {b}, {ctx.const(ones, dtype)})", dtype)
    raise _no(instr, dtype)


@rule("remainder")
def _remainder(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        return f"np.fmod({a}, {b})"
    if kind(dtype) == "signed":
        low = -(1 << (BITS[dtype] - 1))
        return ctx.cast(f"h.srem({a}, {b}, {ctx.const(low, dtype)}, {ctx.const(-1, dtype)})", dtype)
    if kind(dtype) == "unsigned":
        return ctx.cast(f"h.urem({a}, {b})", dtype)
    raise _no(instr, dtype)


@rule("maximum", "minimum")
def _max_min(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    is_max = instr.opcode == "maximum"
    if dtype == "pred":
        return f"({a} {_PRED_ARITH[instr.opcode]} {b})"
    if kind(dtype) == "float":
        return f"h.{'fmax' if is_max else 'fmin'}({a}, {b})"
    return f"({a} if {a} {'>' if is_max else '<'} {b} else {b})"


@rule("power")
def _power(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        return f"{ctx.math('power', 'f32' if dtype == 'bf16' else dtype)}({a}, {b})"
    if kind(dtype) in ("signed", "unsigned"):
        # only the exponent's low 6 bits, as XLA's kernels (and the interpreter) read it
        bits = unsigned_of(dtype)
        unsigned = ctx.cast(f"{ctx.cast(b, bits)} & {ctx.const(63, bits)}", bits)
        negative = f"({b} < 0)" if kind(dtype) == "signed" else "False"
        if dtype == "s64":  # squared in u64, see _wrapped
            return _wrapped(
                ctx,
                f"h.ipow({ctx.cast(a, 'u64')}, {unsigned}, {negative}, "
                f"{ctx.const(1, 'u64')}, {ctx.const(0, 'u64')})",
            )
        return ctx.cast(
            f"h.ipow({a}, {unsigned}, {negative}, {ctx.const(1, dtype)}, {ctx.const(0, dtype)})",
            dtype,
        )
    raise _no(instr, dtype)


@rule("atan2")
def _atan2(ctx, instr, args):
    dtype = instr.shape.dtype
    if kind(dtype) != "float":
        raise _no(instr, dtype)
    return f"{ctx.math('atan2', 'f32' if dtype == 'bf16' else dtype)}({args[0]}, {args[1]})"


_BITWISE = {"and": "&", "or": "|", "xor": "^"}


@rule("and", "or", "xor")
def _bitwise(ctx, instr, args):
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        raise _no(instr, dtype)
    expr = f"{args[0]} {_BITWISE[instr.opcode]} {args[1]}"
    return f"({expr})" if dtype == "pred" else ctx.cast(expr, dtype)


@rule("shift-left", "shift-right-logical", "shift-right-arithmetic")
def _shift(ctx, instr, args):
    a, b = args
    dtype = instr.shape.dtype
    if kind(dtype) not in ("signed", "unsigned"):
        raise _no(instr, dtype)
    bits, unsigned = BITS[dtype], unsigned_of(dtype)
    amount = ctx.cast(b, unsigned)
    if ctx.native_shifts:
        arithmetic = instr.opcode == "shift-right-arithmetic"
        value = ctx.cast(a, signed_of(dtype) if arithmetic else unsigned)
        helper = instr.opcode.replace("-", "_")
        return ctx.cast(f"h.{helper}({value}, {amount})", dtype)
    in_range = f"{amount} < {ctx.const(bits, unsigned)}"
    zero = ctx.const(0, dtype)
    if instr.opcode in ("shift-left", "shift-right-logical"):
        op = "<<" if instr.opcode == "shift-left" else ">>"
        shifted = ctx.cast(f"{ctx.cast(a, unsigned)} {op} {amount}", dtype)
        return f"({shifted} if {in_range} else {zero})"
    signed = signed_of(dtype)
    value = ctx.cast(a, signed)
    # all ones: -1 of the signed twin, cast (unsigned types shift their top bit in too)
    fill = f"({ctx.cast(ctx.const(-1, signed), dtype)} if {value} < 0 else {zero})"
    shifted = ctx.cast(f"{value} >> {ctx.cast(amount, signed)}", dtype)
    return f"({shifted} if {in_range} else {fill})"


# ---- unary -------------------------------------------------------------------------------------


@rule("negate")
def _negate(ctx, instr, args):
    dtype = instr.shape.dtype
    if dtype == "pred":
        raise _no(instr, dtype)
    return f"(-{args[0]})" if kind(dtype) == "float" else _negated(ctx, args[0], dtype)


@rule("abs")
def _abs(ctx, instr, args):
    (a,) = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        return f"abs({a})"
    if kind(dtype) == "signed":
        return f"({_negated(ctx, a, dtype)} if {a} < 0 else {a})"
    if kind(dtype) == "unsigned":
        return a
    raise _no(instr, dtype)


@rule("sign")
def _sign(ctx, instr, args):
    (a,) = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        return f"h.fsign({a}, {ctx.const(1, dtype)})"
    if kind(dtype) in ("signed", "unsigned"):
        one, zero = ctx.const(1, dtype), ctx.const(0, dtype)
        minus = ctx.const(-1, dtype) if kind(dtype) == "signed" else zero
        return f"({one} if {a} > 0 else ({minus} if {a} < 0 else {zero}))"
    raise _no(instr, dtype)


_ROUNDING = {
    "floor": "h.floor",
    "ceil": "h.ceil",
    "round-nearest-even": "h.rint",
    "round-nearest-afz": "h.round_afz",
}


@rule(*_ROUNDING)
def _rounding(ctx, instr, args):
    dtype = instr.shape.dtype
    if kind(dtype) != "float":
        raise _no(instr, dtype)
    return f"{_ROUNDING[instr.opcode]}({args[0]})"


# The transcendental rows: the target's own math table where it has the function (cpu:
# mathlib's vectorizable approximations; cuda: libdevice), libm through Numba's math otherwise.
_MATH = frozenset(op for op in opcodes_with(EXPENSIVE, arity=1) if OPCODES[op].kind == ELEMENTWISE)
_LIBM = {
    "asin": "math.asin",
    "acos": "math.acos",
    "atan": "math.atan",
    "sinh": "math.sinh",
    "cosh": "math.cosh",
    "asinh": "math.asinh",
    "acosh": "math.acosh",
    "atanh": "math.atanh",
}
_DOMAIN = ("asin", "acos")  # defined on [-1, 1]


@rule(*_MATH)
def _math(ctx, instr, args):
    dtype = instr.shape.dtype
    if kind(dtype) != "float":
        raise _no(instr, dtype)
    compute = "f32" if dtype == "bf16" else dtype
    if ctx.has_math(instr.opcode, compute):
        return f"{ctx.math(instr.opcode, compute)}({args[0]})"
    if instr.opcode in _DOMAIN:
        # libm's NaN for an argument outside [-1, 1] has no sign; XLA's (and the interpreter's)
        # is x86's default NaN, sign set.
        x, nan = args[0], ctx.const(-np.nan, compute)
        value = f"({_LIBM[instr.opcode]}({x}) if {x} != {x} or abs({x}) <= 1 else {nan})"
        return ctx.cast(value, dtype)
    if instr.opcode in _LIBM:
        return ctx.cast(f"{_LIBM[instr.opcode]}({args[0]})", dtype)
    raise _no(instr, dtype)


@rule("is-finite")
def _is_finite(ctx, instr, args):
    if kind(instr.operand(0).shape.dtype) != "float":
        raise _no(instr, instr.operand(0).shape.dtype)
    return f"math.isfinite({args[0]})"


@rule("not")
def _not(ctx, instr, args):
    dtype = instr.shape.dtype
    if dtype == "pred":
        return f"(not {args[0]})"
    if kind(dtype) in ("signed", "unsigned"):
        return ctx.cast(f"~{args[0]}", dtype)
    raise _no(instr, dtype)


@rule("popcnt", "count-leading-zeros")
def _bit_count(ctx, instr, args):
    dtype = instr.shape.dtype
    if kind(dtype) not in ("signed", "unsigned"):
        raise _no(instr, dtype)
    fn = "h.popcount" if instr.opcode == "popcnt" else "h.count_leading_zeros"
    return ctx.cast(f"{fn}({ctx.cast(args[0], unsigned_of(dtype))})", dtype)


@rule("copy")
def _copy(ctx, instr, args):
    return args[0]


# ---- compare, select, clamp --------------------------------------------------------------------

_DIRECTIONS = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


@rule("compare")
def _compare(ctx, instr, args):
    a, b = args
    dtype = instr.operand(0).shape.dtype
    op = _DIRECTIONS[instr.attrs["direction"].upper()]
    ctype = str(instr.attrs.get("type") or "").upper()
    if kind(dtype) == "float" and ctype == "TOTALORDER":
        # bf16 is computed in f32, whose bits (the bf16 bits, shifted) order the same way
        width = 32 if dtype == "bf16" else BITS[dtype]
        signed = f"s{width}"
        top = ctx.const((1 << (width - 1)) - 1, signed)
        a, b = (f"h.total_order_key(h.bitcast({v}, {kernel_type(signed)}), {top})" for v in (a, b))
    elif kind(dtype) == "float":
        if ctype not in ("", "FLOAT"):
            raise _no(instr, dtype)
    elif dtype == "pred":
        a, b = ctx.cast(a, "u8"), ctx.cast(b, "u8")
    elif ctype == "SIGNED" or (ctype == "" and kind(dtype) == "signed"):
        a, b = ctx.cast(a, signed_of(dtype)), ctx.cast(b, signed_of(dtype))
    elif ctype in ("UNSIGNED", ""):
        a, b = ctx.cast(a, unsigned_of(dtype)), ctx.cast(b, unsigned_of(dtype))
    else:
        raise _no(instr, dtype)
    return f"({a} {op} {b})"


@rule("select")
def _select(ctx, instr, args):
    return f"({args[1]} if {args[0]} else {args[2]})"


@rule("clamp")
def _clamp(ctx, instr, args):
    low, x, high = args
    dtype = instr.shape.dtype
    if kind(dtype) == "float":
        # mixed precision (XLA allows float bounds of another width): in the widest type,
        # rounded once to the result's, as the interpreter's NumPy promotion does
        types = [op.shape.dtype for op in instr.operands]
        wide = _widest(types)
        low, x, high = (v if t == wide else ctx.cast(v, wide) for v, t in zip(args, types))
        clamped = f"h.fmin(h.fmax({x}, {low}), {high})"
        return clamped if wide == dtype else ctx.cast(clamped, dtype)
    if kind(dtype) in ("signed", "unsigned"):
        upper = f"({x} if {x} > {low} else {low})"
        return f"({upper} if {upper} < {high} else {high})"
    raise _no(instr, dtype)


# ---- conversions ------------------------------------------------------------------------------


@rule("convert")
def _convert(ctx, instr, args):
    (a,) = args
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    kernel_type(src), kernel_type(dst)  # both must have kernel types
    if src == dst:
        return a
    if dst == "bf16" and src not in ("f32", "pred"):
        raise _no(instr, f"{src}->bf16")  # through f32 would round twice
    if dst == "pred":
        return f"({a} != 0)"
    if src == "pred":
        return f"({ctx.const(1, dst)} if {a} else {ctx.const(0, dst)})"
    if kind(src) == "float" and kind(dst) != "float":
        low, high = (
            (-(1 << (BITS[dst] - 1)), (1 << (BITS[dst] - 1)) - 1)
            if kind(dst) == "signed"
            else (0, (1 << BITS[dst]) - 1)
        )
        # The plain cast is only used when x is in range (out of range it is LLVM poison,
        # which the helper's selects never pick).
        return ctx.cast(
            f"h.float_to_int({a}, {ctx.const(float(low), src)}, "
            f"{ctx.const(float(high) + 1, src)}, {ctx.const(low, dst)}, {ctx.const(high, dst)}, "
            f"{ctx.const(0, dst)}, {ctx.cast(a, dst)})",
            dst,
        )
    return ctx.cast(a, dst)  # int->int wraps, int->float and float->float round once


@rule("bitcast-convert")
def _bitcast_convert(ctx, instr, args):
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    if BITS.get(src) != BITS.get(dst) or "pred" in (src, dst) or "bf16" in (src, dst):
        raise _no(instr, f"{src}->{dst}")
    kernel_type(src)
    return f"h.bitcast({args[0]}, {kernel_type(dst)})"


class Retyped:
    """`instr` seen with another result element type or as a convert: same attributes, each
    operand a value of the given shape (only what the rules read)."""

    def __init__(self, opcode: str, attrs, shape, operand_shapes):
        self.opcode, self.attrs, self.shape = opcode, attrs, shape
        self.operands = [SimpleNamespace(shape=s) for s in operand_shapes]

    def operand(self, i: int):
        return self.operands[i]


_TYPE_CHANGING = ("convert", "bitcast-convert", "is-finite", "real", "imag", "complex")


def _mixed_float_unary(instr) -> str | None:
    """The operand's float type when `instr` is a float op of one operand whose result has
    another float type (mixed precision), else None."""
    if len(instr.operands) != 1 or instr.opcode in _TYPE_CHANGING:
        return None
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    return src if src != dst and kind(src) == kind(dst) == "float" else None


def _mixed_float_operands(instr) -> str | None:
    """The widest operand type when `instr` computes on floats of several types (mixed
    precision), else None."""
    if len(instr.operands) < 2 or instr.opcode in _TYPE_CHANGING + ("select", "clamp"):
        return None
    types = {op.shape.dtype for op in instr.operands}
    if len(types) < 2 or any(kind(t) != "float" for t in types):
        return None
    return _widest(types)


def _widest(types) -> str:
    """The float type of most bits among `types` (by element type: f16 and f8 have no
    kernel type)."""
    return max(types, key=lambda t: element_type(t).bits)


def emit_scalar(ctx, instr, args: list[str], *, round_bf16: bool = True) -> str:
    """Source for `instr` applied to operand values `args` (raises NotEmittable); a bf16
    result is rounded to the bf16 grid unless `round_bf16` is false (an f32 accumulator).
    A mixed-precision unary op computes in the wider type, as the interpreter does: f64 =
    cbrt(bf16 x) is cbrt of x converted to f64, bf16 = cbrt(f32 x) rounds the f32 cbrt."""
    source = _mixed_float_unary(instr)
    if source is not None:
        operand, dtype = instr.operand(0).shape, instr.shape.dtype
        kernel_type(source), kernel_type(dtype)  # f16 and f8 have none
        if BITS[dtype] >= BITS[source]:
            value = emit_scalar(ctx, Retyped("convert", {}, instr.shape, [operand]), args)
            return emit_scalar(
                ctx,
                Retyped(instr.opcode, instr.attrs, instr.shape, [operand.with_dtype(dtype)]),
                [value],
                round_bf16=round_bf16,
            )
        value = emit_scalar(ctx, Retyped(instr.opcode, instr.attrs, operand, [operand]), args)
        return emit_scalar(
            ctx, Retyped("convert", {}, instr.shape, [operand]), [value], round_bf16=round_bf16
        )
    wide = _mixed_float_operands(instr)
    if wide is not None:  # in the widest operand type, as NumPy promotes in the interpreter
        values = [
            a
            if op.shape.dtype == wide
            else emit_scalar(
                ctx, Retyped("convert", {}, op.shape.with_dtype(wide), [op.shape]), [a]
            )
            for op, a in zip(instr.operands, args)
        ]
        shapes = [op.shape.with_dtype(wide) for op in instr.operands]
        result = instr.shape if instr.shape.dtype == "pred" else instr.shape.with_dtype(wide)
        value = emit_scalar(ctx, Retyped(instr.opcode, instr.attrs, result, shapes), values)
        if result is instr.shape:
            return value
        return emit_scalar(
            ctx, Retyped("convert", {}, instr.shape, [result]), [value], round_bf16=round_bf16
        )
    if any(
        kind(d) == "complex"
        for d in [instr.shape.dtype] + [op.shape.dtype for op in instr.operands]
    ):
        return _complex(ctx, instr, args)
    fn = SCALAR.get(instr.opcode)
    if fn is None:
        raise NotEmittable(f"{instr.opcode} has no kernel code")
    kernel_type(instr.shape.dtype)
    for operand in instr.operands:
        kernel_type(operand.shape.dtype)
    expr = fn(ctx, instr, args)
    if (
        round_bf16
        and instr.shape.dtype == "bf16"
        and instr.opcode not in EXACT_OPS
        and not (instr.opcode == "convert" and instr.operand(0).shape.dtype in ("bf16", "pred"))
    ):
        return f"h.round_bf16({expr})"
    return expr


def _float_source(value: float) -> str:
    if value != value:
        return "float('nan')"
    if value in (float("inf"), float("-inf")):
        return f"float('{value}')"
    return f"float.fromhex('{value.hex()}')"


def literal(value, dtype: str) -> str:
    """Exact Python source for a scalar of HLO type `dtype` (module level, not in kernels)."""
    ty = kernel_type(dtype)
    if dtype == "pred":
        return f"{ty}({bool(value)})"
    if kind(dtype) == "complex":
        value = complex(np.asarray(value).item())
        return f"{ty}(complex({_float_source(value.real)}, {_float_source(value.imag)}))"
    if kind(dtype) == "float":
        value = float(value)
        if value != value:  # keeps the sign, which a TOTALORDER compare orders by
            sign = "-1.0" if np.signbit(value) else "1.0"
            return f"{ty}(np.copysign(float('nan'), {sign}))"
        if value in (float("inf"), float("-inf")):
            return f"{ty}(float('{value}'))"
        return f"{ty}(float.fromhex('{value.hex()}'))"
    return f"{ty}({int(np.asarray(value).item())})"


@rule("reduce-precision")
def _reduce_precision(ctx, instr, args):
    """Bits of f32/f64 (bf16 values are f32 here, exact) edited by helpers.reduce_precision_bits;
    NaN stays NaN (+inf with no mantissa bits left), as the interpreter does."""
    dtype = instr.shape.dtype
    if dtype not in ("f32", "f64", "bf16"):
        raise _no(instr, dtype)
    exponent_bits, mantissa_bits = instr.attrs["exponent_bits"], instr.attrs["mantissa_bits"]
    if exponent_bits < 1 or mantissa_bits < 0:
        raise _no(instr, dtype)
    src_e, src_m, width = (11, 52, 64) if dtype == "f64" else (8, 23, 32)
    if dtype == "bf16":
        src_m = 7  # the f32 value's low 16 bits are zero; bf16 rounds as its own layout
        shift_extra = 16
    else:
        shift_extra = 0
    ones = (1 << width) - 1
    shift = src_m - mantissa_bits
    last_kept = 1 << (max(shift, 0) + shift_extra)
    keep_mask = ones ^ (last_kept - 1)
    exponent_mask = ((1 << src_e) - 1) << (23 if dtype == "bf16" else src_m)
    src_bias, reduced_bias = (1 << (src_e - 1)) - 1, (1 << (exponent_bits - 1)) - 1
    mshift = 23 if dtype == "bf16" else src_m
    over = ((src_bias + reduced_bias) << mshift) if exponent_bits < src_e else 0
    under = ((src_bias - reduced_bias) << mshift) if exponent_bits < src_e else 0
    int_type = f"np.uint{width}"
    u64 = lambda v: f"np.uint64({v})"  # noqa: E731
    bits = f"np.uint64(h.bitcast({args[0]}, {int_type}))"
    edited = (
        f"h.reduce_precision_bits({bits}, {u64(last_kept)}, {u64(keep_mask)}, "
        f"{u64(exponent_mask)}, {u64(over)}, {u64(under)}, {u64(1 << (width - 1))}, "
        f"{shift > 0}, {exponent_bits < src_e})"
    )
    float_type = kernel_type("f64" if dtype == "f64" else "f32")
    result = f"h.bitcast({int_type}({edited}), {float_type})"
    nan = args[0] if mantissa_bits > 0 else f"{float_type}(np.inf)"
    return f"({nan} if {args[0]} != {args[0]} else {result})"


# ---- complex numbers -------------------------------------------------------------------------

_COMPLEX_BINARY = {"add": "+", "subtract": "-", "multiply": "*"}
_COMPLEX_UNARY = {
    "exponential": "np.exp",
    "log": "np.log",
    "sqrt": "np.sqrt",
    "negate": "-",
    "copy": "",
}


def _complex(ctx, instr, args) -> str:
    """The ops complex values support in kernels; any other op on them falls back."""
    op, dtype = instr.opcode, instr.shape.dtype
    if op == "divide" and kind(dtype) == "complex":
        one = ctx.const(1.0, "f64" if dtype == "c128" else "f32")
        return ctx.cast(f"h.complex_divide({args[0]}, {args[1]}, {one})", dtype)
    if op in _COMPLEX_BINARY and kind(dtype) == "complex":
        return ctx.cast(f"{args[0]} {_COMPLEX_BINARY[op]} {args[1]}", dtype)
    if op in _COMPLEX_UNARY and kind(dtype) == "complex":
        return ctx.cast(f"{_COMPLEX_UNARY[op]}({args[0]})", dtype)
    if op in ("real", "imag") and kind(dtype) == "float":
        return ctx.cast(f"{args[0]}.{op}", dtype)
    if op == "abs" and kind(dtype) == "float":
        return ctx.cast(f"abs({args[0]})", dtype)
    if op == "complex":
        return ctx.cast(f"complex({args[0]}, {args[1]})", dtype)
    if op == "convert" and kind(dtype) == "complex" and instr.operand(0).shape.dtype != "bf16":
        src = instr.operand(0).shape.dtype
        value = f"(1.0 if {args[0]} else 0.0)" if src == "pred" else args[0]
        return ctx.cast(value, dtype)
    if op == "select" and kind(dtype) == "complex":
        return f"({args[1]} if {args[0]} else {args[2]})"
    if op == "compare" and str(instr.attrs["direction"]).upper() in ("EQ", "NE"):
        equal = str(instr.attrs["direction"]).upper() == "EQ"
        return f"({args[0]} {'==' if equal else '!='} {args[1]})"
    raise NotEmittable(f"{op} on complex numbers has no kernel code")
