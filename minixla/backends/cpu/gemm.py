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

On CPUs where another of OpenBLAS's kernel sets runs large GEMMs faster than the one it picks
(`LARGE_GEMM_CORES`), GEMM calls above the small-matrix path go to a second OpenBLAS, the
`scipy-openblas32` wheel's, loaded with that kernel set and one thread (`large_library`);
calls under the limit stay on NumPy's, whose small path wins there, and so do the calls of
GEMMs that run on several threads: NumPy's threads are the process's one BLAS pool
(docs/cpu-backend.md says why).
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
from dataclasses import dataclass

import numpy as np

from .blas_threads import OPENBLAS_SERIAL_GEMM, OPENBLAS_SERIAL_GEMV, always_serial, openblas_paths
from .kernels import KernelSpec

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
# (symbol prefix, suffix, integer width): NumPy's wheels' ILP64 names, then plain ones
# (cblas_sgemm64_, scipy_cblas_dgemv64_, ...)
_SYMBOLS = (("scipy_cblas_", "64_", 64), ("cblas_", "64_", 64), ("cblas_", "", None))
_ROUTINES = {("f32", "gemm"): "sgemm", ("f64", "gemm"): "dgemm"}
_ROUTINES.update({("f32", "gemv"): "sgemv", ("f64", "gemv"): "dgemv"})
LAPACK_ROUTINES = ("getrf", "potrf", "geqrf", "orgqr", "gesdd", "syevd", "trsm")  # lapack.py
# OpenBLAS's AVX-512 kernels compute GEMMs of at most 10^6 multiply-adds without packing the
# operands (its small-matrix path); above that, a GEMM with few rows spends most of its time
# packing B. Such GEMMs are run as column blocks under the limit (`DotPlan.block`).
_SMALL_PATH_CORES = ("skylakex", "cooperlake", "sapphirerapids")
SMALL_PATH_MACS = 1_000_000
MIN_BLOCK_COLUMNS = 128  # _columns_per_call
# Host CPUs (LLVM's names) -> the OpenBLAS kernel set for GEMM calls above the small path,
# where it beats the one OpenBLAS picks. Zen 4 runs AVX-512 as two 256-bit halves; OpenBLAS
# picks its SkylakeX kernels there. Measured on one Zen 4 core, f32, Haswell's AVX2 kernels
# against SkylakeX's: 1024^3 19.5-20.1 against 21.6-22.9 ms, 256x1024x4096 19.7-20.4 against
# 21.7-22.7, 32x256x1024 0.19 against 0.26, 8x256x1024 in one call 82 against 146 us (but
# 58 us as SkylakeX's small-path blocks, which stay); on two threads 1024^3 9.96 against 10.8
# (jax.jit 10.1-10.3), but threaded calls stay on NumPy's (module docstring). Under the
# limit SkylakeX's small path wins (16x64x64: 2.2 against 2.8 us). f64 runs the same speed on
# both. MINIXLA_LARGE_GEMM_CORETYPE overrides the table ("default": none); an
# OPENBLAS_CORETYPE the user set is left to rule both libraries.
LARGE_GEMM_CORES = {"znver4": "Haswell"}
_LARGE_PACKAGE = "scipy_openblas32"  # its library: cblas with 32-bit integers, own names
_LARGE_SYMBOLS = {("f32", "gemm"): "scipy_cblas_sgemm"}
LARGE_DIM = 1 << 31  # the large library's integers hold dims below this


@dataclass(frozen=True)
class LargeGemm:
    """The second OpenBLAS, running `core`'s kernels, for GEMM calls above the small path."""

    path: str
    core: str  # the kernel set, as the library itself reports it
    names: dict  # (element type, "gemm") -> the registered symbol name
    exports: dict  # registered symbol name -> the library's own


@dataclass(frozen=True)
class LapackLibrary:
    """The OpenBLAS lapack.py's kernels call: SciPy's where installed (what its Python
    wrappers, and XLA:CPU through them, call; NumPy's build factors small matrices 2x slower
    here: a 32x32 sgetrf 24.6 us against 10.8 through SciPy's wrapper), else NumPy's."""

    path: str
    width: int  # bits of its integers
    exports: dict  # registered symbol name -> the library's own
    names: dict  # (letter, routine) -> the registered name, where the library exports it


