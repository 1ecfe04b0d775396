"""`minixla.random`: counter-based random numbers with JAX's threefry2x32 keys.

A key is a uint32[2] array (JAX's raw `PRNGKey`), so it passes through `jit`, `vmap` and loop
carries like any array. Every sampler is the algorithm of jax.random with
`jax_threefry_partitionable=True` (JAX's default): threefry2x32 hashes a 64-bit counter per
output element, split and fold_in derive new keys, uniform puts random bits into a float's
mantissa, normal applies erf_inv. `bits`, `randint`, `bernoulli` and `permutation` therefore
match jax.random bit for bit; float samplers match to rounding (erf_inv is XLA's polynomial).
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import (
    add,
    asarray,
    astype,
    bitwise_or,
    bitwise_xor,
    broadcast_to,
    cast,
    constant,
    equal,
    erf,
    exp,
    left_shift,
    less,
    less_equal,
    log,
    log1p,
    maximum,
    multiply,
    remainder,
    right_shift,
    sqrt,
    subtract,
    where,
)
from .numpy_creation import arange, iota, zeros
from .numpy_reduce import argmax
from .numpy_shape import concatenate, expand_dims, reshape, stack
from .indexing import take
from .tracer import Tracer
from ..ir.dtypes import finfo

_U32 = np.dtype(np.uint32)
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PARITY = 0x1BD11BDA  # threefry's key-schedule constant


# -- keys -------------------------------------------------------------------------------------
def PRNGKey(seed) -> np.ndarray | Tracer:
    """The key for an integer seed: (high 32 bits, low 32 bits) of the seed, as JAX does."""
    if isinstance(seed, Tracer):
        return _traced_seed(seed)
    if np.ndim(seed):
        raise FrontendTypeError(
            f"PRNGKey takes a scalar seed, got shape {np.shape(seed)}; use vmap to make many keys"
        )
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise FrontendTypeError(f"PRNGKey takes an integer seed, got {type(seed).__name__}")
    seed = int(seed)
    if not dt.config.enable_x64 and not -(2**31) <= seed < 2**32:
        raise FrontendTypeError(
            f"seed {seed} does not fit in 32 bits (set "
            f"minixla.config.enable_x64 = True for 64-bit seeds)"
        )
    high = (seed >> 32) & 0xFFFFFFFF if dt.config.enable_x64 else 0
    return np.array([high, seed & 0xFFFFFFFF], _U32)


key = PRNGKey


@api
def _traced_seed(seed: Tracer) -> Tracer:
    if seed.ndim or seed.dtype.kind not in "iu":
        raise FrontendTypeError(
            f"PRNGKey takes an integer scalar seed, got {seed.dtype}{list(seed.shape)}"
        )
    low = astype(seed, _U32)
    if seed.dtype.itemsize == 8:
        high = astype(right_shift(astype(seed, np.uint64), 32), _U32)
    else:
        high = zeros((), _U32)
    return stack([high, low])


def _check_key(what: str, key) -> Tracer:
    key = asarray(key)
    if key.shape != (2,) or key.dtype != _U32:
        raise FrontendTypeError(
            f"{what} expects a key (uint32[2], from PRNGKey or split), got "
            f"{key.dtype}{list(key.shape)}"
        )
    return key


def _shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    return tuple(int(d) for d in shape)


# -- the hash ---------------------------------------------------------------------------------
def _rotate_left(x: Tracer, amount: int) -> Tracer:
    return bitwise_or(left_shift(x, cast(amount, _U32)), right_shift(x, cast(32 - amount, _U32)))


def threefry_2x32(key1, key2, x1, x2) -> tuple[Tracer, Tracer]:
    """Threefry-2x32 with 20 rounds on uint32 arrays: the hash of counters (x1, x2)."""
    x1, x2 = broadcast_both(x1, x2)
    ks = [key1, key2, bitwise_xor(bitwise_xor(key1, key2), cast(_PARITY, _U32))]
    x = [add(x1, ks[0]), add(x2, ks[1])]
    for step in range(5):
        for rotation in _ROTATIONS[step % 2]:
            x[0] = add(x[0], x[1])
            x[1] = bitwise_xor(x[0], _rotate_left(x[1], rotation))
        x[0] = add(x[0], ks[(step + 1) % 3])
        x[1] = add(add(x[1], ks[(step + 2) % 3]), cast(step + 1, _U32))
    return x[0], x[1]


def broadcast_both(a, b):
    a, b = asarray(a), asarray(b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    return broadcast_to(a, shape), broadcast_to(b, shape)


def _counters(shape: tuple[int, ...]) -> tuple[Tracer, Tracer]:
    """(high, low) words of a 64-bit iota of `shape`."""
    size = math.prod(shape)
    if size >= 2**32:
        raise FrontendShapeError(f"random arrays of {size} elements are not supported")
    low = reshape(iota(_U32, (size,)), shape) if shape else zeros((), _U32)
    return zeros(shape, _U32), low


def _hash_iota(key: Tracer, shape: tuple[int, ...]) -> tuple[Tracer, Tracer]:
    high, low = _counters(shape)
    return threefry_2x32(key[0], key[1], high, low)


@api
def split(key, num=2) -> Tracer:
    """`num` (an int or a shape) new keys: shape (*num, 2)."""
    key = _check_key("split", key)
    bits1, bits2 = _hash_iota(key, _shape(num))
    return stack([bits1, bits2], axis=bits1.ndim)


@api
def fold_in(key, data) -> Tracer:
    """A new key from `key` and a 32-bit integer."""
    key = _check_key("fold_in", key)
    data = asarray(data)
    if data.ndim:
        raise FrontendTypeError(f"fold_in takes a scalar, got shape {data.shape}; use vmap")
    out1, out2 = threefry_2x32(key[0], key[1], zeros((1,), _U32), reshape(astype(data, _U32), (1,)))
    return concatenate([out1, out2])


def _random_bits(key: Tracer, width: int, shape: tuple[int, ...]) -> Tracer:
    bits1, bits2 = _hash_iota(key, shape)
    if width == 64:
        high, low = astype(bits1, np.uint64), astype(bits2, np.uint64)
        return bitwise_or(left_shift(high, cast(32, np.uint64)), low)
    mixed = bitwise_xor(bits1, bits2)
    return mixed if width == 32 else astype(mixed, np.dtype(f"uint{width}"))


@api
def bits(key, shape=(), dtype=None) -> Tracer:
    """Uniform random bits of an unsigned dtype (uint32 by default)."""
    key = _check_key("bits", key)
    dtype = np.dtype(dtype or ("uint64" if dt.config.enable_x64 else "uint32"))
    if dtype.kind != "u":
        raise FrontendTypeError(f"bits needs an unsigned dtype, got {dtype}")
    dtype = dt.canonicalize(dtype)
    return _random_bits(key, dtype.itemsize * 8, _shape(shape))


# -- floats -----------------------------------------------------------------------------------
def _float_dtype(dtype) -> np.dtype:
    dtype = dt.canonicalize(np.dtype(dtype) if dtype is not None else dt.default_dtype(dt.FLOAT))
    if dt.kind(dtype) != dt.FLOAT:
        raise FrontendTypeError(f"expected a floating dtype, got {dtype}")
    return dtype


def _uniform(key: Tracer, shape, dtype: np.dtype, minval, maxval) -> Tracer:
    info = finfo(dtype)
    nbits, nmant = info.bits, info.nmant
    rng_bits = max(nbits, 8) if nmant >= 8 else 8
    uint = np.dtype(f"uint{nbits}")
    raw = _random_bits(key, rng_bits, shape)
    raw = astype(raw, uint) if rng_bits != nbits else raw
    one = np.array(1.0, dtype).view(uint)
    mantissa = bitwise_or(right_shift(raw, cast(rng_bits - nmant, uint)), cast(one, uint))
    floats = subtract(Tracer(_bitcast(mantissa, dtype)), cast(1.0, dtype))
    low, high = cast(minval, dtype), cast(maxval, dtype)
    return maximum(low, add(multiply(floats, subtract(high, low)), low))


def _bitcast(tracer: Tracer, dtype: np.dtype):
    from .ops_core import BitcastConvert

    return BitcastConvert(tracer.op, dt.hlo_name(dtype))


@api
def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Tracer:
    """Uniform floats in [minval, maxval)."""
    key = _check_key("uniform", key)
    return _uniform(key, _shape(shape), _float_dtype(dtype), minval, maxval)


# XLA's single-precision erf_inv (Giles' approximation), in two ranges of w = -log(1 - x^2)
_ERF_INV_SMALL = (
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
_ERF_INV_LARGE = (
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


@api
def erf_inv(x) -> Tracer:
    """The inverse error function; float32 uses XLA's polynomial, float64 refines it with two
    Newton steps, narrower floats compute in float32."""
    x = asarray(x)
    dtype = _float_dtype(x.dtype)
    work = astype(x, np.float32)
    w = -log1p(-multiply(work, work))
    small = less(w, 5.0)
    w = where(small, subtract(w, 2.5), subtract(sqrt(w), 3.0))
    poly_small, poly_large = (
        cast(_ERF_INV_SMALL[0], np.float32),
        cast(_ERF_INV_LARGE[0], np.float32),
    )
    for a, b in zip(_ERF_INV_SMALL[1:], _ERF_INV_LARGE[1:]):
        poly_small = add(multiply(poly_small, w), a)
        poly_large = add(multiply(poly_large, w), b)
    result = multiply(where(small, poly_small, poly_large), work)
    edge = multiply(cast(np.inf, np.float32), work)  # erf_inv(+-1) = +-inf
    result = where(equal(abs_(work), 1.0), edge, result)
    if dtype == np.float64:
        result = astype(result, np.float64)
        for _ in range(2):
            error = subtract(erf(result), x)
            step = multiply(error, multiply(math.sqrt(math.pi) / 2, exp(multiply(result, result))))
            result = where(less(abs_(x), 1.0), subtract(result, step), result)
        return result
    return astype(result, dtype)


def abs_(x):
    from .numpy_api import abs as abs_value

    return abs_value(x)


@api
def normal(key, shape=(), dtype=None) -> Tracer:
    """Standard normal floats: sqrt(2) * erf_inv(uniform(-1, 1))."""
    key = _check_key("normal", key)
    dtype = _float_dtype(dtype)
    low = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(key, _shape(shape), dtype, low, 1.0)
    return multiply(cast(np.sqrt(2), dtype), erf_inv(u))


@api
def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Tracer:
    """Normal floats conditioned on lower < x < upper (static bounds)."""
    key = _check_key("truncated_normal", key)
    dtype = _float_dtype(dtype)
    for bound in (lower, upper):
        if isinstance(bound, Tracer):
            raise FrontendTypeError("truncated_normal needs static bounds")
    lower, upper = np.asarray(lower, dtype), np.asarray(upper, dtype)
    shape = np.broadcast_shapes(lower.shape, upper.shape) if shape is None else _shape(shape)
    sqrt2 = np.array(np.sqrt(2), dtype)
    a, b = erf(constant(lower / sqrt2, dtype)), erf(constant(upper / sqrt2, dtype))
    u = _uniform(key, shape, dtype, a, b)
    out = multiply(cast(sqrt2, dtype), erf_inv(u))
    low = np.nextafter(lower, np.array(np.inf, dtype))
    high = np.nextafter(upper, np.array(-np.inf, dtype))
    return maximum(constant(low, dtype), minimum_(out, constant(high, dtype)))


def minimum_(a, b):
    from .numpy_api import minimum

    return minimum(a, b)


@api
def gumbel(key, shape=(), dtype=None) -> Tracer:
    """Standard Gumbel floats: -log(-log(u)) for u uniform in [tiny, 1)."""
    key = _check_key("gumbel", key)
    dtype = _float_dtype(dtype)
    u = _uniform(key, _shape(shape), dtype, finfo(dtype).tiny, 1.0)
    return -log(-log(u))


@api
def bernoulli(key, p=0.5, shape=None) -> Tracer:
    """Booleans that are True with probability p."""
    key = _check_key("bernoulli", key)
    p = asarray(p)
    dtype = _float_dtype(p.dtype)
    shape = p.shape if shape is None else _shape(shape)
    return less(_uniform(key, shape, dtype, 0.0, 1.0), astype(p, dtype))


@api
def categorical(key, logits, axis: int = -1, shape=None) -> Tracer:
    """Samples of a categorical distribution from unnormalized log probabilities (the Gumbel
    max trick)."""
    key = _check_key("categorical", key)
    logits = asarray(logits)
    axis = axis % logits.ndim
    batch_shape = logits.shape[:axis] + logits.shape[axis + 1 :]
    shape = batch_shape if shape is None else _shape(shape)
    if shape[len(shape) - len(batch_shape) :] != batch_shape:
        raise FrontendShapeError(
            f"categorical: shape {shape} must end with the logits' batch shape {batch_shape}"
        )
    prefix = shape[: len(shape) - len(batch_shape)]
    noise_shape = list(shape[len(prefix) :])
    noise_shape.insert(axis, logits.shape[axis])
    noise = gumbel(key, (*prefix, *noise_shape), logits.dtype)
    shifted = logits
    for _ in prefix:
        shifted = expand_dims(shifted, 0)
    return argmax(add(noise, shifted), axis=len(prefix) + axis)


# -- integers ---------------------------------------------------------------------------------
def _clip_to(value: Tracer, dtype: np.dtype) -> Tracer:
    """`value` converted to integer `dtype`, clipped to its range rather than wrapped."""
    low = max(np.iinfo(dtype).min, np.iinfo(value.dtype).min)
    high = min(np.iinfo(dtype).max, np.iinfo(value.dtype).max)
    from .numpy_api import clip

    return astype(clip(value, cast(low, value.dtype), cast(high, value.dtype)), dtype)


def _as_int(value) -> Tracer:
    value = asarray(value)
    return value if value.dtype.kind in "iu" else astype(value, dt.default_dtype(dt.INT))


@api
def randint(key, shape, minval, maxval, dtype=None) -> Tracer:
    """Integers in [minval, maxval), from 2 x nbits random bits per value (JAX's method)."""
    key = _check_key("randint", key)
    shape = _shape(shape)
    want = dt.canonicalize(np.dtype(dtype or dt.default_dtype(dt.INT)))
    if want.kind not in "iu":
        raise FrontendTypeError(f"randint needs an integer dtype, got {want}")
    dtype = want
    minval, maxval = _as_int(minval), _as_int(maxval)
    if want.itemsize < 4:  # sample in 32 bits to avoid bias
        dtype = np.dtype(np.int32)
        info = np.iinfo(want)
        from .numpy_api import clip

        minval = clip(astype(minval, dtype), int(info.min), int(info.max))
        maxval = clip(astype(maxval, dtype), int(info.min), int(info.max) + 1)
    nbits = dtype.itemsize * 8
    unsigned = np.dtype(f"uint{nbits}")
    top = _clip_to(constant(np.iinfo(dtype).max, dtype), maxval.dtype)
    out_of_range = maxval > top
    minval, maxval = _clip_to(minval, dtype), _clip_to(maxval, dtype)
    minval, maxval = broadcast_to(minval, shape), broadcast_to(maxval, shape)
    key1, key2 = split(key)
    higher, lower = _random_bits(key1, nbits, shape), _random_bits(key2, nbits, shape)
    span = astype(subtract(maxval, minval), unsigned)
    span = where(less_equal(maxval, minval), cast(1, unsigned), span)
    span = where(out_of_range & (maxval > minval), add(span, cast(1, unsigned)), span)
    multiplier = remainder(cast(2 ** (nbits // 2), unsigned), span)
    multiplier = remainder(multiply(multiplier, multiplier), span)
    offset = add(multiply(remainder(higher, span), multiplier), remainder(lower, span))
    offset = remainder(offset, span)
    return astype(add(minval, astype(offset, dtype)), want)


def _shuffle(key: Tracer, x: Tracer, axis: int) -> Tracer:
    """Sorts by fresh random 32-bit keys, as many rounds as JAX uses against collisions."""
    from .ops_core import GetTupleElement, Sort

    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        keys = split(key)
        key, subkey = keys[0], keys[1]
        sort_keys = _random_bits(subkey, 32, x.shape)
        both = Sort([sort_keys.op, x.op], dimension=axis, is_stable=True)
        x = Tracer(GetTupleElement(both, 1), x.weak)
    return x


@api
def permutation(key, x, axis: int = 0, independent: bool = False) -> Tracer:
    """A random permutation of range(x) for an int x, else of x's slices along `axis`."""
    key = _check_key("permutation", key)
    if isinstance(x, (int, np.integer)):
        return _shuffle(key, arange(int(x)), 0)
    x = asarray(x)
    if x.ndim == 0:
        raise FrontendTypeError("permutation needs an integer or an array of rank >= 1")
    axis %= x.ndim
    if independent or x.ndim == 1:
        return _shuffle(key, x, axis)
    order = _shuffle(key, arange(x.shape[axis]), 0)
    return take(x, order, axis=axis)


@api
def choice(key, a, shape=(), replace: bool = True, p=None, axis: int = 0) -> Tracer:
    """Samples from `a` (or range(a)), uniformly or with probabilities `p`."""
    key = _check_key("choice", key)
    shape = _shape(shape)
    n = int(a) if isinstance(a, (int, np.integer)) else asarray(a).shape[axis]
    draws = math.prod(shape)
    if not replace and draws > n:
        raise FrontendShapeError(f"cannot take {draws} samples from {n} without replacement")
    if p is None and replace:
        index = randint(key, shape, 0, n)
    elif p is None:
        index = reshape(permutation(key, n)[:draws], shape)
    else:
        index = _weighted_choice(key, asarray(p), n, shape, draws, replace)
    if isinstance(a, (int, np.integer)):
        return index
    return take(asarray(a), index, axis=axis)


def _weighted_choice(key, p: Tracer, n: int, shape, draws: int, replace: bool) -> Tracer:
    from .numpy_reduce import cumsum, sum as sum_

    if p.shape != (n,):
        raise FrontendShapeError(f"choice: p must have shape ({n},), got {p.shape}")
    p = astype(p, _float_dtype(p.dtype if p.dtype.kind == "f" else None))
    if replace:  # inverse CDF: the first bin whose cumulative weight reaches r
        cdf = cumsum(p)
        r = multiply(cdf[-1], subtract(1.0, _uniform(key, shape, p.dtype, 0.0, 1.0)))
        below = less(cdf, expand_dims(r, -1))
        return sum_(astype(below, dt.default_dtype(dt.INT)), axis=-1)
    from .ops_core import GetTupleElement, Topk

    scores = add(gumbel(key, (n,), p.dtype), log(p))  # the Gumbel top-k trick
    top = Topk(scores.op, draws)
    return reshape(astype(Tracer(GetTupleElement(top, 1)), dt.default_dtype(dt.INT)), shape)
