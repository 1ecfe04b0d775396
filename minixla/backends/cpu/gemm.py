"""Float dots as calls of the cblas GEMM in NumPy's own OpenBLAS, from compiled code.

One generated kernel per element type (`gemm_spec`) calls the library's `cblas_?gemm` once per
batch matrix, or `cblas_?gemv` where one operand is a vector (m or n is 1: OpenBLAS's GEMM
took 84-114 us for a 512-vector times a 512x1000 matrix, its GEMV 16 us, as NumPy uses).
The dot thunk calls that kernel from the driver, and a native while loop calls the same kernel
from inside the loop, with the same arguments: the two paths run the same library calls, so
they give the same bits.

The library is the OpenBLAS mapped into the process from NumPy's install (its wheel's
`numpy.libs`), else any mapped OpenBLAS exporting cblas. Its routines' addresses are registered with
LLVM under fixed names (`llvmlite.binding.add_symbol`) and the kernel declares them as Numba
external functions: a call by symbol name is resolved when the machine code is loaded, so the
kernel can be cached (a ctypes pointer would bake in this process's address). The names carry
the integer width of the library's interface (`blasint`: 64 bits in NumPy's ILP64 wheels), so
a kernel compiled against one width is never loaded against the other.

A dot's operands are passed as stored where one GEMM operand form fits: row-major `[m, k]`
(no transpose) or `[k, m]` (transposed, leading dimension m), batch dims leading; otherwise
the caller copies the operand into `[batch, m, k]` order first (`DotPlan.copy_lhs/rhs`).
"""

from __future__ import annotations

import ctypes
import math
import os
from dataclasses import dataclass

import numpy as np

from .blas_threads import always_serial, openblas_paths
from .kernels import KernelSpec

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# (symbol prefix, suffix, integer width): NumPy's wheels' ILP64 names, then plain ones
# (cblas_sgemm64_, scipy_cblas_dgemv64_, ...)
_SYMBOLS = (("scipy_cblas_", "64_", 64), ("cblas_", "64_", 64), ("cblas_", "", None))
_ROUTINES = {("f32", "gemm"): "sgemm", ("f64", "gemm"): "dgemm"}
_ROUTINES.update({("f32", "gemv"): "sgemv", ("f64", "gemv"): "dgemv"})
# OpenBLAS's AVX-512 kernels compute GEMMs of at most 10^6 multiply-adds without packing the
# operands (its small-matrix path); above that, a GEMM with few rows spends most of its time
# packing B. Such GEMMs are run as column blocks under the limit (`DotPlan.block`).
_SMALL_PATH_CORES = ("skylakex", "cooperlake", "sapphirerapids")
SMALL_PATH_MACS = 1_000_000
MIN_BLOCK_COLUMNS = 128  # _columns_per_call


@dataclass(frozen=True)
class Blas:
    path: str
    names: dict  # (element type, "gemm" or "gemv") -> the registered symbol name
    width: int  # bits of the interface's integers
    small_path: bool  # the core OpenBLAS runs has its small-matrix GEMM path
    exports: dict  # registered symbol name -> the library's own (native_library.py links it)


_FOUND: list = []  # [Blas | None] once looked up


def library() -> Blas | None:
    """The GEMM kernels call, or None where no usable cblas is mapped (dots then run through
    np.matmul)."""
    if not _FOUND:
        _FOUND.append(_find())
    return _FOUND[0]


def _find() -> Blas | None:
    found = locate()
    if found is not None:
        _register(ctypes.CDLL(found.path), found.exports)
    return found


