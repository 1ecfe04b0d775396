"""Memory limits checked before anything is allocated.

A program whose values cannot fit is rejected at compile time with the byte count, instead of
failing later with NumPy's MemoryError (or an arena allocation that never returns). The budget
is the compile option `memory_budget_bytes`, else $MINIXLA_MEMORY_BUDGET_BYTES, else the
machine's physical memory. One value over the budget fails the compile; so does a shape whose
byte size does not fit in 64 bits, whatever the budget.
"""

from __future__ import annotations

import os

from ..errors import ResourceExhaustedError
from ..ir.module import HloModule

INT64_MAX = (1 << 63) - 1


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def memory_budget(option: int | None = None) -> int | None:
    if option is not None:
        return int(option)
    configured = os.environ.get("MINIXLA_MEMORY_BUDGET_BYTES")
    return int(configured) if configured else physical_memory()


def check_sizes(module: HloModule, budget: int | None) -> None:
    """Raises ResourceExhaustedError for the first instruction whose value cannot fit."""
    for instr in module.all_instructions():
        size = instr.shape.byte_size()  # Python integers: exact, never overflowing
        if size > INT64_MAX:
            raise ResourceExhaustedError(
                f"%{instr.name}: {instr.shape.without_layout()} is {size} bytes, more than a "
                f"64-bit size can hold"
            )
        if budget is not None and size > budget:
            raise ResourceExhaustedError(
                f"%{instr.name}: {instr.shape.without_layout()} needs {size} bytes, over the "
                f"memory budget of {budget} bytes (compile option memory_budget_bytes or "
                f"$MINIXLA_MEMORY_BUDGET_BYTES)"
            )
