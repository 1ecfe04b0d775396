"""Runs the `// RUN:` lines of HLO test files in-process, the way lit runs them.

A RUN line is a pipeline of `minixla opt ARGS` (also spelled `minixla-opt`) and
`filecheck ARGS`, with `%s` standing for the file itself:

    // RUN: minixla opt %s --passes algsimp | filecheck %s

The opt stage calls the CLI's main() directly (no subprocess); its stdout feeds the next
stage. tests/conftest.py turns each RUN line of tests/hlo/**/*.hlo into a pytest item.

Each RUN line with an opt stage also gets a differential item (`RUN0-diff`): the input module
and the module the opt stage printed run on the interpreter with the same seeded random inputs
and must agree bit for bit (NaN meets NaN, -0.0 is not +0.0). Marker comments in the file:

    // NO-DIFF: reason          the module cannot run, or the rewrite is not value-preserving
    // DIFF-TOLERANCE: 1e-6     relative and absolute tolerance, for passes that reassociate

Modules that need several devices, ops the interpreter lacks, or whose entry signature the
passes changed (a partitioned program takes shards) are skipped with that reason.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from .filecheck import run_filecheck

RUN_LINE = re.compile(r"^\s*//\s*RUN:\s*(.*)$")
NO_DIFF = re.compile(r"^\s*//\s*NO-DIFF:\s*(.*)$", re.MULTILINE)
DIFF_TOLERANCE = re.compile(r"^\s*//\s*DIFF-TOLERANCE:\s*(\S+)", re.MULTILINE)
DIFF_SEEDS = (0, 1)


def run_lines(text: str) -> list[str]:
    return [match.group(1).strip() for line in text.splitlines() if (match := RUN_LINE.match(line))]


class RunFailure(Exception):
    """A RUN line stage that failed; the message is its output."""


def _run_minixla(argv: list[str], stdin: str) -> str:
    from ..cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse errors
            status = exc.code
    if status:
        raise RunFailure(f"minixla {' '.join(argv)} exited with {status}:\n{err.getvalue()}")
    return out.getvalue()


def _stages(command: str, path: Path) -> list[list[str]]:
    return [
        [str(path) if w == "%s" else w for w in shlex.split(stage)] for stage in command.split("|")
    ]


def _opt_argv(words: list[str]) -> list[str] | None:
    """The CLI argv of an opt stage, or None for another stage."""
    if words[:2] == ["minixla", "opt"]:
        return ["opt"] + words[2:]
    if words[:1] == ["minixla-opt"]:
        return ["opt"] + words[1:]
    return None


def has_opt_stage(command: str) -> bool:
    return any(_opt_argv(words) is not None for words in _stages(command, Path("-")))


def run_line(command: str, path: Path) -> None:
    """Runs one RUN line for the file at `path`; raises RunFailure when a stage fails."""
    data = ""
    for stage, words in zip(command.split("|"), _stages(command, path)):
        if (argv := _opt_argv(words)) is not None:
            data = _run_minixla(argv, data)
        elif words[:1] == ["filecheck"]:
            check_file = words[-1]
            status, report = run_filecheck(data, check_file, words[1:-1])
            if status:
                raise RunFailure(f"filecheck failed:\n{report}\n--- input ---\n{data}")
        else:
            raise RunFailure(
                f"unsupported RUN stage {stage.strip()!r} (known: minixla opt, filecheck)"
            )


def optimized_text(command: str, path: Path) -> str:
    """What the RUN line's opt stages print (the stages before the first filecheck)."""
    data = ""
    for words in _stages(command, path):
        argv = _opt_argv(words)
        if argv is None:
            break
        data = _run_minixla(argv, data)
    return data


def why_not_differential(before, after) -> str | None:
    """Why two modules cannot be compared on the single-device interpreter, or None."""
    from ..reference.evaluator import unsupported_opcodes
    from ..runtime.spmd import is_multi_device, is_partitioned

    for label, module in (("input", before), ("output", after)):
        if is_multi_device(module, None) or is_partitioned(module):
            return f"the {label} module runs on several devices"
        missing = unsupported_opcodes(module)
        if missing:
            return f"the interpreter cannot run the {label} module: {', '.join(missing)}"
    if _signature(before) != _signature(after):  # layouts aside
        return "the passes changed the entry parameters"
    return None


def _signature(module) -> list[str]:
    return [str(p.shape.without_layout()) for p in module.entry.parameters]


def run_differential(command: str, path: Path, *, seeds=DIFF_SEEDS) -> None:
    """Runs the file's module and the RUN line's optimized module on the interpreter with
    seeded random inputs; raises RunFailure when they differ, pytest.skip when they cannot
    run (see the module docstring)."""
    from ..text import parse_module
    from .compare import compare_values, random_inputs, run_interpreter

    text = path.read_text()
    if (marker := NO_DIFF.search(text)) is not None:
        pytest.skip(f"NO-DIFF: {marker.group(1).strip()}")
    found = DIFF_TOLERANCE.search(text)
    tolerance = float(found.group(1)) if found else 0.0
    before = parse_module(text)
    after = parse_module(optimized_text(command, path))
    reason = why_not_differential(before, after)
    if reason:
        pytest.skip(reason)
    for seed in seeds:
        args = random_inputs(before, seed=seed)
        want, got = run_interpreter(before, args), run_interpreter(after, args)
        problems = compare_values(
            got,
            want,
            rtol=tolerance,
            atol=tolerance,
            what=f"seed {seed}: after vs before",
            signed_zeros=not tolerance,
        )
        if problems:
            raise RunFailure(
                "interpreter results differ:\n  "
                + "\n  ".join(problems)
                + f"\n--- after ---\n{after.to_text()}"
            )


class HloTestFile(pytest.File):
    def collect(self):
        for i, command in enumerate(run_lines(self.path.read_text())):
            yield HloRunItem.from_parent(self, name=f"RUN{i}", command=command)
            if has_opt_stage(command):
                yield HloDiffItem.from_parent(self, name=f"RUN{i}-diff", command=command)


class HloRunItem(pytest.Item):
    def __init__(self, *, command: str, **kwargs):
        super().__init__(**kwargs)
        self.command = command

    def runtest(self) -> None:
        run_line(self.command, self.path)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, RunFailure):
            return f"{self.path}: RUN: {self.command}\n{excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, f"{self.path.name}::{self.name}"


class HloDiffItem(HloRunItem):
    """The interpreter agrees on the RUN line's input and output modules."""

    def runtest(self) -> None:
        run_differential(self.command, self.path)
