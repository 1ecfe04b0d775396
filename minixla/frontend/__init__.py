"""The frontend: an XlaBuilder-style Builder, `minixla.ops`, and a JAX-like `jit` with a
NumPy-style API (`minixla.numpy`), structured control flow (`minixla.lax`) and `minixla.nn`.
See docs/frontend.md."""

from .builder import Builder, XlaOp
from .dtypes import config
from .errors import (
    ConcretizationError,
    EscapedTracerError,
    FrontendError,
    FrontendIndexError,
    FrontendShapeError,
    FrontendTypeError,
    TracerBoolConversionError,
)
from .jit import Jitted, Lowered, jit
from .tracer import Tracer

__all__ = [
    "Builder",
    "ConcretizationError",
    "EscapedTracerError",
    "FrontendError",
    "FrontendIndexError",
    "FrontendShapeError",
    "FrontendTypeError",
    "Jitted",
    "Lowered",
    "Tracer",
    "TracerBoolConversionError",
    "XlaOp",
    "config",
    "jit",
]
