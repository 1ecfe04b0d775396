"""`minixla.compile`: text or module in, Executable out, through the named backend."""
from __future__ import annotations

import time

from ..backends import get as get_backend
from ..ir.module import HloModule
from .metrics import record_phase

DEFAULT_BACKEND = "interpreter"


def compile(module_or_text, backend: str | None = None, **options):
    """Compiles an HloModule (or HLO text, parsed and verified first) for `backend`."""
    if isinstance(module_or_text, str):
        from ..text.parser import parse_hlo_module
        start = time.perf_counter()
        module = parse_hlo_module(module_or_text)
        record_phase("parse", time.perf_counter() - start)
    elif isinstance(module_or_text, HloModule):
        module = module_or_text
    else:
        raise TypeError(f"compile expects an HloModule or HLO text, got "
                        f"{type(module_or_text).__name__}")
    name = backend or DEFAULT_BACKEND
    start = time.perf_counter()
    executable = get_backend(name).compile(module, options)
    record_phase(f"backend.{name}", time.perf_counter() - start)
    return executable
