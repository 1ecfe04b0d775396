"""`minixla.compile`: text or module in, Executable out, through the named backend.

The backend's own pipeline (if it declares one) runs on a copy of the module first, or the passes
given with `passes=[...]` instead. Dump flags come from the options (`dump_to`, `dump_pass_re`,
`dump_as_dot`) or from $MINIXLA_FLAGS.
"""
from __future__ import annotations

import time

from ..backends import get as get_backend
from ..errors import MinixlaError
from ..ir.module import HloModule
from .limits import check_sizes, memory_budget
from .metrics import record_phase
from .participants import check_participants

DEFAULT_BACKEND = "interpreter"


def compile(module_or_text, backend: str | None = None, **options):
    """Compiles an HloModule (or HLO text, parsed and verified first) for `backend`."""
    if isinstance(module_or_text, str):
        from ..text.parser import parse_hlo_module
        start = time.perf_counter()
        module = parse_hlo_module(module_or_text)
        record_phase("parse", time.perf_counter() - start)
    elif isinstance(module_or_text, HloModule):
        module = module_or_text
    else:
        raise TypeError(f"compile expects an HloModule or HLO text, got "
                        f"{type(module_or_text).__name__}")
    name = backend or DEFAULT_BACKEND
    target = get_backend(name)
    check_sizes(module, memory_budget(options.pop("memory_budget_bytes", None)))
    check_participants(module)
    module, report, dumper, remat = _optimize(module, target, options)
    start = time.perf_counter()
    executable = target.compile(module, options)
    record_phase(f"codegen.{name}", time.perf_counter() - start)
    executable.pass_report = report
    executable.rematerialization = remat.report if remat is not None else None
    if dumper is not None and hasattr(executable, "dump_files"):
        for suffix, text in executable.dump_files().items():  # kernels, buffer assignment
            dumper.write(suffix, text)
    return executable


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
    for key, attr in (("dump_to", "dump_to"), ("dump_pass_re", "pass_re"),
                      ("dump_as_dot", "as_dot")):
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
        raise MinixlaError(f"memory_limit_bytes must be a non-negative int of bytes, got "
                           f"{value!r}")
    return value
