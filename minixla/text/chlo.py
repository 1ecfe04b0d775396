"""CHLO's math ops as HLO, for StableHLO input: HLO has no lgamma, digamma, erfc, erf_inv, ...

JAX lowers these to `chlo.*` ops and XLA's CHLO legalization expands each into HLO arithmetic
before compiling; minixla.text.stablehlo does the same with the functions below. Each one is
written once against `Emitter`, an elementwise builder whose values take Python's arithmetic
operators, so a formula reads as a formula. The algorithms are XLA's (Lanczos for lgamma and
digamma, Euler-Maclaurin for zeta, bit stepping for next_after, Cephes' rational functions for
erfc, Giles' polynomials for erf_inv); bessel_i1e sums its power series below a threshold and
its asymptotic series above.
f16 and bf16 inputs are computed in f32 and rounded once, as XLA does.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from ..ir.instruction import HloInstruction
from ..ir.shapes import Shape

# emit(opcode, shape, operands, attrs, **fields) adds one instruction and returns it
Emit = Callable[..., HloInstruction]


class Val:
    """One instruction of the emitter's shape; `+ - * /` with Vals or Python numbers."""

    __slots__ = ("m", "instr")

    def __init__(self, m: "Emitter", instr: HloInstruction):
        self.m, self.instr = m, instr

    def _binary(self, opcode: str, other, swap: bool = False) -> "Val":
        other = self.m.lift(other)
        return self.m.op(opcode, *((other, self) if swap else (self, other)))

    def __add__(self, other):
        return self._binary("add", other)

    def __radd__(self, other):
        return self._binary("add", other, swap=True)

    def __sub__(self, other):
        return self._binary("subtract", other)

    def __rsub__(self, other):
        return self._binary("subtract", other, swap=True)

    def __mul__(self, other):
        return self._binary("multiply", other)

    def __rmul__(self, other):
        return self._binary("multiply", other, swap=True)

    def __truediv__(self, other):
        return self._binary("divide", other)

    def __rtruediv__(self, other):
        return self._binary("divide", other, swap=True)

    def __neg__(self):
        return self.m.op("negate", self)


class Emitter:
    """Elementwise HLO over the dims of `shape`, computed in `shape`'s element type; Python
    numbers become splat constants of that type (one instruction per distinct value)."""

    def __init__(self, emit: Emit, shape: Shape):
        self.emit, self.shape = emit, shape
        self._constants: dict[tuple[str, float], Val] = {}

    def lift(self, value) -> Val:
        return value if isinstance(value, Val) else self.const(value)

    def const(self, value: float, dtype: str | None = None) -> Val:
        dtype = dtype or self.shape.dtype
        key = (dtype, value)
        if key not in self._constants:
            scalar = Shape.array(dtype, ())
            literal = np.array(value).astype(scalar.numpy_dtype)
            instr = self.emit("constant", scalar, [], None, literal=literal)
            if self.shape.dims:
                instr = self.emit("broadcast", self.shape.with_dtype(dtype), [instr], {})
            self._constants[key] = Val(self, instr)
        return self._constants[key]

    def op(self, opcode: str, *args, dtype: str | None = None, **attrs) -> Val:
        """`opcode` of `args`; the result has the last operand's type unless `dtype` says."""
        operands = [self.lift(a).instr for a in args]
        shape = self.shape.with_dtype(dtype or operands[-1].shape.dtype)
        return Val(self, self.emit(opcode, shape, operands, attrs))

    def compare(self, direction: str, a, b) -> Val:
        return self.op("compare", a, b, dtype="pred", direction=direction)

    def lt(self, a, b) -> Val:
        return self.compare("LT", a, b)

    def le(self, a, b) -> Val:
        return self.compare("LE", a, b)

    def gt(self, a, b) -> Val:
        return self.compare("GT", a, b)

    def eq(self, a, b) -> Val:
        return self.compare("EQ", a, b)

    def ne(self, a, b) -> Val:
        return self.compare("NE", a, b)

    def select(self, pred: Val, a, b) -> Val:
        return self.op("select", pred, a, b)

    def is_finite(self, x: Val) -> Val:
        return self.op("is-finite", x, dtype="pred")

    def __getattr__(self, opcode: str) -> Callable[..., Val]:
        """`m.exp(x)`, `m.log_plus_one(x)`, `m.and_(p, q)`: the HLO op of that name."""
        if opcode.startswith("_"):
            raise AttributeError(opcode)
        name = {"exp": "exponential", "sin": "sine", "cos": "cosine"}.get(opcode, opcode)
        return lambda *args: self.op(name.rstrip("_").replace("_", "-"), *args)


