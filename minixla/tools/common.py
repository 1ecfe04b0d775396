"""Helpers shared by the command-line tools."""
from __future__ import annotations

from pathlib import Path

from ..errors import MinixlaError
from ..ir.module import HloModule


class ToolError(MinixlaError):
    """A bad command-line input: the message is printed as the tool's one-line error."""


def load_module(path: str, *, verify: bool = True) -> HloModule:
    """HLO or StableHLO/MHLO text from a file, or from stdin when `path` is `-`."""
    from ..text import parse_module
    if path == "-":
        import sys
        return parse_module(sys.stdin.read(), verify=verify)
    file = Path(path)
    if not file.exists():
        raise ToolError(f"no such file: {path}")
    if file.is_dir():
        raise ToolError(f"{path} is a directory, not an HLO file")
    try:
        text = file.read_text()
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not a text file") from None
    return parse_module(text, verify=verify)


def default_backend() -> str:
    from ..backends import available
    return "cpu" if available().get("cpu") is True else "interpreter"
