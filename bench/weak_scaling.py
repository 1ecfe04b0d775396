#!/usr/bin/env python
"""Weak scaling of a data-parallel SGD step and a model-parallel MLP over MPI processes.

    python bench/weak_scaling.py [--case data|model|all] [--processes 1,2,4]
                                 [--devices-per-process 1] [--repeat 10] [--rounds 3]

launches `mpiexec -n P python bench/weak_scaling.py --worker` for each case and P, in turn
for --rounds rounds (so slow spells of a shared machine fall on every P alike). P processes
x D devices per process run a program of N = P * D partitions, and every device does the
same work whatever N is:

- data: an SGD step of a 2-layer MLP, x and y split by rows (--rows per device), the
  weights replicated; the gradients are all-reduced (across processes over MPI).
- model: a Megatron-style 2-layer MLP forward, tanh(x @ w1) @ w2, with --rows rows of x
  replicated, w1 split by columns and w2 by rows (WIDTH hidden columns per device); the
  partial products are all-reduced into the replicated output.

Every rank checks its outputs against the same function on one device. Rank 0 reports the
median seconds of a step; the table shows the median over rounds and the efficiency
t(1) / t(P) (1.0 is perfect weak scaling).
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

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WIDTH = 512


def sgd_step(w1, w2, x, y):
    import minixla
    import minixla.numpy as mnp

    def loss(w1, w2):
        return ((mnp.tanh(x @ w1) @ w2 - y) ** 2).mean()

    g1, g2 = minixla.grad(loss, argnums=(0, 1))(w1, w2)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def mlp(x, w1, w2):
    import minixla.numpy as mnp

    return mnp.tanh(x @ w1) @ w2


def data_parallel(rng, rows, n):
    """(arguments, partition spec per argument, per output) of the data-parallel step."""
    from minixla.sharding import PartitionSpec as P

    w1, w2 = (
        (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for _ in range(2)
    )
    x, y = (rng.standard_normal((rows * n, WIDTH)).astype(np.float32) for _ in range(2))
    return (w1, w2, x, y), [P(), P(), P("d", None), P("d", None)], [P(), P()]


def model_parallel(rng, rows, n):
    """(arguments, partition spec per argument, per output) of the Megatron-style MLP."""
    from minixla.sharding import PartitionSpec as P

    x = rng.standard_normal((rows, WIDTH)).astype(np.float32)
    w1 = (rng.standard_normal((WIDTH, WIDTH * n)) / np.sqrt(WIDTH)).astype(np.float32)
    w2 = (rng.standard_normal((WIDTH * n, WIDTH)) / np.sqrt(WIDTH * n)).astype(np.float32)
    return (x, w1, w2), [P(), P(None, "d"), P("d", None)], P()


# case: (function, builder of its arguments and shardings, what grows with the devices)
CASES = {
    "data": (sgd_step, data_parallel, "x, y rows"),
    "model": (mlp, model_parallel, "hidden width"),
}


def worker(args) -> None:
    import minixla
    import minixla.distributed as dist
    from minixla.sharding import Mesh, NamedSharding

    dist.initialize()
    processes, rank = dist.process_count(), dist.process_index()
    os.environ["MINIXLA_NUM_CPU_DEVICES"] = str(args.devices_per_process)
    n = processes * args.devices_per_process
    function, build, _ = CASES[args.case]
    arguments, in_specs, out_specs = build(np.random.default_rng(0), args.rows, n)
    mesh = Mesh(np.arange(n), ("d",))

    def shardings(specs):
        if isinstance(specs, list):
            return [NamedSharding(mesh, spec) for spec in specs]
        return NamedSharding(mesh, specs)

    sharded = minixla.jit(
        function,
        backend="cpu",
        in_shardings=shardings(in_specs),
        out_shardings=shardings(out_specs),
    )
    got = sharded(*arguments)  # compiles and warms up
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        sharded(*arguments)
        times.append(time.perf_counter() - start)
    want = minixla.jit(function, backend="cpu")(*arguments)
    got, want = (list(v) if isinstance(v, (tuple, list)) else [v] for v in (got, want))
    diff = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(got, want))
    _line(f"CHECK rank={rank} max_diff={diff:.2e}")
    if rank == 0:
        _line(f"RESULT median_s={statistics.median(times):.4f}")


def _line(text: str) -> None:
    """One write per line: the ranks share stdout, and `print` writes the text and its newline
    separately when stdout is unbuffered, so another rank's line could land in between."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def run_job(case: str, processes: int, args) -> tuple[float, float]:
    """One `mpiexec -n processes` run of a case: (rank 0's median step s, max diff of any rank)."""
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    # Open MPI refuses root and more ranks than cores unless told; MPICH ignores these.
    environment.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    command = [
        "mpiexec",
        "-n",
        str(processes),
        sys.executable,
        __file__,
        "--worker",
        "--case",
        case,
        "--rows",
        str(args.rows),
        "--repeat",
        str(args.repeat),
        "--devices-per-process",
        str(args.devices_per_process),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=1800)
    found = re.search(r"RESULT median_s=(\S+)", done.stdout)
    diffs = [float(d) for d in re.findall(r"CHECK rank=\d+ max_diff=(\S+)", done.stdout)]
    if done.returncode != 0 or found is None or len(diffs) != processes:
        sys.exit(f"mpiexec -n {processes} ({case}) failed:\n{done.stdout}\n{done.stderr}")
    return float(found.group(1)), max(diffs)


def launch(args) -> None:
    cases = list(CASES) if args.case == "all" else [args.case]
    counts = [int(p) for p in args.processes.split(",")]
    seconds = {(case, p): [] for case in cases for p in counts}
    diffs = dict.fromkeys(seconds, 0.0)
    for _ in range(args.rounds):
        for case in cases:
            for processes in counts:
                step_s, diff = run_job(case, processes, args)
                seconds[case, processes].append(step_s)
                diffs[case, processes] = max(diffs[case, processes], diff)
    print(
        f"{WIDTH}-wide 2-layer MLP, {args.rows} rows per device (data) / replicated "
        f"(model), {args.devices_per_process} device(s) per process, cpu backend, median "
        f"over {args.rounds} round(s) of the median of {args.repeat} steps"
    )
    print(
        "| case | processes | devices | grows with devices | step s | efficiency "
        "| max abs diff vs 1 device |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        base = statistics.median(seconds[case, counts[0]])
        for processes in counts:
            median = statistics.median(seconds[case, processes])
            print(
                f"| {case} | {processes} | {processes * args.devices_per_process} | "
                f"{CASES[case][2]} | {median:.4f} | {base / median:.2f} | "
                f"{diffs[case, processes]:.1e} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=[*CASES, "all"], default="all")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--devices-per-process", type=int, default=1)
    parser.add_argument(
        "--rows", type=int, default=256, help="rows of the batch per device (data) or of x (model)"
    )
    parser.add_argument("--repeat", type=int, default=10, help="timed steps per run")
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs of every case and process count, interleaved"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    worker(args) if args.worker else launch(args)


if __name__ == "__main__":
    main()
