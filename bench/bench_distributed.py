#!/usr/bin/env python
"""Collectives between processes: median time of allreduce and allgather per array size.

    mpiexec -n 2 python bench/bench_distributed.py [--sizes 1e3,1e5,1e6] [--repeat 9]

Rank 0 prints, per float32 array size, the median seconds of `allreduce` (sum) and
`allgather` over MPI, the bytes each rank receives per second, and, as the baseline measured
in the same run, the median of folding P local arrays of that size with np.add (the
arithmetic an allreduce does on every rank, without moving any data).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import minixla.distributed as dist  # noqa: E402


def median_seconds(fn, repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e3,1e5,1e6", help="element counts, comma-separated")
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    transport = dist.initialize()
    size = transport.size
    rows = []
    for count in (int(float(c)) for c in args.sizes.split(",")):
        x = np.random.default_rng(transport.rank).normal(size=count).astype(np.float32)
        local = [x] * size
        fold = median_seconds(lambda: __import__("functools").reduce(np.add, local), args.repeat)
        transport.barrier()
        reduce = median_seconds(lambda: transport.allreduce(x, name="bench"), args.repeat)
        gather = median_seconds(lambda: transport.allgather(x, name="bench"), args.repeat)
        received = x.nbytes * (size - 1)
        rows.append((count, reduce, gather, received / reduce / 1e9, fold, reduce / fold))
    if transport.rank == 0:
        print(f"{size} processes; medians of {args.repeat} runs")
        print(
            "| elements | allreduce s | allgather s | allreduce GB/s in | local fold s | "
            "allreduce / fold |"
        )
        print("|---|---|---|---|---|---|")
        for count, reduce, gather, rate, fold, ratio in rows:
            print(
                f"| {count:,} | {reduce:.2e} | {gather:.2e} | {rate:.2f} | {fold:.2e} | "
                f"{ratio:.0f}x |"
            )


if __name__ == "__main__":
    main()
