"""Debug flags from $MINIXLA_FLAGS and $XLA_FLAGS: one table of every flag minixla understands.

Each row names a flag (minixla's short spelling and XLA's `--xla_...` spelling are both rows),
the setting it fills and how its value is read. MINIXLA_FLAGS is read after XLA_FLAGS, so it
wins. An unknown flag in MINIXLA_FLAGS is an error; XLA flags that mean nothing to minixla (in
either variable) are reported once, as a warning, and ignored, so a shell set up for XLA works.
"""

from __future__ import annotations

import os
import shlex
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import MinixlaError


def _bool(value: str) -> bool:
    if value.lower() in ("", "true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _count(value: str) -> int:
    count = int(value)
    if count < 1:
        raise ValueError(f"must be at least 1, got {count}")
    return count


@dataclass(frozen=True)
class Flag:
    setting: str  # the Flags field it fills
    read: Callable[[str], object]  # str, _bool or _count


FLAGS: dict[str, Flag] = {
    "dump_to": Flag("dump_to", str),
    "xla_dump_to": Flag("dump_to", str),
    "dump_pass_re": Flag("pass_re", str),
    "xla_dump_hlo_pass_re": Flag("pass_re", str),
    "dump_module_re": Flag("module_re", str),
    "xla_dump_hlo_module_re": Flag("module_re", str),
    "dump_as_text": Flag("as_text", _bool),
    "xla_dump_hlo_as_text": Flag("as_text", _bool),
    "dump_as_dot": Flag("as_dot", _bool),
    "xla_dump_hlo_as_dot": Flag("as_dot", _bool),
    "dump_as_html": Flag("as_html", _bool),
    "xla_dump_hlo_as_html": Flag("as_html", _bool),
    "xla_force_host_platform_device_count": Flag("device_count", _count),
    "explain_recompiles": Flag("explain_recompiles", _bool),
    "explain_cache_misses": Flag("explain_cache_misses", _bool),
    "flush_denormals": Flag("flush_denormals", _bool),  # XLA:CPU always flushes; no XLA flag
}

_reported: set[str] = set()


class FlagError(MinixlaError, ValueError):
    """A malformed or unknown flag."""


def read_flags(minixla_flags: str | None = None, xla_flags: str | None = None) -> dict:
    """The settings the two variables give (defaults: the environment), by setting name."""
    xla = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    own = os.environ.get("MINIXLA_FLAGS", "") if minixla_flags is None else minixla_flags
    settings: dict = {}
    for source, text in (("XLA_FLAGS", xla), ("MINIXLA_FLAGS", own)):
        for word in shlex.split(text):
            name, has_value, value = word.lstrip("-").partition("=")
            flag = FLAGS.get(name)
            if flag is None:
                if source == "MINIXLA_FLAGS" and not name.startswith("xla_"):
                    known = ", ".join("--" + n for n in FLAGS if not n.startswith("xla_"))
                    raise FlagError(
                        f"unknown MINIXLA_FLAGS flag --{name} (known: {known}, "
                        f"and XLA's spellings of them)"
                    )
                _report_ignored(name, source)
                continue
            if flag.read is not _bool and not has_value:
                raise FlagError(f"{source}: --{name} needs a value (--{name}=...)")
            try:
                settings[flag.setting] = flag.read(value)
            except ValueError as exc:
                raise FlagError(f"{source}: --{name}: {exc}") from None
    return settings


def _report_ignored(name: str, source: str) -> None:
    if name in _reported:
        return
    _reported.add(name)
    warnings.warn(f"{source}: --{name} has no meaning in minixla and is ignored", stacklevel=3)


def host_device_count() -> int:
    """--xla_force_host_platform_device_count (default 1)."""
    return read_flags().get("device_count", 1)


__all__ = ["FLAGS", "Flag", "FlagError", "host_device_count", "read_flags"]
