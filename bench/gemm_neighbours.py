"""A large f32 dot through minixla, timed alone and alternating call by call with NumPy's own
`a @ b` (and jax.jit's where JAX is installed): a BLAS library whose idle threads spin slows
whichever library runs next on the same cores.

    python bench/gemm_neighbours.py [--size 1024] [--calls 100]

Prints each side's median per call, alone and alternating.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import minixla


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    n = args.size
    text = f"""HloModule dot
ENTRY e {{
  a = f32[{n},{n}] parameter(0)
  b = f32[{n},{n}] parameter(1)
  ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    executable = minixla.compile(text, backend="cpu")
    sides = {"minixla": lambda: executable(a, b), "numpy": lambda: a @ b}
    try:
        import jax

        product = jax.jit(lambda x, y: x @ y)
        ja, jb = jax.numpy.asarray(a), jax.numpy.asarray(b)
        sides["jax"] = lambda: product(ja, jb).block_until_ready()
    except ImportError:
        pass
    for run in sides.values():
        for _ in range(3):
            run()
    alone = {}
    for name, run in sides.items():
        for _ in range(5):  # the previous side's threads go quiet
            run()
        alone[name] = _median(run, args.calls)
    alternating: dict = {name: [] for name in sides}
    for _ in range(args.calls):
        for name, run in sides.items():
            start = time.perf_counter()
            run()
            alternating[name].append(time.perf_counter() - start)
    for name in sides:
        together = np.median(alternating[name]) * 1e3
        print(f"{name:8s} alone {alone[name]:7.2f} ms   alternating {together:7.2f} ms")


def _median(run, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


if __name__ == "__main__":
    main()
