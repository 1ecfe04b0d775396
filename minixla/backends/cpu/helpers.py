"""Scalar helpers that generated CPU kernels call: XLA's exact integer and float corner cases.

The NumPy spec of each rule is in reference/elementwise.py and convert.py; these are
the same rules written for Numba, one scalar at a time. Helpers are generic over the element
type; constants whose type matters (-1, INT_MIN, all-ones) are passed in already typed, because
a bare literal in a Numba function is int64/float64 and would widen the result. Callers cast
the returned value to the instruction's element type, which also wraps integer results.

LLVM inlines the helpers into the kernel loop. They are compiled with 'contract' only, so the
NaN and signed-zero selects survive whatever flags the calling kernel uses.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

_JIT = dict(fastmath={"contract"}, error_model="numpy", cache=False, nogil=True)
_FLOATS = (types.float32, types.float64)


# ---- LLVM intrinsics: each lowers to one vectorizable instruction ------------------------------

def _float_intrinsic(name: str):
    """`name(x)` for a float x, as the LLVM intrinsic `llvm.<name>.f32/f64`."""
    def typer(typingctx, x):
        if x not in _FLOATS:
            return None

        def codegen(context, builder, sig, args):
            fty = args[0].type
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(fty, [fty]),
                                                f"llvm.{name}.{fty.intrinsic_name}")
            return builder.call(fn, args)
        return x(x), codegen
    return intrinsic(typer)


floor = _float_intrinsic("floor")
ceil = _float_intrinsic("ceil")
rint = _float_intrinsic("rint")    # ties to even (default rounding mode)
round_afz = _float_intrinsic("round")  # ties away from zero
trunc = _float_intrinsic("trunc")


@intrinsic
def copysign(typingctx, magnitude, sign):
    if magnitude not in _FLOATS or sign != magnitude:
        return None

    def codegen(context, builder, sig, args):
        fty = args[0].type
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(fty, [fty, fty]),
                                            f"llvm.copysign.{fty.intrinsic_name}")
        return builder.call(fn, args)
    return magnitude(magnitude, sign), codegen


def _int_intrinsic(name: str, poison_flag: bool):
    def typer(typingctx, x):
        if not isinstance(x, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            ity = args[0].type
            params = [ity] + ([ir.IntType(1)] if poison_flag else [])
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ity, params),
                                                f"llvm.{name}.i{ity.width}")
            extra = [ir.Constant(ir.IntType(1), 0)] if poison_flag else []
            return builder.call(fn, [args[0]] + extra)
        return x(x), codegen
    return intrinsic(typer)


popcount = _int_intrinsic("ctpop", False)
count_leading_zeros = _int_intrinsic("ctlz", True)  # defined (= width) for a zero input


@intrinsic
def bitcast(typingctx, x, ty):
    """Reinterprets the bits of scalar `x` as the same-width type `ty` (e.g. np.int32)."""
    target = getattr(ty, "instance_type", None)
    if not isinstance(target, (types.Integer, types.Float)) or target.bitwidth != x.bitwidth:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], context.get_value_type(target))
    return target(x, ty), codegen


@intrinsic
def signbit(typingctx, x):
    """True when the sign bit of float x is set (also for -0 and negative NaNs)."""
    if x not in _FLOATS:
        return None

    def codegen(context, builder, sig, args):
        ity = ir.IntType(x.bitwidth)
        return builder.icmp_signed("<", builder.bitcast(args[0], ity), ir.Constant(ity, 0))
    return types.boolean(x), codegen


# ---- floats --------------------------------------------------------------------------------------

def _float_binary_intrinsic(name: str):
    def typer(typingctx, a, b):
        if a not in _FLOATS or b != a:
            return None

        def codegen(context, builder, sig, args):
            fty = args[0].type
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(fty, [fty, fty]),
                                                f"llvm.{name}.{fty.intrinsic_name}")
            return builder.call(fn, args)
        return a(a, b), codegen
    return intrinsic(typer)


# llvm.maximum/minimum are XLA's maximum/minimum exactly: NaN wins, -0 < +0. Unlike a chain of
# selects, LLVM vectorizes reductions over them (a row max runs at memory speed).
fmax = _float_binary_intrinsic("maximum")
fmin = _float_binary_intrinsic("minimum")


@njit(**_JIT)
def ftz(x, tiny):
    """x, or zero with x's sign when x is subnormal (flush-to-zero)."""
    return copysign(x - x, x) if abs(x) < tiny else x


@njit(**_JIT)
def complex_divide(a, b, one):
    """a / b by NumPy's method (Smith's), so a zero divisor gives infinities or NaNs where
    Numba's `/` raises ZeroDivisionError; `one` is 1 in the type of the parts."""
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    if abs(br) >= abs(bi):
        if br == 0 and bi == 0:
            return complex(ar / abs(br), ai / abs(br))
        ratio = bi / br
        scale = one / (br + bi * ratio)
        return complex((ar + ai * ratio) * scale, (ai - ar * ratio) * scale)
    ratio = br / bi
    scale = one / (bi + br * ratio)
    return complex((ar * ratio + ai) * scale, (ai * ratio - ar) * scale)


@njit(**_JIT)
def fsign(x, one):
    # NaN stays NaN, +-0 stays itself, everything else is +-1.
    if x != x or x == 0:
        return x
    return copysign(one, x)


@njit(**_JIT)
def total_order_key(bits, max_value):
    """Signed bits of a float ordered as -NaN < -inf < .. < -0 < +0 < .. < +inf < +NaN."""
    return bits ^ max_value if bits < 0 else bits


