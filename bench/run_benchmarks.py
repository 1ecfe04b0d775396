#!/usr/bin/env python
"""Benchmarks: minixla's cpu backend next to NumPy, jax.jit and torch.compile when installed.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python bench/run_benchmarks.py [--only NAME]
        [--repeat N] [--markdown FILE]

For every workload (bench/workloads.py) it prints the median run time of each system (each
alone in blocks of a quarter of a second, in turns, `--repeat` rounds: bench/timing.py), the
ratio to NumPy, the time with every large kernel threaded (`parallel_threshold=2**18`,
the default only on machines with four or more cores), minixla's cold compile time (empty
persistent cache, nothing in memory), its
warm-cache compile time (the in-process memo dropped, kernels loaded from the disk cache),
peak memory during one call (tracemalloc; minixla's arena is allocated at compile time and
listed separately), and whether minixla's result matches NumPy's. The machine's copy bandwidth
is measured in the same run, so times can be read against the memory system.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import alternating_blocks, median, timed  # noqa: E402
from workloads import WORKLOADS  # noqa: E402


class NumpyOps:
    name = "numpy"
    tanh, exp, maximum = staticmethod(np.tanh), staticmethod(np.exp), staticmethod(np.maximum)
    minimum, matmul = staticmethod(np.minimum), staticmethod(np.matmul)

    @staticmethod
    def sum(x, axis, keepdims=False):
        return np.sum(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def max(x, axis, keepdims=False):
        return np.max(x, axis=axis, keepdims=keepdims)

    @staticmethod
    def rsqrt(x):
        return 1 / np.sqrt(x)

    @staticmethod
    def swap_last(x):
        return np.swapaxes(x, -1, -2)


def jax_ops():
    import jax.numpy as jnp

    class JaxOps(NumpyOps):
        name = "jax"
        tanh, exp = staticmethod(jnp.tanh), staticmethod(jnp.exp)
        maximum = staticmethod(jnp.maximum)
        minimum, matmul = staticmethod(jnp.minimum), staticmethod(jnp.matmul)
        sum = staticmethod(lambda x, axis, keepdims=False: jnp.sum(x, axis=axis, keepdims=keepdims))
        max = staticmethod(lambda x, axis, keepdims=False: jnp.max(x, axis=axis, keepdims=keepdims))
        rsqrt = staticmethod(lambda x: 1 / jnp.sqrt(x))
        swap_last = staticmethod(lambda x: jnp.swapaxes(x, -1, -2))

    return JaxOps


def torch_ops():
    import torch

    class TorchOps(NumpyOps):
        name = "torch"
        tanh, exp, maximum = (
            staticmethod(torch.tanh),
            staticmethod(torch.exp),
            staticmethod(
                lambda a, b: (
                    torch.clamp_min(a, b) if not torch.is_tensor(b) else torch.maximum(a, b)
                )
            ),
        )
        minimum, matmul = staticmethod(torch.minimum), staticmethod(torch.matmul)
        sum = staticmethod(lambda x, axis, keepdims=False: torch.sum(x, dim=axis, keepdim=keepdims))
        max = staticmethod(
            lambda x, axis, keepdims=False: torch.amax(x, dim=axis, keepdim=keepdims)
        )
        rsqrt = staticmethod(torch.rsqrt)
        swap_last = staticmethod(lambda x: torch.swapaxes(x, -1, -2))

    return TorchOps


def peak_bytes(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def copy_bandwidth() -> float:
    """GB/s moved (read + write) by one large np.copyto, best of five."""
    src = np.ones(64 * 1024 * 1024, np.float32)  # 256 MiB
    dst = np.empty_like(src)
    best = min(timed(lambda: np.copyto(dst, src)) for _ in range(5))
    return 2 * src.nbytes / best / 1e9


def bench_minixla(text, inputs):
    import minixla
    from minixla.backends.cpu import jit

    jit.forget_in_memory()
    start = time.perf_counter()
    exe = minixla.compile(text, backend="cpu")
    cold = time.perf_counter() - start
    jit.forget_in_memory()
    start = time.perf_counter()
    exe = minixla.compile(text, backend="cpu")
    warm = time.perf_counter() - start
    assert set(exe.kernel_outcomes) <= {"disk"}, exe.kernel_outcomes
    run = lambda: exe(*inputs)
    result = run()
    threaded = minixla.compile(text, backend="cpu", parallel_threshold=1 << 18)
    return {
        "run": run,
        "run_threaded": lambda: threaded(*inputs),
        "cold": cold,
        "warm": warm,
        "peak": peak_bytes(run),
        "arena": exe.program.arena_bytes,
        "result": result,
        "kernels": len(exe.program.kernels),
    }


def bench_library(make_ops, ref, inputs):
    try:
        ops = make_ops()
    except ImportError:
        return None
    if ops.name == "jax":
        import jax

        args = [jax.device_put(x) for x in inputs]
        fn = jax.jit(lambda *a: ref(ops, *a))
        run = lambda: fn(*args).block_until_ready()
    else:
        import torch

        args = [torch.from_numpy(x) for x in inputs]
        fn = torch.compile(lambda *a: ref(ops, *a))
        run = lambda: fn(*args)
    cold = timed(run)
    return {"run": run, "cold": cold}


def fmt_ms(seconds) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    cache_dir = tempfile.mkdtemp(prefix="minixla-bench-cache-")
    os.environ["MINIXLA_CACHE_DIR"] = cache_dir  # cold compiles really start cold
    import minixla

    minixla.compile(
        "HloModule w\nENTRY m {\n  ROOT x = f32[2] parameter(0)\n}\n", backend="cpu"
    )  # Numba's one-time start-up, outside every workload
    bandwidth = copy_bandwidth()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    header = (
        f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} "
        f"cores (load average {load:.1f} at start), Python {platform.python_version()}, "
        f"NumPy {np.__version__}; copy bandwidth {bandwidth:.1f} GB/s (read+write)"
    )
    print(header)
    columns = [
        "workload",
        "minixla ms",
        "threaded ms",
        "numpy ms",
        "numpy/minixla",
        "jax ms",
        "torch ms",
        "cold compile s",
        "warm compile s",
        "peak MB minixla (+arena)",
        "peak MB numpy",
        "kernels",
        "ok",
    ]
    rows = []
    rng = np.random.default_rng(0)
    for name, (text, make_inputs, ref) in WORKLOADS.items():
        if args.only and not any(o in name for o in args.only):
            continue
        inputs = make_inputs(rng)
        mine = bench_minixla(text, inputs)

        def numpy_run(ref=ref, inputs=inputs):
            return ref(NumpyOps, *inputs)

        want = numpy_run()
        jax_result = bench_library(jax_ops, ref, inputs)
        torch_result = bench_library(torch_ops, ref, inputs)
        libraries = [r and r["run"] for r in (jax_result, torch_result)]
        times = alternating_blocks(
            [mine["run"], mine["run_threaded"], numpy_run, *libraries], args.repeat
        )
        mine["time"], mine["threaded"], numpy_time, jax_time, torch_time = map(median, times)
        ok = np.allclose(mine["result"], want, rtol=1e-3, atol=1e-3)
        row = [
            name,
            fmt_ms(mine["time"]),
            fmt_ms(mine["threaded"]),
            fmt_ms(numpy_time),
            f"{numpy_time / mine['time']:.2f}x",
            fmt_ms(jax_time),
            fmt_ms(torch_time),
            f"{mine['cold']:.2f}",
            f"{mine['warm']:.3f}",
            f"{mine['peak'] / 2**20:.0f} (+{mine['arena'] / 2**20:.0f})",
            f"{peak_bytes(numpy_run) / 2**20:.0f}",
            str(mine["kernels"]),
            "yes" if ok else "NO",
        ]
        rows.append(row)
        print(" | ".join(row), flush=True)
    table = "\n".join(
        ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        + ["| " + " | ".join(r) + " |" for r in rows]
    )
    print()
    print(header)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(header + "\n\n" + table + "\n")
    return 0 if all(r[-1] == "yes" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
