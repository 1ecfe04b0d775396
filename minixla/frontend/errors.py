"""Frontend errors: every message starts with the user's `file:line`.

The location is the innermost stack frame outside the minixla package, so a shape mismatch deep
inside `mnp.matmul` or the builder names the line of the user's program that asked for it.
"""

from __future__ import annotations

import os
import sys

from ..errors import MinixlaError, ShapeError

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_location() -> tuple[str, int] | None:
    """(filename, line) of the innermost frame whose code lives outside the minixla package."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR):
            return filename, frame.f_lineno
        frame = frame.f_back
    return None


class FrontendError(MinixlaError):
    """Bad input to the builder, jit or the NumPy-style API; `location` is (file, line)."""

    def __init__(self, message: str, location: tuple[str, int] | None = None):
        self.reason = message
        self.location = location or user_location()
        prefix = f"{self.location[0]}:{self.location[1]}: " if self.location else ""
        super().__init__(prefix + message)


class FrontendShapeError(FrontendError, ShapeError):
    """Operand shapes that no rule accepts (including NumPy's broadcasting rules)."""


class FrontendTypeError(FrontendError, TypeError):
    """An element type an op does not take, or a value that cannot become an array."""


class FrontendIndexError(FrontendError, IndexError):
    """A static index out of range, or an index kind that is not supported."""


class ConcretizationError(FrontendError, TypeError):
    """A traced value used where Python needs a concrete one (int(), float(), np.asarray)."""


class TracerBoolConversionError(ConcretizationError):
    """Python control flow (`if`, `while`, `and`) on a traced value."""


class EscapedTracerError(FrontendError):
    """A traced value used outside the trace (or sub-computation) that produced it."""
