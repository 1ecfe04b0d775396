"""What generated CUDA kernels call: `h.<helper>`, the math tables, and their `np`/`math`.

The per-element source comes from the shared scalar rules (codegen/scalar.py), which call
helpers as `h.sdiv(...)`, `h.fmax(...)`, `h.bitcast(x, np.int32)`, ... This module is that `h`
for CUDA kernels:

* the shared scalar helpers (codegen/helpers.py: integer division, NaN-propagating max,
  saturating converts, bf16 rounding) are built over this module's primitives and, on a GPU,
  registered as device functions (`register_jitable`);
* the primitives the CPU builds from LLVM intrinsics (bitcast, signbit, copysign, rounding,
  popcount, count-leading-zeros) are libdevice calls on a GPU and NumPy in the simulator;
* MATH_F32 / MATH_F64 map transcendental opcodes to CUDA's math library (libdevice) on a GPU
  and to NumPy ufuncs in the simulator.

The simulator runs kernels as Python, where `math.log(0)` raises and `np.fmod` exists; on a GPU
it is the other way round. So kernels do not import `np` and `math` themselves but take them
from here (`np = h.np`, `math = h.math`): NumPy and C semantics in the simulator, NumPy plus
device `fmod` and the real `math` module on a GPU.
"""

from __future__ import annotations

import math as _math
import types as pytypes

import numpy as _np
from numba import cuda

from ..codegen.helpers import scalar_helpers
from .target import simulating

SIMULATOR = simulating()
_DTYPES = (
    "bool_",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "float16",
    "float32",
    "float64",
)
_UNSIGNED = {8: _np.uint8, 16: _np.uint16, 32: _np.uint32, 64: _np.uint64}


def _module(name: str, **attrs) -> pytypes.ModuleType:
    module = pytypes.ModuleType(name)
    module.__dict__.update(attrs)
    return module


# ---- primitives: NumPy in the simulator ---------------------------------------------------------


def _sim_primitives() -> dict:
    def bitcast(x, ty):
        return _np.asarray(x).view(ty)[()]

    def round_afz(x):
        whole = _np.trunc(x)
        return whole + _np.copysign(x.dtype.type(1), x) if abs(x - whole) >= 0.5 else whole

    def count_leading_zeros(x):
        return _np.asarray(x).dtype.itemsize * 8 - int(x).bit_length()

    return dict(
        bitcast=bitcast,
        signbit=_np.signbit,
        copysign=_np.copysign,
        floor=_np.floor,
        ceil=_np.ceil,
        rint=_np.rint,
        trunc=_np.trunc,
        round_afz=round_afz,
        popcount=lambda x: bin(int(x)).count("1"),
        count_leading_zeros=count_leading_zeros,
    )


# ---- primitives: libdevice on a GPU (chosen per argument type while Numba types the kernel) -----


def _device_primitives() -> dict:
    from numba.cuda import libdevice as ld
    from numba.cuda import types
    from numba.cuda.extending import overload

    def stub(name):
        def fn(*args):
            raise NotImplementedError(f"{name} is only callable inside a CUDA kernel")

        fn.__name__ = name
        return fn

    prims = {
        name: stub(name)
        for name in (
            "bitcast",
            "signbit",
            "copysign",
            "floor",
            "ceil",
            "rint",
            "trunc",
            "round_afz",
            "popcount",
            "count_leading_zeros",
        )
    }

    def choose(x, f32, f64):
        return f32 if x == types.float32 else f64 if x == types.float64 else None

    def per_float(name, f32, f64):
        # Numba matches the typing function's parameters with the implementation's.
        if name == "copysign":
            overload(prims[name], target="cuda")(lambda m, s: choose(m, f32, f64))
        else:
            overload(prims[name], target="cuda")(lambda x: choose(x, f32, f64))

    per_float("signbit", lambda x: ld.signbitf(x) != 0, lambda x: ld.signbitd(x) != 0)
    per_float("copysign", lambda m, s: ld.copysignf(m, s), lambda m, s: ld.copysign(m, s))
    per_float("floor", lambda x: ld.floorf(x), lambda x: ld.floor(x))
    per_float("ceil", lambda x: ld.ceilf(x), lambda x: ld.ceil(x))
    per_float("rint", lambda x: ld.rintf(x), lambda x: ld.rint(x))
    per_float("trunc", lambda x: ld.truncf(x), lambda x: ld.trunc(x))
    per_float("round_afz", lambda x: ld.roundf(x), lambda x: ld.round(x))

    @overload(prims["popcount"], target="cuda")
    def _popcount(x):
        if x.bitwidth == 64:
            return lambda x: ld.popcll(_np.int64(x))
        return lambda x: ld.popc(_np.int32(x))

    @overload(prims["count_leading_zeros"], target="cuda")
    def _clz(x):
        if x.bitwidth == 64:
            return lambda x: ld.clzll(_np.int64(x))
        pad = 32 - x.bitwidth
        return lambda x: ld.clz(_np.int32(x)) - pad

    @overload(prims["bitcast"], target="cuda")
    def _bitcast(x, ty):
        target = getattr(ty, "instance_type", None)
        if target is None or target.bitwidth != x.bitwidth:
            return None
        if isinstance(x, types.Integer) and isinstance(target, types.Integer):
            return lambda x, ty: ty(x)  # same width: a wrapping cast keeps the bits
        if x == types.float32:
            return lambda x, ty: ty(ld.float_as_int(x))
        if x == types.float64:
            return lambda x, ty: ty(ld.double_as_longlong(x))
        if target == types.float32:
            return lambda x, ty: ld.int_as_float(_np.int32(x))
        if target == types.float64:
            return lambda x, ty: ld.longlong_as_double(_np.int64(x))
        return None

    return prims


