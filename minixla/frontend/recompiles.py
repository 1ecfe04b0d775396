"""Why `jit` traced again: each new trace compared with the closest signature seen before.

A jit signature is (pytree structure, per-leaf (shape, dtype, weak type), static argument
values, the x64 switch, the backend). When a call misses the cache, the new signature is
compared with every cached one and the closest (fewest differing parts) explains the miss:
"argument leaf x: shape (3,) -> (4,)". `Jitted.explain_recompiles()` returns the log as text;
with `MINIXLA_FLAGS=--explain_recompiles` each recompile is also logged (logger
`minixla.jit`, level WARNING, so it reaches stderr without any logging set-up).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

LOGGER = logging.getLogger("minixla.jit")


def explain_flag(text: str | None = None) -> bool:
    """Is `--explain_recompiles` (or `--explain_recompiles=true`) in $MINIXLA_FLAGS?"""
    from ..passes.flags import read_flags

    return bool(read_flags(text, "").get("explain_recompiles", False))


@dataclass
class Trace:
    """One trace of a jitted function: its number and why it happened."""

    number: int
    reasons: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"trace {self.number}: " + "; ".join(self.reasons)


@dataclass
class RecompileLog:
    function: str
    traces: list[Trace] = field(default_factory=list)

    def record(self, key, cached_keys, names: list[str]) -> Trace:
        """Notes a trace for signature `key` that none of `cached_keys` matched."""
        cached = list(cached_keys)
        if not cached:
            reasons = ["the cache was cleared"] if self.traces else ["first call"]
        else:
            diffs = [differences(old, key, names) for old in cached]
            reasons = min(diffs, key=len) or ["a signature part that compares unequal"]
        trace = Trace(len(self.traces) + 1, reasons)
        self.traces.append(trace)
        if cached and explain_flag():
            LOGGER.warning("minixla.jit: %s recompiled (%s)", self.function, "; ".join(reasons))
        return trace

    def __str__(self) -> str:
        if not self.traces:
            return f"{self.function}: not traced yet"
        return "\n".join(
            [f"{self.function}: {len(self.traces)} trace(s)"] + [f"  {t}" for t in self.traces]
        )


def differences(old, new, names: list[str]) -> list[str]:
    """What changed from signature `old` to `new`, one phrase per difference."""
    old_tree, old_specs, old_static, old_x64, old_backend = old
    tree, specs, static, x64, backend = new
    found = []
    if old_tree != tree:
        found.append(f"pytree structure changed: {old_tree} -> {tree}")
    else:
        for k, (before, after) in enumerate(zip(old_specs, specs)):
            found += _leaf_changes(names[k] if k < len(names) else f"leaf {k}", before, after)
    old_values, values = dict(old_static), dict(static)
    for argnum in sorted(values):
        if old_values.get(argnum) != values[argnum]:
            found.append(
                f"static argument {argnum}: {old_values.get(argnum)!r} -> {values[argnum]!r}"
            )
    if old_x64 != x64:
        found.append(f"enable_x64: {old_x64} -> {x64}")
    if old_backend != backend:
        found.append(f"backend: {old_backend} -> {backend}")
    return found


def _leaf_changes(name: str, before, after) -> list[str]:
    (old_shape, old_dtype, old_weak), (shape, dtype, weak) = before, after
    found = []
    if old_shape != shape:
        found.append(f"argument {name}: shape {old_shape} -> {shape}")
    if old_dtype != dtype:
        found.append(f"argument {name}: dtype {old_dtype} -> {dtype}")
    if old_weak != weak:
        change = (
            "a Python scalar became an array" if old_weak else "an array became a Python scalar"
        )
        found.append(f"argument {name}: weak type {old_weak} -> {weak} ({change})")
    return found
