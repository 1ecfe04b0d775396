"""The pass contract, pipelines, the pass registry and HLO dumps.

A pass has a `name` and `run(module) -> bool` (True when it changed the module); it mutates the
module in place. `Pipeline` runs passes in order (and nests), `FixedPoint` repeats its passes
until none changes anything (or an iteration cap), the verifier can run after every pass that
changed the module, and each pass's wall time and change count go into a `PassReport`.
"""

from __future__ import annotations

import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import MinixlaError, VerificationError
from ..ir.module import HloModule

_log = logging.getLogger("minixla.passes")


class PassError(MinixlaError):
    """An unknown pass name, or a pass that left the module invalid."""


class Pass:
    name: str = "pass"  # pipelines name themselves per instance

    def run(self, module: HloModule) -> bool:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


@dataclass
class PassRecord:
    name: str
    seconds: float = 0.0
    runs: int = 0
    changes: int = 0


@dataclass
class PassReport:
    records: dict[str, PassRecord] = field(default_factory=dict)
    # Fixed points that hit their round cap while still changing: (name, passes still changing).
    capped: list[tuple[str, list[str]]] = field(default_factory=list)

    def add(self, name: str, seconds: float, changed: bool) -> None:
        record = self.records.setdefault(name, PassRecord(name))
        record.seconds += seconds
        record.runs += 1
        record.changes += int(changed)

    def __str__(self) -> str:
        lines = [f"{'pass':32s} {'runs':>5s} {'changed':>8s} {'ms':>9s}"]
        for r in self.records.values():
            lines.append(f"{r.name:32s} {r.runs:5d} {r.changes:8d} {r.seconds * 1e3:9.2f}")
        for name, changing in self.capped:
            lines.append(
                f"fixed point {name} stopped at its cap; still changing: {', '.join(changing)}"
            )
        return "\n".join(lines)


# Settings of the flag table (flags.py) that other layers read: the device count (runtime),
# --explain_recompiles (minixla.jit), --explain_cache_misses (the CPU compilation cache),
# --flush_denormals (the interpreter and cpu backends).
FLAGS_READ_ELSEWHERE = (
    "device_count",
    "explain_recompiles",
    "explain_cache_misses",
    "flush_denormals",
)


# Compile options that set a DumpOptions field: option name -> field.
DUMP_OPTIONS = {
    "dump_to": "dump_to",
    "dump_pass_re": "pass_re",
    "dump_module_re": "module_re",
    "dump_as_text": "as_text",
    "dump_as_dot": "as_dot",
    "dump_as_html": "as_html",
}


@dataclass
class DumpOptions:
    """Where and what to dump, as XLA's --xla_dump_to / --xla_dump_hlo_pass_re / ..."""

    dump_to: str | None = None
    pass_re: str | None = None  # dump after each matching pass that changed the module
    module_re: str | None = None  # dump only modules whose name matches
    as_text: bool = True
    as_dot: bool = False
    as_html: bool = False

    @staticmethod
    def from_flags(text: str | None = None, xla_flags: str | None = None) -> "DumpOptions":
        """The dump settings of $MINIXLA_FLAGS and $XLA_FLAGS (table: minixla/passes/flags.py)."""
        from .flags import read_flags

        settings = read_flags(text, xla_flags)
        for elsewhere in FLAGS_READ_ELSEWHERE:  # settings other layers read
            settings.pop(elsewhere, None)
        return DumpOptions(**settings)


class Dumper:
    """Writes numbered dump files for one compilation of one module."""

    _next_module_id = 0

    def __init__(self, options: DumpOptions, module: HloModule):
        self.options = options
        self.module_id = Dumper._next_module_id
        Dumper._next_module_id += 1
        self.step = 0
        self.prefix = f"module_{self.module_id:04d}.{_safe(module.name)}"
        self._enabled = bool(options.dump_to) and (
            options.module_re is None or re.search(options.module_re, module.name) is not None
        )
        if self._enabled and options.dump_to:
            Path(options.dump_to).mkdir(parents=True, exist_ok=True)

    @property
    def enabled(self) -> bool:
        return self._enabled

    def write(self, suffix: str, text: str) -> Path | None:
        if not self.enabled or not self.options.dump_to:
            return None
        path = Path(self.options.dump_to) / f"{self.prefix}.{suffix}"
        path.write_text(text)
        return path

    def module(self, module: HloModule, suffix: str) -> None:
        if not self.enabled:
            return
        if self.options.as_text:
            self.write(f"{suffix}.txt", module.to_text())
        if self.options.as_dot:
            from ..text.graph import module_to_dot

            self.write(f"{suffix}.dot", module_to_dot(module))
        if self.options.as_html:
            from ..text.graph import module_to_html

            self.write(f"{suffix}.html", module_to_html(module))

    def after_pass(self, module: HloModule, pipeline: str, pass_name: str) -> None:
        if not self.enabled or self.options.pass_re is None:
            return
        if not re.search(self.options.pass_re, pass_name):
            return
        self.step += 1
        self.module(module, f"{self.step:04d}.{_safe(pipeline)}.after_{_safe(pass_name)}")


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