@dataclass(frozen=True)
class Blas:
    path: str
    names: dict  # (element type, "gemm" or "gemv") -> the registered symbol name
    width: int  # bits of the interface's integers
    small_path: bool  # the core OpenBLAS runs has its small-matrix GEMM path
    exports: dict  # registered symbol name -> the library's own (native_library.py links it)
    large: LargeGemm | None = None
    style: tuple = ("cblas_", "")  # its symbols' prefix and suffix (cblas_sgemm64_: 64_)

    @property
    def small_macs(self) -> int:
        """Multiply-adds up to which a GEMM call stays on this library when a large one is
        loaded: the small path's limit, or 0 where this library's kernels have none."""
        return SMALL_PATH_MACS if self.small_path else 0

    def large_gemm(self, dtype: str) -> str | None:
        """The registered name of the large library's GEMM for `dtype`, or None."""
        return None if self.large is None else self.large.names.get((dtype, "gemm"))

    def runs_large(self, dtype: str, m: int, n: int, k: int, *leading: int) -> bool:
        """Does an m x k x n GEMM call of `dtype` go to the large library? Above the small
        path, where its dims and leading dimensions fit the library's 32-bit integers (what
        the kernel source tests too: `_gemm_call`)."""
        return (
            self.large_gemm(dtype) is not None
            and m * n * k > self.small_macs
            and max(m, n, k, *leading) < LARGE_DIM
        )


_FOUND: list = []  # [Blas | None] once looked up
_LARGE: list = []  # [LargeGemm | None] once loaded


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
        if found.large is not None:
            _register(ctypes.CDLL(found.large.path), found.large.exports)
    return found


def large_gemm_core(host_cpu: str | None = None) -> str | None:
    """The OpenBLAS kernel set for large GEMMs on this CPU, or None for OpenBLAS's own."""
    chosen = os.environ.get("MINIXLA_LARGE_GEMM_CORETYPE")
    if chosen is None:
        if os.environ.get("OPENBLAS_CORETYPE"):
            return None
        if host_cpu is None:
            host_cpu = _host_cpu()
        chosen = LARGE_GEMM_CORES.get(host_cpu)
    return None if not chosen or chosen.lower() == "default" else chosen


@functools.lru_cache(maxsize=1)
def _host_cpu() -> str:
    """LLVM's name for this CPU where LARGE_GEMM_CORES names it, else "". Read from
    /proc/cpuinfo (once: every compile's program key asks): importing llvmlite would add
    24 ms to loading a cached program."""
    try:
        with open("/proc/cpuinfo") as info:
            return cpu_name(info.read(16384))
    except OSError:
        return ""


def cpu_name(cpuinfo: str) -> str:
    """`_host_cpu` of the text of /proc/cpuinfo (its first processor's fields)."""
    fields: dict = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    amd = fields.get("vendor_id") == "AuthenticAMD"
    if amd and fields.get("cpu family") == "25" and "avx512f" in fields.get("flags", "").split():
        return "znver4"  # family 19h with AVX-512 (Zen 3 is 19h without it)
    return ""


def large_library() -> LargeGemm | None:
    """The second OpenBLAS, loaded once (before any program library linking it: the loader
    would start it with OpenBLAS's own choice), or None where this CPU keeps one library or
    the wheel is missing or does not run the kernel set asked for."""
    if not _LARGE:
        _LARGE.append(_load_large())
    return _LARGE[0]


def _load_large() -> LargeGemm | None:
    import importlib.util

    core = large_gemm_core()
    # the package's __init__ loads the library itself (globally, with OpenBLAS's choice):
    # find the file without importing it
    spec = importlib.util.find_spec(_LARGE_PACKAGE) if core is not None else None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], "lib")
    try:
        found = sorted(f for f in os.listdir(folder) if f.startswith("libscipy_openblas"))
    except OSError:
        return None
    if not found:
        return None
    path = os.path.join(folder, found[0])
    # OpenBLAS reads its kernel set and thread count from the environment once, when it is
    # loaded; one thread: no pool of its own
    settings = {"OPENBLAS_CORETYPE": core, "OPENBLAS_NUM_THREADS": "1"}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        return None
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    from .blas_threads import keep_on_one_thread, thread_count

    keep_on_one_thread(path)
    reported = _core(lib)
    if (
        reported.lower() != core.lower()
        or thread_count(lib) != 1
        or not all(hasattr(lib, s) for s in _LARGE_SYMBOLS.values())
    ):
        return None  # loaded before, with another kernel set or thread count
    names = {
        key: f"minixla_cblas_{key[0]}_{key[1]}_{reported.lower()}_i32" for key in _LARGE_SYMBOLS
    }
    exports = {names[key]: _LARGE_SYMBOLS[key] for key in names}
    return LargeGemm(path, reported, names, exports)


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
                style = (prefix, suffix)
                return Blas(path, names, width, small, exports, large_library(), style)
    return None


