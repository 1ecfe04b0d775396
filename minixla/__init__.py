"""minixla: a small HLO compiler in Python."""
from .errors import (ExecutionError, HloParseError, MinixlaError, ShapeError, UnsupportedError,
                     VerificationError)
from .ir import HloComputation, HloInstruction, HloModule, Layout, Shape
from .ir.verifier import verify
from .runtime import Executable, compile, register_custom_call
from .runtime.metrics import metrics
from .text import parse_hlo_module, parse_module, parse_shape
from . import testing  # noqa: E402  (helpers for pass tests: run_pass, m, check_hlo, ...)
from .frontend import (Builder, ConcretizationError, EscapedTracerError, FrontendError,
                       FrontendIndexError, FrontendShapeError, FrontendTypeError,
                       TracerBoolConversionError, XlaOp, config, jit)
from .frontend import ops
from . import lax, nn, numpy  # noqa: E402  (NumPy-style API: `import minixla.numpy as mnp`)

__version__ = "0.1.0"

__all__ = [
    "ExecutionError", "HloComputation", "HloInstruction", "HloModule", "HloParseError", "Layout",
    "MinixlaError", "Shape", "ShapeError", "UnsupportedError", "VerificationError",
    "parse_hlo_module", "parse_module", "parse_shape", "Executable", "compile", "metrics",
    "register_custom_call", "testing", "verify",
    "Builder", "ConcretizationError", "EscapedTracerError", "FrontendError",
    "FrontendIndexError", "FrontendShapeError", "FrontendTypeError",
    "TracerBoolConversionError", "XlaOp", "config", "jit", "lax", "nn", "numpy", "ops",
]