# Verify after each changing pass: on in tests (conftest turns it on) and with MINIXLA_DEBUG=1.
VERIFY_BETWEEN_PASSES = os.environ.get("MINIXLA_DEBUG", "") not in ("", "0")


@dataclass
class RunContext:
    report: PassReport = field(default_factory=PassReport)
    verify: bool = False
    dumper: Dumper | None = None


class Pipeline(Pass):
    """Runs passes in order; a pipeline is itself a pass, so pipelines nest."""

    def __init__(self, name: str, passes: list[Pass], *, verify: bool | None = None):
        self.name = name
        self.passes = list(passes)
        self.verify = verify
        self.report = PassReport()

    def run(self, module: HloModule, context: RunContext | None = None) -> bool:
        context = context or RunContext(
            self.report, VERIFY_BETWEEN_PASSES if self.verify is None else self.verify
        )
        changed = False
        for item in self.passes:
            changed |= run_pass(item, module, context, self.name)
        return changed


class FixedPoint(Pass):
    """Repeats its passes until a whole round changes nothing, at most `max_iterations` rounds."""

    def __init__(self, name: str, passes: list[Pass], *, max_iterations: int = 25):
        self.name = name
        self.passes = list(passes)
        self.max_iterations = max_iterations
        self.iterations = 0

    def run(self, module: HloModule, context: RunContext | None = None) -> bool:
        context = context or RunContext(verify=VERIFY_BETWEEN_PASSES)
        changed_any = False
        for iteration in range(1, self.max_iterations + 1):
            self.iterations = iteration
            changing = [
                item.name for item in self.passes if run_pass(item, module, context, self.name)
            ]
            changed_any |= bool(changing)
            if not changing:
                break
        else:
            # A cap that stops a changing pipeline hides a rewrite loop or a too-small cap.
            context.report.capped.append((self.name, changing))
            _log.warning(
                "fixed point %s stopped after %d rounds with passes still changing the module: %s",
                self.name,
                self.max_iterations,
                ", ".join(changing),
            )
        return changed_any


def run_pass(item: Pass, module: HloModule, context: RunContext, pipeline: str) -> bool:
    if isinstance(item, (Pipeline, FixedPoint)):
        return item.run(module, context)
    start = time.perf_counter()
    changed = bool(item.run(module))
    context.report.add(item.name, time.perf_counter() - start, changed)
    if changed and context.verify:
        from ..ir.verifier import verify

        try:
            verify(module)
        except VerificationError as exc:
            raise VerificationError(f"after pass '{item.name}': {exc}") from None
    if changed and context.dumper is not None:
        context.dumper.after_pass(module, pipeline, item.name)
    return changed


def run_pipeline(
    pipeline: Pass,
    module: HloModule,
    *,
    verify: bool | None = None,
    dump: DumpOptions | None = None,
    dumper: Dumper | None = None,
) -> PassReport:
    """Runs a pass or pipeline with dumps before/after; returns the pass report."""
    if dumper is None and dump is not None and dump.dump_to:
        dumper = Dumper(dump, module)
    context = RunContext(verify=VERIFY_BETWEEN_PASSES if verify is None else verify, dumper=dumper)
    if dumper:
        dumper.module(module, "before_optimizations")
    run_pass(pipeline, module, context, getattr(pipeline, "name", "pipeline"))
    if dumper:
        dumper.module(module, "after_optimizations")
    return context.report


# -- registry ---------------------------------------------------------------------------------
PASSES: dict[str, Callable[[], Pass]] = {}


def register_pass(cls_or_factory, name: str | None = None):
    """Registers a pass class (or zero-argument factory) under its `name`; usable as decorator."""
    key = name or getattr(cls_or_factory, "name", None)
    if not key:
        raise PassError(f"{cls_or_factory!r} has no name to register under")
    PASSES[key] = cls_or_factory
    return cls_or_factory


def get_pass(name: str) -> Pass:
    from . import registry  # noqa: F401  (imports every built-in pass module)

    factory = PASSES.get(name)
    if factory is None:
        raise PassError(f"unknown pass {name!r}; known passes: {', '.join(sorted(PASSES))}")
    return factory()


def make_pipeline(names_or_passes, name: str = "custom") -> Pipeline:
    return Pipeline(name, [get_pass(p) if isinstance(p, str) else p for p in names_or_passes])
