"""Classic Pallas-style kernels with their NumPy references, shared by the pallas tests.

Each builder takes the call's keyword options (interpret=, backend=) and sizes, and returns
(call, inputs, reference outputs)."""

from __future__ import annotations

import numpy as np

import minixla
import minixla.lax as lax
import minixla.numpy as mnp
import minixla.pallas as pl

F32 = np.float32


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(F32)


def vector_add(rng, n=64, block=16, **options):
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((block,), lambda i: (i,))
    call = pl.pallas_call(
        add_kernel,
        out_shape=minixla.ShapeDtypeStruct((n,), F32),
        grid=(n // block,),
        in_specs=[spec, spec],
        out_specs=spec,
        **options,
    )
    x, y = _rand(rng, n), _rand(rng, n)
    return call, (x, y), x + y


def masked_tail(rng, n=37, block=8, **options):
    def scale_kernel(x_ref, o_ref):
        start = pl.program_id(0) * block
        mask = start + mnp.arange(block) < n
        x = pl.load(x_ref, pl.ds(start, block), mask=mask, other=0.0)
        pl.store(o_ref, pl.ds(start, block), x * 2.0 + 1.0, mask=mask)

    call = pl.pallas_call(
        scale_kernel,
        out_shape=minixla.ShapeDtypeStruct((n,), F32),
        grid=(pl.cdiv(n, block),),
        **options,
    )
    x = _rand(rng, n)
    return call, (x,), x * 2 + 1


def blocked_matmul(rng, m=32, n=24, k=40, bm=16, bn=8, bk=8, **options):
    def matmul_kernel(x_ref, y_ref, o_ref):
        def step(kk, acc):
            a = x_ref[:, pl.ds(kk * bk, bk)]
            b = y_ref[pl.ds(kk * bk, bk), :]
            return acc + mnp.dot(a, b)

        o_ref[...] = lax.fori_loop(0, k // bk, step, mnp.zeros((bm, bn), F32))

    call = pl.pallas_call(
        matmul_kernel,
        out_shape=minixla.ShapeDtypeStruct((m, n), F32),
        grid=(m // bm, n // bn),
        in_specs=[
            pl.BlockSpec((bm, k), lambda i, j: (i, 0)),
            pl.BlockSpec((k, bn), lambda i, j: (0, j)),
        ],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j: (i, j)),
        **options,
    )
    x, y = _rand(rng, m, k), _rand(rng, k, n)
    return call, (x, y), x @ y


def row_softmax(rng, rows=12, cols=20, block_rows=4, **options):
    def softmax_kernel(x_ref, o_ref):
        x = x_ref[...]
        e = mnp.exp(x - mnp.max(x, axis=1, keepdims=True))
        o_ref[...] = e / mnp.sum(e, axis=1, keepdims=True)

    spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    call = pl.pallas_call(
        softmax_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows, cols), F32),
        grid=(rows // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        **options,
    )
    x = _rand(rng, rows, cols) * 3
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return call, (x,), e / e.sum(axis=1, keepdims=True)


def sum_with_scratch(rng, rows=8, cols=48, block_cols=16, **options):
    """Row sums over a grid that walks column blocks, accumulating in a scratch buffer."""
    steps = cols // block_cols

    def rowsum_kernel(x_ref, o_ref, acc_ref):
        j = pl.program_id(0)

        @pl.when(j == 0)
        def _():
            acc_ref[...] = mnp.zeros((rows,), F32)

        acc_ref[...] = acc_ref[...] + mnp.sum(x_ref[...], axis=1)

        @pl.when(j == pl.num_programs(0) - 1)
        def _():
            o_ref[...] = acc_ref[...]

    call = pl.pallas_call(
        rowsum_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows,), F32),
        grid=(steps,),
        in_specs=[pl.BlockSpec((rows, block_cols), lambda j: (0, j))],
        out_specs=pl.BlockSpec((rows,), lambda j: (0,)),
        scratch_shapes=[pl.VMEM((rows,), F32)],
        **options,
    )
    x = _rand(rng, rows, cols)
    return call, (x,), x.sum(axis=1)


KERNELS = {
    "vector_add": vector_add,
    "masked_tail": masked_tail,
    "blocked_matmul": blocked_matmul,
    "row_softmax": row_softmax,
    "sum_with_scratch": sum_with_scratch,
}
