"""Interpreter handlers for the linear-algebra ops: dot, convolution, fft, triangular-solve,
cholesky and the batch-norm family.

Contractions run in a work type wide enough for the result and round once at the end: narrow
floats (f16, bf16, f8) in f32, f32 in f32, f64 in f64, integers in 64 bits with the result
wrapped to its width (so s8 x s8 -> s32 wraps exactly as an s32 accumulator would). The
factorizations and batch norm run in f64 / c128, which only makes them more accurate.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import UnsupportedError
from ..ir import WindowDim, parse_dim_labels
from ..ir.dtypes import COMPLEX, PRED, SIGNED, UNSIGNED
from .convert import F32, F64, convert, element_type, round_to_dtype, wrap_int
from .evaluator import as_dtype

_SPATIAL_LETTERS = "hijklmopqrstuvwxyz"  # einsum labels: never n, g, c or d (batch, group, feature)


def _work_dtype(result: np.dtype, *inputs: np.dtype) -> np.dtype:
    kind = element_type(result).kind
    if kind == COMPLEX:
        wide = any(d in (np.complex128, F64) for d in (result, *inputs))
        return np.dtype(np.complex128 if wide else np.complex64)
    if kind in (SIGNED, PRED):
        return np.dtype(np.int64)
    if kind == UNSIGNED:
        return np.dtype(np.uint64)
    return F64 if F64 in (result, *inputs) else F32


def _finish(values: np.ndarray, shape) -> np.ndarray:
    """Rounds or wraps a work-type result to the instruction's element type."""
    dtype = shape.numpy_dtype
    kind = element_type(dtype).kind
    if kind == PRED:
        return values != 0
    if kind in (SIGNED, UNSIGNED):
        return wrap_int(values, dtype)
    if kind == COMPLEX:
        return values.astype(dtype)
    return round_to_dtype(values, dtype)


def _wide(values: np.ndarray) -> np.ndarray:
    """Values in f64 or c128, the work type of factorizations and batch norm."""
    return values.astype(np.complex128 if values.dtype.kind == "c" else F64)


# ---- dot ----------------------------------------------------------------------------------------


def _dot(ev, instr, operands):
    lhs, rhs = operands
    work = _work_dtype(instr.shape.numpy_dtype, lhs.dtype, rhs.dtype)
    if work == F32 and lhs.dtype == rhs.dtype == F32:
        # Products of f32 values are exact in f64, so the f64 sums hardly depend on how BLAS
        # orders them: the result is the same whichever operand comes first. In f32 it was
        # not everywhere: OpenBLAS's Haswell kernels round A^T B and (B^T A)^T differently,
        # and a pass that folds a transpose into a dot changed the interpreter's bits. Where
        # the f32 sum overflows (or meets inf or NaN) its value stands, as in XLA: in f64,
        # 1e30 * 1e30 - 1e30 * 1e30 would be 0, not inf - inf
        wide = _contract(instr.attrs, lhs, rhs, F64)
        if _f32_sum_stays_finite(instr.attrs, lhs, rhs):
            return _finish(wide, instr.shape)
        with np.errstate(over="ignore", invalid="ignore"):
            narrow = _contract(instr.attrs, lhs, rhs, F32)
        return _finish(np.where(np.isfinite(narrow), wide, narrow), instr.shape)
    return _finish(_contract(instr.attrs, lhs, rhs, work), instr.shape)


_F32_HALF_MAX = float(np.finfo(np.float32).max) / 2


def _f32_sum_stays_finite(attrs, lhs: np.ndarray, rhs: np.ndarray) -> bool:
    """No f32 partial sum of the dot can overflow or meet inf or NaN: every one is at most
    the terms' count times the largest magnitudes' product (with room for rounding), so the
    f32 contraction that checks for them need not run (the common case)."""
    if not lhs.size or not rhs.size:
        return True
    terms = math.prod(lhs.shape[d] for d in attrs.get("lhs_contracting_dims", ()))
    with np.errstate(over="ignore", invalid="ignore"):
        bound = float(np.max(np.abs(lhs))) * float(np.max(np.abs(rhs))) * terms
    return bound < _F32_HALF_MAX  # False for inf and NaN too