_LAPACK: list = []  # [LapackLibrary | None] once loaded and registered


def lapack_library() -> LapackLibrary | None:
    """The LAPACK library lapack.py's kernels call, its routines registered with LLVM; loaded
    on first use only (SciPy's OpenBLAS is a 30 MB library a program without LAPACK calls
    should not load)."""
    if not _LAPACK:
        found = lapack_locate()
        if found is not None:
            from .blas_threads import libraries_loaded

            _register(ctypes.CDLL(found.path), found.exports)
            libraries_loaded()  # SciPy's may be new to the process: its threads get set too
        _LAPACK.append(found)
    return _LAPACK[0]


@functools.lru_cache(maxsize=1)
def lapack_locate() -> LapackLibrary | None:
    """SciPy's OpenBLAS where it is installed and exports the routines, else NumPy's (the
    BLAS `locate` finds), else None; nothing registered with LLVM."""
    scipy_path = scipy_openblas()
    if scipy_path is not None:
        try:
            scipy_lib = ctypes.CDLL(scipy_path)
        except OSError:
            scipy_lib = None
        if scipy_lib is not None:
            bits = _width(scipy_lib, None) or 32  # SciPy's wheels: 32-bit integers
            symbols = _lapack_symbols(scipy_lib, "scipy_cblas_", "", bits)
            if len(symbols) == 2 * len(LAPACK_ROUTINES):
                return _named(symbols, scipy_path, bits)
    blas = locate()
    if blas is None:
        return None
    symbols = _lapack_symbols(ctypes.CDLL(blas.path), *blas.style, blas.width)
    return _named(symbols, blas.path, blas.width) if symbols else None


@functools.lru_cache(maxsize=1)
def scipy_openblas() -> str | None:
    """The OpenBLAS SciPy's wheel bundles (`scipy.libs`), found without importing SciPy (the
    program cache's key names it: lapack.py's kernels call it), or None."""
    import importlib.util

    spec = importlib.util.find_spec("scipy")
    for folder in list(spec.submodule_search_locations or []) if spec is not None else []:
        libs = os.path.join(os.path.dirname(folder), "scipy.libs")
        try:
            found = sorted(f for f in os.listdir(libs) if f.startswith("libscipy_openblas"))
        except OSError:
            continue
        if found:
            return os.path.join(libs, found[0])
    return None


def _named(symbols: dict, path: str, width: int) -> LapackLibrary:
    exports = {ours: own for ours, own in symbols.values()}
    return LapackLibrary(path, width, exports, {key: symbols[key][0] for key in symbols})


def _lapack_symbols(lib, prefix: str, suffix: str, width: int) -> dict:
    """{(letter, routine): (registered name, the library's own)} of the LAPACK routines
    lapack.py calls that the library exports: LAPACKE's `_work` entry points (values by
    value, no NaN check, no allocation) and cblas's trsm, named as its cblas routines are."""
    lapacke = prefix.replace("cblas_", "LAPACKE_")
    found = {}
    for letter in "sd":
        for routine in LAPACK_ROUTINES:
            own = (
                f"{prefix}{letter}trsm{suffix}"
                if routine == "trsm"
                else f"{lapacke}{letter}{routine}_work{suffix}"
            )
            if hasattr(lib, own):
                found[letter, routine] = (f"minixla_lapack_{letter}{routine}_i{width}", own)
    return found


