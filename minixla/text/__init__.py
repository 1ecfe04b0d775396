"""HLO text: lexer, parser and printer for XLA's syntax."""
from .parser import parse_hlo_module, parse_shape
from .printer import computation_to_text, instruction_to_text, module_to_text

__all__ = ["parse_hlo_module", "parse_shape", "module_to_text", "computation_to_text",
           "instruction_to_text"]