@njit(**_JIT)
def float_to_int(x, low_f, high_f, low, high, zero, whole):
    """Saturating truncation: NaN -> 0; `whole` is x already truncated by the caller's cast
    (only used when it is in range). low_f = float(low), high_f = float(high) + 1, exact."""
    if x != x:
        return zero
    if x <= low_f:
        return low
    if x >= high_f:
        return high
    return whole


# ---- integers ----------------------------------------------------------------------------------

@njit(**_JIT)
def sdiv(a, b, int_min, minus_one):
    # x / 0 = -1; INT_MIN / -1 = INT_MIN; otherwise truncate toward zero.
    if b == 0:
        return minus_one
    if a == int_min and b == minus_one:
        return int_min
    q = a // b
    if q * b != a and (a < 0) != (b < 0):
        q += 1
    return q


@njit(**_JIT)
def srem(a, b, int_min, minus_one):
    # x % 0 = x; INT_MIN % -1 = 0; the result takes the dividend's sign (C fmod).
    if b == 0:
        return a
    if a == int_min and b == minus_one:
        return a - a
    r = a % b
    if r != 0 and (r < 0) != (a < 0):
        r -= b
    return r


@njit(**_JIT)
def udiv(a, b, all_ones):
    if b == 0:
        return all_ones
    return a // b


@njit(**_JIT)
def urem(a, b):
    if b == 0:
        return a
    return a % b


@njit(**_JIT)
def ipow(base, exponent_bits, negative, one, zero):
    """Square-and-multiply over the exponent's unsigned bits (wraps like the integer type).
    A negative signed exponent gives 1 for base 1, +-1 by parity for base -1, else 0."""
    if negative:
        if base == one:
            return one
        if base == zero - one:
            return zero - one if exponent_bits & 1 else one
        return zero
    result = one
    factor = base
    remaining = exponent_bits
    while remaining != 0:
        if remaining & 1:
            result = result * factor
        factor = factor * factor
        remaining = remaining >> 1
    return result


# ---- bfloat16: kernels keep bf16 values in float32 (exactly), arrays hold the 16-bit patterns ----

@njit(**_JIT)
def bf16_load(bits):
    return bitcast(np.uint32(np.uint32(bits) << np.uint32(16)), np.float32)


@njit(**_JIT)
def bf16_store(x):
    """The bf16 bit pattern of an f32 that is already a bf16 value: its upper half."""
    return np.uint16(bitcast(x, np.uint32) >> np.uint32(16))


@njit(**_JIT)
def round_bf16(x):
    """f32 -> nearest bf16 (ties to even), kept as f32; NaN stays NaN (quiet)."""
    bits = bitcast(x, np.uint32)
    if x != x:
        return bitcast(np.uint32((bits | np.uint32(0x00400000)) & np.uint32(0xFFFF0000)),
                       np.float32)
    odd = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = np.uint32(bits + np.uint32(0x7FFF) + odd)
    return bitcast(np.uint32(rounded & np.uint32(0xFFFF0000)), np.float32)


@njit(**_JIT)
def reduce_precision_bits(bits, last_kept, keep_mask, exponent_mask, over, under, sign_mask,
                          round_mantissa, clamp_exponent):
    """XLA's reduce-precision on a float's bits (widened to uint64): round the mantissa to
    nearest even, then overflow to inf and underflow to a signed zero."""
    if round_mantissa:
        shift_bit = np.uint64(1) if (bits & last_kept) != np.uint64(0) else np.uint64(0)
        bits = (bits + shift_bit + (last_kept >> np.uint64(1)) - np.uint64(1)) & keep_mask
    if clamp_exponent:
        exponent = bits & exponent_mask
        sign = bits & sign_mask
        if exponent > over:
            bits = sign | exponent_mask
        elif exponent <= under:
            bits = sign
    return bits


@njit(**_JIT)
def philox4x32(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 (Random123) on 32-bit words held in uint64 (products fit exactly)."""
    low = np.uint64(0xFFFFFFFF)
    shift = np.uint64(32)
    for _ in range(10):
        p0 = c0 * np.uint64(0xD2511F53)
        p1 = c2 * np.uint64(0xCD9E8D57)
        c0, c1, c2, c3 = ((p1 >> shift) ^ c1 ^ k0) & low, p1 & low, \
            ((p0 >> shift) ^ c3 ^ k1) & low, p0 & low
        k0 = (k0 + np.uint64(0x9E3779B9)) & low
        k1 = (k1 + np.uint64(0xBB67AE85)) & low
    return c0, c1, c2, c3


@njit(**_JIT)
def threefry2x32(c0, c1, k0, k1):
    """Threefry2x32-20 (Random123) on 32-bit words held in uint64."""
    low = np.uint64(0xFFFFFFFF)
    k2 = np.uint64(0x1BD11BDA) ^ k0 ^ k1
    x0 = (c0 + k0) & low
    x1 = (c1 + k1) & low
    for block in range(1, 6):
        for r in range(4):
            if block % 2 == 1:
                rot = (13, 15, 26, 6)[r]
            else:
                rot = (17, 29, 16, 24)[r]
            x0 = (x0 + x1) & low
            x1 = (((x1 << np.uint64(rot)) | (x1 >> np.uint64(32 - rot))) & low) ^ x0
        which = block % 3
        x0 = (x0 + (k0 if which == 0 else k1 if which == 1 else k2)) & low
        after = (block + 1) % 3
        x1 = (x1 + (k0 if after == 0 else k1 if after == 1 else k2) + np.uint64(block)) & low
    return x0, x1
