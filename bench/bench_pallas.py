#!/usr/bin/env python
"""minixla.pallas kernels compiled for cpu against minixla.jit on the plain array program and
against the same kernel with interpret=True.

    python bench/bench_pallas.py [--rows 4096] [--cols 1024] [--block-rows 64]
        [--size 512] [--block 128] [--repeat 5]

Workloads: a row softmax (rows x cols, one block of rows per program) and a tiled matmul
(size^3, block x block output tiles, a fori_loop over K tiles). For each it prints the median
run time of the compiled kernel, of minixla.jit on `softmax(x)` / `x @ y`, of the interpreted
kernel and of the kernel on the step path (the step compiled for cpu, the grid a Python loop,
as when the grid cannot be compiled natively) (timed in turn, round after round, so a change
in the machine's load hits all three alike), the ratios, whether the results agree, and how
the kernel was compiled (native-cpu: the whole grid one Numba function; step: the step
compiled, the grid a Python loop). Targets: compiled kernel within 3x of jit, and at least 3x
faster than interpret=True.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402
import minixla.pallas.core as pallas_core  # noqa: E402
import pallas_kernels as kernels  # noqa: E402


def interleaved_medians(fns, args, repeat: int) -> list[float]:
    """Median seconds of each fn, timing them one after another in every round."""
    for fn in fns:
        fn(*args)  # compile
    times = [[] for _ in fns]
    for _ in range(repeat):
        for fn, samples in zip(fns, times):
            start = time.perf_counter()
            fn(*args)
            samples.append(time.perf_counter() - start)
    return [statistics.median(samples) for samples in times]


def on_step_path(make, inputs):
    """The kernel compiled as if no backend had a native grid (the runner is kept)."""
    saved = dict(pallas_core.NATIVE_GRIDS)
    pallas_core.NATIVE_GRIDS.clear()
    try:
        kernel = make(backend="cpu")
        kernel(*inputs)
    finally:
        pallas_core.NATIVE_GRIDS.update(saved)
    return kernel


def jit_softmax(x):
    e = mnp.exp(x - mnp.max(x, axis=1, keepdims=True))
    return e / mnp.sum(e, axis=1, keepdims=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=1024)
    parser.add_argument("--block-rows", type=int, default=64)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.rows, args.cols)).astype(np.float32)
    a = rng.standard_normal((args.size, args.size)).astype(np.float32)
    b = rng.standard_normal((args.size, args.size)).astype(np.float32)
    br, bt = args.block_rows, args.block
    n = args.size
    workloads = [
        (
            f"softmax {args.rows}x{args.cols}",
            lambda **o: kernels.make_softmax(args.rows, args.cols, br, **o),
            minixla.jit(jit_softmax),
            (x,),
        ),
        (
            f"matmul {n}^3",
            lambda **o: kernels.make_matmul(n, n, n, bt, bt, bt, **o),
            minixla.jit(lambda p, q: p @ q),
            (a, b),
        ),
    ]
    print(
        f"{'workload':18s} {'kernel cpu':>11s} {'jit':>9s} {'interpret':>10s} "
        f"{'kernel/jit':>10s} {'interp/kernel':>13s}  agree  lowering  {'step path':>9s}"
    )
    for name, make, plain, inputs in workloads:
        kernel = make(backend="cpu")
        compiled, baseline, interpreted, stepped = interleaved_medians(
            [kernel, plain, make(interpret=True), on_step_path(make, inputs)], inputs, args.repeat
        )
        agree = np.allclose(kernel(*inputs), plain(*inputs), rtol=1e-4, atol=1e-4)
        lowering = kernel.runner([np.asarray(a) for a in inputs], "cpu").lowering
        print(
            f"{name:18s} {compiled * 1e3:9.2f}ms {baseline * 1e3:7.2f}ms "
            f"{interpreted * 1e3:8.2f}ms {compiled / baseline:9.2f}x "
            f"{interpreted / compiled:12.2f}x  {agree}   {lowering} {stepped * 1e3:7.2f}ms"
        )


if __name__ == "__main__":
    main()