# -- the decompositions --------------------------------------------------------------------
LANCZOS_G = 7.0
LANCZOS_BASE = 0.99999999999980993227684700473478
LANCZOS = (
    676.520368121885098567009190444019,
    -1259.13921672240287047156078755283,
    771.3234287776530788486528258894,
    -176.61502916214059906584551354,
    12.507343278686904814458936853,
    -0.13857109526572011689554707,
    9.984369578019570859563e-6,
    1.50563273514931155834e-7,
)


def _lanczos_t(m: Emitter, z: Val) -> tuple[Val, Val]:
    """t = g + 1/2 + z and log(t), the latter as log(g + 1/2) + log1p(z / (g + 1/2))."""
    half_g = LANCZOS_G + 0.5
    return half_g + z, math.log(half_g) + m.log_plus_one(z / half_g)


def lgamma(m: Emitter, x: Val) -> Val:
    """log|Γ(x)|: Lanczos for x >= 1/2, Euler's reflection below (with |frac(x)| folded into
    [0, 1/2] so that sin(πx) keeps its precision near integers); +inf at ±inf."""
    reflect = m.lt(x, 0.5)
    z = m.select(reflect, -x, x - 1.0)
    series = m.lift(LANCZOS_BASE)
    for i, coefficient in enumerate(LANCZOS):
        series = series + coefficient / (z + float(i + 1))
    t, log_t = _lanczos_t(m, z)
    log_y = 0.5 * math.log(2 * math.pi) + (z + 0.5 - t / log_t) * log_t + m.log(series)
    abs_x = m.abs(x)
    frac = abs_x - m.floor(abs_x)
    frac = m.select(m.gt(frac, 0.5), 1.0 - frac, frac)
    log_sin = m.log(m.sin(math.pi * frac))
    reflection = m.select(m.is_finite(log_sin), math.log(math.pi) - log_sin - log_y, -log_sin)
    result = m.select(reflect, reflection, log_y)
    return m.select(m.eq(abs_x, math.inf), math.inf, result)


def digamma(m: Emitter, x: Val) -> Val:
    """ψ(x): the derivative of the Lanczos lgamma, reflection ψ(1-x) - π cot(πx) below 1/2,
    NaN at the poles (zero and negative integers)."""
    reflect = m.lt(x, 0.5)
    z = m.select(reflect, -x, x - 1.0)
    num, denom = m.lift(0.0), m.lift(LANCZOS_BASE)
    for i, coefficient in enumerate(LANCZOS):
        shifted = z + float(i + 1)
        num = num - coefficient / (shifted * shifted)
        denom = denom + coefficient / shifted
    t, log_t = _lanczos_t(m, z)
    y = log_t + num / denom - LANCZOS_G / t
    reduced = x + m.abs(m.floor(x + 0.5))  # into [-1/2, 1/2], where πx keeps its precision
    reflection = y - math.pi * m.cos(math.pi * reduced) / m.sin(math.pi * reduced)
    result = m.select(reflect, reflection, y)
    pole = m.and_(m.le(x, 0.0), m.eq(x, m.floor(x)))
    return m.select(pole, math.nan, result)


def _polynomial(x: Val, coefficients) -> Val:
    """c0 x^n + c1 x^(n-1) + ... + cn (Horner)."""
    result = x.m.lift(coefficients[0])
    for c in coefficients[1:]:
        result = result * x + c
    return result


