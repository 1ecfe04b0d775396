"""Thunks that call libraries: convolution as im2col + BLAS, dots outside BLAS's types, converts
and bitcasts of types kernels cannot hold, fft (pocketfft through NumPy), cholesky and
triangular-solve (LAPACK/BLAS through SciPy).

Each factory returns `run(out, *operands)` filling the preallocated result, or raises
NotEmittable when it does not cover the instruction (the driver then reports a fallback).
Contractions use the interpreter's work types (f32 for narrow floats, f64 when an f64 is
involved, 64-bit integers wrapped to the result's width) so results round the same way.
"""
from __future__ import annotations

import math

import numpy as np

from .blas_threads import threads_for, use_threads
from ..codegen.scalar import NotEmittable

_NARROW_FLOATS = ("f16", "bf16")
_FLOATS = ("f16", "bf16", "f32", "f64")
_INTS = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "pred")


def _work_dtype(instr) -> np.dtype:
    dtypes = {instr.shape.dtype, instr.operand(0).shape.dtype, instr.operand(1).shape.dtype}
    if not dtypes <= set(_FLOATS + _INTS):
        raise NotEmittable(f"{instr.opcode} on {sorted(dtypes)}")
    if instr.shape.dtype in _INTS:
        return np.dtype(np.uint64 if instr.shape.dtype.startswith("u") else np.int64)
    return np.dtype(np.float64 if "f64" in dtypes else np.float32)


_MAGNITUDE = {"pred": 1, "s8": 128, "u8": 255, "s16": 1 << 15, "u16": (1 << 16) - 1}


def _gemm_dtype(instr, work: np.dtype, terms: int) -> np.dtype:
    """Integer contractions run on float BLAS when every partial sum is an integer the float
    type holds exactly (|a| * |b| * terms below 2^24 for f32, 2^53 for f64), which gives
    the 64-bit integer result bit for bit; otherwise in 64-bit integers (no BLAS)."""
    if work.kind == "f":
        return work
    bounds = [_MAGNITUDE.get(instr.operand(i).shape.dtype) for i in (0, 1)]
    if None in bounds:
        return work
    largest = bounds[0] * bounds[1] * max(terms, 1)
    if largest < 1 << 24:
        return np.dtype(np.float32)
    return np.dtype(np.float64) if largest < 1 << 53 else work


def _finish(out, values) -> None:
    if out.dtype == np.bool_:
        out[...] = values != 0
    elif values.dtype.kind == "f" and out.dtype.kind in "iu":
        out[...] = values.astype(np.int64).astype(out.dtype)  # exact integers, then wrap
    else:
        out[...] = values.astype(out.dtype, copy=False)  # ints wrap, floats round once


# ---- dot ---------------------------------------------------------------------------------------

def dot(instr):
    """Dots BLAS cannot take directly (integers, narrow floats, mixed types): operands cast to
    the work type, one batched matmul, cast back."""
    work = _work_dtype(instr)
    attrs = instr.attrs
    lhs_shape, rhs_shape = instr.operand(0).shape, instr.operand(1).shape
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc = list(attrs.get("lhs_contracting_dims", ()))
    rc = list(attrs.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs_shape.rank) if d not in lb + lc]
    rf = [d for d in range(rhs_shape.rank) if d not in rb + rc]
    size = lambda dims, picked: math.prod(dims[d] for d in picked)  # noqa: E731
    batch, m = size(lhs_shape.dims, lb), size(lhs_shape.dims, lf)
    k, n = size(lhs_shape.dims, lc), size(rhs_shape.dims, rf)
    flops = 2.0 * batch * m * k * n
    work = _gemm_dtype(instr, work, k)

    def run(out, lhs, rhs):
        use_threads(threads_for(flops))
        a = lhs.transpose(lb + lf + lc).astype(work).reshape(batch, m, k)
        b = rhs.transpose(rb + rc + rf).astype(work).reshape(batch, k, n)
        _finish(out, np.matmul(a, b).reshape(out.shape))
    return run


# ---- convolution -----------------------------------------------------------------------------

