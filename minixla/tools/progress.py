"""A tiny per-phase progress reporter for `minixla run` and `minixla opt`.

On a terminal it shows the phase in progress (`[3/4] codegen ...`) and replaces it with the
phase's time when done, one line per phase, on stderr. It says nothing when stderr is not a
terminal or with --quiet, so piped and captured output stays clean.

    progress = Progress.for_command(("parse", "passes", "codegen", "run"), quiet=args.quiet)
    with progress.phase("parse"):
        module = load_module(path)
    with progress.compile():          # minixla.compile: passes, then codegen
        executable = minixla.compile(module)
"""

from __future__ import annotations

import contextlib
import sys
import time


class Progress:
    def __init__(self, phases: tuple[str, ...], stream=None, enabled: bool = True):
        self.phases = phases
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.seconds: dict[str, float] = {}

    @classmethod
    def for_command(cls, phases: tuple[str, ...], *, quiet: bool = False, stream=None):
        stream = stream if stream is not None else sys.stderr
        interactive = bool(getattr(stream, "isatty", lambda: False)())
        return cls(phases, stream, enabled=interactive and not quiet)

    def _number(self, name: str) -> str:
        if name in self.phases:
            return f"[{self.phases.index(name) + 1}/{len(self.phases)}] "
        return ""

    def _show(self, text: str, done: bool) -> None:
        if not self.enabled:
            return
        # \r and clear-to-end-of-line: the "done" line overwrites the "running" one.
        self.stream.write(f"\r\x1b[K{text}" + ("\n" if done else ""))
        self.stream.flush()

    def done(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds
        self._show(f"{self._number(name)}{name:8s} {seconds * 1e3:9.1f} ms", done=True)

    @contextlib.contextmanager
    def phase(self, name: str, shown: str | None = None):
        """Times the block as phase `name`; on failure the running line is erased."""
        self._show(f"{self._number(name)}{shown or name} ...", done=False)
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self._show("", done=False)
            raise
        self.done(name, time.perf_counter() - start)

    @contextlib.contextmanager
    def compile(self):
        """`minixla.compile` runs passes and codegen in one call; its metrics give the split."""
        before = _compile_seconds()
        self._show(f"{self._number('passes')}passes + codegen ...", done=False)
        start = time.perf_counter()
        try:
            yield
        except BaseException:
            self._show("", done=False)
            raise
        total = time.perf_counter() - start
        after = _compile_seconds()
        passes = after["passes"] - before["passes"]
        self.done("passes", passes)
        self.done("codegen", total - passes)  # the rest: codegen plus compile's own overhead


def _compile_seconds() -> dict[str, float]:
    from ..runtime.metrics import metrics

    out = {"passes": 0.0}
    for name, value in metrics().items():
        if name == "compile.passes":
            out["passes"] += value["seconds"]
    return out