# Cephes' erfc: exp(-x^2)/x P(1/x^2) for 1 < x < 2, exp(-x^2)/x R(1/x^2) above (single precision);
# exp(-x^2) P(x)/Q(x) below 8 and exp(-x^2) R(x)/S(x) above (double precision).
ERFC_F32_P = (
    2.326819970068386e-2,
    -1.387039388740657e-1,
    3.687424674597105e-1,
    -5.824733027278666e-1,
    6.210004621745983e-1,
    -4.944515323274145e-1,
    3.404879937665872e-1,
    -2.741127028184656e-1,
    5.638259427386472e-1,
)
ERFC_F32_R = (
    -1.047766399936249e1,
    1.297719955372516e1,
    -7.495518717768503e0,
    2.921019019210786e0,
    -1.015265279202700e0,
    4.218463358204948e-1,
    -2.820767439740514e-1,
    5.641895067754075e-1,
)
ERFC_F64_P = (
    2.46196981473530512524e-10,
    5.64189564831068821977e-1,
    7.46321056442269912687e0,
    4.86371970985681366614e1,
    1.96520832956077098242e2,
    5.26445194995477358631e2,
    9.34528527171957607540e2,
    1.02755188689515710272e3,
    5.57535335369399327526e2,
)
ERFC_F64_Q = (
    1.0,
    1.32281951154744992508e1,
    8.67072140885989742329e1,
    3.54937778887819891062e2,
    9.75708501743205489753e2,
    1.82390916687909736289e3,
    2.24633760818710981792e3,
    1.65666309194161350182e3,
    5.57535340817727675546e2,
)
ERFC_F64_R = (
    5.64189583547755073984e-1,
    1.27536670759978104416e0,
    5.01905042251180477414e0,
    6.16021097993053585195e0,
    7.40974269950448939160e0,
    2.97886665372100240670e0,
)
ERFC_F64_S = (
    1.0,
    2.26052863220117276590e0,
    9.39603524938001434673e0,
    1.20489539808096656605e1,
    1.70814450747565897222e1,
    9.60896809063285878198e0,
    3.36907645100081516050e0,
)


def erfc(m: Emitter, x: Val) -> Val:
    """1 - erf(x), without the cancellation: 1 - erf(x) for |x| <= 1, Cephes' rational
    functions of |x| times exp(-x^2) beyond (2 - that for negative x)."""
    abs_x = m.abs(x)
    gaussian = m.exp(-(x * x))
    if m.shape.dtype == "f64":
        bounded = m.minimum(abs_x, 30.0)  # exp(-x^2) is 0 beyond; keeps inf/inf out
        near = _polynomial(bounded, ERFC_F64_P) / _polynomial(bounded, ERFC_F64_Q)
        far = _polynomial(bounded, ERFC_F64_R) / _polynomial(bounded, ERFC_F64_S)
        tail = gaussian * m.select(m.lt(abs_x, 8.0), near, far)
    else:
        inverse = 1.0 / abs_x
        square = inverse * inverse
        near = _polynomial(square, ERFC_F32_P)
        far = _polynomial(square, ERFC_F32_R)
        tail = gaussian * inverse * m.select(m.lt(abs_x, 2.0), near, far)
    tail = m.select(m.lt(x, 0.0), 2.0 - tail, tail)
    return m.select(m.gt(abs_x, 1.0), tail, 1.0 - m.erf(x))


def next_after(m: Emitter, x: Val, toward: Val) -> Val:
    """The float next to `x` in the direction of `toward`, stepping the bit pattern: towards
    zero when the magnitude must shrink, the smallest subnormal of `toward`'s sign from ±0,
    `toward` itself when equal, NaN if either is NaN."""
    bits = {"f64": "u64", "f32": "u32", "f16": "u16", "bf16": "u16"}[m.shape.dtype]
    sign_bit = 1 << (int(bits[1:]) - 1)

    def as_int(value: Val) -> Val:
        return m.op("bitcast-convert", value, dtype=bits)

    def int_const(value: int) -> Val:
        return m.const(value, bits)

    x_bits, to_bits = as_int(x), as_int(toward)
    magnitude = int_const(sign_bit - 1)
    x_abs, to_abs = m.op("and", x_bits, magnitude), m.op("and", to_bits, magnitude)
    x_sign = m.op("and", x_bits, int_const(sign_bit))
    to_sign = m.op("and", to_bits, int_const(sign_bit))
    shrink = m.or_(m.gt(x_abs, to_abs), m.ne(x_sign, to_sign))
    stepped = m.select(
        shrink, m.op("subtract", x_bits, int_const(1)), m.op("add", x_bits, int_const(1))
    )
    from_zero = m.select(m.eq(to_abs, int_const(0)), to_bits, m.op("or", to_sign, int_const(1)))
    result = m.select(m.eq(x_abs, int_const(0)), from_zero, stepped)
    result = m.select(m.eq(x_bits, to_bits), to_bits, result)
    result = m.op("bitcast-convert", result, dtype=m.shape.dtype)
    return m.select(m.or_(m.ne(x, x), m.ne(toward, toward)), math.nan, result)