def _contract(attrs, lhs: np.ndarray, rhs: np.ndarray, work: np.dtype) -> np.ndarray:
    """dot's contraction in the work type: batch dims, then lhs free dims, then rhs free."""
    lhs_batch = list(attrs.get("lhs_batch_dims", ()))
    rhs_batch = list(attrs.get("rhs_batch_dims", ()))
    lhs_contract = list(attrs.get("lhs_contracting_dims", ()))
    rhs_contract = list(attrs.get("rhs_contracting_dims", ()))
    lhs_free = [d for d in range(lhs.ndim) if d not in lhs_batch + lhs_contract]
    rhs_free = [d for d in range(rhs.ndim) if d not in rhs_batch + rhs_contract]

    def size(array, dims):
        return math.prod(array.shape[d] for d in dims)

    lhs3 = (
        lhs.transpose(lhs_batch + lhs_free + lhs_contract)
        .astype(work)
        .reshape(size(lhs, lhs_batch), size(lhs, lhs_free), size(lhs, lhs_contract))
    )
    rhs3 = (
        rhs.transpose(rhs_batch + rhs_contract + rhs_free)
        .astype(work)
        .reshape(size(rhs, rhs_batch), size(rhs, rhs_contract), size(rhs, rhs_free))
    )
    return np.matmul(lhs3, rhs3).reshape(
        [lhs.shape[d] for d in lhs_batch + lhs_free] + [rhs.shape[d] for d in rhs_free]
    )


def _scaled_dot(ev, instr, operands):
    """dot of the operands times their block scales, each scale element repeated over its
    block; products and sums in f32 (f64 if an input is f64), converted once at the end."""
    lhs, rhs, lhs_scale, rhs_scale = operands
    work = F64 if F64 in (lhs.dtype, rhs.dtype, lhs_scale.dtype, rhs_scale.dtype) else F32

    def scaled(values, scales):
        for axis, (size, blocks) in enumerate(zip(values.shape, scales.shape)):
            scales = np.repeat(scales, size // blocks, axis=axis)
        return values.astype(work) * scales.astype(work)

    return convert(
        _contract(instr.attrs, scaled(lhs, lhs_scale), scaled(rhs, rhs_scale), work),
        instr.shape.numpy_dtype,
    )


# ---- convolution --------------------------------------------------------------------------------


def _dilate_and_pad(x: np.ndarray, window) -> np.ndarray:
    """Applies lhs (base) dilation, then edge padding (negative = crop) to spatial axes 2.."""
    for i, wd in enumerate(window):
        axis = 2 + i
        if wd.lhs_dilation > 1 and x.shape[axis] > 0:
            shape = list(x.shape)
            shape[axis] = (x.shape[axis] - 1) * wd.lhs_dilation + 1
            dilated = np.zeros(shape, x.dtype)
            index = [slice(None)] * x.ndim
            index[axis] = slice(None, None, wd.lhs_dilation)
            dilated[tuple(index)] = x
            x = dilated
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(wd.padding_low, 0), max(wd.padding_high, 0))
        x = np.pad(x, widths)
        index = [slice(None)] * x.ndim
        index[axis] = slice(
            max(-wd.padding_low, 0), max(x.shape[axis] - max(-wd.padding_high, 0), 0)
        )
        x = x[tuple(index)]
    return x


def _window_patches(x: np.ndarray, window, kernel_sizes) -> np.ndarray | None:
    """[N, C, out spatial..., kernel spatial...] view of x, or None when the output is empty."""
    spatial = tuple(range(2, x.ndim))
    extents = [(k - 1) * wd.rhs_dilation + 1 for k, wd in zip(kernel_sizes, window)]
    if any(x.shape[a] < e for a, e in zip(spatial, extents)) or 0 in kernel_sizes:
        return None
    view = np.lib.stride_tricks.sliding_window_view(x, extents, axis=spatial)
    index = (
        [slice(None)] * 2
        + [slice(None, None, wd.stride) for wd in window]
        + [slice(None, None, wd.rhs_dilation) for wd in window]
    )
    return view[tuple(index)]


