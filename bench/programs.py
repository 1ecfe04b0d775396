"""Whole programs for bench/whole_programs.py, written with JAX: each builder returns
(function, arguments) with flat array arguments, so the exported HLO's parameters are the
arguments in order. `export` writes each program's HLO text to bench/programs/<name>.hlo,
which is what the benchmark runs when JAX is not installed.

Programs JAX would lower to LAPACK custom calls (cholesky, triangular solves) have a
hand-written HLO in HLO_TEXT instead; the JAX function computes the same math for timing.
"""

from __future__ import annotations

import numpy as np

SEED = 0


def _rng():
    return np.random.default_rng(SEED)


def _normal(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


# ---- networks ------------------------------------------------------------------------------------


def _conv(x, w, stride=1, padding="SAME", dilation=1):
    from jax import lax

    return lax.conv_general_dilated(
        x,
        w,
        (stride,) * (x.ndim - 2),
        padding,
        rhs_dilation=(dilation,) * (x.ndim - 2),
        dimension_numbers=("NHWC", "HWIO", "NHWC") if x.ndim == 4 else ("NWC", "WIO", "NWC"),
    )


def _cnn(x, w1, w2, dense):
    import jax.numpy as jnp
    from jax import lax

    h = jnp.maximum(_conv(x, w1), 0)
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = jnp.maximum(_conv(h, w2), 0)
    return jnp.mean(h, axis=(1, 2)) @ dense


def cnn_forward():
    rng = _rng()
    return _cnn, [
        _normal(rng, 16, 32, 32, 3),
        _normal(rng, 3, 3, 3, 16, scale=0.3),
        _normal(rng, 3, 3, 16, 32, scale=0.1),
        _normal(rng, 32, 10, scale=0.2),
    ]


def cnn_grad():
    import jax
    import jax.numpy as jnp

    fn, args = cnn_forward()

    def loss(x, w1, w2, dense, labels):
        logits = fn(x, w1, w2, dense)
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1)
        return -jnp.mean(picked)

    labels = _rng().integers(0, 10, 16).astype(np.int32)
    return jax.grad(loss, argnums=(1, 2, 3)), args + [labels]


