"""`minixla.compile`: text or module in, Executable out, through the named backend.

The backend's own pipeline (if it declares one) runs on a copy of the module first, or the passes
given with `passes=[...]` instead. Dump flags come from the options (`dump_to`, `dump_pass_re`,
`dump_module_re`, `dump_as_text`, `dump_as_dot`, `dump_as_html`) or from $MINIXLA_FLAGS and
$XLA_FLAGS.
"""

from __future__ import annotations

import time
import warnings

from . import get as get_backend
from ..errors import MinixlaError
from ..ir.module import HloModule
from ..passes.base import DUMP_OPTIONS
from ..runtime.limits import check_sizes, memory_budget
from ..runtime import compile_memo
from ..runtime.metrics import record_phase
from ..runtime.participants import check_participants
from ..runtime.runnable import check_runnable

DEFAULT_BACKEND = "interpreter"


def compile(module_or_text, backend: str | None = None, **options):
    """Compiles an HloModule, HLO or StableHLO text, or a JAX `Lowered`/`Compiled`/
    `XlaComputation` (anything with `as_text()`/`as_hlo_text()`) for `backend`.

    `num_partitions=N` (default: the header's) above 1, or a header `replica_count` above 1,
    gives a multi-device SpmdExecutable (runtime/spmd.py; options `out_shardings`,
    `collective_timeout`, `already_partitioned`). `auto_sharding=True` (or an
    AutoShardingOptions) chooses the shardings of an unannotated program first
    (passes/auto_sharding.py).

    Compiling the same program with the same backend, options and flags again in one process
    returns a new executable sharing the first one's compiled code (runtime/compile_memo.py); a
    backend with a program cache (the cpu's) may skip the passes across processes too."""
    text = None if isinstance(module_or_text, HloModule) else program_text(module_or_text)
    key = compile_memo.key(
        text if text is not None else module_or_text, backend or DEFAULT_BACKEND, options
    )
    if key is None:
        return _compile(module_or_text, text, backend, options, None)
    found = compile_memo.lookup(key)
    if found is not None:
        return found
    try:
        with warnings.catch_warnings(record=True) as raised:  # raised again on memo hits
            warnings.simplefilter("always")
            executable = _compile(module_or_text, text, backend, options, key)
    finally:
        compile_memo.warn_again(raised)
    compile_memo.remember(key, executable, raised)
    return executable


def _compile(module_or_text, text, backend, options: dict, key):
    if text is not None:
        from ..text import parse_module

        start = time.perf_counter()
        module = parse_module(text)
        record_phase("parse", time.perf_counter() - start)
    elif isinstance(module_or_text, HloModule):
        module = module_or_text
    else:
        raise TypeError(
            f"compile expects an HloModule, HLO or StableHLO text, or a JAX "
            f"Lowered/Compiled object, got {type(module_or_text).__name__}"
        )
    name = backend or DEFAULT_BACKEND
    target = get_backend(name)
    check_options(options, target)
    check_sizes(module, memory_budget(options.pop("memory_budget_bytes", None)))
    check_runnable(module)
    num_partitions = options.pop("num_partitions", None)
    out_shardings = options.pop("out_shardings", None)
    header = module.header_attrs
    if (
        num_partitions is not None
        or options.get("auto_sharding")
        or "num_partitions" in header
        or "replica_count" in header
    ):
        from ..runtime import spmd  # imported only when it may be needed: it is not light

        if options.get("auto_sharding") and not spmd.is_multi_device(module, num_partitions):
            raise MinixlaError(
                "auto_sharding chooses shardings for several devices: pass "
                "num_partitions=N (N > 1) or set it in the module header"
            )
        if spmd.is_multi_device(module, num_partitions):
            return spmd.compile_spmd(
                module,
                name,
                target,
                options,
                _optimize,
                num_partitions=num_partitions,
                out_shardings=out_shardings,
            )
    check_participants(module)
    stored = target.programs if key is not None else None
    if stored is not None:
        start = time.perf_counter()
        executable = stored.load(key, module, backend_options(options))
        record_phase(f"load.{name}", time.perf_counter() - start)
        if executable is not None:
            return executable
    module, report, dumper, remat = _optimize(module, target, options)
    start = time.perf_counter()
    executable = target.compile(module, options)
    record_phase(f"codegen.{name}", time.perf_counter() - start)
    executable.pass_report = report
    executable.rematerialization = remat.report if remat is not None else None
    if dumper is not None and hasattr(executable, "dump_files"):
        for suffix, text in executable.dump_files().items():  # kernels, buffer assignment
            dumper.write(suffix, text)
    if stored is not None:
        stored.store(key, executable, backend_options(options))
    return executable


