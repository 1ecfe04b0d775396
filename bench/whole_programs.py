"""Whole-program benchmark: minixla's cpu backend against jax.jit on the programs of
bench/programs.py (CNN forward and gradient, GRU/LSTM scans, a GPT-2 block, KV-cache decoding,
an Adam step, sort/top-k, GNN message passing, an FFT filter, Cholesky solves in a loop, ...).

    python bench/whole_programs.py [--repeat 9] [--only NAME ...] [--cold] [--export] [--no-jax]

With JAX installed each program's HLO comes from jax.jit(...).lower(...) and both run in the
same process, on the same inputs, alternating in blocks of a quarter of a second (`--repeat`
rounds, each side alone in its block: bench/timing.py); minixla's outputs are checked
against JAX's. Without JAX the stored HLO in bench/programs/ runs with seeded random inputs
(minixla only). Columns: median run times (ms) and their ratio (minixla / jax, below 1 is
faster), compile time (the first compile in this process; with --cold the persistent cache is
off, so every kernel is compiled), tracemalloc's peak during one call (fresh results; the arena
is allocated at compile time and shown after the +), kernels, fallbacks, and whether the
outputs match. `--export` rewrites bench/programs/*.hlo from the JAX programs.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import minixla  # noqa: E402
import programs  # noqa: E402
from timing import alternating_blocks  # noqa: E402

STORED = HERE / "programs"


def _jax():
    try:
        import jax

        return jax
    except ImportError:
        return None


def _leaves(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _leaves(v)]
    return [np.asarray(value)]


def _matches(got, want) -> bool:
    got, want = _leaves(got), _leaves(want)
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        if g.shape != w.shape:
            return False
        if g.dtype.kind in "iub":
            # argmax/argsort may pick another index among (near-)equal values
            if np.mean(g != w) > 0.01:
                return False
        elif not np.allclose(
            g.astype(np.float64), w.astype(np.float64), rtol=2e-3, atol=2e-3, equal_nan=True
        ):
            return False
    return True


def _peak_bytes(fn, *args) -> int:
    tracemalloc.start()
    try:
        fn(*args)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run_one(name: str, repeat: int, cold: bool, jax) -> dict:
    if jax is not None:
        fn, args = programs.PROGRAMS[name]()
        text = programs.hlo_text(name, fn, args)
    else:
        text = (STORED / f"{name}.hlo").read_text()
        from minixla.runtime.inputs import random_arguments

        args = random_arguments(minixla.parse_hlo_module(text), 0)
    options = {"cache": False} if cold else {}
    start = time.perf_counter()
    exe = minixla.compile(text, backend="cpu", **options)
    compile_s = time.perf_counter() - start
    row = {
        "name": name,
        "compile_s": compile_s,
        "kernels": len(exe.program.kernels),
        "fallbacks": sum(exe.program.fallbacks.values()),
        "arena_mb": exe.program.arena_bytes / 2**20,
    }
    got = exe(*args)
    jitted = None
    if jax is not None:
        jitted = jax.jit(fn)
        device_args = [jax.device_put(a) for a in args]
        run_jax = lambda: jax.block_until_ready(jitted(*device_args))  # noqa: E731
        want = run_jax()
        row["ok"] = _matches(got, [np.asarray(x) for x in jax.tree_util.tree_leaves(want)])
    ours, theirs = alternating_blocks([lambda: exe(*args), run_jax if jitted else None], repeat)
    row["minixla_ms"] = float(np.median(ours)) * 1e3
    row["jax_ms"] = float(np.median(theirs)) * 1e3 if theirs else None
    row["peak_mb"] = _peak_bytes(exe, *args) / 2**20
    return row


def _fmt(value, digits=2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def report(rows) -> str:
    lines = [
        "| program | minixla ms | jax ms | minixla/jax | compile s | peak MB (+arena) | "
        "kernels | fallbacks | ok |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for r in rows:
        ratio = r["minixla_ms"] / r["jax_ms"] if r.get("jax_ms") else None
        if ratio is not None:
            ratios.append(ratio)
        lines.append(
            f"| {r['name']} | {_fmt(r['minixla_ms'])} | {_fmt(r.get('jax_ms'))} | "
            f"{_fmt(ratio)}{'x' if ratio else ''} | {_fmt(r['compile_s'])} | "
            f"{r['peak_mb']:.0f} (+{r['arena_mb']:.0f}) | {r['kernels']} | "
            f"{r['fallbacks']} | {'yes' if r.get('ok', True) else 'NO'} |"
        )
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        lines.append("")
        lines.append(
            f"geo-mean minixla/jax: {geo:.2f}x over {len(ratios)} programs; slowest "
            f"{max(ratios):.2f}x; faster than jax on "
            f"{sum(r < 1 for r in ratios)} of {len(ratios)}"
        )
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--only", action="append", default=[])
    parser.add_argument("--cold", action="store_true", help="compile without the disk cache")
    parser.add_argument("--export", action="store_true", help="rewrite bench/programs/*.hlo")
    parser.add_argument(
        "--no-jax", action="store_true", help="run the stored HLO on random inputs, minixla only"
    )
    opts = parser.parse_args(argv)
    jax = None if opts.no_jax else _jax()
    if opts.export:
        programs.export(STORED)
        return
    names = [n for n in programs.PROGRAMS if not opts.only or any(o in n for o in opts.only)]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"machine: {os.cpu_count()} cores, load average {load:.1f} at start; "
        f"jax {'%s' % jax.__version__ if jax else 'not installed'}",
        flush=True,
    )
    rows = []
    for name in names:
        rows.append(run_one(name, opts.repeat, opts.cold, jax))
        r = rows[-1]
        print(
            f"  {name}: minixla {r['minixla_ms']:.2f} ms, jax {_fmt(r.get('jax_ms'))} ms",
            file=sys.stderr,
            flush=True,
        )
    print(report(rows))


if __name__ == "__main__":
    main()
