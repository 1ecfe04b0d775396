"""dot as a tiled shared-memory matmul kernel.

Any dot is a batch of [M, K] x [K, N] products once its dims are grouped (batch, free,
contracting), as in the CPU backend's BLAS call; here the grouping is index arithmetic in the
kernel, so operands are read where they are (no transposed copies). Each block computes a
BM x BN tile of one batch element (BM = BN = threads * micro along each side): it walks K in
steps of BK, staging the A and B slices in shared memory (loaded so that consecutive threads
read consecutive addresses of each operand, whichever of its dims is minor), and each thread
accumulates a micro x micro block of outputs in registers (a local array), strided by the
thread count so shared-memory reads of B are consecutive across a warp.

Accumulation follows the interpreter's dot: f32 for f32 operands, f64 when any side is f64,
64-bit integers (wrapped to the result type at the end) for integer dots. Narrow floats, pred
and mixed float/integer dots are not emitted (host fallback).
"""

from __future__ import annotations

import math

from ..codegen.scalar import NotEmittable, kernel_type
from .kernels import CudaWriter, KernelSpec, assemble, blocks_for

_FLOATS = ("f32", "f64")
_INTS = ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64")


def _work_type(instr) -> str:
    types = [instr.shape.dtype, instr.operand(0).shape.dtype, instr.operand(1).shape.dtype]
    if all(t in _FLOATS for t in types):
        return "f64" if "f64" in types else "f32"
    if all(t in _INTS for t in types):
        return "u64" if instr.shape.dtype[0] == "u" else "s64"
    raise NotEmittable(f"dot on {'/'.join(types)} has no CUDA kernel")


def _offset(groups, shape) -> str:
    """Flat offset, in a row-major array of `shape`, of the element whose dims are split into
    groups [(linear index name, dims in the order that index enumerates them)]."""
    strides = [math.prod(shape[d + 1 :]) for d in range(len(shape))]
    terms = []
    for linear, dims in groups:
        inner = math.prod(shape[d] for d in dims)
        for position, d in enumerate(dims):
            inner //= shape[d]
            if shape[d] == 1:
                continue
            part = linear if inner == 1 else f"({linear} // {inner})"
            if position > 0:  # the first dim needs no modulo: the index is in range
                part = f"({part} % {shape[d]})"
            terms.append(part if strides[d] == 1 else f"{part} * {strides[d]}")
    return " + ".join(terms) or "0"


def build_dot_kernel(instr, geometry, name: str = "kernel") -> KernelSpec:
    work = _work_type(instr)
    attrs = instr.attrs
    lhs, rhs = instr.operand(0).shape.dims, instr.operand(1).shape.dims
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc = list(attrs.get("lhs_contracting_dims", ()))
    rc = list(attrs.get("rhs_contracting_dims", ()))
    lf = [d for d in range(len(lhs)) if d not in lb + lc]
    rf = [d for d in range(len(rhs)) if d not in rb + rc]
    m, k, n = (
        math.prod(lhs[d] for d in lf),
        math.prod(lhs[d] for d in lc),
        math.prod(rhs[d] for d in rf),
    )
    batch = math.prod(lhs[d] for d in lb)
    tt, micro = geometry.mm_threads, geometry.mm_micro
    bm, bk, threads = tt * micro, tt, tt * tt
    tiles_m, tiles_n = -(-m // bm), -(-n // bm)
    w = CudaWriter()
    acc_t, out_t = kernel_type(work), kernel_type(instr.shape.dtype)
    zero = w.const(0, work)
    a_tile = w.declare("As", f"cuda.shared.array(({bk}, {bm}), {acc_t})")
    b_tile = w.declare("Bs", f"cuda.shared.array(({bk}, {bm}), {acc_t})")
    acc = w.declare("acc", f"cuda.local.array(({micro}, {micro}), {acc_t})")
    a_offset = _offset([("bb", lb), ("gm", lf), ("gk", lc)], lhs)
    b_offset = _offset([("bb", rb), ("gk", rc), ("gn", rf)], rhs)
    k_minor = len(lhs) - 1 in lc  # consecutive threads walk A along k (else along m)
    n_minor = len(rhs) - 1 not in rc  # ... and B along n (else along k)
    body = f"""
tid = cuda.threadIdx.x
tx = tid % {tt}
ty = tid // {tt}
for t in range(cuda.blockIdx.x, {batch * tiles_m * tiles_n}, cuda.gridDim.x):
    bb = t // {tiles_m * tiles_n}
    m0 = ((t // {tiles_n}) % {tiles_m}) * {bm}
    n0 = (t % {tiles_n}) * {bm}
    for i in range({micro}):
        for j in range({micro}):
            {acc}[i, j] = {zero}
    for k0 in range(0, {k}, {bk}):
        for e in range(tid, {bm * bk}, {threads}):
            mm = {f"e // {bk}" if k_minor else f"e % {bm}"}
            kk = {f"e % {bk}" if k_minor else f"e // {bm}"}
            gm = m0 + mm
            gk = k0 + kk
            {a_tile}[kk, mm] = {acc_t}(a[{a_offset}]) if gm < {m} and gk < {k} else {zero}
        for e in range(tid, {bm * bk}, {threads}):
            nn = {f"e % {bm}" if n_minor else f"e // {bk}"}
            kk = {f"e // {bm}" if n_minor else f"e % {bk}"}
            gn = n0 + nn
            gk = k0 + kk
            {b_tile}[kk, nn] = {acc_t}(b[{b_offset}]) if gn < {n} and gk < {k} else {zero}
        cuda.syncthreads()
        for kk in range({bk}):
            for i in range({micro}):
                x = {a_tile}[kk, ty + i * {tt}]
                for j in range({micro}):
                    {acc}[i, j] += x * {b_tile}[kk, tx + j * {tt}]
        cuda.syncthreads()
    for i in range({micro}):
        gm = m0 + ty + i * {tt}
        for j in range({micro}):
            gn = n0 + tx + j * {tt}
            if gm < {m} and gn < {n}:
                o[(bb * {m} + gm) * {n} + gn] = {out_t}({acc}[i, j])
"""
    w.lines = ["    " + line for line in body.strip("\n").splitlines()]
    source = assemble(w, name, ["a", "b", "o"], f"Tiled matmul for {instr.name}.")
    dtypes = [instr.operand(0).shape.dtype, instr.operand(1).shape.dtype, instr.shape.dtype]
    blocks = blocks_for(batch * tiles_m * tiles_n, 1, geometry)
    return KernelSpec(
        name,
        source,
        [("param", 0), ("param", 1), ("out", 0)],
        [1, 1, 1],
        dtypes,
        True,
        threads,
        blocks,
        "matmul",
    ).finish()
