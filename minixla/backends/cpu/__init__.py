"""The CPU backend: fused kernels generated as Numba source, driven by generated Python code.

compile_module(module, options) -> Executable:
  emit    driver.build_program: one kernel source per fusion / lone op (kernels.py, with
          elemental.py and scalar.py), one driver function per control computation, a buffer
          plan with a preallocated arena (plan.py). Needs no compiler.
  compile jit.obtain for every kernel: in-process memo, persistent cache (cache.py), Numba.
  run     the entry driver function, under a lock (the arena is per executable).

Options: `cache` (bool, default $MINIXLA_CACHE or on), `cache_dir`, `parallel_threshold`
(elements touched before a kernel uses threads). docs/cpu-backend.md has the design.
"""
from __future__ import annotations

import threading
import time

from ...errors import MinixlaError, at_instruction
from ...ir.module import HloModule
from ...runtime.custom_call import lookup_custom_call
from ...runtime.executable import Executable
from ...runtime.metrics import count, record_phase
from .. import Backend
from . import cache, driver, jit

try:  # the vector math library (and Numba) load with the backend, not inside a compile
    from . import mathlib  # noqa: F401
except ImportError:  # pragma: no cover - reported by available()
    pass

_CODEGEN_OPTIONS = ("parallel_threshold",)  # options that change the generated code


def available() -> tuple[bool, str]:
    try:
        import llvmlite  # noqa: F401
        import numba  # noqa: F401
    except ImportError as exc:
        return False, f"numba/llvmlite are not importable: {exc}"
    return True, ""


def pipeline():
    """The CPU pass pipeline when the passes package provides one; else an empty one (the
    backend compiles unoptimized modules too, one kernel per op)."""
    try:
        from ...passes.pipelines import cpu_pipeline
    except ImportError:
        from ...passes.base import Pipeline
        return Pipeline("cpu", [])
    return cpu_pipeline()


def _check_custom_calls(module: HloModule) -> None:
    for instr in module.all_instructions():
        if instr.opcode == "custom-call":
            try:
                lookup_custom_call(instr.attrs["custom_call_target"], "cpu")
            except MinixlaError as exc:
                raise at_instruction(exc, instr)


def compile_module(module: HloModule, options: dict) -> Executable:
    _check_custom_calls(module)
    start = time.perf_counter()
    program = driver.build_program(module, options)
    record_phase("codegen.cpu.emit", time.perf_counter() - start)
    disk = cache.DiskCache(options.get("cache_dir")) if cache.is_enabled(options) else None
    start = time.perf_counter()
    key = None
    if disk is not None:
        codegen_options = {k: options[k] for k in _CODEGEN_OPTIONS if k in options}
        key = cache.digest("module", module.fingerprint(), codegen_options)
        known = disk.module_entry(key) is not None
    outcomes = []
    for name, spec in program.kernels.items():
        dispatcher, how = jit.obtain(spec, disk)
        program.namespace[name] = jit.entry_point(dispatcher, spec)
        outcomes.append(how)
        count(f"cpu.kernel.{how}")
    record_phase("codegen.cpu.native", time.perf_counter() - start)
    if disk is not None:
        hit = known and "compiled" not in outcomes
        count("cpu.cache.hit" if hit else "cpu.cache.miss")
        if not hit:
            kernels = [jit.kernel_id(s) for s in program.kernels.values()]
            disk.store_module(key, {"kernels": kernels})
            if "compiled" in outcomes:
                disk.evict(keep={jit.kernel_id(s) for s in program.kernels.values()})
    for opcode, n in program.fallbacks.items():
        count(f"fallback.{opcode}", n)
    exec(compile(program.source, f"<minixla driver {module.name}>", "exec"), program.namespace)
    entry = program.namespace[program.entry]
    lock = threading.Lock()

    def run(args):
        with lock:
            return entry(*args)

    executable = Executable(module, "cpu", run, options=options)
    executable.program = program
    executable.dump_files = program.dump_files
    executable.kernel_outcomes = outcomes
    return executable


BACKEND = Backend("cpu", compile_module, available, pipeline,
                  options=("cache", "cache_dir", "parallel_threshold", "buffer_assignment"))
