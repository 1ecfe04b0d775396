"""The in-process compile memo: the same program, backend, options and flags compiled again
returns a new Executable sharing the first one's compiled code, in microseconds.

A key is made of the program's text (hashed; an HloModule is printed first), the backend's
name, every option given (`key` refuses values it cannot print faithfully, such as objects,
and any dump request, whose files are a side effect), and every $MINIXLA_* variable plus
$XLA_FLAGS, which choose passes and code too. `parts` keeps what the key was made of, so a
persistent cache can add its own environment and explain a miss. Warnings the first compile
raised are raised again on every hit, as a fresh compile would.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass

from ..ir.module import HloModule
from ..reference.custom_call import registry_generation
from ..reference.random_stream import RandomStream
from ..passes.base import DUMP_OPTIONS, DumpOptions

MAX_ENTRIES = 64  # executables hold their arenas: keep the most recently used few

_lock = threading.Lock()
_memo: OrderedDict[str, tuple[object, list]] = OrderedDict()


class Unkeyable(Exception):
    """An option value that has no faithful text form."""


@dataclass(frozen=True)
class CompileKey:
    digest: str
    parts: dict  # program, backend, options, environment variables: all plain JSON values
    name: str  # the module's name when known (for explaining misses), else ""


def key(program, backend: str, options: dict) -> CompileKey | None:
    """The memo key of compiling `program` (text or HloModule) for `backend` with `options`;
    None when the compile should not be memoized (unprintable options, dumps requested)."""
    if any(name in options for name in DUMP_OPTIONS) or DumpOptions.from_flags().dump_to:
        return None
    if isinstance(program, HloModule):
        text, name = program.to_text(), program.name
    elif isinstance(program, str):
        text, name = program, ""
    else:
        return None
    try:
        given = {k: plain(v) for k, v in sorted(options.items())}
    except Unkeyable:
        return None
    variables = {
        k: v for k, v in sorted(os.environ.items()) if k.startswith("MINIXLA_") or k == "XLA_FLAGS"
    }
    parts = {
        "program": hashlib.sha256(text.encode()).hexdigest()[:32],
        "backend": backend,
        "options": given,
        "variables": variables,
        "custom_calls": registry_generation(),
    }
    encoded = json.dumps(parts, sort_keys=True).encode()
    return CompileKey(hashlib.sha256(encoded).hexdigest()[:32], parts, name)


def plain(value):
    """`value` as JSON-able data that names it exactly; Unkeyable for anything else."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (list, tuple)):
        return [type(value).__name__, *(plain(v) for v in value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"dict": {k: plain(v) for k, v in sorted(value.items())}}
    raise Unkeyable(repr(value))


def lookup(compile_key: CompileKey):
    """A new Executable sharing the memoized one's compiled code, or None."""
    with _lock:
        found = _memo.get(compile_key.digest)
        if found is None:
            return None
        _memo.move_to_end(compile_key.digest)
    original, raised = found
    warn_again(raised)
    from .metrics import count

    count("compile.memo.hit")
    return share(original)


def warn_again(raised) -> None:
    """Raises recorded warnings (warnings.WarningMessage) again, through the current filters."""
    for w in raised:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def share(executable):
    """A new Executable running the same compiled program, with its own counters and its own
    random stream, as a fresh compile would have."""
    twin = copy.copy(executable)
    twin.options = dict(executable.options)
    twin.executions, twin.execution_seconds = 0, 0.0
    twin.random_stream = RandomStream()
    if hasattr(executable, "kernel_outcomes"):  # a backend's report of where kernels came from
        twin.kernel_outcomes = ["memory"] * len(executable.kernel_outcomes)
    return twin


def remember(compile_key: CompileKey, executable, raised: list = ()) -> None:
    from .executable import Executable

    if type(executable) is not Executable:  # multi-device executables hold device state
        return
    with _lock:
        _memo[compile_key.digest] = (executable, list(raised))
        _memo.move_to_end(compile_key.digest)
        while len(_memo) > MAX_ENTRIES:
            _memo.popitem(last=False)


def clear() -> None:
    with _lock:
        _memo.clear()