def locate() -> Blas | None:
    """The library `library()` uses, found without registering anything with LLVM (so
    without importing llvmlite)."""
    for path in _mapped_openblas():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, symbol_width in _SYMBOLS:
            symbols = {key: f"{prefix}{name}{suffix}" for key, name in _ROUTINES.items()}
            if not all(hasattr(lib, symbol) for symbol in symbols.values()):
                continue
            width = _width(lib, symbol_width)
            if width is not None:
                names = {key: f"minixla_cblas_{key[0]}_{key[1]}_i{width}" for key in symbols}
                exports = {names[key]: symbols[key] for key in symbols}
                small = _core(lib).lower() in _SMALL_PATH_CORES
                return Blas(path, names, width, small, exports)
    return None


def _core(lib) -> str:
    for symbol in (
        "scipy_openblas_get_corename64_",
        "openblas_get_corename64_",
        "openblas_get_corename",
    ):
        fn = getattr(lib, symbol, None)
        if fn is not None:
            fn.restype = ctypes.c_char_p
            return (fn() or b"").decode(errors="replace")
    return ""


def _mapped_openblas() -> list[str]:
    """OpenBLAS libraries mapped into this process, NumPy's own first."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(np.__file__)))
    ours = [os.path.join(site, "numpy"), os.path.join(site, "numpy.libs")]
    paths = [p for p in openblas_paths() if p.endswith(".so") or ".so." in p]
    return sorted(paths, key=lambda p: (not any(p.startswith(d) for d in ours), p))


def _width(library, symbol_width: int | None) -> int | None:
    if symbol_width is not None:
        return symbol_width
    config = getattr(library, "openblas_get_config", None)
    if config is None:
        return None
    config.restype = ctypes.c_char_p
    return 64 if b"USE64BITINT" in (config() or b"") else 32


def _register(lib, exports: dict) -> None:
    import llvmlite.binding as llvm

    for name, symbol in exports.items():
        llvm.add_symbol(name, ctypes.cast(getattr(lib, symbol), ctypes.c_void_p).value)


def available(dtype: str) -> bool:
    found = library()
    return found is not None and (dtype, "gemm") in found.names


_KERNEL = '''"""GEMM and GEMV of NumPy's BLAS, {dtype}: one call per batch matrix."""
import numpy as np
from numba import njit, types
from minixla.backends.cpu import gemm as _library

_library.library()  # registers the symbols before this module's machine code is loaded
_I = types.int{width}
_P = types.intp
_F = types.{scalar}
gemm = types.ExternalFunction(
    "{gemm}", types.void(types.int32, types.int32, types.int32, _I, _I, _I, _F, _P, _I, _P, _I,
                         _F, _P, _I),
)
gemv = types.ExternalFunction(
    "{gemv}", types.void(types.int32, types.int32, _I, _I, _F, _P, _I, _P, _I, _F, _P, _I),
)
blasint = np.int{width}
ONE, ZERO = np.{scalar}(1), np.{scalar}(0)
ROW_MAJOR, NO_TRANS, TRANS = np.int32({row_major}), np.int32({no_trans}), np.int32({trans})


