"""Vectorizable scalar math for fused elementwise CPU kernels.

PyPI llvmlite ships without SVML, so Numba lowers math.tanh/exp/log/sin to one
libm call per element and the loop stays scalar.  The functions here are
branch-free polynomial/rational approximations with range reduction; they are
written with selects (``a if c else b`` on plain values) and small LLVM
intrinsics, so that a loop calling them is if-converted and SIMD-vectorized.

Use: call the functions from an @njit kernel.  They are compiled with
``forceinline=True`` (LLVM ``alwaysinline``), so they are inlined *after* being
compiled with their own flags (FASTMATH): a kernel using ``fastmath=True`` does
not strip their NaN/inf selects.  (Numba's ``inline="always"`` would instead
re-lower the body with the caller's flags, where 'nnan'/'ninf' fold those
selects away; don't use it for these.)  Arguments must already have the table's
dtype (float32 for MATH_F32: use np.float32 constants in kernels, a bare 0.5
promotes to float64).  For IEEE NaN/inf propagation *through* a kernel, the
kernel itself should avoid 'nnan'/'ninf' (e.g. fastmath=FASTMATH).

Accuracy: max error in ulps vs. float64 libm / long double.  float32: over
all 2**32 inputs (offline, exhaustive) for exp .94, expm1 1.44, log .86,
log1p .86, tanh .54, logistic 1.97, erf 1.03, sin/cos .5001; every 61st bit
pattern for tan/atan/cbrt/rsqrt (<= .5006), pow/atan2 on 1.5M pairs (.5).
tanh, sin, cos, tan, atan, atan2, pow, cbrt and rsqrt are evaluated in float64 and
rounded once; sqrt is exact.  float64 (random bit patterns and ranges): exp
.86, expm1 1.8, log .76, log1p .83, tanh 1.07, logistic 1.7; sin/cos/tan/erf/
atan2/pow/cbrt in float64 call libm (scalar: correct, not vectorized).
tests/test_cpu_mathlib.py asserts: float32 exp/log/log1p 1, expm1/erf 1.5,
logistic 2, tanh .55, the other float64-evaluated ones .51; float64 exp/log/log1p 1, tanh 1.5,
expm1/logistic 2 (every 4099th float32 bit pattern, special values, samples).
Special values follow libm/C99 (NaN in -> NaN, exp(-inf) = 0, log(0) = -inf,
log(<0) = NaN, tanh(-0.0) = -0.0, sin(inf) = NaN, pow's 20-odd cases, ...);
subnormal inputs and outputs are handled (no flush-to-zero), overflow gives
inf and underflow rounds to zero.
"""

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .kernels import MATH_OPCODES

# Only 'contract' (lets LLVM form FMAs, which only removes roundings).  Not
# 'nnan'/'ninf': they fold the x != x and inf selects away.  Not 'nsz': breaks
# tanh(-0.0) == -0.0.  Not 'reassoc': it may undo Cody-Waite splits and the
# (x - (u - 1)) error terms.  Not 'arcp': x/y -> x*(1/y) adds an ulp.  'afn'
# is moot (no libm calls).
FASTMATH = {"contract"}  # a set, as njit(fastmath=...) wants; do not mutate
_JIT = dict(fastmath=set(FASTMATH), error_model="numpy", forceinline=True, cache=False)

# --------------------------------------------------------------- intrinsics
_FMT = {
    types.float32: (ir.FloatType(), 32, 23, 127),
    types.float64: (ir.DoubleType(), 64, 52, 1023),
}


def _llvm_math(name, nargs):
    """An intrinsic calling the LLVM float intrinsic `name` (vectorizable)."""

    def codegen(context, builder, sig, llargs):
        fty = llargs[0].type
        fnty = ir.FunctionType(fty, [fty] * nargs)
        fn = cgutils.get_or_insert_function(builder.module, fnty, f"{name}.{fty.intrinsic_name}")
        return builder.call(fn, llargs)

    def check(args):
        ok = args[0] in _FMT and all(a == args[0] for a in args)
        return (args[0](*args), codegen) if ok else None

    # Numba intrinsics need a fixed arity (no *args).
    if nargs == 1:
        return intrinsic(lambda typingctx, a: check((a,)))
    if nargs == 2:
        return intrinsic(lambda typingctx, a, b: check((a, b)))
    return intrinsic(lambda typingctx, a, b, c: check((a, b, c)))