# Windows (every tap of every output position) are a view; one contraction copies them. Past
# this many bytes the taps are contracted one at a time instead (XLA's depthwise filter
# gradients have windows of thousands of taps: 12.7 GiB as one copy).
_WINDOW_COPY_BYTES = 1 << 28


def _contract_windows(spec: str, patches: np.ndarray, kernel: np.ndarray, nsp: int) -> np.ndarray:
    if nsp == 0 or patches.size * patches.itemsize <= _WINDOW_COPY_BYTES:
        return np.einsum(spec, patches, kernel, optimize=True)
    one_tap = spec.replace(_SPATIAL_LETTERS[:nsp].upper(), "")
    taps = patches.shape[-nsp:]
    total = None
    for tap in np.ndindex(*taps):
        term = np.einsum(one_tap, patches[(...,) + tap], kernel[(...,) + tap], optimize=True)
        total = term if total is None else np.add(total, term, out=total)
    return total


def _convolution(ev, instr, operands):
    lhs, rhs = operands
    attrs = instr.attrs
    dims = parse_dim_labels(str(attrs["dim_labels"]))
    groups, batch_groups = attrs.get("feature_group_count", 1), attrs.get("batch_group_count", 1)
    if groups > 1 and batch_groups > 1:
        raise UnsupportedError("convolution with both feature and batch groups")
    kernel_sizes = [rhs.shape[d] for d in dims.kernel_spatial]
    window = attrs["window"].dims if "window" in attrs else tuple(map(WindowDim, kernel_sizes))
    work = _work_dtype(instr.shape.numpy_dtype, lhs.dtype, rhs.dtype)
    x = lhs.transpose((dims.input_batch, dims.input_feature) + dims.input_spatial).astype(work)
    kernel = rhs.transpose(
        (dims.kernel_output_feature, dims.kernel_input_feature) + dims.kernel_spatial
    ).astype(work)
    reversed_axes = [2 + i for i, wd in enumerate(window) if wd.reversal]
    kernel = np.flip(kernel, reversed_axes) if reversed_axes else kernel
    patches = _window_patches(_dilate_and_pad(x, window), window, kernel_sizes)
    out_shape = instr.shape.dims
    if patches is None:
        return np.zeros(out_shape, instr.shape.numpy_dtype)
    # Split into groups as [g, ...]: feature groups cut C (and O) into `groups` contiguous blocks;
    # batch groups cut N (and O) into `batch_groups` contiguous blocks.
    n, c, nsp = patches.shape[0], patches.shape[1], len(window)
    out_feats = kernel.shape[0]
    # Spatial subscripts avoid g, n, c and d, which name groups, batch and features.
    sp = _SPATIAL_LETTERS[:nsp]
    ks = sp.upper()
    if batch_groups > 1:
        patches = patches.reshape((batch_groups, n // batch_groups) + patches.shape[1:])
        spec = f"gnc{sp}{ks},gdc{ks}->ngd{sp}"
        kernel = kernel.reshape((batch_groups, out_feats // batch_groups) + kernel.shape[1:])
    else:
        patches = patches.reshape((n, groups, c // groups) + patches.shape[2:])
        spec = f"ngc{sp}{ks},gdc{ks}->ngd{sp}"
        kernel = kernel.reshape((groups, out_feats // groups) + kernel.shape[1:])
    out = _contract_windows(spec, patches, kernel, nsp)
    out = out.reshape((out.shape[0], out_feats) + out.shape[3:])
    # canonical (b, f, spatial...) -> the output's dim_labels order
    source = [0] * out.ndim
    source[dims.output_batch], source[dims.output_feature] = 0, 1
    for i, axis in enumerate(dims.output_spatial):
        source[axis] = 2 + i
    return _finish(np.asarray(out.transpose(source), order="C"), instr.shape)


# ---- fft ----------------------------------------------------------------------------------------


def _fft(ev, instr, operands):
    return as_dtype(
        fft_values(
            operands[0],
            str(instr.attrs["fft_type"]),
            tuple(instr.attrs["fft_length"]),
            instr.shape.dims,
        ),
        instr.shape,
    )


def fft_values(x: np.ndarray, kind: str, lengths: tuple, dims, fft=np.fft, wide=True):
    """The transform with the result's `dims`, in double precision (complex128 or float64);
    the cpu backend calls it too. `fft` is the module with NumPy's fft functions (the cpu
    backend passes scipy.fft), and `wide=False` keeps f32/c64 operands in single precision."""
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    complex_type = np.complex128 if wide or x.dtype in (F64, np.complex128) else np.complex64
    real_type = F64 if complex_type == np.complex128 else F32
    if kind in ("FFT", "IFFT"):
        return _complex_fft(x.astype(complex_type), lengths, axes, kind == "IFFT", fft)
    if kind not in ("RFFT", "IRFFT"):
        raise UnsupportedError(f"fft_type {kind}")
    if 0 in lengths or 0 in x.shape or 0 in tuple(dims):
        return np.zeros(tuple(dims), complex_type if kind == "RFFT" else real_type)
    if kind == "RFFT":
        return fft.rfftn(x.astype(real_type), s=lengths, axes=axes)
    return fft.irfftn(x.astype(complex_type), s=lengths, axes=axes)


def _complex_fft(x: np.ndarray, lengths, axes, inverse: bool, fft=np.fft) -> np.ndarray:
    """FFT/IFFT of fft_length points, as XLA's evaluator: the operand is cut or zero-padded
    to the lengths, transformed, and the result cut or zero-padded back to the operand's
    shape; a zero length or an empty operand gives zeros."""
    if 0 in lengths or 0 in x.shape:
        return np.zeros_like(x)
    transform = fft.ifftn if inverse else fft.fftn
    out = transform(x, s=lengths, axes=axes)
    fitted = np.zeros_like(x)
    common = tuple(slice(0, min(a, b)) for a, b in zip(x.shape, out.shape))
    fitted[common] = out[common]
    return fitted


# ---- triangular-solve and cholesky --------------------------------------------------------------


def _substitute(tri: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solves tri @ x = b by forward (lower) or back (upper) substitution, batched."""
    m = tri.shape[-1]
    x = np.zeros(np.broadcast_shapes(tri.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)
    for i in range(m) if lower else reversed(range(m)):
        # rows of x not solved yet are still zero, so the full row product is the partial sum
        rest = b[..., i, :] - (tri[..., i : i + 1, :] @ x)[..., 0, :]
        x[..., i, :] = rest / tri[..., i, i, None]
    return x


def _triangular_solve(ev, instr, operands):
    a, b = (_wide(v) for v in operands)
    attrs = instr.attrs
    lower = bool(attrs.get("lower", False))
    tri = np.tril(a) if lower else np.triu(a)  # the other triangle is never read
    if attrs.get("unit_diagonal", False):
        diag = np.arange(a.shape[-1])
        tri[..., diag, diag] = 1
    transpose = str(attrs.get("transpose_a", "NO_TRANSPOSE"))
    if transpose in ("TRANSPOSE", "ADJOINT"):
        tri, lower = tri.swapaxes(-1, -2), not lower
        tri = tri.conj() if transpose == "ADJOINT" else tri
    with np.errstate(all="ignore"):  # a zero pivot gives inf/nan, as in XLA
        if attrs.get("left_side", False):
            x = _substitute(tri, b, lower)
        else:  # x @ op(a) = b  <=>  op(a)^T @ x^T = b^T
            x = _substitute(tri.swapaxes(-1, -2), b.swapaxes(-1, -2), not lower).swapaxes(-1, -2)
    return _finish(x, instr.shape)


def _cholesky(ev, instr, operands):
    lower = bool(instr.attrs.get("lower", False))
    return _finish(cholesky_values(operands[0], lower), instr.shape)


def cholesky_values(a: np.ndarray, lower: bool) -> np.ndarray:
    """The factor in the work type (f64 or c128), column by column; a matrix that is not
    positive definite gives NaN from the failing column on (cpu's fallback when LAPACK fails)."""
    a = _wide(a)
    # upper: U^H U = A with A read from the upper triangle; L = U^H factors conj(A)^T's lower part
    source = a if lower else a.conj().swapaxes(-1, -2)
    n = a.shape[-1]
    factor = np.zeros_like(a)
    with np.errstate(all="ignore"):  # not positive definite -> NaN, as XLA's CPU result
        for j in range(n):
            row = factor[..., j, :j]
            pivot = np.sqrt(source[..., j, j].real - np.sum(np.abs(row) ** 2, axis=-1))
            factor[..., j, j] = pivot
            dots = (factor[..., j + 1 :, :j] @ row.conj()[..., None])[..., 0]
            factor[..., j + 1 :, j] = (source[..., j + 1 :, j] - dots) / pivot[..., None]
    result = factor if lower else factor.conj().swapaxes(-1, -2)
    return np.asarray(result, order="C")


# ---- batch norm ---------------------------------------------------------------------------------


def _per_feature(vector: np.ndarray, rank: int, feature: int) -> np.ndarray:
    shape = [1] * rank
    shape[feature] = vector.size
    return _wide(vector).reshape(shape)


def _reduce_axes(x: np.ndarray, feature: int) -> tuple[int, ...]:
    return tuple(d for d in range(x.ndim) if d != feature)


def _batch_norm_training(ev, instr, operands):
    x, scale, offset = operands
    feature, epsilon = instr.attrs["feature_index"], instr.attrs["epsilon"]
    axes, wide = _reduce_axes(x, feature), _wide(x)
    mean = wide.mean(axis=axes)
    centered = wide - _per_feature(mean, x.ndim, feature)
    var = (centered**2).mean(axis=axes)  # biased (population) variance, as XLA
    out = centered / np.sqrt(_per_feature(var, x.ndim, feature) + epsilon) * _per_feature(
        scale, x.ndim, feature
    ) + _per_feature(offset, x.ndim, feature)
    shapes = instr.shape.tuple_shapes
    return (_finish(out, shapes[0]), _finish(mean, shapes[1]), _finish(var, shapes[2]))


def _batch_norm_inference(ev, instr, operands):
    x, scale, offset, mean, var = operands
    feature, epsilon = instr.attrs["feature_index"], instr.attrs["epsilon"]
    rank = x.ndim
    out = (_wide(x) - _per_feature(mean, rank, feature)) / np.sqrt(
        _per_feature(var, rank, feature) + epsilon
    ) * _per_feature(scale, rank, feature) + _per_feature(offset, rank, feature)
    return _finish(out, instr.shape)


def _batch_norm_grad(ev, instr, operands):
    x, scale, mean, var, grad = operands
    feature, epsilon = instr.attrs["feature_index"], instr.attrs["epsilon"]
    axes, rank = _reduce_axes(x, feature), x.ndim
    inv_std = 1.0 / np.sqrt(_wide(var) + epsilon)
    centered = _wide(x) - _per_feature(mean, rank, feature)
    grad = _wide(grad)
    grad_offset = grad.sum(axis=axes)
    grad_centered = (grad * centered).sum(axis=axes)
    count = x.size // max(x.shape[feature], 1)
    # d/dx of scale * (x - mean(x)) / sqrt(var(x) + eps) + offset, with batch statistics
    grad_x = _per_feature(_wide(scale) * inv_std, rank, feature) * (
        grad
        - _per_feature(grad_offset / count, rank, feature)
        - centered * _per_feature(grad_centered / count * inv_std**2, rank, feature)
    )
    shapes = instr.shape.tuple_shapes
    return (
        _finish(grad_x, shapes[0]),
        _finish(grad_centered * inv_std, shapes[1]),
        _finish(grad_offset, shapes[2]),
    )


HANDLERS = {
    "dot": _dot,
    "scaled-dot": _scaled_dot,
    "convolution": _convolution,
    "fft": _fft,
    "triangular-solve": _triangular_solve,
    "cholesky": _cholesky,
    "batch-norm-training": _batch_norm_training,
    "batch-norm-inference": _batch_norm_inference,
    "batch-norm-grad": _batch_norm_grad,
}
