"""The exception hierarchy: every error minixla raises on bad input derives from MinixlaError."""


class MinixlaError(Exception):
    """Base class of all errors minixla raises for bad input or unsupported programs.

    `line`/`column` locate the error in the source text when known (for errors about an
    instruction: where the instruction was written); 0 when not.
    """

    line = 0
    column = 0


def at_instruction(exc: MinixlaError, instr) -> MinixlaError:
    """Gives `exc` the source location of `instr` (if the parser recorded one) unless it has one."""
    location = getattr(instr, "location", None)
    if location and not exc.line:
        exc.line, exc.column = location
    return exc


class HloParseError(MinixlaError, ValueError):
    """Malformed HLO text. Carries the 1-based line and column and quotes the line with a caret."""

    def __init__(self, message: str, line: int = 0, column: int = 0, source_line: str = ""):
        self.reason = message
        self.line = line
        self.column = column
        self.source_line = source_line
        text = f"{line}:{column}: {message}" if line else message
        if source_line:
            text += "\n" + source_line + "\n" + " " * max(column - 1, 0) + "^"
        super().__init__(text)


class VerificationError(MinixlaError):
    """An IR invariant is broken; the message names the instruction and the rule."""


class ShapeError(MinixlaError, ValueError):
    """Operands or attributes that no shape rule accepts."""


class UnsupportedError(MinixlaError, NotImplementedError):
    """An op, dtype or feature that a component does not implement (named in the message)."""


class ExecutionError(MinixlaError):
    """Bad arguments to an executable, or a failure while running one."""


class ResourceExhaustedError(MinixlaError, MemoryError):
    """A program that needs more memory than is allowed (the message gives the byte count)."""