@njit(error_model='numpy', boundscheck=False, nogil=True, cache=CACHE)
def kernel(a, b, c, dims, scratch):
    # dims: batch, m, n, k, transpose a, transpose b, lda, ldb, batch stride of a and of b,
    # columns per GEMM call, routine (0 GEMM, 1 GEMV of b, 2 GEMV of a, 3 GEMM of the
    # transposed product)
    batch, m, n, k = dims[0], dims[1], dims[2], dims[3]
    if k == 0:
        c[:] = 0
        return
    trans_a, trans_b = np.int32(dims[4]), np.int32(dims[5])
    lda, ldb, stride_a, stride_b, block = dims[6], dims[7], dims[8], dims[9], dims[10]
    routine = dims[11]
    pa, pb, pc = np.intp(a.ctypes.data), np.intp(b.ctypes.data), np.intp(c.ctypes.data)
    ps = np.intp(scratch.ctypes.data)  # routine 3's [n, m] product (the caller's buffer:
    # no allocation here, so the kernel links without Numba's runtime)
    for i in range(batch):
        a_i, b_i = pa + i * stride_a * {size}, pb + i * stride_b * {size}
        c_i = pc + i * m * n * {size}
        if routine == 1:  # one row of a: c = b^T a, b stored [k, n] (or [n, k] transposed)
            rows, columns = (n, k) if trans_b == TRANS else (k, n)
            gemv(ROW_MAJOR, NO_TRANS if trans_b == TRANS else TRANS, blasint(rows),
                 blasint(columns), ONE, b_i, blasint(ldb), a_i, blasint(1), ZERO, c_i, blasint(1))
        elif routine == 2:  # one column of b: c = a b, a stored [m, k] (or [k, m] transposed)
            rows, columns = (k, m) if trans_a == TRANS else (m, k)
            gemv(ROW_MAJOR, trans_a, blasint(rows), blasint(columns), ONE, a_i, blasint(lda),
                 b_i, blasint(1), ZERO, c_i, blasint(1))
        elif routine == 3:  # few rows, b stored [n, k]: c^T = b a^T, then transposed into c
            gemm(ROW_MAJOR, NO_TRANS, TRANS, blasint(n), blasint(m), blasint(k), ONE, b_i,
                 blasint(ldb), a_i, blasint(lda), ZERO, ps, blasint(m))
            base = i * m * n
            for r in range(m):
                for col in range(n):
                    c[base + r * n + col] = scratch[col * m + r]
        else:
            for j in range(0, n, block):
                b_j = b_i + (j * ldb if trans_b == TRANS else j) * {size}
                gemm(ROW_MAJOR, trans_a, trans_b, blasint(m), blasint(min(block, n - j)),
                     blasint(k), ONE, a_i, blasint(lda), b_j, blasint(ldb), ZERO,
                     c_i + j * {size}, blasint(n))