def bessel_i1e(m: Emitter, x: Val) -> Val:
    """exp(-|x|) I1(x): the power series sum (x/2)^(2k+1) / (k! (k+1)!) up to a threshold,
    where its terms fall below the type's precision, and the asymptotic series
    exp(|x|)/sqrt(2π|x|) (1 - 3/(8|x|) - 15/(2! (8|x|)^2) - ...) above it (odd in x)."""
    threshold, series_terms, asymptotic_terms = (
        (20.0, 48, 24) if m.shape.dtype == "f64" else (9.0, 24, 12)
    )
    abs_x = m.abs(x)
    small = m.select(m.gt(abs_x, threshold), threshold, abs_x)  # keeps both branches finite
    quarter_square = 0.25 * small * small
    term = 0.5 * small
    total = term
    for k in range(1, series_terms):
        term = term * quarter_square / float(k * (k + 1))
        total = total + term
    near = total * m.exp(-small)
    large = m.select(m.gt(abs_x, threshold), abs_x, threshold)
    inverse = 1.0 / (8.0 * large)
    coefficient, factor = 1.0, m.lift(1.0)
    correction = m.lift(1.0)
    for k in range(1, asymptotic_terms):
        coefficient *= -(4.0 - (2 * k - 1) ** 2) / k
        factor = factor * inverse
        correction = correction + coefficient * factor
    far = correction / m.sqrt(2.0 * math.pi * large)
    result = m.select(m.gt(abs_x, threshold), far, near)
    return m.select(m.lt(x, 0.0), -result, result)


def _zeta_coefficients() -> list[float]:
    """(2k)! / B_2k for k = 12 .. 1 (B: the Bernoulli numbers), for Euler-Maclaurin."""
    bernoulli = [Fraction(1)]
    for n in range(1, 25):
        total = sum((math.comb(n + 1, k) * bernoulli[k] for k in range(n)), Fraction(0))
        bernoulli.append(-total / (n + 1))
    return [float(math.factorial(2 * k) / bernoulli[2 * k]) for k in range(12, 0, -1)]


ZETA_COEFFICIENTS = _zeta_coefficients()


def zeta(m: Emitter, s: Val, q: Val) -> Val:
    """Hurwitz ζ(s, q) = Σ (q + k)^-s: ten terms summed, the rest by Euler-Maclaurin with twelve
    Bernoulli terms; NaN for s < 1 or a non-integer s at q <= 0, and at the poles (integer
    q <= 0) +inf for even integer s, NaN otherwise."""
    eps = float(np.finfo(m.shape.numpy_dtype).eps)
    a = q
    total = m.power(q, -s)
    for _ in range(9):
        a = a + 1.0
        total = total + m.power(a, -s)
    a = a + 1.0
    power = m.power(a, -s)
    estimate = total + power * a / (s - 1.0)
    inverse_square = 1.0 / (a * a)
    horner = m.lift(0.0)
    for i, coefficient in enumerate(ZETA_COEFFICIENTS[:-1]):
        factor = (s + (22.0 - 2.0 * i)) * (s + (21.0 - 2.0 * i))
        horner = factor * inverse_square * (horner + 1.0 / coefficient)
    estimate = estimate + power * (0.5 + s / a * (1.0 / ZETA_COEFFICIENTS[-1] + horner))
    result = m.select(m.lt(m.abs(power), m.abs(total) * eps), total, estimate)
    result = m.select(m.lt(s, 1.0), math.nan, result)
    result = m.select(m.and_(m.le(q, 0.0), m.ne(s, m.floor(s))), math.nan, result)
    even = m.and_(m.eq(m.remainder(s, 2.0), 0.0), m.eq(s, m.floor(s)))
    pole = m.and_(m.le(q, 0.0), m.eq(q, m.floor(q)))
    return m.select(pole, m.select(even, math.inf, math.nan), result)