# Options minixla.compile itself reads; each backend declares its own (Backend.options).
COMPILE_OPTIONS = (
    "passes",
    "verify",
    *DUMP_OPTIONS,
    "memory_budget_bytes",
    "memory_limit_bytes",
    "num_partitions",
    "out_shardings",
    "collective_timeout",
    "already_partitioned",
    "auto_sharding",
)


def backend_options(options: dict) -> dict:
    """The options a backend's own compile reads (minixla.compile's are taken out)."""
    return {k: v for k, v in options.items() if k not in COMPILE_OPTIONS}


def check_options(options: dict, target) -> None:
    if target.options is None:  # a third-party backend that does not declare its options
        return
    known = COMPILE_OPTIONS + tuple(target.options)
    unknown = sorted(set(options) - set(known))
    if unknown:
        from ..errors import UnsupportedError

        raise UnsupportedError(
            f"unknown compile option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(unknown)} for backend {target.name!r}; known "
            f"options: {', '.join(sorted(known))}"
        )


def program_text(program) -> str | None:
    """The text of a program given as a string or as a JAX object (duck-typed, no import)."""
    if isinstance(program, str):
        return program
    for method in ("as_hlo_text", "as_text"):  # XlaComputation; Lowered and Compiled
        fn = getattr(program, method, None)
        if callable(fn):
            text = fn()
            if isinstance(text, str):
                return text
    if type(program).__name__ in ("Module", "HloModule") and hasattr(program, "to_string"):
        return program.to_string()  # lowered.compiler_ir("hlo")
    if hasattr(program, "operation") and hasattr(program, "body"):  # an MLIR ir.Module
        return str(program)
    return None


def _optimize(module: HloModule, target, options: dict):
    from ..passes.base import DumpOptions, Dumper, Pipeline, make_pipeline, run_pipeline

    passes = options.pop("passes", None)
    limit = _memory_limit(options.pop("memory_limit_bytes", None))
    if passes is not None:
        pipeline = make_pipeline(passes, "custom")
    elif target.pipeline is not None:
        pipeline = target.pipeline()
    elif limit is not None:  # a backend without passes still runs the rematerialized schedule
        pipeline = Pipeline(target.name, [])
    else:
        return module, None, None, None
    remat = None
    if limit is not None:
        from ..passes.rematerialization import Rematerialization

        remat = Rematerialization(limit)
        pipeline = Pipeline(pipeline.name, [pipeline, remat])
    dump = DumpOptions.from_flags()
    for key, attr in DUMP_OPTIONS.items():
        if key in options:
            setattr(dump, attr, options.pop(key))
    module = module.clone()
    dumper = Dumper(dump, module) if dump.dump_to else None
    start = time.perf_counter()
    report = run_pipeline(pipeline, module, verify=options.pop("verify", None), dumper=dumper)
    record_phase("passes", time.perf_counter() - start)
    if remat is not None and dumper is not None:
        dumper.write("rematerialization.txt", str(remat.report))
    return module, report, dumper, remat


def _memory_limit(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MinixlaError(f"memory_limit_bytes must be a non-negative int of bytes, got {value!r}")
    return value