def convolution(instr):
    """im2col + BLAS: the padded, dilated input's windows are copied into one
    [groups, batch * output positions, features * taps] matrix, multiplied with the kernel
    as [groups, features * taps, output features] in one batched GEMM."""
    from ...ir import WindowDim, parse_dim_labels
    attrs = instr.attrs
    dims = parse_dim_labels(str(attrs["dim_labels"]))
    groups, batch_groups = attrs.get("feature_group_count", 1), attrs.get("batch_group_count", 1)
    if groups > 1 and batch_groups > 1:
        raise NotEmittable("convolution with both feature and batch groups")
    work = _work_dtype(instr)
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    kernel_sizes = [rhs.dims[d] for d in dims.kernel_spatial]
    window = attrs["window"].dims if "window" in attrs else tuple(map(WindowDim, kernel_sizes))
    nsp = len(window)
    x_perm = (dims.input_batch, dims.input_feature) + tuple(dims.input_spatial)
    k_perm = (dims.kernel_output_feature, dims.kernel_input_feature) + tuple(dims.kernel_spatial)
    flips = tuple(2 + i for i, wd in enumerate(window) if wd.reversal)
    out_perm = [0] * (nsp + 2)  # canonical (batch, feature, spatial...) -> the output's order
    out_perm[dims.output_batch], out_perm[dims.output_feature] = 0, 1
    for i, axis in enumerate(dims.output_spatial):
        out_perm[axis] = 2 + i
    extents = [(k - 1) * wd.rhs_dilation + 1 for k, wd in zip(kernel_sizes, window)]
    taps = math.prod(kernel_sizes)
    flops = 2.0 * instr.shape.numel() * taps * lhs.dims[dims.input_feature] / max(groups, 1)
    # One spatial dim and no groups: a sum over taps of [batch, positions, c] x [c, o] GEMMs on
    # views of the input (no im2col copy; 2x faster on a dilated 1-D stack). With more spatial
    # dims the views do not flatten into one GEMM per tap.
    by_taps = nsp == 1 and groups == 1 and batch_groups == 1

    def out_n_positions(x):
        return (x.shape[2] - extents[0]) // window[0].stride + 1
    work = _gemm_dtype(instr, work, taps * lhs.dims[dims.input_feature])

    def run(out, x, kernel):
        use_threads(threads_for(flops))
        x = _dilate_and_pad(x.transpose(x_perm).astype(work, copy=False), window)
        kernel = kernel.transpose(k_perm).astype(work, copy=False)
        if flips:
            kernel = np.flip(kernel, flips)
        n, c = x.shape[:2]
        o = kernel.shape[0]
        if any(x.shape[2 + i] < e for i, e in enumerate(extents)) or taps == 0 or n == 0 \
                or c == 0 or out.size == 0:
            out[...] = 0
            return
        if by_taps:
            _finish(out, _conv1d_by_taps(x, kernel, window[0], out_n_positions(x)).transpose(
                out_perm))
            return
        view = np.lib.stride_tricks.sliding_window_view(x, extents, axis=tuple(range(2, 2 + nsp)))
        view = view[(slice(None), slice(None)) + tuple(slice(None, None, wd.stride)
                                                       for wd in window)
                    + tuple(slice(None, None, wd.rhs_dilation) for wd in window)]
        spatial = view.shape[2:2 + nsp]
        positions = math.prod(spatial)
        # [n, c, out spatial..., taps...] -> [n, out spatial..., c, taps...]
        order = (0,) + tuple(range(2, 2 + nsp)) + (1,) + tuple(range(2 + nsp, 2 + 2 * nsp))
        cols = view.transpose(order)
        if batch_groups > 1:
            g = batch_groups
            cols = cols.reshape(g, n // g * positions, c * taps)
            weights = kernel.reshape(g, o // g, c * taps).transpose(0, 2, 1)
            result = np.matmul(cols, weights)  # [g, nb * positions, o / g]
            result = result.reshape(g, n // g, positions, o // g).transpose(1, 2, 0, 3)
            result = result.reshape(n // g, positions, o)
            out_n = n // g
        else:
            g = groups
            cols = cols.reshape(n * positions, g, c // g * taps).transpose(1, 0, 2)
            weights = kernel.reshape(g, o // g, c // g * taps).transpose(0, 2, 1)
            result = np.matmul(cols, weights)  # [g, n * positions, o / g]
            result = result.transpose(1, 0, 2).reshape(n, positions, o)
            out_n = n
        canonical = result.reshape((out_n,) + spatial + (o,))
        canonical = np.moveaxis(canonical, -1, 1)
        _finish(out, canonical.transpose(out_perm))
    return run


def _conv1d_by_taps(x, kernel, wd, positions: int) -> np.ndarray:
    """[n, o, positions]: the sum over taps t of x[:, :, t * dilation + stride * p] times
    kernel[:, :, t]."""
    x_last = np.ascontiguousarray(x.transpose(0, 2, 1))  # [n, w, c]
    total = None
    for t in range(kernel.shape[2]):
        start = t * wd.rhs_dilation
        view = x_last[:, start:start + (positions - 1) * wd.stride + 1:wd.stride, :]
        term = np.matmul(view, kernel[:, :, t].T)  # [n, positions, o]
        total = term if total is None else np.add(total, term, out=total)
    return total.transpose(0, 2, 1)


def _dilate_and_pad(x: np.ndarray, window) -> np.ndarray:
    """Base dilation and edge padding (negative: cropping) of spatial axes 2.., in one copy."""
    shape, src, dst = list(x.shape[:2]), [slice(None)] * 2, [slice(None)] * 2
    plain = True
    for i, wd in enumerate(window):
        n = x.shape[2 + i]
        dilated = (n - 1) * wd.lhs_dilation + 1 if n else 0
        size = max(dilated + wd.padding_low + wd.padding_high, 0)
        # element k of the operand lands at low + k * dilation; keep those inside [0, size)
        low, step = wd.padding_low, wd.lhs_dilation
        first = 0 if low >= 0 else (-low + step - 1) // step
        last = min(n, (size - 1 - low) // step + 1) if size else 0
        last = max(last, first)
        start = low + first * step
        src.append(slice(first, last))
        dst.append(slice(start, start + (last - first - 1) * step + 1, step)
                   if last > first else slice(0, 0))
        shape.append(size)
        plain = plain and wd.lhs_dilation == 1 and wd.padding_low == 0 and wd.padding_high == 0
    if plain:
        return x
    padded = np.zeros(shape, x.dtype)
    padded[tuple(dst)] = x[tuple(src)]
    return padded


# ---- converts and bitcasts ---------------------------------------------------------------------

def convert(instr):
    """Float <-> float converts involving f16 (kernels have no f16): NumPy's casts round once to
    nearest even, as the interpreter does. f64 -> a narrow float and float -> int stay out (the
    interpreter rounds to odd first / saturates)."""
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    small_ints = ("s8", "s16", "s32", "u8", "u16", "u32", "pred")
    if not (src in _FLOATS and dst in _FLOATS or src in small_ints and dst in _FLOATS) or \
            (src == "f64" and dst in _NARROW_FLOATS):
        raise NotEmittable(f"convert {src}->{dst}")
    via = np.float64 if src in small_ints else None

    def run(out, x):
        with np.errstate(over="ignore"):  # out of range rounds to inf, as specified
            out[...] = (x.astype(via) if via is not None else x).astype(out.dtype)
    return run


def bitcast_convert(instr):
    """Same bytes, other type: one byte copy (pieces of a wider type in little-endian order,
    the host's, as XLA specifies)."""
    import sys
    from ..codegen.scalar import BITS
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    if "pred" in (src, dst) or BITS.get(src, 1) % 8 or BITS.get(dst, 1) % 8 or \
            sys.byteorder != "little":
        raise NotEmittable(f"bitcast-convert {src}->{dst}")

    def run(out, x):
        out.reshape(-1).view(np.uint8)[...] = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
    return run


# ---- fft, cholesky, triangular-solve -------------------------------------------------------------

def fft(instr):
    from ...reference.ops_linalg import fft_values
    kind = str(instr.attrs["fft_type"])
    lengths = tuple(instr.attrs["fft_length"])
    if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        raise NotEmittable(f"fft_type {kind}")
    dims = instr.shape.dims

    def run(out, x):  # the interpreter's code: the same lengths, padding and precision
        out[...] = fft_values(x, kind, lengths, dims).astype(out.dtype, copy=False)
    return run


def _lapack():
    try:
        from scipy.linalg import blas, lapack
    except ImportError as exc:  # SciPy is optional; the interpreter's code runs instead
        raise NotEmittable("SciPy is not installed") from exc
    return blas, lapack


def cholesky(instr):
    """LAPACK potrf per matrix; a matrix that is not positive definite gives NaN from the
    failing column on, as a column-by-column factorization does."""
    _, lapack = _lapack()
    lower = bool(instr.attrs.get("lower", False))
    dtype = instr.shape.dtype
    if dtype not in ("f32", "f64"):
        raise NotEmittable(f"cholesky on {dtype}")

    def run(out, a):
        n = a.shape[-1]
        flat_in, flat_out = a.reshape(-1, n, n), out.reshape(-1, n, n)
        potrf = lapack.spotrf if a.dtype == np.float32 else lapack.dpotrf
        for b in range(flat_in.shape[0]):
            factor, info = potrf(flat_in[b], lower=lower, clean=True)
            if info > 0:
                bad = info - 1
                if lower:
                    factor[bad:, bad:] = np.tril(np.full((n - bad, n - bad), np.nan))
                else:
                    factor[bad:, bad:] = np.triu(np.full((n - bad, n - bad), np.nan))
            flat_out[b] = factor
    return run


def triangular_solve(instr):
    """BLAS trsm per matrix (no singularity check: a zero pivot gives inf/NaN, as in XLA)."""
    blas, _ = _lapack()
    attrs = instr.attrs
    dtype = instr.shape.dtype
    if dtype not in ("f32", "f64"):
        raise NotEmittable(f"triangular-solve on {dtype}")
    left = bool(attrs.get("left_side", False))
    lower = bool(attrs.get("lower", False))
    unit = bool(attrs.get("unit_diagonal", False))
    trans = {"NO_TRANSPOSE": 0, "TRANSPOSE": 1, "ADJOINT": 1}[
        str(attrs.get("transpose_a", "NO_TRANSPOSE"))]

    def run(out, a, b):
        trsm = blas.strsm if out.dtype == np.float32 else blas.dtrsm
        m = a.shape[-1]
        flat_a = a.reshape(-1, m, m)
        flat_b = b.reshape((-1,) + b.shape[-2:])
        flat_out = out.reshape(flat_b.shape)
        for k in range(flat_b.shape[0]):
            flat_out[k] = trsm(1.0, flat_a[k], flat_b[k], side=0 if left else 1, lower=lower,
                               trans_a=trans, diag=int(unit))
    return run


LIBCALLS = {"dot": dot, "convolution": convolution, "convert": convert,
            "bitcast-convert": bitcast_convert, "fft": fft, "cholesky": cholesky,
            "triangular-solve": triangular_solve}
