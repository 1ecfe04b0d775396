#!/usr/bin/env python
"""Weak scaling of a data-parallel SGD step over MPI processes.

    python bench/weak_scaling.py [--processes 1,2] [--devices-per-process 1] [--repeat 10]

launches `mpiexec -n P python bench/weak_scaling.py --worker` for each P. Every device
holds the same batch of rows (--rows), so the global batch grows with the device count:
P processes x D devices per process run a program of N = P * D partitions with x and y split
by rows and the weights replicated; the gradients are all-reduced (across processes over
MPI). Rank 0 reports the median seconds of a step; the efficiency of P processes is
t(1) / t(P) (1.0 is perfect weak scaling). Each rank checks the step against the same step
on one device.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH = 512


def step(w1, w2, x, y):
    import minixla
    import minixla.numpy as mnp

    def loss(w1, w2):
        return ((mnp.tanh(x @ w1) @ w2 - y) ** 2).mean()
    g1, g2 = minixla.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def worker(args) -> None:
    import numpy as np

    import minixla
    import minixla.distributed as dist
    from minixla.sharding import Mesh, NamedSharding, PartitionSpec as P
    dist.initialize()
    processes, rank = dist.process_count(), dist.process_index()
    os.environ["MINIXLA_NUM_CPU_DEVICES"] = str(args.devices_per_process)
    n = processes * args.devices_per_process
    rng = np.random.default_rng(0)
    w1, w2 = ((rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
              for _ in range(2))
    x, y = (rng.standard_normal((args.rows * n, WIDTH)).astype(np.float32) for _ in range(2))
    mesh = Mesh(np.arange(n), ("batch",))
    rows, whole = NamedSharding(mesh, P("batch", None)), NamedSharding(mesh, P())
    sharded = minixla.jit(step, backend="cpu", in_shardings=[whole, whole, rows, rows],
                          out_shardings=[whole, whole])
    got = sharded(w1, w2, x, y)  # compiles and warms up
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        sharded(w1, w2, x, y)
        times.append(time.perf_counter() - start)
    want = minixla.jit(step, backend="cpu")(w1, w2, x, y)
    diff = max(float(np.max(np.abs(g - w))) for g, w in zip(got, want))
    if rank == 0:
        print(f"RESULT processes={processes} devices={n} rows={args.rows * n} "
              f"median_s={statistics.median(times):.4f} max_diff={diff:.2e}", flush=True)


def launch(args) -> None:
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    # Open MPI refuses root and more ranks than cores unless told; MPICH ignores these.
    environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       OMPI_MCA_rmaps_base_oversubscribe="1")
    results = []
    for processes in (int(p) for p in args.processes.split(",")):
        command = ["mpiexec", "-n", str(processes), sys.executable, __file__, "--worker",
                   "--rows", str(args.rows), "--repeat", str(args.repeat),
                   "--devices-per-process", str(args.devices_per_process)]
        done = subprocess.run(command, capture_output=True, text=True, env=environment,
                              timeout=1800)
        found = re.search(r"RESULT (.*)", done.stdout)
        if done.returncode != 0 or found is None:
            sys.exit(f"mpiexec -n {processes} failed:\n{done.stdout}\n{done.stderr}")
        fields = dict(kv.split("=") for kv in found.group(1).split())
        results.append(fields)
    base = float(results[0]["median_s"])
    print(f"data-parallel SGD step, {WIDTH}x{WIDTH} weights, {args.rows} rows per device, "
          f"{args.devices_per_process} device(s) per process, cpu backend, "
          f"median of {args.repeat}")
    print("| processes | devices | global rows | step s | efficiency | max |diff| |")
    print("|---|---|---|---|---|---|")
    for fields in results:
        seconds = float(fields["median_s"])
        print(f"| {fields['processes']} | {fields['devices']} | {fields['rows']} | "
              f"{seconds:.4f} | {base / seconds:.2f} | {fields['max_diff']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,2")
    parser.add_argument("--devices-per-process", type=int, default=1)
    parser.add_argument("--rows", type=int, default=256, help="rows of the batch per device")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    main()