def polygamma(m: Emitter, n: Val, x: Val) -> Val:
    """ψ^(n)(x) = (-1)^(n+1) n! ζ(n+1, x), digamma at n = 0; NaN unless n is a natural number."""
    sign = 2.0 * m.remainder(n, 2.0) - 1.0
    higher = sign * m.exp(lgamma(m, n + 1.0)) * zeta(m, n + 1.0, x)
    result = m.select(m.eq(n, 0.0), digamma(m, x), higher)
    natural = m.and_(m.eq(n, m.floor(n)), m.le(0.0, n))
    return m.select(natural, result, math.nan)


# Giles' single-precision erfinv: polynomials in w - 2.5 (w < 5) and sqrt(w) - 3 (w >= 5),
# w = -log(1 - x^2).
ERF_INV_SMALL_W = (
    2.81022636e-08,
    3.43273939e-07,
    -3.5233877e-06,
    -4.39150654e-06,
    0.00021858087,
    -0.00125372503,
    -0.00417768164,
    0.246640727,
    1.50140941,
)
ERF_INV_LARGE_W = (
    -0.000200214257,
    0.000100950558,
    0.00134934322,
    -0.00367342844,
    0.00573950773,
    -0.0076224613,
    0.00943887047,
    1.00167406,
    2.83297682,
)


def erf_inv(m: Emitter, x: Val) -> Val:
    """erf^-1(x): Giles' approximation, as XLA expands it for f32; f64 adds two Newton steps
    on erf(y) = x, each of which squares the approximation's 1e-7 relative error. ±inf at ±1."""
    w = -m.log_plus_one(-(x * x))
    small = m.lt(w, 5.0)
    t = m.select(small, w - 2.5, m.sqrt(w) - 3.0)
    p = m.select(small, ERF_INV_SMALL_W[0], ERF_INV_LARGE_W[0])
    for a, b in zip(ERF_INV_SMALL_W[1:], ERF_INV_LARGE_W[1:]):
        p = m.select(small, a, b) + p * t
    y = p * x
    if m.shape.dtype == "f64":
        for _ in range(2):  # erf'(y) = 2/sqrt(pi) exp(-y^2)
            y = y - (m.erf(y) - x) / (2.0 / math.sqrt(math.pi) * m.exp(-(y * y)))
    return m.select(m.eq(m.abs(x), 1.0), x * math.inf, y)


DECOMPOSITIONS: dict[str, Callable[..., Val]] = {
    "chlo.erf_inv": erf_inv,
    "chlo.lgamma": lgamma,
    "chlo.digamma": digamma,
    "chlo.erfc": erfc,
    "chlo.next_after": next_after,
    "chlo.bessel_i1e": bessel_i1e,
    "chlo.zeta": zeta,
    "chlo.polygamma": polygamma,
}
# next_after steps bits of the type itself; the others compute f16/bf16 in f32.
IN_OWN_TYPE = ("chlo.next_after",)


def decompose(name: str, emit: Emit, operands: list[HloInstruction]) -> HloInstruction:
    """The HLO instructions for CHLO op `name` on `operands` (of one float shape), via `emit`."""
    shape = operands[0].shape.with_default_layout()
    if shape.dtype not in ("f16", "bf16", "f32", "f64"):
        raise ValueError(f"{name} of {shape.dtype}: a float type is needed")
    wide = (
        shape if shape.dtype in ("f32", "f64") or name in IN_OWN_TYPE else shape.with_dtype("f32")
    )
    m = Emitter(emit, wide)
    args = [
        Val(m, o if wide.dtype == shape.dtype else emit("convert", wide, [o], None))
        for o in operands
    ]
    result = DECOMPOSITIONS[name](m, *args).instr
    return result if wide.dtype == shape.dtype else emit("convert", shape, [result], None)


__all__ = ["DECOMPOSITIONS", "Emitter", "Val", "decompose"]
