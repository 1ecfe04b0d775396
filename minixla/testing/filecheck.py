"""FileCheck for HLO text, through the PyPI `filecheck` package (the one xDSL uses).

`check_hlo(text, checks)` matches `text` against the CHECK lines in `checks` and raises
AssertionError carrying filecheck's own report when they do not match.
"""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import tempfile
import textwrap


def run_filecheck(text: str, check_file: str, args=()) -> tuple[int, str]:
    """Runs filecheck on `text` with the checks in `check_file`; returns (status, report)."""
    from filecheck.matcher import Matcher
    from filecheck.options import parse_argv_options

    with tempfile.TemporaryDirectory() as tmp:
        input_path = os.path.join(tmp, "input.hlo")
        with open(input_path, "w", encoding="utf-8") as f:
            f.write(text)
        report = io.StringIO()
        options = parse_argv_options(["filecheck", *args, "--input-file", input_path, check_file])
        with contextlib.redirect_stdout(report), contextlib.redirect_stderr(report):
            matcher = Matcher.from_opts(options)
            matcher.stderr = report
            status = matcher.run()
    return status, report.getvalue()


def check_hlo(text: str, checks: str, *, args: str | list[str] = ()) -> None:
    """Asserts that `text` satisfies the `CHECK:` lines of `checks` (other lines are ignored)."""
    extra = shlex.split(args) if isinstance(args, str) else list(args)
    with tempfile.TemporaryDirectory() as tmp:
        check_file = os.path.join(tmp, "checks.txt")
        with open(check_file, "w", encoding="utf-8") as f:
            f.write(textwrap.dedent(checks))
        status, report = run_filecheck(text, check_file, extra)
    if status != 0:
        raise AssertionError(f"FileCheck failed:\n{report}\n--- input ---\n{text}")