_fma = _llvm_math("llvm.fma", 3)
_rint = _llvm_math("llvm.rint", 1)
_floor = _llvm_math("llvm.floor", 1)
_sqrt = _llvm_math("llvm.sqrt", 1)
_copysign = _llvm_math("llvm.copysign", 2)


@intrinsic
def _signbit(typingctx, x):
    if x not in _FMT:
        return None

    def codegen(context, builder, sig, args):
        it = ir.IntType(_FMT[x][1])
        return builder.icmp_signed("<", builder.bitcast(args[0], it), ir.Constant(it, 0))

    return types.boolean(x), codegen


@intrinsic
def _ldexp2(typingctx, p, n):
    """p * 2**n for integral-valued n within twice the normal exponent range.

    Two exact power-of-two factors, so 2**128 (f32) works and subnormal results
    are rounded once.  The fmuls carry no 'reassoc' so they are not merged."""
    if p not in _FMT or n != p:
        return None

    def codegen(context, builder, sig, args):
        fty, bits, mant, bias = _FMT[p]
        it = ir.IntType(bits)
        ni = builder.fptosi(args[1], it)
        half = builder.ashr(ni, ir.Constant(it, 1))

        def pow2(k):
            k = builder.add(k, ir.Constant(it, bias))
            return builder.bitcast(builder.shl(k, ir.Constant(it, mant)), fty)

        y = builder.fmul(args[0], pow2(half))
        return builder.fmul(y, pow2(builder.sub(ni, half)))

    return p(p, n), codegen


@intrinsic
def _frexp(typingctx, x):
    """(m, e) with |x| = m * 2**e, m in [1, 2), for finite normal x; e as float."""
    if x not in _FMT:
        return None

    def codegen(context, builder, sig, args):
        fty, bits, mant, bias = _FMT[x]
        it = ir.IntType(bits)
        v = builder.bitcast(args[0], it)
        e = builder.and_(builder.lshr(v, ir.Constant(it, mant)), ir.Constant(it, 2 * bias + 1))
        ef = builder.sitofp(builder.sub(e, ir.Constant(it, bias)), fty)
        m = builder.and_(v, ir.Constant(it, (1 << mant) - 1))
        m = builder.bitcast(builder.or_(m, ir.Constant(it, bias << mant)), fty)
        return context.make_tuple(builder, sig.return_type, (m, ef))

    return types.UniTuple(x, 2)(x), codegen


@intrinsic
def _f32_split(typingctx, x):
    """|x| (float32) = M * 2**(max(b, 1) - 150): returns (float64(M), b)."""
    if x != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        v = builder.bitcast(args[0], i32)
        b = builder.and_(builder.lshr(v, ir.Constant(i32, 23)), ir.Constant(i32, 0xFF))
        hidden = builder.select(
            builder.icmp_unsigned("!=", b, ir.Constant(i32, 0)),
            ir.Constant(i32, 1 << 23),
            ir.Constant(i32, 0),
        )
        m = builder.or_(builder.and_(v, ir.Constant(i32, (1 << 23) - 1)), hidden)
        mf = builder.uitofp(m, ir.DoubleType())
        return context.make_tuple(builder, sig.return_type, (mf, builder.zext(b, i64)))

    return types.Tuple((types.float64, types.intp))(x), codegen


