"""A training step on the cpu backend: minixla.value_and_grad against the same MLP step with
hand-written gradients, and against jax.jit(jax.value_and_grad) when JAX is installed.

Ratios are medians of REPS timed calls of each compiled step, in the same run.
Run: python bench/bench_grad.py
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402

BATCH, WIDTH, REPS = 256, 256, 50


def loss(params, x, y, lib):
    h = lib.tanh(x @ params["w1"] + params["b1"])
    err = h @ params["w2"] - y
    return lib.mean(err * err)


def hand_written(params, x, y):
    h = mnp.tanh(x @ params["w1"] + params["b1"])
    err = h @ params["w2"] - y
    d_pred = 2 * err / err.size
    d_h = (d_pred @ params["w2"].T) * (1 - h * h)
    grads = {"w1": x.T @ d_h, "b1": mnp.sum(d_h, axis=0), "w2": h.T @ d_pred}
    return mnp.mean(err * err), grads


def median_seconds(step, *args) -> float:
    step(*args)
    times = []
    for _ in range(REPS):
        start = time.perf_counter()
        out = step(*args)
        np.asarray(out[0])
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    rng = np.random.default_rng(0)
    params = {"w1": rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 16,
              "b1": np.zeros(WIDTH, np.float32),
              "w2": rng.standard_normal((WIDTH, 8)).astype(np.float32) / 16}
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.standard_normal((BATCH, 8)).astype(np.float32)
    auto = minixla.jit(minixla.value_and_grad(lambda p, a, b: loss(p, a, b, mnp)),
                       backend="cpu")
    manual = minixla.jit(hand_written, backend="cpu")
    base = median_seconds(manual, params, x, y)
    rows = [("hand-written gradients (baseline)", base),
            ("minixla.value_and_grad", median_seconds(auto, params, x, y))]
    try:
        import jax
        import jax.numpy as jnp
        step = jax.jit(jax.value_and_grad(lambda p, a, b: loss(p, a, b, jnp)))
        rows.append(("jax.jit(jax.value_and_grad)", median_seconds(
            lambda *a: jax.block_until_ready(step(*a)), params, x, y)))
    except ImportError:
        pass
    print(f"MLP training step, batch {BATCH}, width {WIDTH}, median of {REPS}:")
    for name, seconds in rows:
        print(f"  {name:36s} {seconds * 1e3:8.3f} ms   {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()
