"""Checks minixla on what JAX exports, beyond the stored corpus (needs `pip install jax`).

    python tests/stablehlo/sweep.py [--backend cpu] [--x64] [--forms stablehlo,hlo,...] [NAME ...]

For each of the 24 whole programs of bench/programs.py and about 190 functions of jax.numpy,
jax.lax, jax.scipy, jax.nn and jax.random below, it exports the jitted function in each form
(`stablehlo`: lowered.as_text(); `generic`: the same in MLIR's generic op form; `debug`: with
debug locations; `hlo`: JAX's HLO text; `optimized`: XLA:CPU's module after its passes),
compiles it with minixla for the backend, runs it on the function's arguments and compares
with JAX's own results (ints exactly, floats to 2e-3). Each line says OK, MISMATCH or FAIL; the
last line counts them. NAMEs (prefixes) pick cases. It takes minutes on the interpreter and
much longer on the cpu backend, which compiles every function.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
X64 = "--x64" in sys.argv
os.environ.setdefault("JAX_ENABLE_X64", "1" if X64 else "0")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy as jsp  # noqa: E402
from jax import lax  # noqa: E402

import minixla  # noqa: E402
from bench import programs  # noqa: E402

rng = np.random.default_rng(0)
F = np.float64 if X64 else np.float32


def f(*dims):
    return rng.standard_normal(dims).astype(F)


def pos(*dims):
    return (rng.random(dims) + 0.5).astype(F)


def unit(*dims):
    return (rng.random(dims) * 1.8 - 0.9).astype(F)


def i32(*dims, lo=-5, hi=6):
    return rng.integers(lo, hi, dims).astype(np.int32)


def spd(n):
    a = f(n, n)
    return (a @ a.T + n * np.eye(n)).astype(F)


def c64(*dims):
    return (f(*dims) + 1j * f(*dims)).astype(np.complex128 if X64 else np.complex64)


def key():
    return jax.random.key(1)


FUNCTIONS = {
    # unary math
    **{
        f"jnp.{n}": (getattr(jnp, n), [f(7)])
        for n in "sin cos tan tanh sinh cosh arctan arcsinh exp exp2 expm1 abs negative sign floor ceil rint round trunc square cbrt signbit isfinite isnan isinf logaddexp2".split()
        if n != "logaddexp2"
    },
    **{
        f"jnp.{n}": (getattr(jnp, n), [pos(7)])
        for n in "log log1p log2 log10 sqrt reciprocal rsqrt".split()
        if hasattr(jnp, n)
    },
    **{f"jnp.{n}": (getattr(jnp, n), [unit(7)]) for n in "arcsin arccos arctanh".split()},
    "jnp.arccosh": (jnp.arccosh, [pos(5) + 1]),
    # binary
    **{
        f"jnp.{n}": (getattr(jnp, n), [f(6), f(6)])
        for n in "add subtract multiply divide true_divide maximum minimum arctan2 hypot copysign nextafter logaddexp logaddexp2 fmax fmin heaviside fmod remainder floor_divide".split()
    },
    "jnp.power": (jnp.power, [pos(6), f(6)]),
    "jnp.float_power": (jnp.float_power, [pos(6), f(6)]),
    "int.ops": (
        lambda a, b: (
            a // jnp.where(b == 0, 1, b),
            a % jnp.where(b == 0, 1, b),
            a**2,
            jnp.gcd(a, b),
            jnp.lcm(a, b),
            a ^ b,
            ~a,
            jnp.left_shift(a, 3),
            jnp.right_shift(a, 1),
        ),
        [i32(8), i32(8)],
    ),
    "int.popcount_clz": (
        lambda a: (lax.population_count(a), lax.clz(a), jnp.bitwise_count(a)),
        [i32(8, lo=-100, hi=100)],
    ),
    "uint.ops": (
        lambda a, b: (
            a // (b + 1),
            a % (b + 1),
            a >> 2,
            a * b,
            lax.shift_right_logical(a, jnp.uint32(3)),
        ),
        [rng.integers(0, 2**31, 8).astype(np.uint32), rng.integers(0, 100, 8).astype(np.uint32)],
    ),
    "int8.ops": (
        lambda a, b: (
            a + b,
            a * b,
            (a.astype(jnp.int32) @ b.astype(jnp.int32).T),
            a.astype(jnp.float32),
        ),
        [
            rng.integers(-100, 100, (3, 4)).astype(np.int8),
            rng.integers(-100, 100, (3, 4)).astype(np.int8),
        ],
    ),
    "bool.ops": (
        lambda a, b: (a & b, a | b, ~a, a ^ b, jnp.any(a), jnp.all(b), a.sum()),
        [rng.random(8) > 0.5, rng.random(8) > 0.5],
    ),
    "f16.ops": (
        lambda a, b: (
            a.astype(jnp.float16) * b.astype(jnp.float16) + 1,
            jnp.exp(a.astype(jnp.float16)),
            (a.astype(jnp.float16) @ b.astype(jnp.float16).T),
        ),
        [f(3, 4), f(3, 4)],
    ),
    "bf16.dot": (
        lambda a, b: jnp.dot(
            a.astype(jnp.bfloat16), b.astype(jnp.bfloat16), preferred_element_type=jnp.float32
        ),
        [f(3, 4), f(4, 5)],
    ),
    "complex.ops": (
        lambda z, w: (
            z * w,
            z / w,
            jnp.exp(z),
            jnp.log(z),
            jnp.sqrt(z),
            jnp.abs(z),
            jnp.angle(z),
            jnp.conj(z),
            z @ w.T,
            jnp.sin(z),
            jnp.tanh(z),
        ),
        [c64(3, 3), c64(3, 3)],
    ),
    "complex.sort": (lambda z: jnp.sort(z), [c64(6)]),
    # special
    **{
        f"jsp.special.{n}": (getattr(jsp.special, n), [pos(6) * 3])
        for n in "gammaln digamma erfc erf i0e i1e i0 i1 expit logit ndtri entr".split()
        if n not in ("logit", "ndtri")
    },
    "jsp.special.logit": (jsp.special.logit, [(rng.random(6) * 0.9 + 0.05).astype(F)]),
    "jsp.special.ndtri": (jsp.special.ndtri, [(rng.random(6) * 0.9 + 0.05).astype(F)]),
    "jsp.special.xlogy": (jsp.special.xlogy, [pos(6), pos(6)]),
    "jsp.special.gammainc": (jsp.special.gammainc, [pos(6) * 2, pos(6) * 2]),
    "jsp.special.betainc": (jsp.special.betainc, [pos(5), pos(5), unit(5) * 0.5 + 0.5]),
    "jsp.special.zeta": (jsp.special.zeta, [pos(5) + 1.5, pos(5)]),
    "lax.igamma": (lax.igamma, [pos(6) * 2, pos(6) * 2]),
    "lax.lgamma": (lax.lgamma, [pos(6) * 3]),
    "lax.random_gamma_grad": (lambda a, x: lax.random_gamma_grad(a, x), [pos(5) * 2, pos(5)]),
    "lax.reduce_precision": (lambda x: lax.reduce_precision(x, 5, 10), [f(8) * 1000]),
    "lax.bitcast_convert": (
        lambda x: (lax.bitcast_convert_type(x, jnp.int32), lax.bitcast_convert_type(x, jnp.uint8)),
        [f(4).astype(np.float32)],
    ),
    "lax.integer_pow": (lambda x: (lax.integer_pow(x, 5), lax.integer_pow(x, -2)), [pos(5)]),
    "lax.rem_sign": (lambda x, y: (lax.rem(x, y), lax.sign(x), lax.logistic(x)), [f(6), pos(6)]),
    "jnp.frexp_ldexp": (
        lambda x: (*jnp.frexp(x), jnp.ldexp(x, jnp.arange(5, dtype=jnp.int32)), *jnp.modf(x)),
        [f(5) * 10],
    ),
    # reductions
    "reduce.basic": (
        lambda x: (
            x.sum(),
            x.sum(0),
            x.max(1),
            x.min(),
            x.prod(1),
            x.mean(0),
            jnp.argmax(x, 0),
            jnp.argmin(x, 1),
        ),
        [f(4, 6)],
    ),
    "reduce.stats": (
        lambda x: (
            x.var(0),
            x.std(1),
            jnp.median(x, 1),
            jnp.quantile(x, 0.3, axis=0),
            jnp.percentile(x, 75),
            jnp.average(x, 0, weights=jnp.arange(4.0)),
            jnp.ptp(x, 1),
        ),
        [f(4, 6)],
    ),
    "reduce.nan": (
        lambda x: (jnp.nansum(x), jnp.nanmean(x, 0), jnp.nanmax(x, 1), jnp.nanargmin(x, 1)),
        [np.where(rng.random((4, 6)) > 0.8, np.nan, f(4, 6)).astype(F)],
    ),
    "reduce.logsumexp": (
        lambda x: (
            jsp.special.logsumexp(x, 1),
            jax.nn.logsumexp(x),
            jax.nn.softmax(x),
            jax.nn.log_softmax(x, 0),
        ),
        [f(4, 6)],
    ),
    "reduce.cumulative": (
        lambda x: (
            jnp.cumsum(x, 0),
            jnp.cumprod(x, 1),
            lax.cummax(x, 1),
            lax.cummin(x, 0),
            lax.cumlogsumexp(x, 1),
            jnp.diff(x, axis=1),
        ),
        [f(4, 6)],
    ),
    "reduce.cumsum_reverse": (lambda x: lax.cumsum(x, 0, reverse=True), [f(40, 3)]),
    "reduce.count": (
        lambda x: (jnp.count_nonzero(x > 0, 1), jnp.any(x > 2), jnp.all(x < 5, 0)),
        [f(4, 6)],
    ),
    "reduce.variadic": (
        lambda x, y: lax.reduce(
            (x, y),
            (jnp.float32(-np.inf), jnp.int32(0)),
            lambda a, b: (jnp.maximum(a[0], b[0]), jnp.where(a[0] > b[0], a[1], b[1])),
            (1,),
        ),
        [f(4, 6).astype(np.float32), i32(4, 6)],
    ),
    # shape ops
    "shape.misc": (
        lambda x: (
            jnp.roll(x, 2, 1),
            jnp.tile(x, (2, 1)),
            jnp.repeat(x, 2, 0),
            jnp.swapaxes(x, 0, 1),
            jnp.rot90(x),
            jnp.triu(x),
            jnp.tril(x, -1),
            jnp.diag(x[:, :4]),
            jnp.trace(x),
            jnp.diagonal(x, 1),
        ),
        [f(4, 6)],
    ),
    "shape.stack": (
        lambda x, y: (
            jnp.stack([x, y]),
            jnp.hstack([x, y]),
            jnp.vstack([x, y]),
            jnp.concatenate([x, y], 1),
            jnp.split(x, 2, 1),
            jnp.expand_dims(x, 1),
            jnp.squeeze(x[None]),
        ),
        [f(4, 6), f(4, 6)],
    ),
    "shape.pad": (
        lambda x: (
            jnp.pad(x, 2, mode="reflect"),
            jnp.pad(x, ((1, 1), (2, 0)), mode="edge"),
            jnp.pad(x, 1, mode="wrap"),
            lax.pad(x, 0.0, ((-1, 1, 1), (0, -2, 0))),
        ),
        [f(4, 6)],
    ),
    "shape.meshgrid": (lambda x, y: jnp.meshgrid(x, y), [f(3), f(4)]),
    "shape.outer_kron": (
        lambda x, y: (
            jnp.outer(x, y),
            jnp.kron(x.reshape(2, 2), y.reshape(2, 2)),
            jnp.tensordot(x.reshape(2, 2), y.reshape(2, 2), 1),
            jnp.inner(x, y),
            jnp.cross(x[:3], y[:3]),
            jnp.vdot(x, y),
        ),
        [f(4), f(4)],
    ),
    "shape.einsum": (
        lambda a, b, c: (
            jnp.einsum("ij,jk,kl->il", a, b, c),
            jnp.einsum("ii->i", a @ b @ c),
            jnp.einsum("ij->", a),
        ),
        [f(3, 4), f(4, 5), f(5, 3)],
    ),
    # indexing
    "index.take": (
        lambda x, i: (
            jnp.take(x, i, axis=1),
            jnp.take_along_axis(x, jnp.abs(i[:4, None]) % 6, axis=1),
            x[i % 4],
            x[1:3, ::2],
            x[..., -1],
            x[jnp.array([0, 2])][:, jnp.array([1, 3])],
        ),
        [f(4, 6), i32(5, lo=0, hi=6)],
    ),
    "index.take_clip": (
        lambda x, i: (
            jnp.take(x, i, mode="clip"),
            jnp.take(x, i, mode="wrap"),
            x.at[i].get(mode="fill", fill_value=-1.0),
        ),
        [f(6), i32(5, lo=-8, hi=9)],
    ),
    "index.scatter": (
        lambda x, i, u: (
            x.at[i].add(u),
            x.at[i].set(u),
            x.at[i].max(u),
            x.at[i].min(u),
            x.at[i].mul(u),
            x.at[i, 1].set(0.0),
        ),
        [f(6, 3), i32(4, lo=0, hi=6), f(4, 3)],
    ),
    "index.scatter_drop": (
        lambda x, i, u: x.at[i].add(u, mode="drop"),
        [f(6), i32(4, lo=-8, hi=9), f(4)],
    ),
    "index.where": (
        lambda x: (
            jnp.nonzero(x > 0, size=5),
            jnp.argwhere(x > 0, size=4, fill_value=-1),
            jnp.flatnonzero(x > 0, size=3),
        ),
        [f(8)],
    ),
    "index.searchsorted": (
        lambda a, v: (
            jnp.searchsorted(jnp.sort(a), v),
            jnp.searchsorted(jnp.sort(a), v, side="right", method="sort"),
            jnp.searchsorted(jnp.sort(a), v, method="compare_all"),
            jnp.digitize(v, jnp.sort(a)),
        ),
        [f(10), f(5)],
    ),
    "index.unique": (
        lambda x: jnp.unique(
            x, size=6, fill_value=0, return_index=True, return_inverse=True, return_counts=True
        ),
        [i32(10, lo=0, hi=5)],
    ),
    "index.bincount_hist": (
        lambda i, x: (jnp.bincount(i, length=6), jnp.histogram(x, bins=5, range=(-2, 2))[0]),
        [i32(12, lo=0, hi=6), f(20)],
    ),
    "index.interp": (lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5), jnp.arange(5.0)), [f(7)]),
    "index.dynamic": (
        lambda x, i: (
            lax.dynamic_slice_in_dim(x, i, 2, 1),
            lax.dynamic_update_index_in_dim(x, x[0], i, 0),
            lax.dynamic_index_in_dim(x, i, 1, keepdims=False),
        ),
        [f(4, 6), np.int32(3)],
    ),
    "index.one_hot": (lambda i: jax.nn.one_hot(i, 5), [i32(6, lo=0, hi=5)]),
    # sort
    "sort.variants": (
        lambda x: (
            jnp.sort(x, 0),
            jnp.argsort(x, 1, descending=True),
            jnp.argsort(x, stable=True),
            jnp.partition(x, 2, axis=1),
            jnp.argpartition(x, 1, axis=1),
            jnp.lexsort((x[0], x[1])),
        ),
        [f(4, 6)],
    ),
    "sort.int": (lambda x: (jnp.sort(x), jnp.argsort(x)), [i32(10)]),
    "sort.top_k": (
        lambda x: (lax.top_k(x, 3), lax.approx_max_k(x, 2), lax.approx_min_k(x, 2)),
        [f(3, 8)],
    ),
    "sort.nan": (
        lambda x: (jnp.sort(x), jnp.argsort(x), jnp.max(x), jnp.nanmin(x)),
        [np.array([3, np.nan, -1, np.inf, -np.inf, 0.0, -0.0, np.nan], F)],
    ),
    "sort.multi": (
        lambda a, b, c: lax.sort((a, b, c), num_keys=2),
        [i32(8, lo=0, hi=3), f(8), i32(8)],
    ),
    # control flow
    "control.while": (
        lambda x: lax.while_loop(
            lambda c: c[1] < 50.0,
            lambda c: (c[0] + 1, c[1] * 2 + jnp.abs(c[2]).sum(), c[2] * 0.5),
            (0, 1.0, x),
        ),
        [f(3).astype(np.float32)],
    ),
    "control.fori_unrolled": (
        lambda x: lax.fori_loop(0, 3, lambda i, v: v * 2 + i, x, unroll=True),
        [f(3)],
    ),
    "control.scan_reverse": (
        lambda xs: lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3, xs.dtype), xs, reverse=True),
        [f(5, 3)],
    ),
    "control.scan_unroll": (
        lambda xs: lax.scan(
            lambda c, x: (c * 0.9 + x, jnp.sin(c)), jnp.zeros(3, xs.dtype), xs, unroll=2
        ),
        [f(5, 3)],
    ),
    "control.map": (lambda xs: lax.map(lambda x: jnp.dot(x, x), xs), [f(4, 3)]),
    "control.associative_scan": (lambda x: lax.associative_scan(jnp.add, x), [f(9)]),
    "control.cond_multi": (
        lambda p, x, y: lax.cond(p, lambda a, b: (a + b, a * 2), lambda a, b: (a - b, b * 3), x, y),
        [np.bool_(False), f(3), f(3)],
    ),
    "control.switch": (
        lambda i, x: lax.switch(i, [jnp.sin, jnp.cos, lambda v: v * 3], x),
        [np.int32(7), f(3)],
    ),
    "control.vmap_cond": (
        jax.vmap(lambda p, x: lax.cond(p > 0, jnp.sin, jnp.cos, x)),
        [f(4), f(4)],
    ),
    "control.remat": (
        jax.grad(lambda x: jax.checkpoint(lambda v: jnp.sin(jnp.sin(v)).sum())(x)),
        [f(5)],
    ),
    "control.opt_barrier": (lambda x: lax.optimization_barrier((x, x * 2)), [f(3)]),
    "control.custom_jvp": (
        jax.grad(
            lambda x: (
                jax.nn.relu(x).sum()
                + jax.nn.softplus(x).sum()
                + jax.nn.gelu(x).sum()
                + jax.nn.silu(x).sum()
            )
        ),
        [f(5)],
    ),
    "control.jacfwd": (jax.jacfwd(lambda x: jnp.sin(x) * x.sum()), [f(3)]),
    "control.hessian": (jax.hessian(lambda x: (x**3).sum() * jnp.cos(x[0])), [f(3)]),
    "control.while_dynamic": (
        lambda n, x: lax.fori_loop(0, n, lambda i, v: v + i, x),
        [np.int32(5), f(2)],
    ),
    # linalg
    "linalg.cholesky": (
        lambda a: (
            jnp.linalg.cholesky(a),
            jsp.linalg.cho_solve(jsp.linalg.cho_factor(a), jnp.ones((4, 2), a.dtype)),
        ),
        [spd(4)],
    ),
    "linalg.lu": (
        lambda a, b: (jsp.linalg.lu(a)[0], jsp.linalg.lu_solve(jsp.linalg.lu_factor(a), b)),
        [f(4, 4), f(4, 2)],
    ),
    "linalg.qr": (
        lambda a: (jnp.linalg.qr(a, mode="complete")[1], jnp.abs(jnp.linalg.qr(a)[0])),
        [f(5, 3)],
    ),
    "linalg.eigh": (
        lambda a: (jnp.linalg.eigvalsh(a), jnp.abs(jnp.linalg.eigh(a)[1][:, -1])),
        [spd(4)],
    ),
    "linalg.svd": (
        lambda a: (
            jnp.linalg.svd(a, compute_uv=False),
            jnp.linalg.matrix_rank(a),
            jnp.linalg.norm(a, 2),
            jnp.linalg.cond(a),
            jnp.linalg.pinv(a) @ a,
        ),
        [f(4, 3)],
    ),
    "linalg.inv_det": (
        lambda a: (
            jnp.linalg.inv(a),
            jnp.linalg.det(a),
            *jnp.linalg.slogdet(a),
            jnp.linalg.matrix_power(a, 3),
            jnp.linalg.solve(a, a.T),
        ),
        [f(3, 3)],
    ),
    "linalg.lstsq": (lambda a, b: jnp.linalg.lstsq(a, b)[0], [f(5, 3), f(5, 2)]),
    "linalg.norms": (
        lambda a: (
            jnp.linalg.norm(a),
            jnp.linalg.norm(a, axis=0),
            jnp.linalg.norm(a, "fro"),
            jnp.linalg.norm(a, 1),
            jnp.linalg.norm(a, np.inf),
        ),
        [f(3, 4)],
    ),
    "linalg.triangular": (
        lambda a, b: (
            jsp.linalg.solve_triangular(a, b, lower=False, trans=1),
            jsp.linalg.solve_triangular(a, b, unit_diagonal=True),
        ),
        [spd(4), f(4, 2)],
    ),
    "linalg.expm": (lambda a: jsp.linalg.expm(a * 0.1), [f(3, 3)]),
    "linalg.eig": (lambda a: jnp.sort(jnp.abs(jnp.linalg.eigvals(a))), [f(3, 3)]),
    "linalg.batched": (
        lambda a: (jnp.linalg.cholesky(a), jnp.linalg.inv(a), jnp.linalg.eigvalsh(a)),
        [np.stack([spd(3), spd(3)])],
    ),
    "linalg.complex": (
        lambda a: (jnp.linalg.inv(a), jnp.linalg.det(a), jnp.linalg.svd(a, compute_uv=False)),
        [c64(3, 3)],
    ),
    "linalg.schur": (lambda a: jnp.abs(jnp.diag(jsp.linalg.schur(a)[0])), [spd(3)]),
    "linalg.tridiagonal": (
        lambda d, e, b: lax.linalg.tridiagonal_solve(e, d, e, b),
        [pos(5) + 3, np.concatenate([[0], f(4)]).astype(F), f(5, 1)],
    ),
    # fft
    "fft.all": (
        lambda x: (
            jnp.fft.fft(x),
            jnp.fft.ifft(x),
            jnp.fft.rfft(x.real),
            jnp.fft.irfft(x, 14),
            jnp.fft.fft2(x.reshape(2, 4)),
            jnp.fft.fftn(x.reshape(2, 2, 2)),
            jnp.fft.irfftn(x.reshape(2, 4)),
            jnp.fft.fftshift(x.real),
        ),
        [c64(8)],
    ),
    "fft.real": (
        lambda x: (jnp.fft.rfft2(x), jnp.fft.irfft2(jnp.fft.rfft2(x), x.shape)),
        [f(4, 6)],
    ),
    # convolution
    "conv.transpose": (
        lambda x, k: lax.conv_transpose(
            x, k, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
        ),
        [f(1, 4, 4, 2), f(3, 3, 2, 3)],
    ),
    "conv.grouped": (
        lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "VALID", feature_group_count=2),
        [f(1, 4, 5, 5), f(6, 2, 2, 2)],
    ),
    "conv.dilated": (
        lambda x, k: lax.conv_general_dilated(
            x, k, (1, 2), ((1, 1), (2, 0)), lhs_dilation=(2, 1), rhs_dilation=(1, 2)
        ),
        [f(2, 3, 5, 6), f(4, 3, 2, 3)],
    ),
    "conv.1d3d": (
        lambda x, k, y, q: (
            jnp.convolve(x, k),
            jnp.correlate(x, k, "same"),
            lax.conv(y, q, (1, 1, 1), "SAME"),
        ),
        [f(10), f(3), f(1, 2, 3, 4, 4), f(2, 2, 2, 2, 2)],
    ),
    "conv.grad": (
        jax.grad(lambda k, x: lax.conv(x, k, (1, 1), "SAME").sum() ** 2, argnums=(0, 1)),
        [f(3, 2, 3, 3), f(2, 2, 5, 5)],
    ),
    "conv.batch_group_grad": (
        jax.grad(
            lambda k, x: (
                lax.conv_general_dilated(x, k, (1, 1), "SAME", feature_group_count=2) ** 2
            ).sum()
        ),
        [f(4, 1, 3, 3), f(2, 2, 5, 5)],
    ),
    "conv.int": (
        lambda x, k: lax.conv(x, k, (1, 1), "VALID", preferred_element_type=jnp.int32),
        [
            rng.integers(-5, 5, (1, 2, 4, 4)).astype(np.int8),
            rng.integers(-5, 5, (3, 2, 2, 2)).astype(np.int8),
        ],
    ),
    # windows
    "window.pools": (
        lambda x: (
            lax.reduce_window(x, 0.0, lax.add, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
            lax.reduce_window(
                x,
                -jnp.inf,
                lax.max,
                (1, 2, 2, 1),
                (1, 1, 1, 1),
                ((0, 0), (1, 0), (0, 1), (0, 0)),
                window_dilation=(1, 2, 1, 1),
            ),
            lax.reduce_window(
                x, jnp.inf, lax.min, (1, 2, 2, 1), (1, 2, 2, 1), "VALID", base_dilation=(1, 2, 1, 1)
            ),
        ),
        [f(1, 5, 6, 2)],
    ),
    "window.pool_grad": (
        jax.grad(
            lambda x: (
                (
                    lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME") ** 2
                ).sum()
                + lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID").sum()
            )
        ),
        [f(1, 5, 6, 2)],
    ),
    "window.image_resize": (
        lambda x: (
            jax.image.resize(x, (8, 10), "linear"),
            jax.image.resize(x, (2, 3), "cubic"),
            jax.image.resize(x, (8, 12), "nearest"),
        ),
        [f(4, 6)],
    ),
    # random
    "random.all": (
        lambda x: (
            jax.random.normal(key(), (3,)),
            jax.random.randint(key(), (4,), 0, 10),
            jax.random.bernoulli(key(), 0.3, (5,)),
            jax.random.permutation(key(), 6),
            jax.random.categorical(key(), x),
            jax.random.gamma(key(), 2.0, (3,)),
            jax.random.truncated_normal(key(), -1, 1, (3,)),
            jax.random.choice(key(), 5, (3,), replace=False),
        ),
        [f(4, 5)],
    ),
    "random.threefry_raw": (
        lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (4,)),
        [np.array([0, 42], np.uint32)],
    ),
    "random.rbg": (
        lambda: lax.rng_bit_generator(jnp.array([1, 2, 3, 4], jnp.uint32), (3, 4), jnp.uint32),
        [],
    ),
    # nn
    "nn.misc": (
        lambda x: (
            jax.nn.gelu(x, approximate=False),
            jax.nn.relu6(x),
            jax.nn.elu(x),
            jax.nn.celu(x),
            jax.nn.selu(x),
            jax.nn.leaky_relu(x),
            jax.nn.hard_tanh(x),
            jax.nn.glu(x),
            jax.nn.standardize(x),
            jax.nn.squareplus(x),
            jax.nn.log_sigmoid(x),
            jax.nn.mish(x),
        ),
        [f(4, 6)],
    ),
    "nn.dot_product_attention": (
        lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
        [
            f(1, 4, 2, 8).astype(np.float32),
            f(1, 4, 2, 8).astype(np.float32),
            f(1, 4, 2, 8).astype(np.float32),
        ],
    ),
    # more
    "complex.inverse_trig": (
        lambda z: (
            jnp.arcsin(z),
            jnp.arccos(z),
            jnp.arctan(z),
            jnp.arcsinh(z),
            jnp.arccosh(z),
            jnp.arctanh(z),
            jnp.tan(z),
            jnp.sinh(z),
            jnp.cosh(z),
            jnp.log1p(z),
            jnp.expm1(z),
            z**2.5,
            jnp.sign(z),
            jnp.round(z),
        ),
        [c64(5) * 0.7],
    ),
    "random.philox": (
        lambda: (
            jax.random.uniform(jax.random.key(3, impl="philox4x32"), (5,)),
            jax.random.normal(jax.random.key(3, impl="philox4x32"), (3,)),
        ),
        [],
    ),
    "random.rbg_impl": (lambda: jax.random.uniform(jax.random.key(3, impl="rbg"), (5,)), []),
    "random.unsafe_rbg": (
        lambda: jax.random.uniform(jax.random.key(3, impl="unsafe_rbg"), (5,)),
        [],
    ),
    "lax.ragged_dot": (
        lambda a, b, g: lax.ragged_dot(a, b, g),
        [f(6, 4).astype(np.float32), f(3, 4, 5).astype(np.float32), np.array([2, 1, 3], np.int32)],
    ),
    "lax.polygamma": (
        lambda n, x: (
            jsp.special.polygamma(n, x),
            jax.grad(lambda v: jsp.special.digamma(v).sum())(x),
        ),
        [np.array([0, 1, 2, 3], np.int32), pos(4)],
    ),
    "lax.mulhi": (
        lambda a, b: lax.mulhi(a, b),
        [rng.integers(0, 2**31, 6).astype(np.uint32), rng.integers(0, 2**31, 6).astype(np.uint32)],
    ),
    "lax.split_sort": (lambda x: (jnp.split(x, [1, 3]), lax.sort(x, is_stable=True)), [f(6)]),
    "lax.cond_index": (
        lambda i, x: lax.switch(i, [lambda v: jnp.sort(v), lambda v: jnp.cumsum(v)], x),
        [np.int32(1), f(5)],
    ),
    "lax.reduce_and_or": (lambda x: (jnp.all(x > 0, axis=0), jnp.any(x > 1, axis=1)), [f(3, 4)]),
    "lax.top_k_int": (lambda x: lax.top_k(x, 2), [i32(3, 5)]),
    "lax.clamp_round": (
        lambda x: (
            lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
            lax.round(x),
            lax.clamp(jnp.float32(-1) if x.dtype == np.float32 else -1.0, x, jnp.ones_like(x)),
        ),
        [f(6) * 3],
    ),
    "nn.conv_general": (
        lambda x, k: jax.nn.relu(
            lax.conv_general_dilated(
                x, k, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW")
            )
        ),
        [f(2, 3, 6, 6), f(4, 3, 3, 3)],
    ),
    "jvp.linearize": (lambda x: jax.linearize(lambda v: jnp.sin(v) ** 2, x)[1](x), [f(4)]),
    "vmap.batched_linalg": (
        jax.vmap(lambda a, b: jnp.linalg.solve(a @ a.T + 3 * jnp.eye(3), b)),
        [f(2, 3, 3), f(2, 3)],
    ),
    # misc
    "misc.poly": (
        lambda c, x: (
            jnp.polyval(c, x),
            jnp.polyfit(x, jnp.sin(x), 2),
            jnp.polyder(c),
            jnp.polymul(c, c),
        ),
        [f(4), f(6)],
    ),
    "misc.stats": (
        lambda x, y: (
            jnp.corrcoef(x, y),
            jnp.cov(x),
            jnp.isclose(x, y),
            jnp.allclose(x, x),
            jnp.unwrap(x * 4),
            jnp.clip(x, -0.5, 0.5),
            jnp.nan_to_num(x / 0.0),
        ),
        [f(6), f(6)],
    ),
    "misc.linspace": (
        lambda x: (
            jnp.linspace(0, x, 5),
            jnp.logspace(0, 1, 4) * x,
            jnp.geomspace(1, 8, 4) * x,
            jnp.arange(6) * x,
            jnp.full((2, 2), x),
            jnp.eye(3, k=1) * x,
            jnp.identity(2) * x,
        ),
        [np.asarray(1.5, F)],
    ),
    "misc.dtypes": (
        lambda x: (
            x.astype(jnp.int8),
            x.astype(jnp.uint8),
            x.astype(jnp.int16),
            x.astype(jnp.uint32),
            x.astype(jnp.float16),
            x.astype(jnp.bfloat16).astype(F),
            x.astype(bool),
            (x * 100).astype(jnp.int32).astype(F),
        ),
        [f(8) * 50],
    ),
    "misc.float8": (
        lambda x: (
            x.astype(jnp.float8_e4m3fn).astype(jnp.float32),
            x.astype(jnp.float8_e5m2).astype(jnp.float32),
            (x.astype(jnp.float8_e4m3fn) @ x.astype(jnp.float8_e4m3fn).T).astype(jnp.float32),
        ),
        [f(4, 4).astype(np.float32)],
    ),
    "misc.int4": (
        lambda x: (x.astype(jnp.int4).astype(jnp.int32), x.astype(jnp.uint4).astype(jnp.int32)),
        [i32(8, lo=0, hi=8)],
    ),
    "misc.x64_literals": (
        lambda x: (
            x + jnp.finfo(x.dtype).eps,
            x * jnp.finfo(x.dtype).max,
            x + jnp.finfo(x.dtype).tiny,
            jnp.iinfo(jnp.int32).min + x.astype(jnp.int32),
        ),
        [f(3)],
    ),
    "misc.shard_1dev": (
        lambda x: jax.lax.with_sharding_constraint(
            x * 2, jax.sharding.SingleDeviceSharding(jax.devices()[0])
        ),
        [f(4)],
    ),
    "misc.pure_callback_free": (
        lambda x: jax.lax.stop_gradient(x) + jax.lax.reduce_precision(x, 8, 7),
        [f(4)],
    ),
}


FORMS = {
    "stablehlo": lambda lowered: lowered.as_text(),
    "generic": lambda lowered: lowered.compiler_ir("stablehlo").operation.get_asm(
        print_generic_op_form=True
    ),
    "debug": lambda lowered: lowered.as_text(debug_info=True),
    "hlo": lambda lowered: lowered.compiler_ir("hlo").as_hlo_text(),
    "optimized": lambda lowered: lowered.compile().as_text(),
}


def compare(got, want) -> str | None:
    got = [np.asarray(g) for g in jax.tree_util.tree_leaves(list(got))]
    if len(got) != len(want):
        return f"{len(got)} outputs, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"out {i}: {g.dtype}{g.shape}, want {w.dtype}{w.shape}"
        if w.dtype.kind in "biu":
            if not np.array_equal(g, w):
                return f"out {i}: {np.sum(g != w)} of {g.size} differ"
            continue
        g, w = g.astype(np.complex128), w.astype(np.complex128)
        close = np.isclose(g, w, rtol=2e-3, atol=2e-3, equal_nan=True)
        if not close.all():
            return f"out {i}: {np.sum(~close)} of {g.size} differ, by up to {np.nanmax(abs(g - w)):.3g}"
    return None


def cases():
    for name, build in programs.PROGRAMS.items():
        fn, args = build()
        yield f"program.{name}", fn, args
    for name, (fn, args) in FUNCTIONS.items():
        yield name, fn, args


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only the cases whose name starts so")
    parser.add_argument("--backend", default="interpreter")
    parser.add_argument("--x64", action="store_true", help="f64 arguments (jax_enable_x64)")
    parser.add_argument("--forms", default="stablehlo,hlo,optimized", help=", ".join(FORMS))
    args = parser.parse_args()
    counts = {"OK": 0, "MISMATCH": 0, "FAIL": 0}
    for name, fn, arguments in cases():
        if args.names and not any(name.startswith(n) for n in args.names):
            continue
        lowered = jax.jit(fn).lower(*arguments)
        want = [np.asarray(a) for a in jax.tree_util.tree_leaves(jax.jit(fn)(*arguments))]
        for form in args.forms.split(","):
            start = time.perf_counter()
            try:
                module = minixla.parse_module(FORMS[form](lowered))
                got = minixla.compile(module, backend=args.backend)(*arguments)
                problem = compare(got if isinstance(got, tuple) else (got,), want)
                status = "OK" if problem is None else f"MISMATCH {problem}"
            except Exception as exc:  # noqa: BLE001 - every failure is reported and counted
                status = f"FAIL {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            counts[status.split()[0]] += 1
            seconds = time.perf_counter() - start
            print(f"{name:32s} {form:10s} {seconds:6.1f}s {status}", flush=True)
    print(" ".join(f"{k} {v}" for k, v in counts.items()))
    return 0 if counts["OK"] and not counts["MISMATCH"] + counts["FAIL"] else 1


if __name__ == "__main__":
    sys.exit(main())
