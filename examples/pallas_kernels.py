"""Custom kernels with minixla.pallas: vector add, fused GELU, row softmax, layernorm, a tiled
matmul with a K loop, a masked tail and a flash-attention forward pass with an online softmax.

Run: python examples/pallas_kernels.py   (prints each kernel's largest error against NumPy)
"""

from __future__ import annotations

import math

import numpy as np

import minixla
import minixla.lax as lax
import minixla.numpy as mnp
import minixla.pallas as pl

F32 = np.float32


def vector_add(x, y, block=256, **options):
    def add_kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + y_ref[...]

    spec = pl.BlockSpec((block,), lambda i: (i,))
    return pl.pallas_call(
        add_kernel,
        out_shape=minixla.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // block,),
        in_specs=[spec, spec],
        out_specs=spec,
        **options,
    )(x, y)


def gelu(x, block_rows=8, **options):
    """tanh-approximated GELU, one fused pass over each block of rows."""

    def gelu_kernel(x_ref, o_ref):
        v = x_ref[...]
        inner = math.sqrt(2 / math.pi) * (v + 0.044715 * v * v * v)
        o_ref[...] = 0.5 * v * (1.0 + mnp.tanh(inner))

    spec = pl.BlockSpec((block_rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(
        gelu_kernel,
        out_shape=minixla.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(x.shape[0], block_rows),),
        in_specs=[spec],
        out_specs=spec,
        **options,
    )(x)


def make_softmax(rows, cols, block_rows=8, **options):
    """The call object; build it once and call it many times (it compiles on first call)."""

    def softmax_kernel(x_ref, o_ref):
        v = x_ref[...]
        e = mnp.exp(v - mnp.max(v, axis=1, keepdims=True))
        o_ref[...] = e / mnp.sum(e, axis=1, keepdims=True)

    spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    return pl.pallas_call(
        softmax_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows, cols), F32),
        grid=(rows // block_rows,),
        in_specs=[spec],
        out_specs=spec,
        **options,
    )


def softmax(x, block_rows=8, **options):
    return make_softmax(*x.shape, block_rows=block_rows, **options)(x)


def layernorm(x, gamma, beta, eps=1e-5, block_rows=8, **options):
    def layernorm_kernel(x_ref, g_ref, b_ref, o_ref):
        v = x_ref[...]
        mean = mnp.mean(v, axis=1, keepdims=True)
        centered = v - mean
        var = mnp.mean(centered * centered, axis=1, keepdims=True)
        o_ref[...] = centered / mnp.sqrt(var + eps) * g_ref[...] + b_ref[...]

    rows, cols = x.shape
    row_spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))
    vec_spec = pl.BlockSpec((cols,), lambda i: (0,))
    return pl.pallas_call(
        layernorm_kernel,
        out_shape=minixla.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows // block_rows,),
        in_specs=[row_spec, vec_spec, vec_spec],
        out_specs=row_spec,
        **options,
    )(x, gamma, beta)


def make_matmul(m, n, k, bm=32, bn=32, bk=32, **options):
    """Output tiles (bm, bn) on a 2-d grid; each sums its K tiles in a fori_loop."""

    def matmul_kernel(x_ref, y_ref, o_ref):
        def k_step(kk, acc):
            return acc + mnp.dot(x_ref[:, pl.ds(kk * bk, bk)], y_ref[pl.ds(kk * bk, bk), :])

        o_ref[...] = lax.fori_loop(0, k // bk, k_step, mnp.zeros((bm, bn), F32))

    return pl.pallas_call(
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


def matmul(x, y, bm=32, bn=32, bk=32, **options):
    return make_matmul(x.shape[0], y.shape[1], x.shape[1], bm, bn, bk, **options)(x, y)


def masked_scale(x, scale=3.0, block=64, **options):
    """A length that is not a multiple of the block: the last block masks its tail."""
    n = x.shape[0]

    def scale_kernel(x_ref, o_ref):
        start = pl.program_id(0) * block
        mask = start + mnp.arange(block) < n
        v = pl.load(x_ref, pl.ds(start, block), mask=mask)
        pl.store(o_ref, pl.ds(start, block), v * scale, mask=mask)

    return pl.pallas_call(
        scale_kernel,
        out_shape=minixla.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(n, block),),
        **options,
    )(x)


def flash_attention(q, k, v, block_q=16, block_k=16, **options):
    """softmax(q k^T / sqrt(d)) v without the (S, S) matrix: each program takes a block of
    queries and walks the keys block by block, keeping a running max and sum."""
    seq, d = q.shape
    scale = 1.0 / math.sqrt(d)

    def attention_kernel(q_ref, k_ref, v_ref, o_ref):
        qb = q_ref[...] * scale

        def key_block(j, carry):
            m, l, acc = carry
            kb = k_ref[pl.ds(j * block_k, block_k), :]
            vb = v_ref[pl.ds(j * block_k, block_k), :]
            s = mnp.dot(qb, kb.T)
            m_new = mnp.maximum(m, mnp.max(s, axis=1))
            p = mnp.exp(s - m_new[:, None])
            correction = mnp.exp(m - m_new)
            l_new = l * correction + mnp.sum(p, axis=1)
            return m_new, l_new, acc * correction[:, None] + mnp.dot(p, vb)

        init = (
            mnp.full((block_q,), -np.inf, F32),
            mnp.zeros((block_q,), F32),
            mnp.zeros((block_q, d), F32),
        )
        _, l, acc = lax.fori_loop(0, seq // block_k, key_block, init)
        o_ref[...] = acc / l[:, None]

    q_spec = pl.BlockSpec((block_q, d), lambda i: (i, 0))
    kv_spec = pl.BlockSpec((seq, d), lambda i: (0, 0))
    return pl.pallas_call(
        attention_kernel,
        out_shape=minixla.ShapeDtypeStruct(q.shape, F32),
        grid=(seq // block_q,),
        in_specs=[q_spec, kv_spec, kv_spec],
        out_specs=q_spec,
        **options,
    )(q, k, v)


def _softmax(z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def main(verbose: bool = True, **options) -> dict:
    """Runs every kernel; returns {name: (kernel result, NumPy result)}."""
    rng = np.random.default_rng(0)
    r = lambda *shape: rng.standard_normal(shape).astype(F32)  # noqa: E731
    x, y = r(1024), r(1024)
    a = r(40, 64)
    g, b = r(64), r(64)
    ma, mb = r(64, 96), r(96, 32)
    t = r(1000)
    q, k, v = r(48, 16), r(48, 16), r(48, 16)
    mean = a.mean(1, keepdims=True)
    var = ((a - mean) ** 2).mean(1, keepdims=True)
    results = {
        "vector_add": (vector_add(x, y, **options), x + y),
        "gelu": (
            gelu(a, **options),
            0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3))),
        ),
        "softmax": (softmax(a, **options), _softmax(a)),
        "layernorm": (layernorm(a, g, b, **options), (a - mean) / np.sqrt(var + 1e-5) * g + b),
        "matmul": (matmul(ma, mb, **options), ma @ mb),
        "masked_scale": (masked_scale(t, **options), t * 3),
        "flash_attention": (
            flash_attention(q, k, v, **options),
            _softmax(q @ k.T / math.sqrt(16)) @ v,
        ),
    }
    if verbose:
        for name, (got, want) in results.items():
            print(f"{name:16s} max |error| = {np.abs(got - want).max():.2e}")
    return results


if __name__ == "__main__":
    main()
