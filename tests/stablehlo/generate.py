"""Regenerates the StableHLO corpus in this folder from JAX (needs `pip install jax`).

    python tests/stablehlo/generate.py [NAME ...]

For each function below it writes NAME.mlir (`jax.jit(f).lower(*args).as_text()`, StableHLO),
NAME.hlo (the same lowering as HLO text) and NAME.npz (the arguments and JAX's results), so the
tests need no JAX; with NAMEs, only those cases.
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

# Four host devices for the sharded cases (they lower with Shardy and collectives); the other
# cases are jitted for one device as before.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=4")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jax.scipy as jsp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AxisType, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

jax.config.update("jax_enable_x64", False)
HERE = pathlib.Path(__file__).parent
rng = np.random.default_rng(0)


def f32(*dims):
    return rng.standard_normal(dims).astype(np.float32)


def mlp(x, w1, b1, w2):
    return jnp.tanh(x @ w1 + b1) @ w2


def conv2d(x, k):
    return lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def conv_strided(x, k):
    return lax.conv_general_dilated(x, k, (2, 2), ((1, 0), (0, 1)), rhs_dilation=(1, 1))


def reductions(x):
    return x.sum(0), x.max(1), x.min(), jnp.prod(x, axis=1), x.mean()


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def logsumexp(x):
    return jax.scipy.special.logsumexp(x, axis=1)


def while_loop(x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 1.5 + 1.0), (0, x))[1]


def fori_loop(x):
    return lax.fori_loop(0, 4, lambda i, v: v + i * v, x)


def scan_cumulative(xs):
    def step(carry, x):
        carry = carry * 0.5 + x
        return carry, carry * 2

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def cond(p, x):
    return lax.cond(p > 0, lambda v: jnp.sin(v), lambda v: jnp.cos(v) * 2, x)


def switch(i, x):
    return lax.switch(i, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)


def sort(x):
    return jnp.sort(x, axis=-1)


def argsort(x):
    return jnp.argsort(x)


def sort_pairs(k, v):
    return lax.sort((k, v), num_keys=1)


def top_k(x):
    return lax.top_k(x, 3)


def gather(x, i):
    return x[i]


def gather_2d(x, i, j):
    return x[i, j]


def scatter_add(x, i, u):
    return x.at[i].add(u)


def scatter_set(x, i, u):
    return x.at[i].set(u)


def cumsum(x):
    return jnp.cumsum(x, axis=1)


def cumprod(x):
    return jnp.cumprod(x)


def argmax(x):
    return jnp.argmax(x, axis=1), jnp.argmin(x, axis=0)


def dynamic_slice(x, i):
    return lax.dynamic_slice(x, (i, 1), (2, 3))


def dynamic_update(x, u, i):
    return lax.dynamic_update_slice(x, u, (i, 0))


def complex_ops(a, b):
    z = lax.complex(a, b)
    w = z * z + jnp.exp(z)
    return jnp.real(w), jnp.imag(w), jnp.abs(z)


def bf16_math(x, y):
    return (x.astype(jnp.bfloat16) * y.astype(jnp.bfloat16) + 1).astype(jnp.float32)


def elementwise(x):
    return (
        jnp.exp(x)
        - jnp.log1p(jnp.abs(x))
        + jnp.sqrt(jnp.abs(x)) * jnp.sign(x)
        + jnp.floor(x)
        + jnp.round(x)
        + jnp.maximum(x, 0.1) ** 2
        + jax.nn.sigmoid(x)
    )


def trig(x):
    return jnp.arcsin(jnp.tanh(x)), jnp.arctan2(x, 2.0), jnp.sinh(x), jnp.arccosh(1 + x * x)


def integers(a, b):
    return a // (jnp.abs(b) + 1), a % 3, a << 2, a >> 1, a & b, a | b, jnp.clip(a, -2, 3)


def compare_select(x, y):
    return jnp.where(x > y, x, y * 2), (x == y) | (x < 0)


def reshape_transpose(x):
    return x.reshape(3, 8).T, jnp.concatenate([x.reshape(24), x.ravel()]), x[::-1, 1:3, ::2]


def pad_reverse(x):
    return jnp.pad(x, ((1, 2), (0, 1))), jnp.flip(x, 0), lax.pad(x, 0.0, ((0, 0, 1), (1, 0, 0)))


def iota_broadcast(x):
    return x + jnp.arange(4, dtype=x.dtype), jnp.eye(3), jnp.tri(3, 4)


def max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def avg_pool_grad(x):
    return jax.grad(
        lambda v: lax.reduce_window(v, -jnp.inf, lax.max, (2, 2), (1, 1), "SAME").sum()
    )(x)


def mlp_grad(x, w):
    return jax.grad(lambda w_: jnp.sum(jnp.tanh(x @ w_) ** 2))(w)


def einsum_batch(a, b):
    return jnp.einsum("bij,bjk->bik", a, b)


def rng_uniform(x):
    key = jax.random.key(0)
    return x + jax.random.uniform(key, x.shape)


def erf_inv(x):
    return jax.scipy.special.erf(x), lax.erf_inv(jnp.tanh(x) * 0.9)


def cholesky_solve(a, b):
    spd = a @ a.T + 4 * jnp.eye(4)
    return jnp.linalg.cholesky(spd), jax.scipy.linalg.solve_triangular(spd, b, lower=True)


def nested_call(x):
    inner = jax.jit(lambda v: jnp.sin(v) * 2)
    return inner(x) + inner(x + 1)


def clamp_convert(x):
    return lax.clamp(-1.0, x, 1.0).astype(jnp.int32), x.astype(jnp.int8).astype(jnp.float32)


def is_finite(x):
    y = x / (x - x[0])
    return jnp.isfinite(y), jnp.isnan(y), jnp.isinf(y), jnp.nan_to_num(y)


def lu(a):
    return jax.scipy.linalg.lu_factor(a)


def qr(a):
    return jnp.linalg.qr(a)


def eigvalsh(a):
    return jnp.linalg.eigvalsh(a @ a.T)


def svdvals(a):
    return jnp.linalg.svd(a, compute_uv=False)


def inv_det(a):
    return jnp.linalg.inv(a), jnp.linalg.det(a)


def solve(a, b):
    return jnp.linalg.solve(a, b)


def special_functions(x, n):
    return (
        jsp.special.gammaln(x * 3),
        jsp.special.digamma(x - 2.5),
        jsp.special.erfc(x * 3 - 1),
        jsp.special.i1e(x * 8 - 4),
        jsp.special.zeta(x + 1.5, x),
        jsp.special.polygamma(n, x + 0.5),
        jnp.nextafter(x, -x),
        jax.nn.gelu(x * 4 - 2, approximate=False),
    )


def gamma_sample(x):
    """jax.random.gamma: rejection sampling, a while loop inside a while loop."""
    return x + jax.random.gamma(jax.random.key(1), x + 0.5)


def truncated_normal(x):
    return x + jax.random.truncated_normal(jax.random.key(2), -1.0, 1.0, x.shape)


def fft_real(x):
    spectrum = jnp.fft.rfft(x, axis=-1)
    return jnp.fft.irfft(spectrum * jnp.exp(-jnp.arange(5.0)), n=8), jnp.fft.fft2(x)


def approx_top_k(x):
    return lax.approx_max_k(x, 3), lax.approx_min_k(x, 2)


def eigvals(a):
    return jnp.sort_complex(jnp.linalg.eigvals(a))


def hessenberg_tridiagonal(a):
    h, q = jsp.linalg.hessenberg(a, calc_q=True)
    return h, q, lax.linalg.tridiagonal(a + a.T, lower=True)


def qr_pivoting(a):
    return jsp.linalg.qr(a, pivoting=True)


def tridiagonal_solve(d, e, b):
    zero = jnp.zeros(1, e.dtype)
    return lax.linalg.tridiagonal_solve(
        jnp.concatenate([zero, e]), d, jnp.concatenate([e, zero]), b
    )


MESH = jax.make_mesh((2, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


def sharded_constraint(x):
    return jax.lax.with_sharding_constraint(jnp.sin(x) * 2, NamedSharding(MESH, P("y"))).sum(0)


def _collectives(a, b):
    return (
        jax.lax.psum(a, "x"),
        jax.lax.all_gather(a, "x", axis=1, tiled=True),
        jax.lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True),
        jax.lax.all_to_all(a, "y", 0, 1, tiled=True),
        jax.lax.ppermute(b, "x", [(0, 1), (1, 0)]),
        jax.lax.pmax(b, ("x", "y")) * jax.lax.axis_index("y"),
    )


shard_map_collectives = jax.shard_map(
    _collectives,
    mesh=MESH,
    in_specs=(P("x", "y"), P("y")),
    out_specs=P(("x", "y")),
    check_vma=False,
)

# Cases jitted with shardings on their arguments and results.
SHARDINGS = {
    "sharded_constraint": (NamedSharding(MESH, P("x")), NamedSharding(MESH, P())),
}

CASES = {
    "mlp": (mlp, [f32(4, 8), f32(8, 16), f32(16), f32(16, 3)]),
    "conv2d": (conv2d, [f32(1, 6, 6, 3), f32(3, 3, 3, 4)]),
    "conv_strided": (conv_strided, [f32(2, 3, 7, 7), f32(5, 3, 2, 2)]),
    "reductions": (reductions, [f32(5, 7)]),
    "softmax": (softmax, [f32(3, 10)]),
    "logsumexp": (logsumexp, [f32(4, 6)]),
    "while_loop": (while_loop, [f32(4)]),
    "fori_loop": (fori_loop, [f32(3, 2)]),
    "scan": (scan_cumulative, [f32(5, 3)]),
    "cond": (cond, [np.float32(0.5), f32(4)]),
    "cond_false": (cond, [np.float32(-0.5), f32(4)]),
    "switch": (switch, [np.int32(1), f32(4)]),
    "sort": (sort, [f32(3, 8)]),
    "argsort": (argsort, [f32(9)]),
    "sort_pairs": (sort_pairs, [f32(6), np.arange(6, dtype=np.int32)]),
    "top_k": (top_k, [f32(4, 10)]),
    "gather": (gather, [f32(5, 3), np.array([4, 0, 2], np.int32)]),
    "gather_2d": (gather_2d, [f32(4, 5), np.array([1, 3], np.int32), np.array([0, 4], np.int32)]),
    "scatter_add": (scatter_add, [f32(5, 2), np.array([1, 1, 3], np.int32), f32(3, 2)]),
    "scatter_set": (scatter_set, [f32(6), np.array([0, 5], np.int32), f32(2)]),
    "cumsum": (cumsum, [f32(3, 6)]),
    "cumprod": (cumprod, [f32(7)]),
    "argmax": (argmax, [f32(4, 6)]),
    "dynamic_slice": (dynamic_slice, [f32(5, 6), np.int32(2)]),
    "dynamic_update": (dynamic_update, [f32(5, 3), f32(2, 3), np.int32(4)]),
    "complex": (complex_ops, [f32(4), f32(4)]),
    "bf16": (bf16_math, [f32(3, 4), f32(3, 4)]),
    "elementwise": (elementwise, [f32(10)]),
    "trig": (trig, [f32(6)]),
    "integers": (integers, [np.arange(-4, 4, dtype=np.int32), np.arange(8, dtype=np.int32) - 2]),
    "compare_select": (compare_select, [f32(5), f32(5)]),
    "reshape_transpose": (reshape_transpose, [f32(2, 3, 4)]),
    "pad_reverse": (pad_reverse, [f32(3, 2)]),
    "iota_broadcast": (iota_broadcast, [f32(2, 4)]),
    "max_pool": (max_pool, [f32(1, 4, 6, 2)]),
    "max_pool_grad": (avg_pool_grad, [f32(4, 5)]),
    "mlp_grad": (mlp_grad, [f32(3, 4), f32(4, 2)]),
    "einsum_batch": (einsum_batch, [f32(2, 3, 4), f32(2, 4, 5)]),
    "rng_uniform": (rng_uniform, [f32(2, 3)]),
    "erf_inv": (erf_inv, [f32(6)]),
    "cholesky_solve": (cholesky_solve, [f32(4, 4), f32(4, 2)]),
    "nested_call": (nested_call, [f32(3)]),
    "clamp_convert": (clamp_convert, [f32(6) * 3]),
    "is_finite": (is_finite, [f32(5)]),
    "lu": (lu, [f32(4, 4)]),
    "qr": (qr, [f32(5, 3)]),
    "eigvalsh": (eigvalsh, [f32(4, 4)]),
    "svdvals": (svdvals, [f32(3, 5)]),
    "inv_det": (inv_det, [f32(2, 3, 3)]),
    "solve": (solve, [f32(4, 4), f32(4, 2)]),
    "special": (
        special_functions,
        [rng.uniform(0.05, 1, 8).astype(np.float32), np.arange(8, dtype=np.int32) % 4],
    ),
    "gamma_sample": (gamma_sample, [rng.uniform(0.2, 3, 4).astype(np.float32)]),
    "truncated_normal": (truncated_normal, [f32(5)]),
    "fft": (fft_real, [f32(3, 8)]),
    "approx_top_k": (approx_top_k, [f32(3, 9)]),
    "eigvals": (eigvals, [f32(4, 4)]),
    "hessenberg": (hessenberg_tridiagonal, [f32(4, 4)]),
    "qr_pivoting": (qr_pivoting, [f32(5, 4)]),
    "tridiagonal_solve": (
        tridiagonal_solve,
        [rng.uniform(3, 4, 5).astype(np.float32), f32(4), f32(5, 2)],
    ),
    "sharded_constraint": (sharded_constraint, [f32(8, 4)]),
    "shard_map_collectives": (shard_map_collectives, [f32(8, 8), f32(8, 4)]),
}
# Cases whose XLA:CPU-optimized module (`.lower(...).compile().as_text()`) is kept as
# NAME.optimized.hlo: bitcasts that change the element type, TopK and LAPACK custom calls.
OPTIMIZED = [
    "sort",
    "argsort",
    "top_k",
    "cholesky_solve",
    "lu",
    "qr",
    "eigvalsh",
    "svdvals",
    "inv_det",
    "solve",
    "eigvals",
    "hessenberg",
    "qr_pivoting",
    "tridiagonal_solve",
    "mlp",
    "while_loop",
    "scatter_add",
    "softmax",
]


def main(names: list[str]) -> None:
    for name, (fn, args) in CASES.items():
        if names and name not in names:
            continue
        shardings = SHARDINGS.get(name, (None, None))
        jitted = jax.jit(fn, in_shardings=shardings[0], out_shardings=shardings[1])
        lowered = jitted.lower(*args)
        (HERE / f"{name}.mlir").write_text(lowered.as_text())
        (HERE / f"{name}.hlo").write_text(lowered.as_text(dialect="hlo"))
        results = jax.tree_util.tree_leaves(jitted(*args))
        arrays = {f"arg{i}": np.asarray(a) for i, a in enumerate(args)}
        arrays.update({f"out{i}": np.asarray(r) for i, r in enumerate(results)})
        np.savez(HERE / f"{name}.npz", **arrays)
        if name in OPTIMIZED:
            optimized = lowered.compile().as_text()
            assert "{...}" not in optimized, f"{name}: XLA elided a constant"
            (HERE / f"{name}.optimized.hlo").write_text(optimized)
        print(name)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
