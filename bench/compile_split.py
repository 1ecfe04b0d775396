#!/usr/bin/env python
"""Where a cold cpu compile's time goes, per whole program, each in a new process.

    python bench/compile_split.py [NAME ...]

For every program of bench/programs/ (or those named), in a new process with the cache off:
  start-up  importing Numba and loading its typing and lowering registries (paid once per
            process, before the first kernel; measured apart, before the compile);
  passes    the pass pipeline (`compile.passes`);
  emit      driver and kernel sources (`compile.codegen.cpu.emit`);
  helpers   Numba compiling the scalar helpers and mathlib's functions the kernels call (once
            per process, when a kernel first calls them), their LLVM included;
  typing    Numba's front end on the kernels themselves: bytecode, typing, lowering to LLVM IR;
  LLVM      the kernels' time in LLVM (Numba's `numba:llvm_lock` event): function and module
            passes, machine code;
  total     `minixla.compile` (after start-up): the columns plus linking, caching, driver.
Helpers and kernels are told apart by the module of the function Numba compiles (its
`numba:compile` events); LLVM time goes to the function being compiled when it ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = r"""
import json, sys, time
import minixla
begin = time.perf_counter()
from numba.core import event
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
cpu_target.typing_context.refresh()
started = time.perf_counter() - begin
spent = {"helpers": 0.0, "kernels": 0.0, "llvm_helpers": 0.0, "llvm_kernels": 0.0}
frames = []

class Compiles(event.Listener):
    def on_start(self, ev):
        module = getattr(ev.data["dispatcher"].py_func, "__module__", "") or ""
        kind = "kernels" if module.startswith("minixla_kernel") else "helpers"
        frames.append([kind, time.perf_counter(), 0.0])

    def on_end(self, ev):
        kind, start, nested = frames.pop()
        total = time.perf_counter() - start
        spent[kind] += total - nested
        if frames:
            frames[-1][2] += total

class Llvm(event.Listener):
    depth = 0
    def on_start(self, ev):
        if self.depth == 0:
            self.start = time.perf_counter()
        self.depth += 1
    def on_end(self, ev):
        self.depth -= 1
        if self.depth == 0:
            kind = frames[-1][0] if frames else "kernels"
            spent["llvm_" + kind] += time.perf_counter() - self.start

event.register("numba:compile", Compiles())
event.register("numba:llvm_lock", Llvm())
module = minixla.parse_hlo_module(open(sys.argv[1]).read())
begin = time.perf_counter()
exe = minixla.compile(module, backend="cpu", cache=False)
total = time.perf_counter() - begin
seconds = {k: v.get("seconds", 0.0) for k, v in minixla.metrics().items()}
print(json.dumps({**spent, "startup": started, "total": total,
                  "passes": seconds.get("compile.passes", 0.0),
                  "emit": seconds.get("compile.codegen.cpu.emit", 0.0),
                  "kernels_n": len(exe.program.kernels)}))
"""


def measure(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr else "failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    names = (argv if argv is not None else sys.argv[1:]) or [
        p.stem for p in sorted((ROOT / "bench" / "programs").glob("*.hlo"))
    ]
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "minixla")], check=True)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"cold cpu compiles, cache off, one new process each; load {load:.1f}")
    columns = ("startup", "passes", "emit", "helpers", "typing", "llvm", "total")
    print(
        "| program | kernels | start-up s | passes s | emit s | helpers s | typing s | LLVM s "
        "| total s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    sums = dict.fromkeys(columns, 0.0)
    for name in names:
        row = measure(ROOT / "bench" / "programs" / f"{name}.hlo")
        row["typing"] = row["kernels"] - row["llvm_kernels"]
        row["llvm"] = row["llvm_kernels"]
        for column in columns:
            sums[column] += row[column]
        cells = " | ".join(f"{row[c]:.2f}" for c in columns)
        print(f"| {name} | {row['kernels_n']} | {cells} |", flush=True)
    cells = " | ".join(f"**{sums[c]:.1f}**" for c in columns)
    print(f"| all | | {cells} |")


if __name__ == "__main__":
    main()