'''


def gemm_spec(dtype: str) -> KernelSpec:
    """The dot kernel for `dtype` ("f32" or "f64"): kernel(a, b, c, dims, scratch), every array
    flat; `scratch` holds m * n elements where the plan's routine is 3 (`DotPlan.scratch`)."""
    blas = library()
    assert blas is not None
    source = _KERNEL.format(
        gemm=blas.names[(dtype, "gemm")],
        gemv=blas.names[(dtype, "gemv")],
        dtype=dtype,
        width=blas.width,
        scalar="float32" if dtype == "f32" else "float64",
        size=4 if dtype == "f32" else 8,
        row_major=ROW_MAJOR,
        no_trans=NO_TRANS,
        trans=TRANS,
    )
    args = [("param", 0), ("param", 1), ("out", 0), ("dims", None), ("scratch", None)]
    dtypes = [dtype, dtype, dtype, "s64", dtype]  # called by GemmDot and native loops
    spec = KernelSpec("kernel", source, args, [1] * 5, dtypes, True, False)
    spec.kid = spec.content_id()
    return spec


@dataclass(frozen=True)
class DotPlan:
    """How a dot instruction maps onto batched GEMMs of row-major operands."""

    batch: int
    m: int
    n: int
    k: int
    copy_lhs: tuple | None  # (dims, permutation) of a transpose into [batch, m, k] order
    copy_rhs: tuple | None  # ... into [batch, k, n]
    dims: np.ndarray  # the kernel's dims argument

    @property
    def flops(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def empty(self) -> bool:
        return self.batch * self.m * self.n == 0

    @property
    def scratch(self) -> int:
        """Elements of the kernel's scratch argument: the transposed product's, or none."""
        return self.m * self.n if self.dims[11] == 3 else 0


def _operand_form(dims, batch, first, second) -> tuple[bool, tuple | None]:
    """(transposed, copy) for an operand whose GEMM matrix is [first, second] per batch: as
    stored when its dims are batch + first + second (plain) or batch + second + first
    (transposed); else a copy into batch + first + second order."""
    if batch + first + second == list(range(len(dims))):
        return False, None
    if batch + second + first == list(range(len(dims))):
        return True, None
    return False, (tuple(dims), tuple(batch + first + second))


def plan(instr) -> DotPlan:
    attrs = instr.attrs
    lhs, rhs = instr.operand(0).shape, instr.operand(1).shape
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc = list(attrs.get("lhs_contracting_dims", ()))
    rc = list(attrs.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs.rank) if d not in lb + lc]
    rf = [d for d in range(rhs.rank) if d not in rb + rc]
    batch = math.prod(lhs.dims[d] for d in lb)
    m, k = math.prod(lhs.dims[d] for d in lf), math.prod(lhs.dims[d] for d in lc)
    n = math.prod(rhs.dims[d] for d in rf)
    trans_a, copy_lhs = _operand_form(lhs.dims, lb, lf, lc)
    trans_b, copy_rhs = _operand_form(rhs.dims, rb, rc, rf)
    lda = max(1, m if trans_a else k)
    ldb = max(1, k if trans_b else n)
    dims = np.array(
        [batch, m, n, k, TRANS if trans_a else NO_TRANS, TRANS if trans_b else NO_TRANS]
        + [lda, ldb, m * k, k * n, _columns_per_call(m, n, k, trans_a, trans_b)]
        + [_routine(m, n, k, trans_a, trans_b)],
        np.int64,
    )
    return DotPlan(batch, m, n, k, copy_lhs, copy_rhs, dims)


def _routine(m: int, n: int, k: int, trans_a: bool, trans_b: bool) -> int:
    """The kernel's routine: 1 GEMV of b, 2 GEMV of a, 3 the transposed product, 0 GEMM."""
    if m == 1:
        return 1
    if n == 1:
        return 2
    return 3 if _transposed_product(m, n, k, trans_a, trans_b) else 0


def _transposed_product(m: int, n: int, k: int, trans_a: bool, trans_b: bool) -> bool:
    """Compute C^T = B A^T and transpose it? For row-major A [m, k] times B stored [n, k]
    (a PyTorch linear layer's weight) with few rows. Measured on a Zen 4 core, f32, k 64-512,
    n 512-4096, the transposed product plus the transposing copy took 0.53-0.61x the time of
    the GEMM as written for 8 rows, 0.70-0.93x for 32; for 48-96 rows 0.76-0.93x with k 512
    but 0.9-1.2x with k 64; 0.96-1.3x for 128 rows."""
    few_rows = m <= 32 or (m <= 96 and k >= 256)
    return trans_b and not trans_a and few_rows and n >= 128 and m * n * k >= 1 << 18


def _columns_per_call(m: int, n: int, k: int, trans_a: bool, trans_b: bool) -> int:
    """Columns of C per GEMM call: all of them, except for a GEMM with few rows above the
    small-matrix path's limit, which runs as blocks of columns under it. Measured on a Zen 4
    core (OpenBLAS's SkylakeX kernels), f32 16x128x1024: 97 us as one call, 45 us as three;
    8x256x1024: 319 against 42 us. Blocks narrower than MIN_BLOCK_COLUMNS lose: m x k x 1024
    in blocks of 240-976 columns took 0.40-0.91x the time of one call, in blocks of 112
    1.07-1.35x (32x256, 64x128, 16x512; an LSTM's recurrent GEMM is 32x256x1024), of 48
    1.5-1.9x. Not with B transposed and A not (row-major), which OpenBLAS keeps off its small
    path, nor for GEMMs large enough for BLAS threads."""
    blas = library()
    if (
        blas is None
        or not blas.small_path
        or m > 128
        or (trans_b and not trans_a)
        or m * n * k <= SMALL_PATH_MACS
        or not always_serial(2.0 * m * n * k)
    ):
        return max(n, 1)
    columns = SMALL_PATH_MACS // (m * k) // 16 * 16
    return columns if columns >= MIN_BLOCK_COLUMNS else n
