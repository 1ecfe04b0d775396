#!/usr/bin/env python
"""Rematerialization on the gradient of a deep ReLU MLP: temporary memory against flops.

    python bench/bench_remat.py [--layers 16] [--width 512] [--batch 256] [--fraction 0.3333]
        [--repeat 3]

The front end has no autodiff, so the gradient is written by hand with minixla.numpy (forward,
then the backward of loss = sum(out**2)/2 for every weight). The script compiles it for the
cpu backend without a limit and with memory_limit_bytes = fraction * the unlimited temporary
peak, and prints, from each executable's memory_analysis() and cost_analysis(): the scheduled
temporary peak, the temporary arena, the flops, their ratios, the median run time of each, and
whether the results are bit-identical. Targets: a third of the memory at <= 1.6x the flops.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402


def mlp_gradient(ws, x):
    acts = [x]
    for w in ws:
        acts.append(mnp.maximum(acts[-1] @ w, 0.0))
    g, grads = acts[-1], []
    for i in reversed(range(len(ws))):
        dh = mnp.where(acts[i + 1] > 0, g, 0.0)
        grads.append(acts[i].T @ dh)
        if i:
            g = dh @ ws[i].T
    return tuple(reversed(grads))


def median_seconds(exe, args, repeat: int) -> float:
    exe(*args)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        exe(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--fraction", type=float, default=1 / 3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((args.width, args.width)) / np.sqrt(args.width))
          .astype(np.float32) for _ in range(args.layers)]
    x = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    lowered = minixla.jit(mlp_gradient, backend="cpu").lower(ws, x)
    plain = lowered.compile()
    peak = plain.memory_analysis().temp_peak_in_bytes
    limit = int(peak * args.fraction)
    start = time.perf_counter()
    limited = minixla.jit(mlp_gradient, backend="cpu", memory_limit_bytes=limit) \
        .lower(ws, x).compile()
    compile_seconds = time.perf_counter() - start
    flat = ws + [x]
    same = all(np.array_equal(a, b) for a, b in zip(plain(*flat), limited(*flat)))
    rows = []
    for name, exe in (("no limit", plain), (f"limit {limit}", limited)):
        memory, cost = exe.memory_analysis(), exe.cost_analysis()
        rows.append((name, memory.temp_peak_in_bytes, memory.temp_size_in_bytes,
                     cost["flops"], median_seconds(exe, flat, args.repeat)))
    print(f"gradient of a {args.layers}-layer MLP, width {args.width}, batch {args.batch}")
    print(f"{'':16s} {'temp peak B':>12s} {'temp arena B':>13s} {'GFLOP':>8s} {'run ms':>8s}")
    for name, temp_peak, arena, flops, seconds in rows:
        print(f"{name:16s} {temp_peak:12d} {arena:13d} {flops / 1e9:8.3f} {seconds * 1e3:8.1f}")
    (_, p0, a0, f0, s0), (_, p1, a1, f1, s1) = rows
    print(f"ratios: temp peak {p1 / p0:.3f}, temp arena {a1 / a0:.3f}, flops {f1 / f0:.3f}, "
          f"run time {s1 / s0:.3f}")
    print(f"{len(limited.rematerialization.remats)} instructions recomputed; compile with the "
          f"limit took {compile_seconds:.1f} s; results bit-identical: {same}")
    return 0 if same and p1 <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
