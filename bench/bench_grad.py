"""A training step on the cpu backend: minixla.value_and_grad against the same MLP step with
hand-written gradients, and against jax.jit(jax.value_and_grad) when JAX is installed.

Ratios are medians of REPS timed calls of each compiled step, taking turns in the same run.
Run: NUMBA_NUM_THREADS=1 OMP_NUM_THREADS=1 python bench/bench_grad.py
(one thread each keeps the figures steady on a shared machine)
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


def interleaved_medians(steps: dict, *args) -> dict:
    """Median seconds per call of each step; the steps take turns, so a busy machine slows
    them alike."""
    for step in steps.values():
        np.asarray(step(*args)[0])
    times = {name: [] for name in steps}
    for _ in range(REPS):
        for name, step in steps.items():
            start = time.perf_counter()
            np.asarray(step(*args)[0])
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    rng = np.random.default_rng(0)
    params = {
        "w1": rng.standard_normal((WIDTH, WIDTH)).astype(np.float32) / 16,
        "b1": np.zeros(WIDTH, np.float32),
        "w2": rng.standard_normal((WIDTH, 8)).astype(np.float32) / 16,
    }
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    y = rng.standard_normal((BATCH, 8)).astype(np.float32)
    auto = minixla.jit(minixla.value_and_grad(lambda p, a, b: loss(p, a, b, mnp)), backend="cpu")
    manual = minixla.jit(hand_written, backend="cpu")
    steps = {"hand-written gradients (baseline)": manual, "minixla.value_and_grad": auto}
    try:
        import jax
        import jax.numpy as jnp

        step = jax.jit(jax.value_and_grad(lambda p, a, b: loss(p, a, b, jnp)))
        steps["jax.jit(jax.value_and_grad)"] = lambda *a: jax.block_until_ready(step(*a))
    except ImportError:
        pass
    medians = interleaved_medians(steps, params, x, y)
    base = medians["hand-written gradients (baseline)"]
    print(f"MLP training step, batch {BATCH}, width {WIDTH}, median of {REPS}:")
    for name, seconds in medians.items():
        print(f"  {name:36s} {seconds * 1e3:8.3f} ms   {seconds / base:5.2f}x")


if __name__ == "__main__":
    main()
