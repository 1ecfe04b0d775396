"""XLA:CPU's LAPACK FFI targets (getrf, potrf, geqrf, orgqr, gesdd, syevd, trsm; float32 and
float64) as one compiled kernel per routine and element type that loops over the batch.

The Python loop these replace (libcalls.py, which still runs the complex types) paid SciPy's
wrapper per matrix, 10-25 us, where the routine itself takes a few: a batch of 32 LU
factorizations of 32x32 matrices took 0.66 ms. Here each matrix is copied into LAPACK's
column-major order in a scratch buffer, factored by the routine of SciPy's OpenBLAS where
SciPy is installed (the one its wrappers, and XLA:CPU through them, call), else NumPy's
(`gemm.LapackLibrary`), and copied back. The kernels call LAPACKE's `_work` entry points
(arguments by value, no NaN check, no allocation) and cblas's trsm, registered with LLVM by
gemm.py so the kernels cache and link like its GEMM kernels. The results are what the Python
loop gave: the same routines on the same column-major copies (1-based pivots, the untouched
triangle of potrf, info 1 for a matrix potrf cannot factor, and that matrix returned as it
was).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from ...reference.lapack_ffi import FLAG
from . import blas_threads
from .kernels import KernelSpec, storage_dtype

COL_MAJOR = 102  # LAPACKE's and cblas's layout constant
# cblas's enums for trsm
_SIDE = {True: 141, False: 142}  # left, right
_UPLO = {False: 121, True: 122}  # upper, lower
_TRANSPOSE = {FLAG["N"]: 111, FLAG["T"]: 112, FLAG["C"]: 113}
_DIAG = {False: 131, True: 132}  # non-unit, unit
_DTYPES = {"s": "f32", "d": "f64"}
_WORKSPACE_ROUTINES = ("geqrf", "orgqr")
_INTEGER_SCRATCH = ("getrf", "gesdd", "syevd")  # pivots or iwork

_HEADER = '''"""{routine} of gemm.lapack_library()'s LAPACK, {dtype}: one call per batch matrix."""
import numpy as np
from numba import njit, types
from minixla.backends.cpu import gemm as _library

_library.lapack_library()  # registers the symbols before this module's machine code is loaded
_I = types.int{width}
_P = types.intp
_F = types.{scalar}
lapack_int = np.int{width}
COL_MAJOR = np.int32({col_major})
SIZE = {size}
{declaration}

