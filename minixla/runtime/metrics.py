"""Process-wide counters: compile phases, cache hits and misses, executions."""

from __future__ import annotations

import threading
from collections import defaultdict

_lock = threading.Lock()
_seconds: dict[str, float] = defaultdict(float)
_counts: dict[str, int] = defaultdict(int)


def record_phase(phase: str, seconds: float) -> None:
    with _lock:
        _seconds[f"compile.{phase}"] += seconds
        _counts[f"compile.{phase}"] += 1


def record_execution(backend: str, seconds: float) -> None:
    with _lock:
        _seconds[f"execute.{backend}"] += seconds
        _counts[f"execute.{backend}"] += 1


def count(name: str, amount: int = 1) -> None:
    with _lock:
        _counts[name] += amount


def metrics() -> dict[str, dict[str, float]]:
    """{name: {"count": n, "seconds": s}} for every counter recorded so far."""
    with _lock:
        names = sorted(set(_seconds) | set(_counts))
        return {n: {"count": _counts.get(n, 0), "seconds": _seconds.get(n, 0.0)} for n in names}


def reset() -> None:
    with _lock:
        _seconds.clear()
        _counts.clear()


def report() -> str:
    lines = [f"{'metric':40s} {'count':>8s} {'seconds':>10s}"]
    for name, value in metrics().items():
        lines.append(f"{name:40s} {value['count']:8d} {value['seconds']:10.4f}")
    return "\n".join(lines)