def _core(lib) -> str:
    for symbol in (
        "scipy_openblas_get_corename64_",
        "scipy_openblas_get_corename",
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
{large_declaration}ONE, ZERO = np.{scalar}(1), np.{scalar}(0)
ROW_MAJOR, NO_TRANS, TRANS = np.int32({row_major}), np.int32({no_trans}), np.int32({trans})


@njit(error_model='numpy', boundscheck=False, nogil=True, cache=CACHE)
def kernel(a, b, c, dims, scratch):
    # dims: batch, m, n, k, transpose a, transpose b, lda, ldb, batch stride of a and of b,
    # columns per GEMM call, routine (0 GEMM, 1 GEMV of b, 2 GEMV of a, 3 GEMM of the
    # transposed product), large library allowed (1: the dot runs on one thread)
    batch, m, n, k = dims[0], dims[1], dims[2], dims[3]
    if k == 0:
        c[:] = 0
        return
    trans_a, trans_b = np.int32(dims[4]), np.int32(dims[5])
    lda, ldb, stride_a, stride_b, block = dims[6], dims[7], dims[8], dims[9], dims[10]
    routine, large_allowed = dims[11], dims[12]
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
{transposed_call}
            base = i * m * n
            for r in range(m):
                for col in range(n):
                    c[base + r * n + col] = scratch[col * m + r]
        else:
            for j in range(0, n, block):
                b_j = b_i + (j * ldb if trans_b == TRANS else j) * {size}
                columns = min(block, n - j)
{block_call}
'''


_LARGE_DECLARATION = """gemm_large = types.ExternalFunction(
    "{gemm}", types.void(types.int32, types.int32, types.int32, types.int32, types.int32,
                         types.int32, _F, _P, types.int32, _P, types.int32, _F, _P, types.int32),
)
"""


def _gemm_call(args: tuple, indent: int, large: bool, small_macs: int) -> str:
    """Kernel source calling GEMM on `args` (transposes, m, n, k, a, lda, b, ldb, c, ldc):
    the large library's above the small path where one is loaded, the dot runs on one
    thread and the dims fit its integers (`Blas.runs_large`), else NumPy's."""
    ta, tb, m, n, k, a, lda, b, ldb, c, ldc = args

    def call(fn: str, cast: str) -> str:
        return (
            f"{fn}(ROW_MAJOR, {ta}, {tb}, {cast}({m}), {cast}({n}), {cast}({k}), ONE, {a}, "
            f"{cast}({lda}), {b}, {cast}({ldb}), ZERO, {c}, {cast}({ldc}))"
        )

    pad = " " * indent
    if not large:
        return pad + call("gemm", "blasint")
    fits = f"max({m}, {n}, {k}, {lda}, {ldb}, {ldc}) < {LARGE_DIM}"
    return (
        f"{pad}if large_allowed and {m} * {n} * {k} > {small_macs} and {fits}:\n"
        f"{pad}    {call('gemm_large', 'np.int32')}\n"
        f"{pad}else:\n"
        f"{pad}    {call('gemm', 'blasint')}"
    )


def gemm_spec(dtype: str) -> KernelSpec:
    """The dot kernel for `dtype` ("f32" or "f64"): kernel(a, b, c, dims, scratch), every array
    flat; `scratch` holds m * n elements where the plan's routine is 3 (`DotPlan.scratch`)."""
    blas = library()
    assert blas is not None
    large = blas.large_gemm(dtype)
    transposed = ("NO_TRANS", "TRANS", "n", "m", "k", "b_i", "ldb", "a_i", "lda", "ps", "m")
    block = ("trans_a", "trans_b", "m", "columns", "k", "a_i", "lda", "b_j", "ldb")
    block += (f"c_i + j * {4 if dtype == 'f32' else 8}", "n")
    source = _KERNEL.format(
        large_declaration="" if large is None else _LARGE_DECLARATION.format(gemm=large),
        transposed_call=_gemm_call(transposed, 12, large is not None, blas.small_macs),
        block_call=_gemm_call(block, 16, large is not None, blas.small_macs),
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
    def sets_threads(self) -> bool:
        """Could OpenBLAS run one of its calls on several threads? Else no count is set."""
        calls = self.m * self.n * self.k  # a GEMV's matrix elements where m or n is 1
        if self.dims[11] in (1, 2):
            return calls >= OPENBLAS_SERIAL_GEMV
        return calls > OPENBLAS_SERIAL_GEMM

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
        + [_routine(m, n, k, trans_a, trans_b), _large_allowed(instr.shape.dtype, batch, m, n, k)],
        np.int64,
    )
    return DotPlan(batch, m, n, k, copy_lhs, copy_rhs, dims)


def _large_allowed(dtype: str, batch: int, m: int, n: int, k: int) -> int:
    """1 where the dot's GEMM calls may go to the large library: it runs on one BLAS thread
    (blas_threads.threads_for, from its size alone), as that library always does."""
    blas = library()
    large = blas is not None and blas.large_gemm(dtype) is not None
    return int(large and always_serial(2.0 * batch * m * n * k))


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
