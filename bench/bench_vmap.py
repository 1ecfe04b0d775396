"""vmap vs a Python loop of per-example jit calls, on the CPU backend.

    per example: y = tanh(x @ w1) @ w2, a 256-wide two-layer MLP on one vector
    batched:     jit(vmap(f, in_axes=(0, None, None)))(xs, w1, w2)   (one program)
    by hand:     jit(f)(xs, w1, w2)                 (the same program written for the batch)
    loop:        [jit(f)(x, w1, w2) for x in xs]                     (one call per example)

Prints medians over REPS runs, compiled before timing, and the ratios to vmap.
Run: python bench/bench_vmap.py
"""

import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402

BATCH, WIDTH, REPS = 128, 256, 9


def mlp(x, w1, w2):
    return mnp.tanh(x @ w1) @ w2


def median_seconds(fn) -> float:
    fn()
    times = []
    for _ in range(REPS):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((BATCH, WIDTH), dtype=np.float32)
    w1 = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16
    w2 = rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) / 16
    one = minixla.jit(mlp, backend="cpu")
    batched = minixla.jit(minixla.vmap(mlp, in_axes=(0, None, None)), backend="cpu")
    np.testing.assert_allclose(
        batched(xs, w1, w2), np.stack([one(x, w1, w2) for x in xs]), rtol=1e-4, atol=1e-4
    )
    vmap_s = median_seconds(lambda: batched(xs, w1, w2))
    hand_s = median_seconds(lambda: one(xs, w1, w2))
    loop_s = median_seconds(lambda: [one(x, w1, w2) for x in xs])
    print(
        f"batch {BATCH}, width {WIDTH}: vmap {vmap_s * 1e3:.2f} ms, by hand "
        f"{hand_s * 1e3:.2f} ms, loop {loop_s * 1e3:.2f} ms; by hand/vmap "
        f"{hand_s / vmap_s:.2f}x, loop/vmap {loop_s / vmap_s:.2f}x"
    )


if __name__ == "__main__":
    main()
