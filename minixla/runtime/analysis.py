"""What an executable reports about itself: `memory_analysis()` and `cost_analysis()`.

Both read the module the backend runs. Memory comes from its buffer assignment (the module is
scheduled by the backend's pipeline); a backend that runs an unscheduled module (the
interpreter) is measured on a scheduled copy made with copy-insertion and the memory-aware
scheduler, i.e. the memory the same program needs when it runs in that order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class MemoryAnalysis:
    """JAX's CompiledMemoryStats fields, plus the scheduled peaks.

    temp_size_in_bytes: bytes of temporary storage the executable allocates (arena slots that
    hold neither a parameter, a constant nor an output); argument/output_size_in_bytes: entry
    parameters and results; alias_size_in_bytes: parameter storage that is also an output;
    generated_code_size_in_bytes: size of the generated code (source text for Python/Numba
    backends); peak_memory_in_bytes: most bytes live at once (parameters and constants
    throughout, outputs from their definition); temp_peak_in_bytes: most temporary bytes live
    at once, which `memory_limit_bytes` bounds."""

    temp_size_in_bytes: int
    argument_size_in_bytes: int
    output_size_in_bytes: int
    alias_size_in_bytes: int
    generated_code_size_in_bytes: int
    peak_memory_in_bytes: int
    temp_peak_in_bytes: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def memory_analysis(
    assignment,
    *,
    generated_code_size: int = 0,
    extra_temp_bytes: int = 0,
    own_arena_bytes: int | None = None,
) -> MemoryAnalysis:
    """From a BufferAssignment; `extra_temp_bytes` is storage the backend adds on its own,
    `own_arena_bytes` the whole temporary arena of a backend that plans it itself."""
    from ..passes.dataflow import leaf_bytes

    module = assignment.module
    arguments = sum(
        leaf_bytes(leaf) for p in module.entry.parameters for _, leaf in p.shape.leaves()
    )
    outputs = sum(leaf_bytes(leaf) for _, leaf in module.entry.root.shape.leaves())
    aliased = sum(a.size for a in assignment.allocations if a.is_aliased)
    temps = sum(a.size for a in assignment.allocations if a.in_arena and not a.maybe_live_out)
    if own_arena_bytes is not None:
        temps, extra_temp_bytes = own_arena_bytes, 0
    return MemoryAnalysis(
        temps + extra_temp_bytes,
        arguments,
        outputs,
        aliased,
        generated_code_size,
        assignment.peak_memory_bytes,
        assignment.temp_peak_bytes,
    )


def scheduled_copy(module):
    """A copy of `module` with the copies and schedule buffer assignment needs."""
    from ..passes.base import get_pass

    copy = module.clone()
    for name in ("copy-insertion", "scheduling"):
        get_pass(name).run(copy)
    return copy
