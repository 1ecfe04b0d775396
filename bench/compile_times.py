#!/usr/bin/env python
"""Compile times: cold, warm from the persistent cache in a new process, and again in-process.

    python bench/compile_times.py [--only NAME ...] [--repeat N] [--no-jax] [--chain N ...]
                                  [--extra FILE.hlo ...]

For README's MLP (examples/mlp.hlo) and every whole program of bench/programs/ (the HLO that
bench/whole_programs.py runs), each in new processes, on the cpu backend:
  cold   the first compile into an empty cache directory (the pass pipeline, code generation,
         Numba and LLVM for every kernel, linking the program's library; it fills the cache),
         Numba's start-up included;
  cold'  the same after a warm-up compile of an unrelated module in that process (cache off)
         and loading Numba's typing and lowering registries, so without Numba's start-up:
         measured as XLA's figure is;
  warm   the same compile in another new process with that cache (what a user's second run
         pays): the time of `minixla.compile` alone, after `import minixla`, which is printed
         apart (`import`); `numba` says whether that process imported Numba;
  memo   compiling it again in that process (the in-process memo; median of five);
  xla    with JAX installed: `jax.jit(f).lower(*args).compile()` alone, in a new process
         after one warm-up compile of another function (XLA's own cold compile).
Each time is the median of --repeat new processes (a new cache directory for every cold one).
minixla's bytecode is compiled first (`compileall`), as an installed package's is. A program
with narrow types (bf16, f8...) loads ml_dtypes before the clock starts: the caller of such a
program holds arrays of those types, so it has.
The project's targets: warm at most 50 ms for the MLP and at most 5% of cold for every
program, memo under 1 ms, cold at most 1.5x XLA's (geo-mean). `--chain N` adds chains of N
elementwise ops, whose cold compile should grow linearly with N; `--extra` adds HLO files from
outside the repository (XLA's own benchmark modules, say), measured without XLA.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORED = ROOT / "bench" / "programs"

_COMPILE = r"""
import json, sys, time
start = time.perf_counter()
import minixla
imported = time.perf_counter()
if sys.argv[3] == "warm-up":  # Numba's start-up, on a module sharing no kernel with any other
    minixla.compile("HloModule w\nENTRY e {\n  x = s16[3] parameter(0)\n"
                    "  ROOT y = s16[3] xor(x, x)\n}\n", backend="cpu", cache=False)
    from numba.core.registry import cpu_target  # and every typing and lowering registry
    cpu_target.target_context.refresh()
    cpu_target.typing_context.refresh()
text = open(sys.argv[1]).read()
module = minixla.parse_hlo_module(text)
if any(shape.element_type.narrow for i in module.all_instructions() for _, shape in
       i.shape.leaves()):  # bf16 and the like: whoever holds such arrays has ml_dtypes loaded
    import ml_dtypes
    ml_dtypes.finfo(ml_dtypes.bfloat16)
begin = time.perf_counter()
minixla.compile(module, backend="cpu", cache_dir=sys.argv[2])
first = time.perf_counter()
memo = []
for _ in range(5):  # the median of five: one compile of a millisecond can meet a pause
    again = time.perf_counter()
    minixla.compile(module, backend="cpu", cache_dir=sys.argv[2])
    memo.append(time.perf_counter() - again)
print(json.dumps({"import": imported - start, "compile": first - begin,
                  "memo": sorted(memo)[2], "numba": "numba" in sys.modules}))
"""

_XLA = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import jax, jax.numpy as jnp
import programs
jax.jit(lambda x: jnp.sin(x) * 2).lower(jnp.ones(3)).compile()  # backend start-up
fn, args = programs.PROGRAMS[sys.argv[2]]()
lowered = jax.jit(fn).lower(*args)
begin = time.perf_counter()
lowered.compile()
print(json.dumps({"compile": time.perf_counter() - begin}))
"""


