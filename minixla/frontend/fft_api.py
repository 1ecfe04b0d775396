"""`minixla.numpy.fft`: NumPy's FFT functions lowered to HLO `fft` (which transforms the last
one to three dims), with the wanted axes moved last, inputs cropped or zero-padded to the
requested lengths, and the `norm` scaling applied around it."""

from __future__ import annotations

import math

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import asarray, cast, multiply, where
from .numpy_creation import arange
from .numpy_shape import normalize_axis, pad, roll, transpose
from .ops_core import Op
from .tracer import Tracer

_COMPLEX_OF = {
    np.dtype(np.float32): np.dtype(np.complex64),
    np.dtype(np.float64): np.dtype(np.complex128),
}
_NORMS = (None, "backward", "ortho", "forward")


def _as_complex(name: str, a) -> Tracer:
    x = asarray(a)
    k = dt.kind(x.dtype)
    if k == dt.COMPLEX:
        return x
    float_type = x.dtype if x.dtype in _COMPLEX_OF else dt.default_dtype(dt.FLOAT)
    if k == dt.FLOAT and x.dtype not in _COMPLEX_OF:
        raise FrontendTypeError(f"fft.{name} supports float32/64 and complex64/128, got {x.dtype}")
    return cast(x, _COMPLEX_OF[np.dtype(float_type)])


def _as_real(name: str, a) -> Tracer:
    x = asarray(a)
    if dt.kind(x.dtype) == dt.COMPLEX:
        raise FrontendTypeError(f"fft.{name} needs a real input, got {x.dtype}")
    if x.dtype in _COMPLEX_OF:
        return x
    if dt.kind(x.dtype) == dt.FLOAT:
        raise FrontendTypeError(f"fft.{name} supports float32 and float64, got {x.dtype}")
    return cast(x, dt.default_dtype(dt.FLOAT))


def _resize(x: Tracer, axis: int, length: int) -> Tracer:
    """x cropped or zero-padded along `axis` to `length`, as NumPy's `n`/`s` do."""
    size = x.shape[axis]
    if length < 1:
        raise FrontendShapeError(f"fft: invalid length {length} for axis {axis}")
    if length < size:
        index = [slice(None)] * x.ndim
        index[axis] = slice(0, length)
        return x[tuple(index)]
    if length > size:
        widths = [(0, 0)] * x.ndim
        widths[axis] = (0, length - size)
        return pad(x, widths)
    return x


def _hlo_fft(x: Tracer, axes: tuple[int, ...], fft_type: str, lengths) -> Tracer:
    """HLO fft over `axes` (at most three), moved last and then back."""
    rest = [d for d in range(x.ndim) if d not in axes]
    perm = rest + list(axes)
    moved = transpose(x, perm)
    out = Tracer(Op("fft", [moved.op], {"fft_type": fft_type, "fft_length": tuple(lengths)}))
    return transpose(out, list(np.argsort(perm)))


def _scale(x: Tracer, norm, n: int, inverse: bool) -> Tracer:
    if norm not in _NORMS:
        raise FrontendTypeError(
            f"fft: unknown norm {norm!r} (use 'backward', 'ortho' or 'forward')"
        )
    # HLO's IFFT already divides by n (NumPy's 'backward')
    factor = {
        None: 1.0,
        "backward": 1.0,
        "ortho": math.sqrt(n) if inverse else 1 / math.sqrt(n),
        "forward": n if inverse else 1 / n,
    }[norm]
    return x if factor == 1.0 else multiply(x, cast(factor, x.dtype))


def _axes_and_lengths(x: Tracer, s, axes, default_all: bool) -> tuple[list[int], list]:
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
        if not default_all and s is None:
            axes = axes[-2:]
    axes = [normalize_axis(a, x.ndim) for a in axes]
    if len(set(axes)) != len(axes):
        raise FrontendShapeError(f"fft: repeated axes {axes}")
    if s is not None and len(s) != len(axes):
        raise FrontendShapeError(f"fft: s={tuple(s)} and axes={tuple(axes)} differ in length")
    return axes, list(s) if s is not None else [None] * len(axes)


def _complex_nd(name: str, a, s, axes, norm, inverse: bool) -> Tracer:
    x = _as_complex(name, a)
    axes, lengths = _axes_and_lengths(x, s, axes, True)
    for axis, length in zip(axes, lengths):
        if length is not None:
            x = _resize(x, axis, length)
    kind = "IFFT" if inverse else "FFT"
    for start in range(0, len(axes), 3):  # separable: three axes per HLO fft
        group = tuple(axes[start : start + 3])
        x = _hlo_fft(x, group, kind, [x.shape[d] for d in group])
    n = math.prod(x.shape[d] for d in axes)
    return _scale(x, norm, n, inverse)


