"""Helpers shared by the command-line tools."""

from __future__ import annotations

from pathlib import Path

from ..errors import MinixlaError
from ..ir.module import HloModule


class ToolError(MinixlaError):
    """A bad command-line input: the message is printed as the tool's one-line error."""


def bounded(kind, low, high=None):
    """An argparse `type` that also range-checks: `--iterations 0` is a usage error."""
    import argparse

    def convert(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if value < low or (high is not None and value > high) or value != value:
            upper = f" and at most {high}" if high is not None else ""
            raise argparse.ArgumentTypeError(
                f"{text} is out of range: must be at least {low}{upper}"
            )
        return value

    convert.__name__ = kind.__name__
    return convert


def add_lenient_flag(parser) -> None:
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="keep attributes an opcode does not take (reported on stderr) instead of failing",
    )


def load_module(path: str, *, verify: bool = True, strict: bool = True) -> HloModule:
    """HLO or StableHLO/MHLO text from a file, or from stdin when `path` is `-`.

    A lenient (`strict=False`) load reports the attributes it kept without knowing on stderr.
    """
    module = _parse(_read(path), verify, strict)
    if module.unknown_attributes:
        import sys

        print(
            f"{path}: kept {len(module.unknown_attributes)} unknown attribute(s): "
            + "; ".join(module.unknown_attributes),
            file=sys.stderr,
        )
    return module


def _parse(text: str, verify: bool, strict: bool) -> HloModule:
    from ..text import parse_module

    return parse_module(text, verify=verify, strict=strict)


def _read(path: str) -> str:
    if path == "-":
        import sys

        return sys.stdin.read()
    file = Path(path)
    if not file.exists():
        raise ToolError(f"no such file: {path}")
    if file.is_dir():
        raise ToolError(f"{path} is a directory, not an HLO file")
    try:
        return file.read_text()
    except UnicodeDecodeError:
        raise ToolError(f"{path} is not a text file") from None


def default_backend() -> str:
    from ..backends import available

    return "cpu" if available().get("cpu") is True else "interpreter"
