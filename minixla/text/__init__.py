"""HLO text: lexer, parser and printer for XLA's syntax; StableHLO/MHLO (MLIR) text is read too."""

from .parser import parse_hlo_module, parse_shape
from ..ir.printer import computation_to_text, instruction_to_text, module_to_text


def parse_module(text: str, *, verify: bool = True, strict: bool = True):
    """HLO text or StableHLO/MHLO MLIR text (told apart by how it starts) into an HloModule.

    `strict=False` keeps HLO attributes an opcode does not take (see parse_hlo_module).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_module expects str, got {type(text).__name__}")
    from .mlir import looks_like_mlir

    if looks_like_mlir(text):
        from .stablehlo import parse_mlir_module

        return parse_mlir_module(text, verify=verify)
    return parse_hlo_module(text, verify=verify, strict=strict)


__all__ = [
    "parse_hlo_module",
    "parse_module",
    "parse_shape",
    "module_to_text",
    "computation_to_text",
    "instruction_to_text",
]
