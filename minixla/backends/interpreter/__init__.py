"""The interpreter backend: the reference evaluator (minixla/reference/) run as written.

It evaluates the module as written (no optimization passes), with XLA's semantics for every
opcode it implements; `compile` rejects modules that use an opcode it does not implement or a
custom-call target not registered for it.
"""

from __future__ import annotations

from ...errors import MinixlaError, UnsupportedError, at_instruction
from ...ir.module import HloModule
from ...reference.custom_call import lookup_custom_call
from ...runtime.executable import Executable
from .. import Backend, flush_denormals_requested
from ...reference.evaluator import Evaluator, unsupported_opcodes


def compile_module(module: HloModule, options: dict) -> Executable:
    missing = unsupported_opcodes(module)
    if missing:
        raise UnsupportedError(f"the interpreter does not implement: {', '.join(missing)}")
    for instr in module.all_instructions():
        if instr.opcode == "custom-call":
            try:
                lookup_custom_call(instr.attrs["custom_call_target"], "interpreter")
            except MinixlaError as exc:
                at_instruction(exc, instr)
                raise
    evaluator = Evaluator(
        module,
        max_while_iterations=options.get("max_while_iterations"),
        flush_denormals=flush_denormals_requested(options),
    )
    return Executable(module, "interpreter", evaluator.run, options=options)


BACKEND = Backend(
    "interpreter", compile_module, options=("max_while_iterations", "flush_denormals")
)