def _device(fn):
    """A plain-Python helper: as it is in the simulator, a device function on a GPU."""
    if not SIMULATOR:
        from numba.cuda.extending import register_jitable

        register_jitable(fn)
    return fn


_prims = _sim_primitives() if SIMULATOR else _device_primitives()
bitcast = _prims["bitcast"]
signbit = _prims["signbit"]
copysign = _prims["copysign"]
floor = _prims["floor"]
ceil = _prims["ceil"]
rint = _prims["rint"]
trunc = _prims["trunc"]
round_afz = _prims["round_afz"]
popcount = _prims["popcount"]
count_leading_zeros = _prims["count_leading_zeros"]

# ---- the shared helpers (codegen/helpers.py), over the primitives above ---------------------

_shared = scalar_helpers(_device, bitcast=bitcast, copysign=copysign, signbit=signbit)
fmax = _shared.fmax  # written out with selects: CUDA has no NaN-propagating max for both types
fmin = _shared.fmin
ftz = _shared.ftz
complex_divide = _shared.complex_divide
fsign = _shared.fsign
total_order_key = _shared.total_order_key
float_to_int = _shared.float_to_int
sdiv = _shared.sdiv
srem = _shared.srem
udiv = _shared.udiv
urem = _shared.urem
ipow = _shared.ipow
mulhi64 = _shared.mulhi64
bf16_load = _shared.bf16_load
bf16_store = _shared.bf16_store
round_bf16 = _shared.round_bf16
reduce_precision_bits = _shared.reduce_precision_bits
philox4x32 = _shared.philox4x32
threefry2x32 = _shared.threefry2x32


# ---- math tables --------------------------------------------------------------------------------


def _keeps_nan(fn):
    """`fn` whose NaN operand comes back as it is and whose NaN made from a number is -NaN,
    x86's default NaN, as on the interpreter: NumPy's loops drop the sign of a NaN operand
    in some functions (f32 exp, log, tanh, sin, cos; f64 tanh, arccos) and give log(-1.5)
    either sign by SIMD path, which a TOTALORDER compare sees."""

    def apply(x):
        if x != x:
            return x
        result = fn(x)
        return result if result == result else type(result)(-_np.nan)

    return apply


def _sim_power(x, y):
    """C's pow, as the interpreter computes it: NumPy's scalar path takes x^0.5 for sqrt(x),
    NaN for -inf and -0 for -0 where pow gives inf and +0; its array loop does not."""
    return _np.power(_np.reshape(x, 1), _np.reshape(y, 1))[0]


def _math_table(T, sim: bool) -> dict:
    one = T(1)
    if sim:
        unary = {
            "exponential": _np.exp,
            "exponential-minus-one": _np.expm1,
            "log": _np.log,
            "log-plus-one": _np.log1p,
            "tanh": _np.tanh,
            "sine": _np.sin,
            "cosine": _np.cos,
            "tan": _np.tan,
            "cbrt": _np.cbrt,
            "sqrt": _np.sqrt,
            "erf": lambda x: T(_math.erf(float(x))),
            "logistic": lambda x: one / (one + _np.exp(-x)),
            "rsqrt": lambda x: one / _np.sqrt(x),
        }
        return {name: _keeps_nan(fn) for name, fn in unary.items()} | {
            "power": _sim_power,
            "atan2": _np.arctan2,
        }
    from numba.cuda import libdevice as ld

    rsqrt = ld.rsqrtf if T is _np.float32 else ld.rsqrt
    table = {
        "exponential": lambda x: _math.exp(x),
        "exponential-minus-one": lambda x: _math.expm1(x),
        "log": lambda x: _math.log(x),
        "log-plus-one": lambda x: _math.log1p(x),
        "tanh": lambda x: _math.tanh(x),
        "sine": lambda x: _math.sin(x),
        "cosine": lambda x: _math.cos(x),
        "tan": lambda x: _math.tan(x),
        "cbrt": lambda x: cuda.cbrt(x),
        "sqrt": lambda x: _math.sqrt(x),
        "power": lambda x, y: _math.pow(x, y),
        "atan2": lambda x, y: _math.atan2(x, y),
        "erf": lambda x: _math.erf(x),
        "logistic": lambda x: one / (one + _math.exp(-x)),
        "rsqrt": lambda x: rsqrt(x),
    }
    return {name: _device(fn) for name, fn in table.items()}


MATH_F32 = _math_table(_np.float32, SIMULATOR)
MATH_F64 = _math_table(_np.float64, SIMULATOR)
MATH_OPCODES = frozenset(MATH_F32)


# ---- the `np` and `math` kernels see ------------------------------------------------------------


def _sim_lgamma(x):
    if x <= 0 and x == _np.floor(x):
        return _math.inf  # a pole: C's lgamma, where Python's raises
    return _math.lgamma(x) if _math.isfinite(x) else abs(float(x))


if SIMULATOR:
    np = _np
    math = _module(
        "minixla_cuda_math",
        isfinite=_np.isfinite,
        asin=_keeps_nan(_np.arcsin),
        acos=_keeps_nan(_np.arccos),
        atan=_keeps_nan(_np.arctan),
        sinh=_keeps_nan(_np.sinh),
        cosh=_keeps_nan(_np.cosh),
        asinh=_keeps_nan(_np.arcsinh),
        acosh=_keeps_nan(_np.arccosh),
        atanh=_keeps_nan(_np.arctanh),
        lgamma=_keeps_nan(_sim_lgamma),
    )
else:
    np = _module(
        "minixla_cuda_np",
        fmod=_device(lambda a, b: _math.fmod(a, b)),
        **{name: getattr(_np, name) for name in _DTYPES},
    )
    math = _math
