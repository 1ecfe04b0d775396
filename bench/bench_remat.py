#!/usr/bin/env python
"""Rematerialization on the gradient of a deep network: temporary memory against flops.

    python bench/bench_remat.py [--layers 16] [--width 512] [--batch 256] [--fraction 0.3333]
        [--repeat 3]
    python bench/bench_remat.py --checkpoint [--layers 16] [--width 256] [--batch 256]
        [--backends interpreter,cpu]

By default: the gradient of a deep ReLU MLP, written by hand with minixla.numpy (forward, then
the backward of loss = sum(out**2)/2 for every weight), compiled for the cpu backend without a
limit and with memory_limit_bytes = fraction * the unlimited temporary peak. It prints, from
each executable's memory_analysis() and cost_analysis(): the scheduled temporary peak, the
temporary arena, the flops, their ratios, the median run time of each, and whether the results
are bit-identical. Targets: a third of the memory at <= 1.6x the flops.

With --checkpoint: minixla.grad of a deep residual network (each layer h + tanh(h @ w1) @ w2,
hidden width 4 * width), once as written and once with every layer under minixla.checkpoint,
on each backend; it prints the same figures for the two, and whether the gradients are
bit-identical. Target: the checkpointed gradient needs measurably less temporary memory.
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


def residual_layer(w1, w2, h):
    return h + mnp.tanh(h @ w1) @ w2


def residual_loss(ws, x, remat: bool):
    layer = minixla.checkpoint(residual_layer) if remat else residual_layer
    h = x
    for w1, w2 in ws:
        h = layer(w1, w2, h)
    return mnp.sum(h * h) / 2


def checkpoint_rows(backend: str, ws, x, repeat: int) -> tuple[list, bool]:
    """(name, temp peak, temp arena, flops, run seconds) without and with per-layer
    checkpoint, and whether the two gradients are bit-identical."""
    step = minixla.jit(minixla.grad(residual_loss), static_argnums=2, backend=backend)
    flat = [w for pair in ws for w in pair] + [x]
    rows, grads = [], []
    for remat in (False, True):
        exe = step.lower(ws, x, remat).compile()
        memory, cost = exe.memory_analysis(), exe.cost_analysis()
        grads.append(exe(*flat))
        rows.append(
            (
                "checkpoint" if remat else "as written",
                memory.temp_peak_in_bytes,
                memory.temp_size_in_bytes,
                cost["flops"],
                median_seconds(exe, flat, repeat),
            )
        )
    same = all(np.array_equal(a, b) for a, b in zip(*grads))
    return rows, same


def checkpoint_main(args) -> int:
    rng = np.random.default_rng(0)
    hidden = 4 * args.width
    ws = [
        (
            (rng.standard_normal((args.width, hidden)) / np.sqrt(args.width)).astype(np.float32),
            (rng.standard_normal((hidden, args.width)) / np.sqrt(hidden) / args.layers).astype(
                np.float32
            ),
        )
        for _ in range(args.layers)
    ]
    x = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    print(
        f"gradient of a {args.layers}-layer residual network (h + tanh(h @ w1) @ w2), width "
        f"{args.width}, hidden {hidden}, batch {args.batch}; every layer checkpointed or not"
    )
    ok = True
    for backend in args.backends.split(","):
        rows, same = checkpoint_rows(backend, ws, x, args.repeat)
        print(f"{backend}:")
        print(f"  {'':12s} {'temp peak B':>12s} {'temp arena B':>13s} {'GFLOP':>8s} {'run ms':>8s}")
        for name, temp_peak, arena, flops, seconds in rows:
            print(
                f"  {name:12s} {temp_peak:12d} {arena:13d} {flops / 1e9:8.3f} {seconds * 1e3:8.1f}"
            )
        (_, p0, a0, f0, s0), (_, p1, a1, f1, s1) = rows
        print(
            f"  ratios: temp peak {p1 / p0:.3f}, temp arena {a1 / a0:.3f}, flops "
            f"{f1 / f0:.3f}, run time {s1 / s0:.3f}; gradients bit-identical: {same}"
        )
        ok = ok and same and p1 < p0
    return 0 if ok else 1


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
    parser.add_argument(
        "--checkpoint",
        action="store_true",
        help="per-layer minixla.checkpoint instead of a memory limit",
    )
    parser.add_argument(
        "--backends", default="interpreter,cpu", help="with --checkpoint: comma-separated backends"
    )
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument(
        "--width", type=int, default=None, help="512 by default, 256 with --checkpoint (hidden 4x)"
    )
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--fraction", type=float, default=1 / 3)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.width is None:
        args.width = 256 if args.checkpoint else 512
    if args.checkpoint:
        return checkpoint_main(args)
    rng = np.random.default_rng(0)
    ws = [
        (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32)
        for _ in range(args.layers)
    ]
    x = rng.standard_normal((args.batch, args.width)).astype(np.float32)
    lowered = minixla.jit(mlp_gradient, backend="cpu").lower(ws, x)
    plain = lowered.compile()
    peak = plain.memory_analysis().temp_peak_in_bytes
    limit = int(peak * args.fraction)
    start = time.perf_counter()
    limited = (
        minixla.jit(mlp_gradient, backend="cpu", memory_limit_bytes=limit).lower(ws, x).compile()
    )
    compile_seconds = time.perf_counter() - start
    flat = ws + [x]
    same = all(np.array_equal(a, b) for a, b in zip(plain(*flat), limited(*flat)))
    rows = []
    for name, exe in (("no limit", plain), (f"limit {limit}", limited)):
        memory, cost = exe.memory_analysis(), exe.cost_analysis()
        rows.append(
            (
                name,
                memory.temp_peak_in_bytes,
                memory.temp_size_in_bytes,
                cost["flops"],
                median_seconds(exe, flat, args.repeat),
            )
        )
    print(f"gradient of a {args.layers}-layer MLP, width {args.width}, batch {args.batch}")
    print(f"{'':16s} {'temp peak B':>12s} {'temp arena B':>13s} {'GFLOP':>8s} {'run ms':>8s}")
    for name, temp_peak, arena, flops, seconds in rows:
        print(f"{name:16s} {temp_peak:12d} {arena:13d} {flops / 1e9:8.3f} {seconds * 1e3:8.1f}")
    (_, p0, a0, f0, s0), (_, p1, a1, f1, s1) = rows
    print(
        f"ratios: temp peak {p1 / p0:.3f}, temp arena {a1 / a0:.3f}, flops {f1 / f0:.3f}, "
        f"run time {s1 / s0:.3f}"
    )
    print(
        f"{len(limited.rematerialization.remats)} instructions recomputed; compile with the "
        f"limit took {compile_seconds:.1f} s; results bit-identical: {same}"
    )
    return 0 if same and p1 <= limit else 1


if __name__ == "__main__":
    sys.exit(main())