def _python(code: str, *args: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(path: Path, repeat: int, xla_name: str | None) -> dict:
    cold, started, warm, memo, imported, xla, numba = [], [], [], [], [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as cache_dir:
            started.append(_python(_COMPILE, str(path), cache_dir, "warm-up")["compile"])
        with tempfile.TemporaryDirectory() as cache_dir:
            cold.append(_python(_COMPILE, str(path), cache_dir, "-")["compile"])
            again = _python(_COMPILE, str(path), cache_dir, "-")
            warm.append(again["compile"])
            memo.append(again["memo"])
            imported.append(again["import"])
            numba.append(again["numba"])
        if xla_name is not None:
            xla.append(_python(_XLA, str(ROOT / "bench"), xla_name)["compile"])
    row = {
        "cold": statistics.median(cold),
        "started": statistics.median(started),
        "warm": statistics.median(warm),
        "memo": statistics.median(memo),
        "import": statistics.median(imported),
        "numba": any(numba),
    }
    if xla:
        row["xla"] = statistics.median(xla)
    return row


def chain_module(n: int) -> str:
    ops = ("tanh", "negate", "exponential", "sine", "cosine", "abs")
    lines = ["HloModule chain", "ENTRY e {", "  v0 = f32[1024] parameter(0)"]
    lines += [f"  v{i} = f32[1024] {ops[i % len(ops)]}(v{i - 1})" for i in range(1, n + 1)]
    lines[-1] = lines[-1].replace(f"  v{n} =", f"  ROOT v{n} =")
    return "\n".join(lines + ["}"]) + "\n"


def _have_jax() -> bool:
    try:
        import jax  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-jax", action="store_true")
    parser.add_argument("--chain", type=int, nargs="*", default=[])
    parser.add_argument("--extra", nargs="*", default=[], help="more .hlo files to measure")
    args = parser.parse_args(argv)
    jax = not args.no_jax and _have_jax()
    cases = [("mlp (README)", ROOT / "examples" / "mlp.hlo", None)]
    cases += [(p.stem, p, p.stem) for p in sorted(STORED.glob("*.hlo"))]
    if args.only is not None:
        cases = [c for c in cases if c[2] in args.only or c[0] in args.only]
    cases += [(Path(extra).stem, Path(extra), None) for extra in args.extra]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "minixla")], check=True)
    with tempfile.TemporaryDirectory() as folder:
        for n in args.chain:
            path = Path(folder) / f"chain_{n}.hlo"
            path.write_text(chain_module(n))
            cases.append((f"chain of {n} ops", path, None))
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"cpu backend, median of {args.repeat} new processes per figure; load {load:.1f}")
        print(
            "| program | cold s | cold' s | warm ms | numba | warm/cold | memo ms | xla cold s "
            "| cold/xla | cold'/xla |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        ratios, started_ratios, worst, imports = [], [], 0.0, []
        for label, path, name in cases:
            row = measure(path, args.repeat, name if jax else None)
            imports.append(row["import"])
            share = row["warm"] / row["cold"]
            worst = max(worst, share) if name else worst
            xla, ratio, started = "-", "-", "-"
            if "xla" in row:
                ratios.append(row["cold"] / row["xla"])
                started_ratios.append(row["started"] / row["xla"])
                xla = f"{row['xla']:.2f}"
                ratio, started = f"{ratios[-1]:.2f}x", f"{started_ratios[-1]:.2f}x"
            print(
                f"| {label} | {row['cold']:.2f} | {row['started']:.2f} | "
                f"{1e3 * row['warm']:.1f} | {'yes' if row['numba'] else 'no'} | "
                f"{100 * share:.1f}% | {1e3 * row['memo']:.3f} | {xla} | {ratio} | {started} |",
                flush=True,
            )
        if ratios:
            print(
                f"cold/xla geo-mean {statistics.geometric_mean(ratios):.2f}x, cold'/xla "
                f"{statistics.geometric_mean(started_ratios):.2f}x over {len(ratios)} programs"
            )
        print(
            f"largest warm/cold over the programs: {100 * worst:.1f}%; `import minixla` "
            f"{1e3 * statistics.median(imports):.0f} ms (median; not counted in warm)"
        )


if __name__ == "__main__":
    main()
