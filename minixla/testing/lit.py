"""Runs the `// RUN:` lines of HLO test files in-process, the way lit runs them.

A RUN line is a pipeline of `minixla opt ARGS` (also spelled `minixla-opt`) and
`filecheck ARGS`, with `%s` standing for the file itself:

    // RUN: minixla opt %s --passes algsimp | filecheck %s

The opt stage calls the CLI's main() directly (no subprocess); its stdout feeds the next
stage. tests/conftest.py turns each RUN line of tests/hlo/**/*.hlo into a pytest item.
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


def run_lines(text: str) -> list[str]:
    return [match.group(1).strip() for line in text.splitlines()
            if (match := RUN_LINE.match(line))]


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


def run_line(command: str, path: Path) -> None:
    """Runs one RUN line for the file at `path`; raises RunFailure when a stage fails."""
    data = ""
    for stage in command.split("|"):
        words = [str(path) if w == "%s" else w for w in shlex.split(stage)]
        if words[:2] == ["minixla", "opt"] or words[:1] == ["minixla-opt"]:
            data = _run_minixla(["opt"] + words[1 if words[0] == "minixla-opt" else 2:], data)
        elif words[:1] == ["filecheck"]:
            check_file = words[-1]
            status, report = run_filecheck(data, check_file, words[1:-1])
            if status:
                raise RunFailure(f"filecheck failed:\n{report}\n--- input ---\n{data}")
        else:
            raise RunFailure(f"unsupported RUN stage {stage.strip()!r} (known: minixla opt, "
                             f"filecheck)")


class HloTestFile(pytest.File):
    def collect(self):
        for i, command in enumerate(run_lines(self.path.read_text())):
            yield HloRunItem.from_parent(self, name=f"RUN{i}", command=command)


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
