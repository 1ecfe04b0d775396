"""Instructions the verifier accepts but no backend runs, refused when compiling.

XLA's default (not layout-sensitive) HloVerifier lets a bitcast change the byte size and
verifies structured-sparse convolutions, and so does minixla's. Running them would give a wrong
answer rather than an error, so `minixla.compile` raises UnsupportedError naming the instruction
before any pass or backend sees the module:
- a bitcast reinterprets its operand's buffer: a result whose physical byte size (tiles, tail
  padding and element packing included) differs would read past the buffer or drop part of it;
- a convolution with a sparsity_config needs its compressed operands expanded from their
  metadata, which no backend implements;
- a constant read as `{...}` has no values: XLA printed it without them.
"""

from __future__ import annotations

from ..errors import UnsupportedError, at_instruction
from ..ir import layout_math
from ..ir.module import HloModule


def _refusal(instr) -> str | None:
    if instr.opcode == "bitcast":
        source, result = instr.operand(0).shape, instr.shape
        if (
            source.is_array
            and result.is_array
            and min((*source.dims, *result.dims), default=0) >= 0
        ):  # no `?` dims
            before, after = layout_math.shape_bytes(source), layout_math.shape_bytes(result)
            if before != after:
                return (
                    f"reinterprets the {before}-byte buffer of {source} as {result}, "
                    f"{after} bytes: a bitcast must keep the byte size to run"
                )
    if instr.opcode == "constant" and instr.elided:
        return (
            "its values were not printed ({...}: XLA elides constants of more than ten "
            "elements); dump the module with --xla_dump_large_constants, or print it with "
            "print_large_constants, to run it"
        )
    if instr.opcode == "convolution" and "sparsity_config" in instr.attrs:
        return "structured-sparse convolution (sparsity_config) is not supported by any backend"
    return None


def check_runnable(module: HloModule) -> None:
    """Raises UnsupportedError for the first instruction no backend can run faithfully."""
    for instr in module.all_instructions():
        reason = _refusal(instr)
        if reason is not None:
            raise at_instruction(UnsupportedError(f"{instr.opcode} %{instr.name}: {reason}"), instr)
