"""The `minixla` command: one subcommand per tool module in minixla/tools/.

Each tool module provides `add_arguments(parser)` and `main(args) -> int`. Errors a user can cause
(missing file, bad HLO, mismatch) print one line to stderr and exit 1; bad flags exit 2; a
traceback only with --debug.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from .errors import MinixlaError
from .version import __version__

# subcommand -> (tool module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("minixla.tools.run", "compile and run an HLO module (XLA's run_hlo_module)"),
    "opt": ("minixla.tools.opt", "run passes over an HLO module and print it (XLA's hlo-opt)"),
    "graph": ("minixla.tools.graph", "draw an HLO module as DOT, SVG or HTML"),
    "diff": ("minixla.tools.diff", "structural diff of two HLO modules"),
    "cache": ("minixla.tools.cache", "inspect or clear the compilation cache"),
    "backends": ("minixla.tools.backends", "list backends and whether they are available"),
    "bisect": ("minixla.tools.bisect", "find the pass and rewrite after which results change"),
    "reduce": ("minixla.tools.reduce", "shrink an HLO module while a test still fails"),
    "explain-fusion": (
        "minixla.tools.explain_fusion",
        "why each producer-consumer pair was fused or not",
    ),
}


def _available_commands() -> dict[str, object]:
    tools = {}
    for name, (module_name, _help) in COMMANDS.items():
        try:
            tools[name] = importlib.import_module(module_name)
        except ImportError:
            continue  # a tool whose module is not part of this build
    return tools


def build_parser(tools) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="minixla", description="minixla: a small HLO compiler")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    parser.add_argument("--version", action="version", version=f"minixla {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name, module in tools.items():
        command = sub.add_parser(name, help=COMMANDS[name][1])
        command.add_argument("--debug", action="store_true", help="show tracebacks")
        module.add_arguments(command)
    return parser


def main(argv=None) -> int:
    tools = _available_commands()
    args = build_parser(tools).parse_args(argv)
    if args.command is None:
        build_parser(tools).print_usage(sys.stderr)
        return 2
    try:
        return int(tools[args.command].main(args) or 0)
    except (MinixlaError, OSError, ValueError) as exc:
        if args.debug:
            raise
        print(
            f"minixla {args.command}: {one_line(exc, getattr(args, 'file', None))}", file=sys.stderr
        )
        return 1
    except KeyboardInterrupt:
        return 130


def one_line(exc: BaseException, path: str | None) -> str:
    """`FILE:LINE:COL: reason` for errors that know where in the file they are (parse errors,
    and verifier and backend errors about an instruction), else the first line of the message."""
    from .errors import HloParseError

    where = "<stdin>" if path in (None, "-") else path
    if isinstance(exc, HloParseError) and exc.line:
        return f"{where}:{exc.line}:{exc.column}: {exc.reason}"
    lines = str(exc).splitlines()
    text = lines[0] if lines else type(exc).__name__
    if getattr(exc, "line", 0):
        return f"{where}:{exc.line}:{exc.column}: {text}"
    return text


if __name__ == "__main__":
    sys.exit(main())
