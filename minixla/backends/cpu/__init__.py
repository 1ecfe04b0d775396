"""The CPU backend: fused kernels generated as Numba source, driven by generated Python code.

compile_module(module, options) -> Executable:
  emit    driver.build_program: one kernel source per fusion / lone op (kernels.py, with
          the shared emitter and scalar rules of codegen/), one driver function per control
          computation, a buffer plan with a preallocated arena (codegen/plan.py). Needs no
          compiler.
  compile with the persistent cache, the program's kernels linked into one shared library,
          loaded without Numba (native_library.py); else jit.obtain for every kernel:
          in-process memo, persistent cache (cache.py), Numba; then the library is linked
          for the next process.
  run     the entry driver function, under a lock (the arena is per executable).

Options: `cache` (bool, default $MINIXLA_CACHE or on), `cache_dir`, `parallel_threshold`
(elements touched before a kernel uses threads), `native_loops` (default on: a while loop
made only of kernels runs as one native function, native_loop.py), `strict` (an instruction
without native code is a compile error instead of a FallbackWarning). docs/cpu-backend.md has
the design.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
import time
import warnings

from ...errors import MinixlaError, UnsupportedError, at_instruction
from ...ir.module import HloModule
from ...ir.opcodes import COLLECTIVE
from ...reference.custom_call import lookup_custom_call
from ...runtime.donation import Donations
from ...runtime.executable import Executable
from ...runtime.metrics import count, record_phase
from .. import Backend, flush_denormals_requested
from ..codegen.driver import FallbackWarning, report_fallbacks
from . import cache, driver, jit, native_library, programs
from .blas_threads import restore_threads

_CODEGEN_OPTIONS = ("parallel_threshold", "native_loops")  # options that change the generated code


def available() -> tuple[bool, str]:
    """Whether Numba and llvmlite are installed: found, not imported (a compile whose kernels
    come from the cache never imports them)."""
    import importlib.util

    missing = [name for name in ("numba", "llvmlite") if importlib.util.find_spec(name) is None]
    if missing:
        return False, f"{' and '.join(missing)} not installed"
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
                at_instruction(exc, instr)
                raise


def _open_cache(options: dict) -> "cache.DiskCache | None":
    if not cache.is_enabled(options):
        return None
    disk = cache.DiskCache(options.get("cache_dir"))
    try:
        disk.prepare()
    except cache.CacheUnusable as exc:
        jit.warn_unusable(disk, str(exc))
        return None
    return disk


def compile_module(module: HloModule, options: dict) -> Executable:
    _check_custom_calls(module)
    start = time.perf_counter()
    program = driver.build_program(module, options)
    record_phase("codegen.cpu.emit", time.perf_counter() - start)
    report_fallbacks("cpu", program.fallback_reasons, bool(options.get("strict", False)))
    disk = _open_cache(options)
    start = time.perf_counter()
    key = None
    if disk is not None:
        codegen_options = {k: options[k] for k in _CODEGEN_OPTIONS if k in options}
        if flush_denormals_requested(options):  # the option or MINIXLA_FLAGS; changes the code too
            codegen_options["flush_denormals"] = True
        fingerprint = module.fingerprint()
        key = cache.digest("module", fingerprint, codegen_options)
        known = disk.module_entry(key) is not None
    outcomes = bind_kernels(program, disk)
    record_phase("codegen.cpu.native", time.perf_counter() - start)
    if disk is not None:
        hit = known and "compiled" not in outcomes
        count("cpu.cache.hit" if hit else "cpu.cache.miss")
        parts = cache.key_parts(fingerprint, codegen_options)
        if not hit and cache.explain_requested():
            logging.getLogger("minixla.cache").warning(
                "compilation cache miss for %s", disk.explain_miss(module.name, parts)
            )
        with contextlib.suppress(OSError):
            disk.record(hit)
        if not hit:
            kernels = [jit.kernel_id(s) for s in program.kernels.values()]
            disk.store_module(key, {"kernels": kernels, "name": module.name, "parts": parts})
            if "compiled" in outcomes:
                disk.evict(keep={jit.kernel_id(s) for s in program.kernels.values()})
    return executable_of(module, program, options, outcomes)


def bind_kernels(program, disk) -> list[str]:
    """Compiles (or loads) every kernel of `program` into its namespace; how each came. With
    a disk cache the kernels come from the program's shared library when there is one
    (native_library.py: Numba is imported only for kernels that need its runtime); else from
    Numba, and the library is linked for next time and bound here too, so a program runs the
    same machine code through the same entry points in every process."""
    library = native_library.bind(program, disk) if disk is not None else None
    if library is not None:
        count("cpu.cache.library_hit")
    bound, names = library if library is not None else (set(), list(program.kernels))
    outcomes = {name: "disk" for name in program.kernels}
    progress = KernelProgress(len(names), program.source)
    for name in names:
        spec = program.kernels[name]
        start = time.perf_counter()
        dispatcher, how = jit.obtain(spec, disk)
        if name not in bound:
            program.namespace[name] = jit.entry_point(dispatcher, spec)
        outcomes[name] = how
        progress.kernel(name, spec, how, time.perf_counter() - start)
    progress.finish()
    if library is None and disk is not None:
        native_library.bind(program, disk)
    for how in outcomes.values():
        count(f"cpu.kernel.{how}")
    return list(outcomes.values())


class KernelProgress:
    """What a long compile is doing, kernel by kernel: a `logging` record (logger
    `minixla.compile`, INFO) for every kernel Numba compiles, and on a terminal, once the
    kernels have taken a second, one line on stderr rewritten after each kernel and erased at
    the end (the CLI's own phase line is written the same way)."""

    SHOW_AFTER = 1.0  # seconds: shorter compiles print nothing

    def __init__(self, total: int, driver_source: str = "", stream=None, clock=time.perf_counter):
        self.total, self.done, self.clock = total, 0, clock
        self.callers = _kernel_callers(driver_source)
        self.stream = stream if stream is not None else sys.stderr
        self.start = clock()
        self.shown = False
        self.terminal = bool(getattr(self.stream, "isatty", lambda: False)())

    def kernel(self, name: str, spec, how: str, seconds: float) -> None:
        self.done += 1
        if how == "compiled":
            _progress_log.info(
                "kernel %d/%d %s for %s compiled in %.2f s",
                self.done,
                self.total,
                name,
                self.callers.get(name, "a native loop"),
                seconds,
            )
        elapsed = self.clock() - self.start
        if self.terminal and (self.shown or elapsed >= self.SHOW_AFTER):
            self.shown = True
            self.stream.write(
                f"\r\x1b[Kminixla: {self.done}/{self.total} kernels ({elapsed:.1f} s)"
            )
            self.stream.flush()

    def finish(self) -> None:
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


_progress_log = logging.getLogger("minixla.compile")


def _kernel_callers(driver_source: str) -> dict[str, str]:
    """{kernel: the instruction of its first call}, from the comment the driver writes above
    each instruction's code (`# fusion.3 = fusion f32[8,4]{1,0}`)."""
    callers: dict[str, str] = {}
    instruction = ""
    for line in driver_source.splitlines():
        text = line.strip()
        if text.startswith("# ") and " = " in text:
            instruction = "%" + text[2:].split(" = ")[0]
        elif call := re.match(r"(k\d+)\(", text):
            callers.setdefault(call.group(1), instruction)
    return callers


def executable_of(module: HloModule, program, options: dict, outcomes: list[str]) -> Executable:
    """The Executable running `program`, whose kernels are bound."""
    for opcode, n in program.fallbacks.items():
        count(f"fallback.{opcode}", n)
    exec(compile(program.source, f"<minixla driver {module.name}>", "exec"), program.namespace)
    entry = program.namespace[program.entry]
    lock = threading.Lock()

    def run(args):
        with lock:
            try:
                return entry(*args)
            finally:
                restore_threads()

    executable = Executable(module, "cpu", run, options=options)
    executable.donations = Donations.of(module, program.aliases)
    executable.writes_donated_buffers = True
    executable.program = program
    executable.dump_files = program.dump_files
    executable.kernel_outcomes = outcomes
    executable.generated_code_size = len(program.source.encode()) + sum(
        len(spec.source.encode()) for spec in program.kernels.values()
    )
    if program.assignment is not None:  # the driver packs what the assignment left out
        executable.buffer_assignment = program.assignment
        executable.extra_temp_bytes = program.arena_bytes - program.assignment.arena_size
    return executable


BACKEND = Backend(
    "cpu",
    compile_module,
    available,
    pipeline,
    options=(
        "cache",
        "cache_dir",
        "parallel_threshold",
        "buffer_assignment",
        "strict",
        "max_while_iterations",
        "flush_denormals",
        "native_loops",
    ),
    programs=programs.ProgramCache(),
)
