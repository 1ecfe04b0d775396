"""Scalar helpers that generated kernels call as `h.<name>(...)`: XLA's exact integer and float
corner cases, written once for every target.

The NumPy spec of each rule is in reference/elementwise.py and convert.py; these are the same
rules one scalar at a time, in the subset of Python that Numba compiles for the CPU and for
CUDA alike. Helpers are generic over the element type; constants whose type matters (-1,
INT_MIN, all-ones) are passed in already typed, because a bare literal in a Numba function is
int64/float64 and would widen the result. Callers cast the returned value to the
instruction's element type, which also wraps integer results.

A target builds its set with `scalar_helpers(jit, bitcast=..., copysign=..., signbit=...)`:
`jit` is how it compiles a helper (the CPU's `njit`, CUDA's device-function registration, or
nothing in the simulator), and the three primitives are what it builds from its own
instructions (LLVM intrinsics on the CPU, libdevice on a GPU, NumPy in the simulator). The
helpers reach the primitives as closure variables, which Numba resolves like globals when it
compiles them. Each backend's helpers module (cpu/helpers.py, cuda/helpers.py) names the
results as its own attributes, so kernels find them as `h.sdiv`, `h.round_bf16`, ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ScalarHelpers:
    """The helpers of one target, compiled (or not) by its `jit`."""

    ftz: Callable
    complex_divide: Callable
    fsign: Callable
    total_order_key: Callable
    float_to_int: Callable
    sdiv: Callable
    srem: Callable
    udiv: Callable
    urem: Callable
    ipow: Callable
    mulhi64: Callable
    bf16_load: Callable
    bf16_store: Callable
    round_bf16: Callable
    reduce_precision_bits: Callable
    philox4x32: Callable
    threefry2x32: Callable
    # NaN-propagating max/min written with selects, for targets without such an instruction
    # (the CPU uses llvm.maximum/minimum instead, which LLVM vectorizes in reductions).
    fmax: Callable
    fmin: Callable


def scalar_helpers(
    jit: Callable, *, bitcast: Callable, copysign: Callable, signbit: Callable
) -> ScalarHelpers:
    """The helpers written over a target's primitives: `bitcast(x, ty)` reinterprets a
    scalar's bits as the same-width type `ty`, `copysign(m, s)` and `signbit(x)` are C's."""

    @jit
    def ftz(x, tiny):
        """x, or zero with x's sign when x is subnormal (flush-to-zero)."""
        return copysign(x - x, x) if abs(x) < tiny else x

    @jit
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

    @jit
    def fsign(x, one):
        # NaN stays NaN, +-0 stays itself, everything else is +-1.
        if x != x or x == 0:
            return x
        return copysign(one, x)

    @jit
    def total_order_key(bits, max_value):
        """Signed bits of a float ordered as -NaN < -inf < .. < -0 < +0 < .. < +inf < +NaN."""
        return bits ^ max_value if bits < 0 else bits

    @jit
    def float_to_int(x, low_f, high_f, low, high, zero, whole):
        """Saturating truncation: NaN -> 0; `whole` is x already truncated by the caller's
        cast (only used when it is in range). low_f = float(low), high_f = float(high) + 1,
        exact."""
        if x != x:
            return zero
        if x <= low_f:
            return low
        if x >= high_f:
            return high
        return whole

    # ---- integers ------------------------------------------------------------------------------

    @jit
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

    @jit
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

    @jit
    def udiv(a, b, all_ones):
        if b == 0:
            return all_ones
        return a // b

    @jit
    def urem(a, b):
        if b == 0:
            return a
        return a % b

    @jit
    def mulhi64(a, b, signed):
        """The high 64 bits of the 128-bit product of two 64-bit integers, given and returned
        as uint64 bit patterns; for signed operands the unsigned high word is corrected by
        subtracting the other operand where one is negative."""
        mask, half = np.uint64(0xFFFFFFFF), np.uint64(32)
        a_lo, a_hi, b_lo, b_hi = a & mask, a >> half, b & mask, b >> half
        cross_hl, cross_lh = a_hi * b_lo, a_lo * b_hi
        middle = ((a_lo * b_lo) >> half) + (cross_hl & mask) + cross_lh  # < 2^64: no carry lost
        high = a_hi * b_hi + (cross_hl >> half) + (middle >> half)
        if signed:
            if a >> np.uint64(63):
                high -= b
            if b >> np.uint64(63):
                high -= a
        return high

    @jit
    def ipow(base, exponent_bits, negative, one, zero):
        """Square-and-multiply over the exponent's unsigned bits (wraps like the integer
        type; the caller keeps the low 6, as XLA's kernels read). A negative signed exponent
        gives 1 for base 1, +-1 by parity for base -1, else 0."""
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

    # ---- bfloat16: kernels keep bf16 values in float32 (exactly), arrays hold the bit patterns --

    @jit
    def bf16_load(bits):
        return bitcast(np.uint32(np.uint32(bits) << np.uint32(16)), np.float32)

    @jit
    def bf16_store(x):
        """The bf16 bit pattern of an f32 that is already a bf16 value: its upper half."""
        return np.uint16(bitcast(x, np.uint32) >> np.uint32(16))

    @jit
    def round_bf16(x):
        """f32 -> nearest bf16 (ties to even), kept as f32; NaN stays NaN (quiet)."""
        bits = bitcast(x, np.uint32)
        if x != x:
            return bitcast(
                np.uint32((bits | np.uint32(0x00400000)) & np.uint32(0xFFFF0000)), np.float32
            )
        odd = (bits >> np.uint32(16)) & np.uint32(1)
        rounded = np.uint32(bits + np.uint32(0x7FFF) + odd)
        return bitcast(np.uint32(rounded & np.uint32(0xFFFF0000)), np.float32)

    @jit
    def reduce_precision_bits(
        bits,
        last_kept,
        keep_mask,
        exponent_mask,
        over,
        under,
        sign_mask,
        round_mantissa,
        clamp_exponent,
    ):
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

    # ---- counter-based random bits -------------------------------------------------------------

    @jit
    def philox4x32(c0, c1, c2, c3, k0, k1):
        """Philox4x32-10 (Random123) on 32-bit words held in uint64 (products fit exactly)."""
        low = np.uint64(0xFFFFFFFF)
        shift = np.uint64(32)
        for _ in range(10):
            p0 = c0 * np.uint64(0xD2511F53)
            p1 = c2 * np.uint64(0xCD9E8D57)
            c0, c1, c2, c3 = (
                ((p1 >> shift) ^ c1 ^ k0) & low,
                p1 & low,
                ((p0 >> shift) ^ c3 ^ k1) & low,
                p0 & low,
            )
            k0 = (k0 + np.uint64(0x9E3779B9)) & low
            k1 = (k1 + np.uint64(0xBB67AE85)) & low
        return c0, c1, c2, c3

    @jit
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

    # ---- NaN-propagating max/min with selects ----------------------------------------------------

    @jit
    def fmax(a, b):
        # NaN wins; +0 beats -0 in either order.
        if a != a:
            return a
        if b != b:
            return b
        if a == b:
            return b if signbit(a) else a
        return a if a > b else b  # noqa: FURB136 - keeps the dtype, as on the device

    @jit
    def fmin(a, b):
        if a != a:
            return a
        if b != b:
            return b
        if a == b:
            return a if signbit(a) else b
        return a if a < b else b  # noqa: FURB136

    return ScalarHelpers(
        ftz=ftz,
        complex_divide=complex_divide,
        fsign=fsign,
        total_order_key=total_order_key,
        float_to_int=float_to_int,
        sdiv=sdiv,
        srem=srem,
        udiv=udiv,
        urem=urem,
        ipow=ipow,
        mulhi64=mulhi64,
        bf16_load=bf16_load,
        bf16_store=bf16_store,
        round_bf16=round_bf16,
        reduce_precision_bits=reduce_precision_bits,
        philox4x32=philox4x32,
        threefry2x32=threefry2x32,
        fmax=fmax,
        fmin=fmin,
    )