def _real_nd(name: str, a, s, axes, norm) -> Tracer:
    x = _as_real(name, a)
    axes, lengths = _axes_and_lengths(x, s, axes, True)
    for axis, length in zip(axes, lengths):
        if length is not None:
            x = _resize(x, axis, length)
    last = tuple(axes[-3:])
    out = _hlo_fft(x, last, "RFFT", [x.shape[d] for d in last])
    n = math.prod(x.shape[d] for d in axes)
    if len(axes) > 3:
        out = _complex_nd(name, out, None, axes[:-3], None, False)
    return _scale(out, norm, n, False)


def _inverse_real_nd(name: str, a, s, axes, norm) -> Tracer:
    x = _as_complex(name, a)
    axes, lengths = _axes_and_lengths(x, s, axes, True)
    lengths = [x.shape[d] if n is None else n for d, n in zip(axes, lengths)]
    if s is None:
        lengths[-1] = 2 * (x.shape[axes[-1]] - 1)
    if lengths[-1] < 1:
        raise FrontendShapeError(f"fft.{name}: invalid output length {lengths[-1]}")
    for axis, length in zip(axes[:-1], lengths[:-1]):
        x = _resize(x, axis, length)
    x = _resize(x, axes[-1], lengths[-1] // 2 + 1)
    if len(axes) > 3:
        x = _complex_nd(name, x, None, axes[:-3], None, True)
    last = tuple(axes[-3:])
    out = _hlo_fft(x, last, "IRFFT", lengths[-3:])
    return _scale(out, norm, math.prod(lengths), True)


@api
def fft(a, n=None, axis: int = -1, norm=None) -> Tracer:
    return _complex_nd("fft", a, None if n is None else [n], [axis], norm, False)


@api
def ifft(a, n=None, axis: int = -1, norm=None) -> Tracer:
    return _complex_nd("ifft", a, None if n is None else [n], [axis], norm, True)


@api
def rfft(a, n=None, axis: int = -1, norm=None) -> Tracer:
    return _real_nd("rfft", a, None if n is None else [n], [axis], norm)


@api
def irfft(a, n=None, axis: int = -1, norm=None) -> Tracer:
    return _inverse_real_nd("irfft", a, None if n is None else [n], [axis], norm)


@api
def fftn(a, s=None, axes=None, norm=None) -> Tracer:
    return _complex_nd("fftn", a, s, axes, norm, False)


@api
def ifftn(a, s=None, axes=None, norm=None) -> Tracer:
    return _complex_nd("ifftn", a, s, axes, norm, True)


@api
def rfftn(a, s=None, axes=None, norm=None) -> Tracer:
    return _real_nd("rfftn", a, s, axes, norm)


@api
def irfftn(a, s=None, axes=None, norm=None) -> Tracer:
    return _inverse_real_nd("irfftn", a, s, axes, norm)


@api
def fft2(a, s=None, axes=(-2, -1), norm=None) -> Tracer:
    return _complex_nd("fft2", a, s, axes, norm, False)


@api
def ifft2(a, s=None, axes=(-2, -1), norm=None) -> Tracer:
    return _complex_nd("ifft2", a, s, axes, norm, True)


@api
def rfft2(a, s=None, axes=(-2, -1), norm=None) -> Tracer:
    return _real_nd("rfft2", a, s, axes, norm)


@api
def irfft2(a, s=None, axes=(-2, -1), norm=None) -> Tracer:
    return _inverse_real_nd("irfft2", a, s, axes, norm)


@api
def fftfreq(n: int, d: float = 1.0) -> Tracer:
    """Sample frequencies of an n-point FFT: [0, 1, ..., -(n//2), ..., -1] / (d*n)."""
    k = cast(arange(n), dt.default_dtype(dt.FLOAT))
    half = (n - 1) // 2 + 1  # indices from `half` on are the negative frequencies
    k = where(k < cast(half, k.dtype), k, k - cast(n, k.dtype))
    return multiply(k, cast(1.0 / (d * n), k.dtype))


@api
def rfftfreq(n: int, d: float = 1.0) -> Tracer:
    k = cast(arange(n // 2 + 1), dt.default_dtype(dt.FLOAT))
    return multiply(k, cast(1.0 / (d * n), k.dtype))


@api
def fftshift(x, axes=None) -> Tracer:
    t = asarray(x)
    axes = range(t.ndim) if axes is None else ([axes] if isinstance(axes, int) else axes)
    for axis in axes:
        t = roll(t, t.shape[axis] // 2, axis)
    return t


@api
def ifftshift(x, axes=None) -> Tracer:
    t = asarray(x)
    axes = range(t.ndim) if axes is None else ([axes] if isinstance(axes, int) else axes)
    for axis in axes:
        t = roll(t, -(t.shape[axis] // 2), axis)
    return t
