"""The backend registry: backends are found by name and imported only when first asked for.

A backend is a factory `(module: HloModule, options: dict) -> Executable`, plus an optional
`available() -> (bool, reason)` check. Built-in backends are listed in `_BUILTIN`; third parties
register with `register(name, factory)` or through the `minixla.backends` entry-point group
(the entry point loads to such a factory, or to an object with `compile` and `available`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable

from ..errors import MinixlaError

_BUILTIN = {
    "interpreter": "minixla.backends.interpreter:BACKEND",
    "cpu": "minixla.backends.cpu:BACKEND",
    "cuda": "minixla.backends.cuda:BACKEND",
}
ENTRY_POINT_GROUP = "minixla.backends"


class BackendError(MinixlaError):
    """An unknown or unavailable backend."""


@dataclass
class Backend:
    name: str
    compile: Callable[..., Any]  # (module, options) -> Executable
    available: Callable[[], tuple[bool, str]] = lambda: (True, "")
    pipeline: Callable[[], Any] | None = None  # the backend's own pass pipeline
    options: tuple[str, ...] | None = None  # compile options it reads; None: not checked
    # A persistent program cache keyed on the module before the passes (the cpu's:
    # cpu/programs.py): load(key, module, options) -> Executable | None and
    # store(key, executable, options).
    programs: Any = None


_registry: dict[str, Backend | str] = dict(_BUILTIN)
_entry_points_loaded = False


def register(name: str, factory, *, available=None, pipeline=None) -> None:
    """Registers a backend: `factory(module, options) -> Executable`, or a Backend object."""
    if isinstance(factory, Backend):
        _registry[name] = factory
        return
    if not callable(factory):
        raise TypeError(f"backend {name!r}: factory must be callable")
    _registry[name] = Backend(name, factory, available or (lambda: (True, "")), pipeline)


def unregister(name: str) -> None:
    _registry.pop(name, None)


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _registry:
            _registry[ep.name] = f"{ep.value}"


def _resolve(name: str) -> Backend:
    entry = _registry.get(name)
    if entry is None:  # entry points never replace a registered name: scan them only now
        _load_entry_points()
        entry = _registry.get(name)
    if entry is None:
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(names())}")
    if isinstance(entry, Backend):
        return entry
    module_name, _, attr = entry.partition(":")
    try:
        target = (
            getattr(importlib.import_module(module_name), attr)
            if attr
            else importlib.import_module(module_name)
        )
    except (ImportError, AttributeError) as exc:
        raise BackendError(f"backend {name!r} cannot be loaded: {exc}") from None
    if isinstance(target, Backend):
        backend = target
    elif hasattr(target, "compile"):
        backend = Backend(
            name,
            target.compile,
            getattr(target, "available", lambda: (True, "")),
            getattr(target, "pipeline", None),
        )
    else:
        backend = Backend(name, target)
    _registry[name] = backend
    return backend


def names() -> list[str]:
    _load_entry_points()
    return sorted(_registry)


def get(name: str) -> Backend:
    """The backend called `name`; raises BackendError when unknown or unavailable."""
    backend = _resolve(name)
    ok, reason = backend.available()
    if not ok:
        raise BackendError(f"backend {name!r} is not available: {reason}")
    return backend


def available() -> dict[str, str | bool]:
    """Backend name -> True when usable, else a one-line reason why not."""
    out: dict[str, str | bool] = {}
    for name in names():
        try:
            ok, reason = _resolve(name).available()
        except BackendError as exc:
            ok, reason = False, str(exc)
        out[name] = True if ok else reason
    return out


def flush_denormals_requested(options: dict) -> bool:
    """The `flush_denormals` compile option, else the MINIXLA_FLAGS flag (reference/denormals.py
    flushes)."""
    from ..passes.flags import read_flags
    from ..reference.denormals import OPTION

    if OPTION in options:
        return bool(options[OPTION])
    return bool(read_flags().get(OPTION, False))
