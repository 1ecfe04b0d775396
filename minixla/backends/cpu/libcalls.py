"""Thunks that call libraries: convolution (convolution.py), dots outside BLAS's types, converts
and bitcasts of types kernels cannot hold, fft (pocketfft through SciPy in the operand's
precision, as XLA's ducc; through NumPy in f64 without SciPy), cholesky and
triangular-solve (LAPACK/BLAS through SciPy).

Each factory returns `run(out, *operands)` filling the preallocated result, or raises
NotEmittable when it does not cover the instruction (the driver then reports a fallback).
Contractions use the interpreter's work types (f32 for narrow floats, f64 when an f64 is
involved, 64-bit integers wrapped to the result's width) so results round the same way.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
import sys

import numpy as np

from ...reference.lapack_ffi import FLAG, full_matrices
from ..codegen.scalar import NotEmittable
from .blas_threads import libraries_loaded, threads_for, use_threads

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
        # exact integers (_gemm_dtype): below 2^24 (f32) or 2^53 (f64), so a signed type at
        # least that wide takes them as they are; others wrap through int64
        if out.dtype.kind == "i" and out.dtype.itemsize >= values.dtype.itemsize:
            np.copyto(out, values, casting="unsafe")
        else:
            out[...] = values.astype(np.int64).astype(out.dtype)
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
    """Shifted GEMMs or im2col + one batched GEMM, channels-last (convolution.py)."""
    from .convolution import convolution as build

    return build(instr)


# ---- converts and bitcasts ---------------------------------------------------------------------


def convert(instr):
    """Float <-> float converts involving f16 (kernels have no f16): NumPy's casts round once to
    nearest even, as the interpreter does. f64 -> a narrow float and float -> int stay out (the
    interpreter rounds to odd first / saturates)."""
    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    small_ints = ("s8", "s16", "s32", "u8", "u16", "u32", "pred")
    if not (src in _FLOATS and dst in _FLOATS or src in small_ints and dst in _FLOATS) or (
        src == "f64" and dst in _NARROW_FLOATS
    ):
        raise NotEmittable(f"convert {src}->{dst}")
    via = np.float64 if src in small_ints else None

    def run(out, x):
        with np.errstate(over="ignore"):  # out of range rounds to inf, as specified
            out[...] = (x.astype(via) if via is not None else x).astype(out.dtype)

    return run


def bitcast_convert(instr):
    """Same bytes, other type: one byte copy (pieces of a wider type in little-endian order,
    the host's, as XLA specifies). A pred is the byte 0 or 1; a byte read as a pred is true
    where it is not 0 (reference/convert.py)."""
    from ..codegen.scalar import BITS

    src, dst = instr.operand(0).shape.dtype, instr.shape.dtype
    if BITS.get(src, 1) % 8 or BITS.get(dst, 1) % 8 or sys.byteorder != "little":
        raise NotEmittable(f"bitcast-convert {src}->{dst}")

    def run(out, x):
        data = np.ascontiguousarray(x).reshape(-1).view(np.uint8)
        if dst == "pred":
            np.not_equal(data, 0, out=out.reshape(-1))
        else:
            out.reshape(-1).view(np.uint8)[...] = data

    return run


# ---- fft, cholesky, triangular-solve -------------------------------------------------------------


def fft(instr):
    from ...reference.ops_linalg import fft_values

    kind = str(instr.attrs["fft_type"])
    lengths = tuple(instr.attrs["fft_length"])
    if kind not in ("FFT", "IFFT", "RFFT", "IRFFT"):
        raise NotEmittable(f"fft_type {kind}")
    dims = instr.shape.dims
    transforms = single_precision_fft()

    def run(out, x):  # the interpreter's code: the same lengths and padding
        if transforms is None:
            values = fft_values(x, kind, lengths, dims)
        else:
            values = fft_values(x, kind, lengths, dims, transforms, wide=False)
        out[...] = values.astype(out.dtype, copy=False)

    return run


def single_precision_fft():
    """An FFT with fftn/ifftn/rfftn/irfftn (`s`, `axes`) that transforms f32/c64 in their own
    precision, or None (NumPy's double precision only, the interpreter's values): SciPy's
    pocketfft extension, loaded without `scipy.fft`, whose import costs a warm compile
    0.2-0.3 s; else `scipy.fft` itself. (NumPy's own fftn loops over the axes in Python: a
    2-d real filter ran 2.4x slower.)"""
    try:
        return _PocketFFT(_scipy_extension("fft._pocketfft.pypocketfft"))
    except ImportError:
        pass
    try:
        import scipy.fft
    except ImportError:
        return None
    return scipy.fft


class _PocketFFT:
    """scipy.fft's n-d transforms over its pocketfft extension: the operand cut or
    zero-padded to `s` along `axes` (an inverse real transform's last axis to s//2+1), and the
    inverse transforms divided by the points' count, as scipy.fft's default norm does."""

    def __init__(self, pocketfft):
        self.pocketfft = pocketfft

    def fftn(self, x, s, axes):
        return self.pocketfft.c2c(_fit(x, s, axes), axes, True, 0)

    def ifftn(self, x, s, axes):
        return self.pocketfft.c2c(_fit(x, s, axes), axes, False, 2)

    def rfftn(self, x, s, axes):
        return self.pocketfft.r2c(_fit(x, s, axes), axes, True, 0)

    def irfftn(self, x, s, axes):
        halved = tuple(s[:-1]) + (s[-1] // 2 + 1,)
        return self.pocketfft.c2r(_fit(x, halved, axes), axes, s[-1], False, 2)


def _fit(x: np.ndarray, sizes, axes) -> np.ndarray:
    """`x` cut or zero-padded to `sizes` along `axes`."""
    shape = list(x.shape)
    for axis, size in zip(axes, sizes):
        shape[axis] = size
    if tuple(shape) == x.shape:
        return x
    fitted = np.zeros(shape, x.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(x.shape, shape))
    fitted[common] = x[common]
    return fitted


def _lapack():
    """SciPy's f2py wrappers of BLAS and LAPACK (`scipy.linalg.blas`/`.lapack` re-export them).
    Loaded on their own: importing `scipy.linalg` costs a warm compile 0.2-0.6 s, most of it
    SciPy's array-API helpers, which these extension modules do not need."""
    try:
        blas, lapack = _scipy_extension("linalg._fblas"), _scipy_extension("linalg._flapack")
    except ImportError:
        try:  # another SciPy layout: through the package
            from scipy.linalg import blas, lapack
        except ImportError as exc:  # SciPy is optional; the interpreter's code runs instead
            raise NotEmittable("SciPy is not installed") from exc
    libraries_loaded()
    return blas, lapack


def _scipy_extension(name: str):
    """The extension module `scipy.<name>` ("linalg._flapack"), loaded from its file without
    running its packages' `__init__`s; registered under its own name so a later import of the
    package finds this one. ImportError when there is no such file."""
    full = f"scipy.{name}"
    if full in sys.modules:
        return sys.modules[full]
    scipy = importlib.util.find_spec("scipy")
    *folders, stem = name.split(".")
    for root in list(scipy.submodule_search_locations or []) if scipy is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(root, *folders, stem + suffix)
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location(full, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                sys.modules[full] = module
                return module
    raise ImportError(f"no {full}")


def cholesky(instr):
    """LAPACK dpotrf per matrix, in f64 like the interpreter. potrf stops at the first failing
    pivot and leaves the columns before it unfinished, so a matrix that is not positive
    definite is factored by the interpreter's column-by-column code instead (NaN from the
    failing column on)."""
    from ...reference.ops_linalg import cholesky_values

    _, lapack = _lapack()
    lower = bool(instr.attrs.get("lower", False))
    dtype = instr.shape.dtype
    if dtype not in ("f32", "f64"):
        raise NotEmittable(f"cholesky on {dtype}")
    flops = instr.shape.numel() * instr.shape.dims[-1] / 3 if instr.shape.rank else 0

    def run(out, a):
        if a.size == 0:  # no matrices, or 0x0 ones: nothing to factor
            return
        use_threads(threads_for(flops))
        n = a.shape[-1]
        flat_in = a.reshape(-1, n, n)
        flat_out = out.reshape(-1, n, n)
        for b in range(flat_in.shape[0]):
            # in f64, as the interpreter does. LAPACK reads the C-order copy as its transpose,
            # the same symmetric matrix, and leaves the other triangle's factor there: our
            # factor, in place (`factor` is `work.T`), with no copy into Fortran order and back.
            work = np.array(flat_in[b], dtype=np.float64)
            factor, info = lapack.dpotrf(work.T, lower=not lower, clean=True, overwrite_a=True)
            flat_out[b] = factor.T if info == 0 else cholesky_values(flat_in[b], lower)

    return run


def triangular_solve(instr):
    """BLAS dtrsm per matrix, in f64 like the interpreter (no singularity check: a zero pivot
    gives inf/NaN, as in XLA)."""
    blas, _ = _lapack()
    attrs = instr.attrs
    dtype = instr.shape.dtype
    if dtype not in ("f32", "f64"):
        raise NotEmittable(f"triangular-solve on {dtype}")
    left = bool(attrs.get("left_side", False))
    lower = bool(attrs.get("lower", False))
    unit = bool(attrs.get("unit_diagonal", False))
    trans = {"NO_TRANSPOSE": 0, "TRANSPOSE": 1, "ADJOINT": 1}[
        str(attrs.get("transpose_a", "NO_TRANSPOSE"))
    ]
    a_shape = instr.operand(0).shape
    flops = instr.shape.numel() * (a_shape.dims[-1] if a_shape.rank else 0)

    def run(out, a, b):
        if out.size == 0:
            return
        use_threads(threads_for(flops))
        m = a.shape[-1]  # solved in f64, as the interpreter does (f32 drifts when ill-conditioned)
        flat_a = a.reshape(-1, m, m).astype(np.float64, copy=False)
        flat_b = b.reshape((-1,) + b.shape[-2:])
        flat_out = out.reshape(flat_b.shape)
        for k in range(flat_b.shape[0]):
            # BLAS reads C-order matrices as their transposes: op(A) X = B is
            # X^T op(A)^T = B^T, so the side and the triangle flip and X is solved in place
            work = np.array(flat_b[k], dtype=np.float64)
            solved = blas.dtrsm(
                1.0,
                np.ascontiguousarray(flat_a[k]).T,
                work.T,
                side=1 if left else 0,
                lower=not lower,
                trans_a=trans,
                diag=int(unit),
                overwrite_b=True,
            )
            flat_out[k] = solved.T

    return run


LIBCALLS = {
    "dot": dot,
    "convolution": convolution,
    "convert": convert,
    "bitcast-convert": bitcast_convert,
    "fft": fft,
    "cholesky": cholesky,
    "triangular-solve": triangular_solve,
}


def lapack_ffi(instr):
    """XLA:CPU's LAPACK FFI targets whose reference code loops in Python (getrf, trsm, potrf,
    orgqr) or works in f64 (geqrf, syevd, gesdd), as one call of the named routine per
    matrix of the batch: sgetrf for `lapack_sgetrf_ffi`, the operands' own type, as XLA:CPU
    calls it (lapack.py compiles these routines for the real types as one loop over the batch;
    the driver asks it first). They leave what the reference leaves
    (1-based pivots, the untouched triangle, info 1 for a matrix potrf cannot factor). Returns
    a custom call (`fn(out, *operands, backend_config=...)` filling `out`), or None for other
    targets, whose reference code calls NumPy's LAPACK; NotEmittable without SciPy."""
    from ...ir.attrs import backend_config_string
    from ...reference.xla_custom_calls import ffi_attributes, lapack_routine

    found = lapack_routine(instr.attrs["custom_call_target"])
    if found is None or found[1] not in _FFI_ROUTINES:
        return None
    letter, routine = found
    attrs = ffi_attributes(backend_config_string(instr.attrs.get("backend_config")))
    run = _FFI_ROUTINES[routine](letter, attrs)
    # BLAS threads as the routine's size asks, not as the last GEMM left them: a 32x32 trsm
    # took 27-77 us on two threads against 7 on one
    threads = threads_for(_flops_per_matrix(instr, routine))

    def threaded(out, *operands, **attributes):
        use_threads(threads)
        run(out, *operands, **attributes)

    return threaded


def _flops_per_matrix(instr, routine: str) -> float:
    """About the multiply-adds of one matrix's call: n^3 for an n x n factorization, m n k for
    a triangular solve (the constants do not matter next to threads_for's threshold)."""
    a = instr.operand(0).shape.dims[-2:]
    if routine == "trsm" and instr.operand_count > 1:
        b = instr.operand(1).shape.dims[-2:]
        return float(math.prod(b) * max(a, default=1))
    return float(math.prod(a) * min(a, default=1)) if len(a) == 2 else 0.0


def _matrices(array: np.ndarray) -> np.ndarray:
    return array.reshape((-1,) + array.shape[-2:])


_LETTER_DTYPE = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def _ffi_getrf(letter: str, attrs):
    _, lapack = _lapack()
    getrf, work = getattr(lapack, f"{letter}getrf"), _LETTER_DTYPE[letter]

    def run(out, a, **_):
        factors, pivots, infos = out
        if a.size == 0:
            infos[...] = 0
            return
        flat_factors = _matrices(factors)
        flat_pivots = pivots.reshape(flat_factors.shape[0], -1)
        flat_infos = infos.reshape(-1)
        for k, matrix in enumerate(_matrices(a)):
            lu, piv, info = getrf(np.array(matrix, work, order="F"), overwrite_a=True)
            flat_factors[k] = lu
            flat_pivots[k] = piv + 1  # LAPACK's pivots are 1-based; SciPy gives them 0-based
            flat_infos[k] = info

    return run


def _ffi_trsm(letter: str, attrs):
    blas, _ = _lapack()
    trsm, work = getattr(blas, f"{letter}trsm"), _LETTER_DTYPE[letter]
    left = attrs.get("side", FLAG["L"]) == FLAG["L"]
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]
    unit = attrs.get("diag", FLAG["N"]) == FLAG["U"]
    transpose = {FLAG["N"]: 0, FLAG["T"]: 1, FLAG["C"]: 2}[attrs.get("trans_x", FLAG["N"])]

    def run(out, a, b, *_, **__):
        if out.size == 0:
            return
        flat_out = _matrices(out)
        for k, (matrix, rhs) in enumerate(zip(_matrices(a), _matrices(b))):
            flat_out[k] = trsm(
                1.0,
                np.array(matrix, work, order="F"),
                np.array(rhs, work, order="F"),
                side=0 if left else 1,
                lower=int(lower),
                trans_a=transpose,
                diag=int(unit),
                overwrite_b=True,
            )

    return run


def _ffi_potrf(letter: str, attrs):
    _, lapack = _lapack()
    potrf, work = getattr(lapack, f"{letter}potrf"), _LETTER_DTYPE[letter]
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]

    def run(out, a, **_):
        factors, infos = out
        if a.size == 0:
            infos[...] = 0
            return
        flat_factors = _matrices(factors)
        flat_infos = infos.reshape(-1)
        for k, matrix in enumerate(_matrices(a)):
            # potrf reads and writes only the `uplo` triangle; the other keeps the input
            factor, info = potrf(
                np.array(matrix, work, order="F"), lower=lower, clean=False, overwrite_a=True
            )
            flat_factors[k] = factor if info == 0 else matrix
            flat_infos[k] = 0 if info == 0 else 1

    return run


def _ffi_orgqr(letter: str, attrs):
    _, lapack = _lapack()
    name = f"{letter}ungqr" if letter in "cz" else f"{letter}orgqr"
    orgqr, work = getattr(lapack, name), _LETTER_DTYPE[letter]

    def run(out, a, tau, **_):
        if out.size == 0:
            return
        flat_out = _matrices(out)
        flat_tau = tau.reshape(flat_out.shape[0], -1)
        for k, matrix in enumerate(_matrices(a)):
            # Q's first columns from the reflectors below the diagonal (geqrf's compact form)
            q, _, _ = orgqr(np.array(matrix, work, order="F"), flat_tau[k], overwrite_a=True)
            flat_out[k] = q

    return run


def _ffi_syevd(letter: str, attrs):
    _, lapack = _lapack()
    name = f"{letter}heevd" if letter in "cz" else f"{letter}syevd"
    syevd, work = getattr(lapack, name), _LETTER_DTYPE[letter]
    lower = attrs.get("uplo", FLAG["L"]) == FLAG["L"]

    def run(out, a, **_):
        vectors, values, infos = out
        if a.size == 0:
            infos[...] = 0
            return
        flat_vectors = _matrices(vectors)
        flat_values = values.reshape(flat_vectors.shape[0], -1)
        flat_infos = infos.reshape(-1)
        for k, matrix in enumerate(_matrices(a)):
            # eigenvalues ascending, eigenvectors in the columns, from the `uplo` triangle
            w, v, info = syevd(np.array(matrix, work, order="F"), lower=int(lower))
            flat_vectors[k], flat_values[k], flat_infos[k] = v, w, info

    return run


def _ffi_gesdd(letter: str, attrs):
    _, lapack = _lapack()
    gesdd, work = getattr(lapack, f"{letter}gesdd"), _LETTER_DTYPE[letter]
    vectors = attrs.get("mode", FLAG["A"]) != FLAG["N"]

    def run(out, a, **_):
        operand, values, left, right, infos = out
        operand[...] = a  # returned as it is, as the reference does
        left[...] = 0  # without vectors LAPACK leaves u and vt unset: zeros, as the reference
        right[...] = 0
        infos[...] = 0
        if a.size == 0:
            values[...] = 0
            return
        full = full_matrices(*a.shape[-2:], left.shape, right.shape)
        flat_values = values.reshape(-1, min(a.shape[-2:]))
        flat_left, flat_right, flat_infos = _matrices(left), _matrices(right), infos.reshape(-1)
        for k, matrix in enumerate(_matrices(a)):
            u, s, vt, info = gesdd(
                np.array(matrix, work, order="F"), compute_uv=int(vectors), full_matrices=int(full)
            )
            flat_values[k], flat_infos[k] = s, info
            if vectors:
                flat_left[k], flat_right[k] = u, vt

    return run


def _ffi_geqrf(letter: str, attrs):
    _, lapack = _lapack()
    geqrf, work = getattr(lapack, f"{letter}geqrf"), _LETTER_DTYPE[letter]

    def run(out, a, **_):
        factors, taus = out
        if a.size == 0:
            return
        flat_factors = _matrices(factors)
        flat_taus = taus.reshape(flat_factors.shape[0], -1)
        for k, matrix in enumerate(_matrices(a)):
            # R on and above the diagonal, the Householder vectors below it, and their tau
            qr, tau, _, _ = geqrf(np.array(matrix, work, order="F"), overwrite_a=True)
            flat_factors[k], flat_taus[k] = qr, tau

    return run


_FFI_ROUTINES = {
    "geqrf": _ffi_geqrf,
    "gesdd": _ffi_gesdd,
    "syevd": _ffi_syevd,
    "heevd": _ffi_syevd,
    "getrf": _ffi_getrf,
    "trsm": _ffi_trsm,
    "potrf": _ffi_potrf,
    "orgqr": _ffi_orgqr,
    "ungqr": _ffi_orgqr,
}