# ---------------------------------------------------- constants, from scratch
def _fixed_pi(bits):
    """floor(pi * 2**bits) (to within a unit), by Machin's formula."""
    one = 1 << (bits + 16)

    def atan_inv(k):
        total, term, n, sign = 0, one // k, 1, 1
        while term:
            total += sign * (term // n)
            term //= k * k
            n, sign = n + 2, -sign
        return total

    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 16


def _fixed_ln2(bits):
    one = 1 << (bits + 16)
    return sum(one // (k << k) for k in range(1, bits + 16)) >> 16


_FIX = 200
_LN2_FIX = _fixed_ln2(_FIX)


def _split(fix, hi_bits):
    """(hi, lo) doubles with hi = fix * 2**-_FIX truncated to hi_bits bits."""
    drop = fix.bit_length() - hi_bits
    hi = (fix >> drop) << drop
    return math.ldexp(hi, -_FIX), math.ldexp(fix - hi, -_FIX)


def _two_over_pi_table(chunk=29):
    """W[j, b]: for |x| = M * 2**E (E = max(b,1) - 150, M < 2**24 integral),
    (2/pi * 2**E) mod 4 split in 3 chunks of `chunk` bits, so M*W[j] is exact
    in float64 and x*2/pi mod 4 is computed exactly enough for any float32."""
    k = 420
    t = (1 << (2 * k + 1)) // _fixed_pi(k)  # 2/pi * 2**k
    w = np.zeros((3, 256))
    for b in range(255):
        e = max(b, 1) - 150
        v = ((t << e) if e >= 0 else (t >> -e)) % (4 << k)
        top = v.bit_length()
        for j in range(3):
            sh = top - chunk * (j + 1)
            w[j, b] = math.ldexp((v >> sh) & ((1 << chunk) - 1), sh - k)
    return w


_W1, _W2, _W3 = (np.ascontiguousarray(r) for r in _two_over_pi_table())


def _poly(coeffs, dt):
    """Jitted Horner evaluator sum(c[k] * x**k) with constants of dtype dt."""
    ns = {f"c{k}": dt(c) for k, c in enumerate(coeffs)}
    ns["__name__"] = __name__  # so the symbol is recognizably ours
    expr = f"c{len(coeffs) - 1}"
    for k in range(len(coeffs) - 2, -1, -1):
        expr = f"c{k} + x * ({expr})"
    exec(f"def horner(x):\n    return {expr}\n", ns)
    return njit(**_JIT)(ns["horner"])


_FACT = [1.0 / math.factorial(k) for k in range(20)]
_ERFC_MID = 2.5
# Minimax fits (Lawson iteration / mpmath chebyfit), relative error unless
# noted; each well under 0.1 ulp of its dtype before rounding.
_TANH_P64 = (
    -0.3333333333333333,
    0.13333333333333042,
    -0.05396825396789699,  # [0, .625]
    0.021869488519008305,
    -0.008863235103240878,
    0.0035921217511549622,
    -0.0014557754120478055,
    0.0005896606577757043,
    -0.0002375906496055562,
    9.257116129556769e-05,
    -3.12011014257974e-05,
    6.485163482793113e-06,
)
# tanh(x)/x = P(z)/Q(z), z = x^2 in [0, 9.5^2]: Lawson-iterated least squares, relative.
_TANH_P_RATIONAL = (
    1.0,
    0.13658783328865162,
    0.0038418570928150197,
    2.747461557247333e-05,
    2.931297766543261e-08,
    -1.1273361917148085e-11,
)
_TANH_Q_RATIONAL = (
    1.0,
    0.4699211522665897,
    0.02714893478605027,
    0.00038919957850811485,
    1.2502436370380107e-06,
)
_ATAN_P = (
    -0.33333331813792966,
    0.19999842818585298,
    -0.1428026622230179,  # [0, 7/16],
    0.11023278312629266,
    -0.08357857582991657,
    0.045022736169590176,
)  # float64 eval
_ERF_Q = (
    0.128379166,
    -0.37612626,
    0.112835854,
    -0.0268538129,  # [0, 1]
    0.00518832868,
    -0.000801020302,
    7.85388984e-05,
)
_ERFC_P = (
    4.0695231e-04,
    -2.1782783e-03,
    5.4456908e-03,
    -8.3502159e-03,  # [1, 4] in a-2.5,
    8.6225858e-03,
    -6.1165639e-03,
    2.7976083e-03,
    -5.4459315e-04,  # absolute error
    -2.5880395e-04,
    2.5349893e-04,
    -8.1048616e-05,
    -7.8058101e-06,
    1.5701335e-05,
    -3.4463308e-06,
    -8.8771401e-07,
    3.4916829e-07,
)


# ------------------------------------- exp/log family, generic over dtype
def _build_exp_log(dt):
    f = dt
    eps_bits, tiny = (24, 2.0**-126) if dt is np.float32 else (53, 2.0**-1022)
    lo, hi = (-104.0, 89.0) if dt is np.float32 else (-746.0, 710.0)  # beyond: 0 / inf
    em1_lo = -(eps_bits + 4) * 0.7  # expm1 -> -1 below
    ln2_hi, ln2_lo = _split(_LN2_FIX, 16 if dt is np.float32 else 32)  # n*ln2_hi exact
    LO, HI, EM1_LO, LOG2E = f(lo), f(hi), f(em1_lo), f(1 / math.log(2))
    LN2_HI, LN2_LO, ONE, TWO, HALF, ZERO = f(ln2_hi), f(ln2_lo), f(1), f(2), f(0.5), f(0)
    TINY, SCALE, SCALE_E = f(tiny), f(2.0**eps_bits), f(eps_bits)
    # invalid operations give x86's default NaN, which has the sign bit set (as XLA's do)
    SQRT2, INF, NAN = f(math.sqrt(2)), f(np.inf), f(-np.nan)
    BIG_N = f(127 if dt is np.float32 else 1023)  # 2**n overflows from here
    n_exp = 8 if dt is np.float32 else 14  # Taylor degree + 1
    n_log = 5 if dt is np.float32 else 11
    exp_poly = _poly(_FACT[:n_exp], dt)  # e**r, |r| <= ln2/2
    em1_poly = _poly(_FACT[2 : n_exp + 2], dt)  # (e**r - 1 - r) / r**2
    log_poly = _poly([2.0 / (2 * k + 1) for k in range(1, n_log)], dt)

    @njit(**_JIT)
    def reduce(x):  # x = n*ln2 + r, |r| <= ln2/2, x clamped
        n = _rint(x * LOG2E)
        return n, _fma(n, -LN2_LO, _fma(n, -LN2_HI, x))

    @njit(**_JIT)
    def exp(x):
        xc = x if x > LO else LO  # NaN -> LO: keep fptosi defined
        xc = xc if xc < HI else HI
        n, r = reduce(xc)
        y = _ldexp2(exp_poly(r), n)
        return y if x == x else x

    @njit(**_JIT)
    def expm1(x):
        xc = x if x > EM1_LO else EM1_LO
        xc = xc if xc < HI else HI
        n, r = reduce(xc)
        q = _fma(r * r, em1_poly(r), r)  # expm1(r)
        t = _ldexp2(ONE, n if n < BIG_N else ZERO)
        y = _fma(t, q, t - ONE)  # 2**n * q + (2**n - 1), one rounding for n < 25
        y = y if n < BIG_N else _ldexp2(q + ONE, n) - ONE
        y = x if x == ZERO else y  # keeps -0.0
        return y if x == x else x

    @njit(**_JIT)
    def log_core(x, corr):  # log(x) + corr, corr tiny w.r.t. x
        sub = x < TINY
        m, e = _frexp(x * SCALE if sub else x)
        e = e - SCALE_E if sub else e
        big = m > SQRT2
        m = m * HALF if big else m  # m in [sqrt(.5), sqrt(2))
        e = e + ONE if big else e
        fm = m - ONE  # exact
        s = fm / (TWO + fm)  # log(1+f) = 2 atanh(s)
        z = s * s
        hfsq = HALF * fm * fm  # f - hfsq + s*(hfsq + R) = 2*atanh(s)
        r = z * log_poly(z)
        y = e * LN2_HI - ((hfsq - (s * (hfsq + r) + (e * LN2_LO + corr))) - fm)
        y = -INF if x == ZERO else y
        y = NAN if x < ZERO else y
        return x if (x == INF or x != x) else y

    @njit(**_JIT)
    def log(x):
        return log_core(x, ZERO)

    @njit(**_JIT)
    def log1p(x):
        u = ONE + x
        # rounding error of 1 + x (Fast2Sum, larger magnitude first)
        c = x - (u - ONE) if abs(x) < ONE else ONE - (u - x)
        corr = c / u if c != ZERO else ZERO
        y = log_core(u, corr)
        y = x if x == ZERO else y  # -0.0
        return x if x == INF else y

    @njit(**_JIT)
    def exp_pos(x):  # exp for x in [-hi, hi], no specials
        n, r = reduce(x)
        return _ldexp2(exp_poly(r), n)

    @njit(**_JIT)
    def recip1p(num, e, inv):
        """num / (1 + e) for 0 <= e, with the rounding error of 1 + e
        compensated; inv ~ 1/(1 + e)."""
        d = ONE + e
        dl = e - (d - ONE) if e < ONE else ONE - (d - e)  # Fast2Sum error
        q = num / d
        return _fma(-q * dl, inv, q)

    @njit(**_JIT)
    def logistic(x):
        e = exp(-abs(x))  # in [0, 1]: never overflows
        pos = x >= ZERO
        q = (ONE if pos else e) / (ONE + e)  # NaN -> e (NaN)
        y = recip1p(ONE if pos else e, e, q if pos else ONE - q)
        return y if x == x else x  # a NaN operand passes on with its sign

    # float64 only: float32's tanh is a float64 rational (below)
    tanh_p = _poly(_TANH_P64, dt)
    T_SMALL, T_CLAMP = f(0.625), f(20.0)

    @njit(**_JIT)
    def tanh(x):
        a = abs(x)
        z = a * a
        small = _fma(a * z, tanh_p(z), a)  # odd minimax polynomial
        ac = a if a < T_CLAMP else T_CLAMP  # tanh rounds to +-1 beyond; NaN -> clamp
        e = exp_pos(ac + ac)
        q = TWO / (e + ONE)
        large = ONE - recip1p(TWO, e, HALF * q)  # 1 - 2/(exp(2a) + 1)
        t = _copysign(small if a < T_SMALL else large, x)
        return t if x == x else x

    return dict(
        exp=exp, expm1=expm1, log=log, log1p=log1p, logistic=logistic, tanh=tanh, log_core=log_core
    )


_E32 = _build_exp_log(np.float32)
_E64 = _build_exp_log(np.float64)
_NAMES5 = ("exp", "expm1", "log", "log1p", "logistic")
exp_f32, expm1_f32, log_f32, log1p_f32, logistic_f32 = (_E32[k] for k in _NAMES5)
exp_f64, expm1_f64, log_f64, log1p_f64, logistic_f64 = (_E64[k] for k in _NAMES5)
tanh_f64 = _E64["tanh"]

# ------------------------------------------------------------- float32 only
_f = np.float32
_ONE, _ZERO = _f(1), _f(0)
_ERF_Q0, _erf_q = _f(_ERF_Q[0]), _poly(_ERF_Q[1:], _f)
_erfc_p = _poly(_ERFC_P, _f)
_ERFC_MID32, _FOUR = _f(_ERFC_MID), _f(4)


@njit(**_JIT)
def erf_f32(x):
    a = abs(x)
    small = _fma(a, (a * a) * _erf_q(a * a) + _ERF_Q0, a)  # a*(2/sqrt(pi)) + a^3 Q
    ac = a if a < _FOUR else _FOUR
    large = _ONE - _erfc_p(ac - _ERFC_MID32)
    large = large if large < _ONE else _ONE
    r = _copysign(small if a < _ONE else large, x)
    return r if x == x else x


# tanh(x) = x P(x^2) / Q(x^2) in float64 on [-9.5, 9.5] (relative error 2.4e-9 before
# the one rounding to float32), beyond which tanh rounds to +-1.  Half the latency of
# the exp form (one division, no compensation): a scan's recurrence waits on it.
_tanh_p = _poly(_TANH_P_RATIONAL, np.float64)
_tanh_q = _poly(_TANH_Q_RATIONAL, np.float64)
# Clamped in float32, before widening: a vector loop then clamps 8 lanes with vminps and
# vmaxps instead of widening two compare masks to float64 (12% of the throughput).
_TANH_CLAMP = np.float32(9.5)


@njit(**_JIT)
def tanh_f32(x):
    c = x if x < _TANH_CLAMP else _TANH_CLAMP  # NaN -> clamp; returned as x below
    c = c if c > -_TANH_CLAMP else -_TANH_CLAMP  # -0.0 stays -0.0
    d = np.float64(c)
    z = d * d
    t = np.float32(d * _tanh_p(z) / _tanh_q(z))
    return t if x == x else x


# atan/atan2 for float32 are evaluated in float64 (exact reduction, one final
# rounding), with fdlibm-style intervals so |t| <= 7/16 and base >> atan(t).
_atan_p = _poly(_ATAN_P, np.float64)
_ATAN_HALF, _ATAN_1P5 = math.atan(0.5), math.atan(1.5)
_PIO2_D, _PIO4_D, _PI_D = math.pi / 2, math.pi / 4, math.pi


@njit(**_JIT)
def _atan_ratio(num, den):
    """atan(num/den) in float64 for float32-valued 0 <= num, 0 < den (inf ok).
    p, q below are exact for float32 inputs; only t = p/q rounds."""
    i1, i2 = num <= 0.4375 * den, num <= 0.6875 * den
    i3, i4 = num <= 1.1875 * den, num <= 2.4375 * den
    p = (
        num
        if i1
        else (
            2.0 * num - den
            if i2
            else (num - den if i3 else (2.0 * num - 3.0 * den if i4 else -den))
        )
    )
    q = (
        den
        if i1
        else (
            2.0 * den + num if i2 else (num + den if i3 else (2.0 * den + 3.0 * num if i4 else num))
        )
    )
    base = (
        0.0 if i1 else (_ATAN_HALF if i2 else (_PIO4_D if i3 else (_ATAN_1P5 if i4 else _PIO2_D)))
    )
    t = p / q
    z = t * t
    return base + _fma(t * z, _atan_p(z), t)


@njit(**_JIT)
def atan_f32(x):
    r = np.float32(_copysign(_atan_ratio(abs(np.float64(x)), 1.0), np.float64(x)))
    return r if x == x else x


@njit(**_JIT)
def atan2_f32(y, x):
    ax, ay = abs(np.float64(x)), abs(np.float64(y))
    swap = ay > ax
    num = ax if swap else ay
    den = ay if swap else ax
    both_inf = ax == ay and ax == np.inf
    num = 1.0 if both_inf else num
    den = 1.0 if (both_inf or den == 0.0) else den  # atan2(+-0, +-0)
    r = _atan_ratio(num, den)
    r = _PIO2_D - r if swap else r
    r = _PI_D - r if _signbit(x) else r
    r = np.float32(_copysign(r, np.float64(y)))
    return r if (x == x and y == y) else x + y


# sin/cos/tan: exact-enough reduction of any float32 in float64 (3 table
# gathers), Taylor polynomials in float64, one final rounding to float32.
_sin_p = _poly([(-1) ** (k + 1) * _FACT[2 * k + 3] for k in range(5)], np.float64)
_cos_p = _poly([(-1) ** (k + 1) * _FACT[2 * k + 2] for k in range(6)], np.float64)


@njit(**_JIT)
def _sincos_red(x):
    """(sin(y), cos(y), q) with |x| = (q + f) * pi/2, y = f*pi/2, |f| <= 1/2."""
    m, b = _f32_split(x)
    p1 = m * _W1[b]
    p1 = p1 - 4.0 * _floor(p1 * 0.25)  # exact: drops multiples of 4 quarter turns
    p2 = m * _W2[b]
    k = _rint(p1 + p2)
    y = (((p1 - k) + p2) + m * _W3[b]) * _PIO2_D
    z = y * y
    return _fma(y * z, _sin_p(z), y), _fma(z, _cos_p(z), 1.0), int(k)


@njit(**_JIT)
def sin_f32(x):
    s, c, q = _sincos_red(x)
    r = c if q & 1 else s
    r = -r if ((q & 2) != 0) != _signbit(x) else r
    d = x - x  # NaN for inf / NaN input
    return np.float32(r) if d == _ZERO else d


@njit(**_JIT)
def cos_f32(x):
    s, c, q = _sincos_red(x)
    r = -s if q & 1 else c
    r = -r if q & 2 else r
    d = x - x
    return np.float32(r) if d == _ZERO else d


@njit(**_JIT)
def tan_f32(x):
    s, c, q = _sincos_red(x)
    odd = (q & 1) == 1
    r = (-c if odd else s) / (s if odd else c)
    r = -r if _signbit(x) else r
    d = x - x
    return np.float32(r) if d == _ZERO else d


_log64_core, _exp64 = _E64["log_core"], _E64["exp"]


# x86's default NaN (sign bit set), what invalid operations give in XLA's kernels too; a
# global, so Numba keeps its bits (negating a NaN at run time may not set the sign).
_DEFAULT_NAN = float(np.copysign(np.nan, -1.0))


@njit(**_JIT)
def power_f32(x, y):
    """C99 pow semantics; evaluated as exp(y*log|x|) in float64 (<= 0.5 ulp +
    double rounding), sign from odd integer y."""
    xd, yd = np.float64(x), np.float64(y)
    r = _exp64(yd * _log64_core(abs(xd), 0.0))
    yint = _rint(yd) == yd  # inf counts as even integer
    yodd = yint and _rint(yd * 0.5) != yd * 0.5
    r = -r if (yodd and _signbit(x)) else r
    r = _DEFAULT_NAN if (xd < 0.0 and xd > -np.inf and not yint) else r
    r = 1.0 if (xd == 1.0 or yd == 0.0 or (abs(xd) == 1.0 and abs(yd) == np.inf)) else r
    return np.float32(r)


@njit(**_JIT)
def cbrt_f32(x):
    xd = np.float64(x)
    r = _exp64(_log64_core(abs(xd), 0.0) * (1.0 / 3.0))
    return np.float32(_copysign(r, xd))


@njit(**_JIT)
def sqrt_f32(x):
    return _sqrt(x)


@njit(**_JIT)
def rsqrt_f32(x):
    return np.float32(1.0 / _sqrt(np.float64(x)))  # one rounding to float32


# ------------------------------------------------------------- float64 only
# libm fallbacks (scalar calls, not vectorized).
sin_f64 = njit(**_JIT)(lambda x: math.sin(x))
cos_f64 = njit(**_JIT)(lambda x: math.cos(x))
tan_f64 = njit(**_JIT)(lambda x: math.tan(x))
erf_f64 = njit(**_JIT)(lambda x: math.erf(x))
atan_f64 = njit(**_JIT)(lambda x: math.atan(x))
atan2_f64 = njit(**_JIT)(lambda y, x: math.atan2(y, x))
power_f64 = njit(**_JIT)(lambda x, y: np.power(x, y))
cbrt_f64 = njit(**_JIT)(lambda x: x if x != x else np.cbrt(x))  # keeps a NaN's sign
sqrt_f64 = njit(**_JIT)(lambda x: _sqrt(x))
rsqrt_f64 = njit(**_JIT)(lambda x: 1.0 / _sqrt(x))

_NAMES = (
    "exp",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "logistic",
    "sin",
    "cos",
    "tan",
    "erf",
    "power",
    "atan2",
    "cbrt",
    "sqrt",
    "rsqrt",
)
MATH_F32 = {op: globals()[f"{n}_f32"] for op, n in zip(MATH_OPCODES, _NAMES, strict=True)}
MATH_F64 = {op: globals()[f"{n}_f64"] for op, n in zip(MATH_OPCODES, _NAMES, strict=True)}
# Functions evaluated natively (vectorizable); the rest of MATH_F64 calls libm.
VECTORIZED_F64 = frozenset(
    (
        "exponential",
        "exponential-minus-one",
        "log",
        "log-plus-one",
        "tanh",
        "logistic",
        "sqrt",
        "rsqrt",
    )
)