def _recurrent(kind):
    import jax
    import jax.numpy as jnp

    gates = 3 if kind == "gru" else 4

    def run(xs, wx, wh, b):
        batch, hidden = xs.shape[1], wh.shape[0]

        def step(carry, x):
            h, c = carry
            z = x @ wx + h @ wh + b
            if kind == "gru":
                r, u, n = jnp.split(z, 3, axis=-1)
                h = (1 - jax.nn.sigmoid(u)) * jnp.tanh(n * jax.nn.sigmoid(r)) + jax.nn.sigmoid(
                    u
                ) * h
            else:
                i, f, g, o = jnp.split(z, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
            return (h, c), h

        zeros = jnp.zeros((batch, hidden), xs.dtype)
        _, hs = jax.lax.scan(step, (zeros, zeros), xs)
        return hs

    rng = _rng()
    return run, [
        _normal(rng, 64, 16, 64),
        _normal(rng, 64, gates * 128, scale=0.1),
        _normal(rng, 128, gates * 128, scale=0.1),
        _normal(rng, gates * 128),
    ]


def gru_scan():
    return _recurrent("gru")


def lstm_scan():
    return _recurrent("lstm")


def _layernorm(x, g):
    import jax.numpy as jnp

    mean = jnp.mean(x, -1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, -1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + 1e-5) * g


def _attention(q, k, v, causal=True):
    import jax
    import jax.numpy as jnp

    s = jnp.einsum("bhtd,bhsd->bhts", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    if causal:
        t = q.shape[2]
        s = jnp.where(jnp.tril(jnp.ones((t, s.shape[-1]), bool)), s, -1e9)
    return jnp.einsum("bhts,bhsd->bhtd", jax.nn.softmax(s, -1), v)


def gpt2_block():
    import jax

    def block(x, g1, wqkv, wo, g2, w1, w2):
        b, t, d = x.shape
        heads = 4
        qkv = _layernorm(x, g1) @ wqkv
        q, k, v = (
            a.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)
            for a in jax.numpy.split(qkv, 3, -1)
        )
        a = _attention(q, k, v).transpose(0, 2, 1, 3).reshape(b, t, d)
        x = x + a @ wo
        return x + jax.nn.gelu(_layernorm(x, g2) @ w1) @ w2

    rng = _rng()
    d = 256
    return block, [
        _normal(rng, 4, 128, d),
        _normal(rng, d),
        _normal(rng, d, 3 * d, scale=0.05),
        _normal(rng, d, d, scale=0.05),
        _normal(rng, d),
        _normal(rng, d, 4 * d, scale=0.05),
        _normal(rng, 4 * d, d, scale=0.05),
    ]


def kv_cache_decode():
    import jax
    import jax.numpy as jnp

    def decode(embed, wq, cache_k, cache_v, wout):
        def step(i, state):
            token, ck, cv, out = state
            x = embed[token]
            q = (x @ wq).reshape(8, 1, 64)
            ck = jax.lax.dynamic_update_slice(ck, q[:, None, 0:1, :], (0, 0, 128 + i, 0))
            cv = jax.lax.dynamic_update_slice(cv, q[:, None, 0:1, :], (0, 0, 128 + i, 0))
            s = jnp.einsum("hqd,hsd->hqs", q, ck[:, 0]) / 8.0
            mask = jnp.arange(ck.shape[2]) <= 128 + i
            s = jnp.where(mask, s, -1e9)
            a = jnp.einsum("hqs,hsd->hqd", jax.nn.softmax(s, -1), cv[:, 0]).reshape(512)
            token = jnp.argmax(a @ wout).astype(jnp.int32)
            return token, ck, cv, out.at[i].set(token)

        state = (jnp.int32(0), cache_k, cache_v, jnp.zeros(32, jnp.int32))
        return jax.lax.fori_loop(0, 32, step, state)[3]

    rng = _rng()
    return decode, [
        _normal(rng, 1000, 512),
        _normal(rng, 512, 512, scale=0.05),
        _normal(rng, 8, 1, 160, 64),
        _normal(rng, 8, 1, 160, 64),
        _normal(rng, 512, 1000, scale=0.05),
    ]


def _mlp_loss(x, y, w1, w2):
    import jax.numpy as jnp

    return jnp.mean((jnp.tanh(x @ w1) @ w2 - y) ** 2)


def adam_step():
    import jax
    import jax.numpy as jnp

    def step(x, y, w1, w2, m1, m2, v1, v2):
        g1, g2 = jax.grad(_mlp_loss, argnums=(2, 3))(x, y, w1, w2)
        out = []
        for w, g, m, v in ((w1, g1, m1, v1), (w2, g2, m2, v2)):
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            out += [w - 1e-3 * m / (jnp.sqrt(v) + 1e-8), m, v]
        return tuple(out)

    rng = _rng()
    w1, w2 = _normal(rng, 256, 512, scale=0.05), _normal(rng, 512, 64, scale=0.05)
    return step, [
        _normal(rng, 128, 256),
        _normal(rng, 128, 64),
        w1,
        w2,
        np.zeros_like(w1),
        np.zeros_like(w2),
        np.zeros_like(w1),
        np.zeros_like(w2),
    ]


def vae_elbo_grad():
    import jax
    import jax.numpy as jnp

    def elbo(x, eps, we, wmu, wlv, wd1, wd2):
        h = jnp.tanh(x @ we)
        mu, logvar = h @ wmu, h @ wlv
        z = mu + jnp.exp(0.5 * logvar) * eps
        recon = jax.nn.sigmoid(jnp.tanh(z @ wd1) @ wd2)
        nll = -jnp.sum(x * jnp.log(recon + 1e-6) + (1 - x) * jnp.log(1 - recon + 1e-6))
        kl = -0.5 * jnp.sum(1 + logvar - mu**2 - jnp.exp(logvar))
        return (nll + kl) / x.shape[0]

    rng = _rng()
    x = (rng.random((128, 784)) > 0.5).astype(np.float32)
    return jax.grad(elbo, argnums=(2, 3, 4, 5, 6)), [
        x,
        _normal(rng, 128, 32),
        _normal(rng, 784, 256, scale=0.05),
        _normal(rng, 256, 32, scale=0.05),
        _normal(rng, 256, 32, scale=0.05),
        _normal(rng, 32, 256, scale=0.1),
        _normal(rng, 256, 784, scale=0.05),
    ]


# ---- data processing -------------------------------------------------------------------------


def sort_topk():
    import jax
    import jax.numpy as jnp

    def run(x):
        values, indices = jax.lax.top_k(x, 16)
        return jnp.sort(x, axis=-1), values, indices, jnp.argsort(-x[:, :256], axis=-1)

    return run, [_normal(_rng(), 64, 1024)]


def gnn_message_passing():
    import jax

    def layer(h, src, dst, w):
        messages = h[src] @ w
        agg = jax.ops.segment_sum(messages, dst, num_segments=h.shape[0])
        return jax.nn.relu(agg + h @ w)

    rng = _rng()
    return layer, [
        _normal(rng, 2048, 64),
        rng.integers(0, 2048, 16384).astype(np.int32),
        rng.integers(0, 2048, 16384).astype(np.int32),
        _normal(rng, 64, 64, scale=0.1),
    ]


def fft_filter():
    import jax.numpy as jnp

    def run(x, response):
        return jnp.fft.irfft(jnp.fft.rfft(x, axis=-1) * response, n=x.shape[-1], axis=-1)

    rng = _rng()
    return run, [_normal(rng, 64, 1024), _normal(rng, 513)]


def preprocessing():
    import jax
    import jax.numpy as jnp

    def run(x, labels):
        x = (x - jnp.mean(x, 0)) / (jnp.std(x, 0) + 1e-6)
        running = jnp.cumsum(x, axis=0)
        peak = jax.lax.cummax(running, axis=0)
        return jnp.clip(running - peak, -3, 3), jax.nn.one_hot(labels, 32)

    rng = _rng()
    return run, [_normal(rng, 1024, 64), rng.integers(0, 32, 1024).astype(np.int32)]


def cumsum_rows():
    import jax.numpy as jnp

    return (lambda x: jnp.cumsum(x, axis=1)), [_normal(_rng(), 256, 2048)]


def int8_matmul():
    import jax.numpy as jnp

    def run(a, b, scale):
        acc = jnp.matmul(a, b, preferred_element_type=jnp.int32)
        return acc.astype(jnp.float32) * scale

    rng = _rng()
    return run, [
        rng.integers(-127, 127, (256, 512)).astype(np.int8),
        rng.integers(-127, 127, (512, 256)).astype(np.int8),
        _normal(rng, 256),
    ]


def dilated_conv1d():
    import jax

    def stack(x, w1, w2, w3, w4):
        for dilation, w in zip((1, 2, 4, 8), (w1, w2, w3, w4)):
            x = jax.nn.relu(_conv(x, w, dilation=dilation)) + x
        return x

    rng = _rng()
    return stack, [_normal(rng, 8, 1024, 32)] + [
        _normal(rng, 3, 32, 32, scale=0.1) for _ in range(4)
    ]


def cross_entropy_labels():
    import jax
    import jax.numpy as jnp

    def run(logits, labels):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    rng = _rng()
    return run, [_normal(rng, 512, 1000), rng.integers(0, 1000, 512).astype(np.int32)]


def attention():
    rng = _rng()
    return (lambda q, k, v: _attention(q, k, v, causal=False)), [
        _normal(rng, 8, 8, 256, 64) for _ in range(3)
    ]


def layernorm_mlp():
    import jax

    def run(x, g, w1, w2):
        return jax.nn.gelu(_layernorm(x, g) @ w1) @ w2

    rng = _rng()
    return run, [
        _normal(rng, 1024, 512),
        _normal(rng, 512),
        _normal(rng, 512, 1024, scale=0.05),
        _normal(rng, 1024, 512, scale=0.05),
    ]


def embedding_grad():
    import jax
    import jax.numpy as jnp

    def loss(table, ids, target):
        return jnp.sum((table[ids] - target) ** 2)

    rng = _rng()
    return jax.grad(loss), [
        _normal(rng, 10000, 64),
        rng.integers(0, 10000, 4096).astype(np.int32),
        _normal(rng, 4096, 64),
    ]


def maxpool_grad():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(x):
        pooled = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        return jnp.sum(pooled**2)

    return jax.grad(loss), [_normal(_rng(), 8, 64, 64, 16)]


def switch_sort():
    import jax
    import jax.numpy as jnp

    def run(x, which):
        branches = [
            lambda v: jnp.sort(v, axis=-1),
            lambda v: -jnp.sort(-v, axis=-1),
            lambda v: jnp.cumsum(v, axis=-1),
        ]
        return jax.lax.switch(which, branches, x)

    return run, [_normal(_rng(), 128, 512), np.int32(1)]


def small_while_loop():
    import jax

    def run(x, w):
        return jax.lax.fori_loop(0, 200, lambda i, h: jax.numpy.tanh(h @ w + x), x)

    rng = _rng()
    return run, [_normal(rng, 1, 32), _normal(rng, 32, 32, scale=0.2)]


def dus_loop():
    import jax

    def run(buf, row):
        return jax.lax.fori_loop(
            0, 512, lambda i, b: jax.lax.dynamic_update_slice(b, row * i, (i, 0)), buf
        )

    rng = _rng()
    return run, [np.zeros((4096, 1024), np.float32), _normal(rng, 1, 1024)]


def cholesky_solves():
    import jax
    import jax.numpy as jnp

    def run(a, b):
        def step(i, x):
            factor = jnp.linalg.cholesky(a + (i + 1.0) * jnp.eye(a.shape[-1], dtype=a.dtype))
            y = jax.scipy.linalg.solve_triangular(factor, x, lower=True)
            return jax.scipy.linalg.solve_triangular(factor, y, lower=True, trans="T")

        return jax.lax.fori_loop(0, 10, step, b)

    rng = _rng()
    m = _normal(rng, 128, 128)
    return run, [(m @ m.T / 128).astype(np.float32), _normal(rng, 128, 16)]


def linalg_solve():
    """Batched LU solves: JAX lowers them to XLA:CPU's LAPACK FFI custom calls (getrf,
    trsm) and a pivot-permutation loop."""
    import jax.numpy as jnp

    rng = _rng()
    a = _normal(rng, 16, 64, 64) + 8 * np.eye(64, dtype=np.float32)
    return (lambda a, b: jnp.linalg.solve(a, b)), [a, _normal(rng, 16, 64, 8)]


def batched_factorizations():
    """Small matrices factored in batches: QR, SVD and a symmetric eigensolver, which JAX
    lowers to XLA:CPU's LAPACK calls (geqrf, orgqr, gesdd, syevd); each result is rebuilt
    into its matrix (the vectors' signs are LAPACK's choice)."""
    import jax.numpy as jnp

    def run(a, s):
        q, r = jnp.linalg.qr(a)
        u, singular, vt = jnp.linalg.svd(a, full_matrices=False)
        w, v = jnp.linalg.eigh(s)
        rebuilt = q @ r + (u * singular[..., None, :]) @ vt
        return rebuilt, singular, w, (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2)

    rng = _rng()
    m = _normal(rng, 32, 16, 16)
    return run, [_normal(rng, 32, 24, 16), m + np.swapaxes(m, -1, -2)]


def conv_transpose_decoder():
    """A decoder's stride-2 transposed convolutions (base-dilated convolutions)."""
    from jax import lax

    def run(x, w1, w2):
        dims = ("NHWC", "HWIO", "NHWC")
        h = lax.conv_transpose(x, w1, (2, 2), "SAME", dimension_numbers=dims)
        h = lax.conv_transpose(h * (h > 0), w2, (2, 2), "SAME", dimension_numbers=dims)
        return h

    rng = _rng()
    return run, [
        _normal(rng, 8, 16, 16, 32),
        _normal(rng, 4, 4, 32, 16, scale=0.1),
        _normal(rng, 4, 4, 16, 3, scale=0.1),
    ]


def mixture_grad():
    """The gradient of a Gaussian mixture's log-likelihood: sums over the batch of
    [batch, components, features] terms (column reductions of one fusion)."""
    import jax
    import jax.numpy as jnp

    def loglik(x, mu, log_sigma):
        z = (x[:, None, :] - mu[None]) / jnp.exp(log_sigma)[None]
        lp = -0.5 * jnp.sum(z * z, -1) - jnp.sum(log_sigma, -1)[None]
        return jax.scipy.special.logsumexp(lp, 1).mean()

    rng = _rng()
    args = [_normal(rng, 4096, 16), _normal(rng, 32, 16), _normal(rng, 32, 16, scale=0.1)]
    return jax.grad(loglik, (1, 2)), args


def dropout_noise():
    """Normal noise and a dropout mask from `jax.random` (Threefry: a while loop of cipher
    rounds over two words per element), applied to activations."""
    import jax
    import jax.numpy as jnp

    def noisy(x, key_data):
        key = jax.random.wrap_key_data(key_data)
        noise_key, mask_key = jax.random.split(key)
        keep = jax.random.bernoulli(mask_key, 0.9, x.shape)
        return jnp.where(keep, x + 0.1 * jax.random.normal(noise_key, x.shape), 0.0) / 0.9

    rng = _rng()
    return noisy, [_normal(rng, 512, 1024), np.array([0, 42], np.uint32)]


def avg_pool():
    """A 3x3 average pool of a channels-last image batch (a sum of windows)."""
    from jax import lax

    def pool(x):
        s = lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
        return s / 9.0

    rng = _rng()
    return pool, [_normal(rng, 16, 64, 64, 32)]


# The same loop as cholesky_solves in HLO (JAX lowers these to LAPACK custom calls on CPU).
HLO_TEXT = {
    "cholesky_solves": """
HloModule cholesky_solves
cond {
  s = (s32[], f32[128,128], f32[128,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(10)), direction=LT
}
body {
  s = (s32[], f32[128,128], f32[128,16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[128,128] get-tuple-element(s), index=1
  x = f32[128,16] get-tuple-element(s), index=2
  shift = f32[] add(f32[] convert(i), f32[] constant(1))
  r = s32[128,128] iota(), iota_dimension=0
  c = s32[128,128] iota(), iota_dimension=1
  eye = f32[128,128] convert(pred[128,128] compare(r, c), direction=EQ)
  shifted = f32[128,128] add(a, f32[128,128] multiply(eye, f32[128,128] broadcast(shift), dimensions={}))
  l = f32[128,128] cholesky(shifted), lower=true
  y = f32[128,16] triangular-solve(l, x), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  z = f32[128,16] triangular-solve(l, y), left_side=true, lower=true, transpose_a=TRANSPOSE
  ROOT t = (s32[], f32[128,128], f32[128,16]) tuple(s32[] add(i, s32[] constant(1)), a, z)
}
ENTRY main {
  a = f32[128,128] parameter(0)
  b = f32[128,16] parameter(1)
  w = (s32[], f32[128,128], f32[128,16]) while((s32[], f32[128,128], f32[128,16]) tuple(s32[] constant(0), a, b)), condition=cond, body=body
  ROOT x = f32[128,16] get-tuple-element(w), index=2
}
"""
}

PROGRAMS = {
    fn.__name__: fn
    for fn in (
        cnn_forward,
        cnn_grad,
        gru_scan,
        lstm_scan,
        gpt2_block,
        kv_cache_decode,
        adam_step,
        vae_elbo_grad,
        sort_topk,
        gnn_message_passing,
        fft_filter,
        preprocessing,
        cumsum_rows,
        int8_matmul,
        dilated_conv1d,
        cross_entropy_labels,
        attention,
        layernorm_mlp,
        embedding_grad,
        maxpool_grad,
        switch_sort,
        small_while_loop,
        dus_loop,
        cholesky_solves,
        linalg_solve,
        batched_factorizations,
        conv_transpose_decoder,
        mixture_grad,
        dropout_noise,
        avg_pool,
    )
}


def hlo_text(name: str, fn, args) -> str:
    """The program's HLO: hand-written where JAX would emit custom calls, else JAX's."""
    if name in HLO_TEXT:
        return HLO_TEXT[name]
    import jax

    return jax.jit(fn).lower(*args).compiler_ir("hlo").as_hlo_text()


def export(folder) -> None:
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name, build in PROGRAMS.items():
        fn, args = build()
        (folder / f"{name}.hlo").write_text(hlo_text(name, fn, args))