@njit(error_model='numpy', boundscheck=False, nogil=True, cache=CACHE)
'''

# Each matrix of [batch, rows, columns] row-major storage `src` (at `base`) into column-major
# `work`, and back into `dst`.
_IN = """        for i in range({rows}):
            for j in range({columns}):
                {work}[i + j * {rows}] = {src}[{base} + i * {columns} + j]
"""
_OUT = """        for i in range({rows}):
            for j in range({columns}):
                {dst}[{base} + i * {columns} + j] = {work}[i + j * {rows}]
"""


def _in_place(arguments: str, unpack: str, call: str, dst: str) -> str:
    """A kernel that runs `call` on each m x n matrix of `a` copied into `work` (column-major)
    with its `taus` at `pt`, and copies the result into `dst`."""
    return (
        f"def kernel({arguments}):\n"
        f"    {unpack}\n"
        "    pw, pt = np.intp(work.ctypes.data), np.intp(taus.ctypes.data)\n"
        "    for b in range(batch):\n"
        "        base = b * m * n\n"
        + _IN.format(rows="m", columns="n", work="work", src="a", base="base")
        + f"        {call}\n"
        + _OUT.format(rows="m", columns="n", work="work", dst=dst, base="base")
    )


_DECLARATIONS = {
    # LAPACKE_?getrf_work(layout, m, n, a, lda, ipiv)
    "getrf": "routine = types.ExternalFunction('{name}', _I(types.int32, _I, _I, _P, _I, _P))",
    # LAPACKE_?potrf_work(layout, uplo, n, a, lda)
    "potrf": "routine = types.ExternalFunction('{name}', _I(types.int32, types.int8, _I, _P, _I))",
    # LAPACKE_?geqrf_work(layout, m, n, a, lda, tau, work, lwork)
    "geqrf": (
        "routine = types.ExternalFunction('{name}', _I(types.int32, _I, _I, _P, _I, _P, _P, _I))"
    ),
    # LAPACKE_?orgqr_work(layout, m, n, k, a, lda, tau, work, lwork)
    "orgqr": (
        "routine = types.ExternalFunction('{name}', "
        "_I(types.int32, _I, _I, _I, _P, _I, _P, _P, _I))"
    ),
    # LAPACKE_?gesdd_work(layout, jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork)
    "gesdd": (
        "routine = types.ExternalFunction('{name}', _I(types.int32, types.int8, _I, _I, _P, _I,"
        " _P, _P, _I, _P, _I, _P, _I, _P))"
    ),
    # LAPACKE_?syevd_work(layout, jobz, uplo, n, a, lda, w, work, lwork, iwork, liwork)
    "syevd": (
        "routine = types.ExternalFunction('{name}', _I(types.int32, types.int8, types.int8, _I,"
        " _P, _I, _P, _P, _I, _P, _I))"
    ),
    # cblas_?trsm(layout, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb)
    "trsm": (
        "routine = types.ExternalFunction('{name}', types.void(types.int32, types.int32, "
        "types.int32, types.int32, types.int32, _I, _I, _F, _P, _I, _P, _I))"
    ),
}

_KERNELS = {
    "getrf": (
        "def kernel(a, factors, pivots, infos, dims, work, ipiv):\n"
        "    batch, m, n = dims[0], dims[1], dims[2]\n"
        "    k = min(m, n)\n"
        "    pw, pp = np.intp(work.ctypes.data), np.intp(ipiv.ctypes.data)\n"
        "    for b in range(batch):\n"
        "        base = b * m * n\n"
        + _IN.format(rows="m", columns="n", work="work", src="a", base="base")
        + "        info = routine(COL_MAJOR, lapack_int(m), lapack_int(n), pw,"
        " lapack_int(max(m, 1)), pp)\n"
        "        infos[b] = np.int32(info)\n"
        + _OUT.format(rows="m", columns="n", work="work", dst="factors", base="base")
        + "        for i in range(k):\n"
        "            pivots[b * k + i] = np.int32(ipiv[i])\n"
    ),
    "potrf": (
        "def kernel(a, factors, infos, dims, work):\n"
        "    batch, n = dims[0], dims[1]\n"
        "    uplo = np.int8(dims[2])\n"
        "    pw = np.intp(work.ctypes.data)\n"
        "    for b in range(batch):\n"
        "        base = b * n * n\n"
        + _IN.format(rows="n", columns="n", work="work", src="a", base="base")
        + "        info = routine(COL_MAJOR, uplo, lapack_int(n), pw, lapack_int(max(n, 1)))\n"
        "        infos[b] = np.int32(0 if info == 0 else 1)\n"
        "        if info != 0:  # the matrix as it was\n"
        "            for i in range(n * n):\n"
        "                work[i] = a[base + (i % n) * n + i // n]\n"
        + _OUT.format(rows="n", columns="n", work="work", dst="factors", base="base")
    ),
    "geqrf": _in_place(
        "a, factors, taus, dims, work",
        "batch, m, n, lwork = dims[0], dims[1], dims[2], dims[3]\n    k = min(m, n)",
        "routine(COL_MAJOR, lapack_int(m), lapack_int(n), pw, lapack_int(max(m, 1)),"
        " pt + b * k * SIZE, pw + m * n * SIZE, lapack_int(lwork))",
        "factors",
    ),
    "orgqr": _in_place(
        "a, taus, q, dims, work",
        "batch, m, n, k, lwork = dims[0], dims[1], dims[2], dims[3], dims[4]",
        "routine(COL_MAJOR, lapack_int(m), lapack_int(n), lapack_int(k), pw,"
        " lapack_int(max(m, 1)), pt + b * k * SIZE, pw + m * n * SIZE, lapack_int(lwork))",
        "q",
    ),
    "trsm": (
        "def kernel(a, rhs, out, dims, work):\n"
        "    batch, m, n, na = dims[0], dims[1], dims[2], dims[3]\n"
        "    side, uplo = np.int32(dims[4]), np.int32(dims[5])\n"
        "    trans, diag = np.int32(dims[6]), np.int32(dims[7])\n"
        "    pb = np.intp(work.ctypes.data)\n"
        "    pa = pb + m * n * SIZE\n"
        "    for b in range(batch):\n"
        "        base, abase = b * m * n, b * na * na\n"
        + _IN.format(rows="m", columns="n", work="work", src="rhs", base="base")
        + _IN.format(rows="na", columns="na", work="work", src="a", base="abase").replace(
            "work[i", "work[m * n + i"
        )
        + "        routine(COL_MAJOR, side, uplo, trans, diag, lapack_int(m), lapack_int(n),"
        " ONE, pa, lapack_int(max(na, 1)), pb, lapack_int(max(m, 1)))\n"
        + _OUT.format(rows="m", columns="n", work="work", dst="out", base="base")
    ),
    # scratch: the matrix, u (m x ucols), vt (vrows x n), then the routine's workspace
    "gesdd": (
        "def kernel(a, operand, values, left, right, infos, dims, work, iwork):\n"
        "    batch, m, n, jobz = dims[0], dims[1], dims[2], np.int8(dims[3])\n"
        "    ucols, vrows, lwork = dims[4], dims[5], dims[6]\n"
        "    k = min(m, n)\n"
        "    pw, pi = np.intp(work.ctypes.data), np.intp(iwork.ctypes.data)\n"
        "    ps = np.intp(values.ctypes.data)\n"
        "    pu = pw + m * n * SIZE\n"
        "    pv = pu + m * ucols * SIZE\n"
        "    pwork = pv + vrows * n * SIZE\n"
        "    for b in range(batch):\n"
        "        base = b * m * n\n"
        + _IN.format(rows="m", columns="n", work="work", src="a", base="base")
        + "        for i in range(m * n):\n"
        "            operand[base + i] = a[base + i]  # returned as it was\n"
        "        info = routine(COL_MAJOR, jobz, lapack_int(m), lapack_int(n), pw,"
        " lapack_int(max(m, 1)), ps + b * k * SIZE, pu, lapack_int(max(m, 1)), pv,"
        " lapack_int(max(vrows, 1)), pwork, lapack_int(lwork), pi)\n"
        "        infos[b] = np.int32(info)\n"
        "        if jobz != 78:  # 'N': no vectors (the caller zeroed them)\n"
        "            for i in range(m):\n"
        "                for j in range(ucols):\n"
        "                    left[b * m * ucols + i * ucols + j] = work[m * n + i + j * m]\n"
        "            for i in range(vrows):\n"
        "                for j in range(n):\n"
        "                    right[b * vrows * n + i * n + j] = "
        "work[m * n + m * ucols + i + j * vrows]\n"
    ),
    # scratch: the matrix (its eigenvectors after), then the workspace
    "syevd": (
        "def kernel(a, vectors, values, infos, dims, work, iwork):\n"
        "    batch, n, uplo = dims[0], dims[1], np.int8(dims[2])\n"
        "    lwork, liwork = dims[3], dims[4]\n"
        "    pw, pi = np.intp(work.ctypes.data), np.intp(iwork.ctypes.data)\n"
        "    pv = np.intp(values.ctypes.data)\n"
        "    for b in range(batch):\n"
        "        base = b * n * n\n"
        + _IN.format(rows="n", columns="n", work="work", src="a", base="base")
        + "        info = routine(COL_MAJOR, np.int8(86), uplo, lapack_int(n), pw,"
        " lapack_int(max(n, 1)), pv + b * n * SIZE, pw + n * n * SIZE, lapack_int(lwork), pi,"
        " lapack_int(liwork))\n"
        "        infos[b] = np.int32(info)\n"
        + _OUT.format(rows="n", columns="n", work="work", dst="vectors", base="base")
    ),
}


@dataclass(frozen=True)
class LapackPlan:
    """One LAPACK FFI custom call as batched calls of `routine`."""

    letter: str  # s or d
    routine: str
    dims: np.ndarray  # the kernel's dims argument
    work: int  # elements of the scratch buffer
    ipiv: int  # elements of the integer scratch (getrf's pivots, gesdd's and syevd's iwork)
    flops: float  # of one matrix, for the BLAS thread count
    empty: bool  # no matrix to compute (the thunk sets what is set without one)


def plan(instr) -> LapackPlan | None:
    """The plan of `instr`, a custom call, or None where it is not one of the routines here
    for a real type, the user registered its target, or the library lacks the routine."""
    from ...ir.attrs import backend_config_string
    from ...reference.custom_call import registered_targets
    from ...reference.xla_custom_calls import ffi_attributes, lapack_routine
    from .gemm import lapack_library

    target = instr.attrs["custom_call_target"]
    found = lapack_routine(target)
    if found is None or target in registered_targets("cpu"):
        return None
    letter, routine = found
    if letter not in _DTYPES:
        return None
    library = lapack_library()
    if library is None or (letter, routine) not in library.names:
        return None
    attrs = ffi_attributes(backend_config_string(instr.attrs.get("backend_config")))
    a = instr.operand(0).shape.dims
    if len(a) < 2:
        return None
    rows, columns = a[-2], a[-1]
    batch = math.prod(a[:-2])
    empty = batch * rows * columns == 0
    flops = float(rows * columns * min(rows, columns))
    if routine == "getrf":
        return LapackPlan(
            letter,
            routine,
            _dims(batch, rows, columns),
            rows * columns,
            min(rows, columns),
            flops,
            empty,
        )
    uplo = FLAG["L"] if attrs.get("uplo", FLAG["L"]) == FLAG["L"] else FLAG["U"]
    if routine == "potrf":
        return LapackPlan(letter, routine, _dims(batch, rows, uplo), rows * rows, 0, flops, empty)
    if routine in _WORKSPACE_ROUTINES:
        k = min(rows, columns) if routine == "geqrf" else instr.operand(1).shape.dims[-1]
        lwork = 0 if empty else _workspace(library, letter, routine, rows, columns, k)
        if lwork is None:
            return None
        dims = (
            (batch, rows, columns, lwork)
            if routine == "geqrf"
            else (batch, rows, columns, k, lwork)
        )
        return LapackPlan(letter, routine, _dims(*dims), rows * columns + lwork, 0, flops, empty)
    if routine == "gesdd":
        return _gesdd(instr, library, letter, attrs, batch, rows, columns, empty)
    if routine == "syevd":
        sizes = (0, 0) if empty else _syevd_workspace(library, letter, rows, uplo)
        if sizes is None:
            return None
        dims = _dims(batch, rows, uplo, *sizes)
        return LapackPlan(letter, routine, dims, rows * rows + sizes[0], sizes[1], flops, empty)
    # trsm: a [batch, na, na], b [batch, m, n]
    if instr.operand_count < 2:
        return None
    b = instr.operand(1).shape.dims
    if len(b) != len(a) or b[:-2] != a[:-2]:
        return None
    m, n = b[-2], b[-1]
    left = attrs.get("side", FLAG["L"]) == FLAG["L"]
    unit = attrs.get("diag", FLAG["N"]) == FLAG["U"]
    trans = _TRANSPOSE.get(attrs.get("trans_x", FLAG["N"]))
    if trans is None or rows != columns or rows != (m if left else n):
        return None
    dims = _dims(batch, m, n, rows, _SIDE[left], _UPLO[uplo == FLAG["L"]], trans, _DIAG[unit])
    empty = batch * m * n == 0
    return LapackPlan(letter, routine, dims, m * n + rows * rows, 0, float(m * n * rows), empty)


def _gesdd(instr, library, letter, attrs, batch, m, n, empty) -> LapackPlan | None:
    from ...reference.lapack_ffi import full_matrices

    shapes = instr.shape.tuple_shapes
    left, right = shapes[2].dims, shapes[3].dims
    vectors = attrs.get("mode", FLAG["A"]) != FLAG["N"]
    full = full_matrices(m, n, left, right)
    jobz = FLAG["N"] if not vectors else (FLAG["A"] if full else FLAG["S"])
    k = min(m, n)
    ucols, vrows = (m, n) if full else (k, k)
    if tuple(left[-2:]) != (m, ucols) or tuple(right[-2:]) != (vrows, n):
        return None
    lwork = 0 if empty else _gesdd_workspace(library, letter, jobz, m, n, ucols, vrows)
    if lwork is None:
        return None
    dims = _dims(batch, m, n, jobz, ucols, vrows, lwork)
    work = m * n + m * ucols + vrows * n + lwork
    return LapackPlan(letter, "gesdd", dims, work, max(1, 8 * k), float(m * n * k), empty)


def _dims(*values: int) -> np.ndarray:
    found = np.array(values, np.int64)
    found.flags.writeable = False
    return found


def _workspace(library, letter: str, routine: str, m: int, n: int, k: int) -> int | None:
    """The routine's optimal workspace (a query with lwork -1), or None where the query
    fails."""
    fn, integer, scalar = _library_function(library, letter, routine)
    matrix = (scalar * max(1, m * n))()
    tau = (scalar * max(1, k))()
    answer = scalar()
    shape = (integer(m), integer(n)) + ((integer(k),) if routine == "orgqr" else ())
    status = fn(
        ctypes.c_int32(COL_MAJOR),
        *shape,
        matrix,
        integer(max(m, 1)),
        tau,
        ctypes.byref(answer),
        integer(-1),
    )
    if status != 0:
        return None
    return max(1, int(answer.value))


def _library_function(library, letter: str, routine: str):
    """(the routine through ctypes, its integer type, its scalar type)."""
    fn = getattr(ctypes.CDLL(library.path), library.exports[library.names[letter, routine]])
    fn.restype = ctypes.c_int64 if library.width == 64 else ctypes.c_int32
    scalar = ctypes.c_float if letter == "s" else ctypes.c_double
    return fn, fn.restype, scalar


def _gesdd_workspace(library, letter, jobz, m, n, ucols, vrows) -> int | None:
    fn, integer, scalar = _library_function(library, letter, "gesdd")
    answer = scalar()
    iwork = (integer * max(1, 8 * min(m, n)))()
    status = fn(
        ctypes.c_int32(COL_MAJOR), ctypes.c_char(jobz), integer(m), integer(n),
        (scalar * max(1, m * n))(), integer(max(m, 1)), (scalar * max(1, min(m, n)))(),
        (scalar * max(1, m * ucols))(), integer(max(m, 1)), (scalar * max(1, vrows * n))(),
        integer(max(vrows, 1)), ctypes.byref(answer), integer(-1), iwork,
    )  # fmt: skip
    return None if status != 0 else max(1, int(answer.value))


def _syevd_workspace(library, letter, n, uplo) -> tuple[int, int] | None:
    fn, integer, scalar = _library_function(library, letter, "syevd")
    answer, ianswer = scalar(), integer()
    status = fn(
        ctypes.c_int32(COL_MAJOR), ctypes.c_char(FLAG["V"]), ctypes.c_char(uplo), integer(n),
        (scalar * max(1, n * n))(), integer(max(n, 1)), (scalar * max(1, n))(),
        ctypes.byref(answer), integer(-1), ctypes.byref(ianswer), integer(-1),
    )  # fmt: skip
    if status != 0:
        return None
    return max(1, int(answer.value)), max(1, int(ianswer.value))


def kernel_spec(found: LapackPlan) -> KernelSpec:
    """The batched kernel of `found`'s routine and element type."""
    from .gemm import lapack_library

    library = lapack_library()
    assert library is not None
    dtype = _DTYPES[found.letter]
    scalar = "float32" if dtype == "f32" else "float64"
    source = (
        _HEADER.format(
            routine=found.routine,
            dtype=dtype,
            width=library.width,
            scalar=scalar,
            col_major=COL_MAJOR,
            size=4 if dtype == "f32" else 8,
            declaration=_DECLARATIONS[found.routine].format(
                name=library.names[found.letter, found.routine]
            )
            + f"\nONE = np.{scalar}(1)",
        )
        + _KERNELS[found.routine]
    )
    arrays = {
        "getrf": (("param", 0), ("out", 0), ("out", 1), ("out", 2)),
        "potrf": (("param", 0), ("out", 0), ("out", 1)),
        "geqrf": (("param", 0), ("out", 0), ("out", 1)),
        "orgqr": (("param", 0), ("param", 1), ("out", 0)),
        "trsm": (("param", 0), ("param", 1), ("out", 0)),
        "gesdd": (("param", 0), *(("out", i) for i in range(5))),
        "syevd": (("param", 0), ("out", 0), ("out", 1), ("out", 2)),
    }[found.routine]
    types = {
        "getrf": (dtype, dtype, "s32", "s32"),
        "potrf": (dtype, dtype, "s32"),
        "geqrf": (dtype, dtype, dtype),
        "orgqr": (dtype, dtype, dtype),
        "trsm": (dtype, dtype, dtype),
        "gesdd": (dtype, dtype, dtype, dtype, dtype, "s32"),
        "syevd": (dtype, dtype, dtype, "s32"),
    }[found.routine]
    scratch = scratch_buffers(found)
    args = [*arrays, ("dims", None), *(("scratch", None) for _ in scratch)]
    dtypes = [*types, "s64", *(dtype for _, dtype in scratch)]
    spec = KernelSpec("kernel", source, args, [1] * len(args), dtypes, True, False)
    spec.kid = spec.content_id()
    return spec


def scratch_buffers(found: LapackPlan) -> list[tuple[int, str]]:
    """(elements, HLO type) of the kernel's scratch arguments after `dims`: the work buffer,
    then, for getrf, gesdd and syevd, the integers in the library's width."""
    from .gemm import lapack_library

    library = lapack_library()
    assert library is not None
    buffers = [(max(1, found.work), _DTYPES[found.letter])]
    if found.routine in _INTEGER_SCRATCH:
        buffers.append((max(1, found.ipiv), f"s{library.width}"))
    return buffers


def input_count(found: LapackPlan) -> int:
    """How many of the custom call's operands the kernel reads."""
    return 2 if found.routine in ("orgqr", "trsm") else 1


class LapackCall:
    """The custom call's thunk: the batch in one call of the compiled kernel, looked up by its
    global name in the driver's namespace (as GemmDot's)."""

    def __init__(self, found: LapackPlan, namespace: dict, kernel: str):
        self.plan, self.namespace, self.kernel = found, namespace, kernel
        self.threads = blas_threads.threads_for(found.flops)
        self.scratch = [(n, storage_dtype(dtype)) for n, dtype in scratch_buffers(found)]

    def __call__(self, out, *operands, **_):
        found = self.plan
        outs = out if isinstance(out, tuple) else (out,)
        if found.routine == "gesdd" and (found.empty or found.dims[3] == FLAG["N"]):
            for array in outs[2:]:  # no vectors: zeros, as the reference gives
                array[...] = 0
        if found.empty:
            if found.routine == "gesdd":
                outs[0][...], outs[1][...], outs[4][...] = operands[0], 0, 0
            elif found.routine in ("getrf", "potrf", "syevd"):
                outs[-1][...] = 0  # infos
            return
        blas_threads.use_threads(self.threads)
        inputs = operands[: input_count(found)]
        flat = [x.reshape(-1) for x in (*inputs, *outs)]
        scratch = [np.empty(n, dtype) for n, dtype in self.scratch]
        self.namespace[self.kernel](*flat, found.dims, *scratch)
