"""`minixla graph FILE.hlo -o OUT.{dot,svg,html}`: draw a module (text/graph.py draws it).

`--format` picks the drawing (else the suffix of `-o`), `--pass NAME` draws the module right
after that pass of the backend's pipeline, `--graphviz` uses Graphviz's `dot` for SVG and HTML.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..text.graph import module_to_dot, module_to_html, module_to_svg
from .common import ToolError, add_lenient_flag, default_backend, load_module


class _Reached(Exception):
    """Raised right after the requested pass has run, to stop the pipeline there."""


class _StopAfter:
    def __init__(self, inner):
        self.inner, self.name = inner, inner.name

    def run(self, module, *args) -> bool:
        self.inner.run(module, *args)
        raise _Reached


def _wrap(pipeline, name: str) -> bool:
    """Replaces the first pass (or nested pipeline) called `name` with a _StopAfter."""
    for i, item in enumerate(getattr(pipeline, "passes", [])):
        if item.name == name:
            pipeline.passes[i] = _StopAfter(item)
            return True
        if _wrap(item, name):
            return True
    return False


def _leaf_names(pipeline) -> list[str]:
    items = getattr(pipeline, "passes", None)
    return [pipeline.name] if items is None else [n for p in items for n in _leaf_names(p)]


def run_until(module, pass_name: str, backend: str) -> None:
    """Runs `backend`'s pipeline on `module` up to and including the first run of `pass_name`."""
    from .. import backends
    from ..passes.base import run_pipeline

    try:
        factory = backends.get(backend).pipeline
    except backends.BackendError as exc:
        raise ToolError(f"--pass needs a pipeline: {exc}") from None
    if factory is None:
        raise ToolError(
            f"--pass needs a pipeline, and backend {backend!r} has none yet "
            f"(choose one with --backend)"
        )
    pipeline = factory()
    if not _wrap(pipeline, pass_name):
        names = ", ".join(dict.fromkeys(_leaf_names(pipeline)))
        raise ToolError(
            f"no pass {pass_name!r} in the {backend} pipeline; "
            + (f"its passes: {names}" if names else "it has no passes yet")
        )
    try:
        run_pipeline(pipeline, module)
    except _Reached:
        pass


# -- the command ------------------------------------------------------------------------------
FORMATS = ("dot", "svg", "html")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO or StableHLO text file, or - for stdin")
    add_lenient_flag(parser)
    parser.add_argument(
        "-o", "--output", metavar="OUT", help="OUT.dot, OUT.svg or OUT.html (default: stdout)"
    )
    parser.add_argument(
        "--format",
        metavar="FORMAT",
        help="dot, svg or html (default: the -o name's suffix, else dot)",
    )
    parser.add_argument(
        "--graphviz",
        action="store_true",
        help="lay SVG and HTML out with Graphviz's dot instead of the built-in layered layout",
    )
    parser.add_argument(
        "--expand", action="store_true", help="draw constants and parameters as nodes of their own"
    )
    parser.add_argument(
        "--pass",
        dest="pass_name",
        metavar="NAME",
        help="draw the module after the backend's pipeline ran up to this pass",
    )
    parser.add_argument(
        "--backend", default=None, help="whose pipeline --pass runs (default: cpu when available)"
    )
    parser.add_argument("--no-verify", action="store_true", help="do not verify the input")


def output_format(fmt: str | None, output: str | None) -> str:
    """--format when given, else the output file's suffix, else DOT."""
    if fmt is not None:
        if fmt.lower() not in FORMATS:
            raise ToolError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
        return fmt.lower()
    if not output:
        return "dot"
    suffix = Path(output).suffix.lstrip(".").lower()
    if suffix not in FORMATS:
        raise ToolError(
            f"cannot tell the format of {output}: use a .dot, .svg or .html name, or --format"
        )
    return suffix


def main(args) -> int:
    fmt = output_format(args.format, args.output)
    # `-` reads stdin: `minixla opt x.hlo -p dce | minixla graph - -o g.svg`
    module = load_module(args.file, verify=not args.no_verify, strict=not args.lenient)
    if args.pass_name:
        run_until(module, args.pass_name, args.backend or default_backend())
    if fmt == "html":
        text = module_to_html(module, expand=args.expand, use_dot=args.graphviz)
    elif fmt == "svg":
        text = module_to_svg(module, expand=args.expand, use_dot=args.graphviz)
    else:
        text = module_to_dot(module, expand=args.expand)
    if not args.output:
        print(text, end="")
        return 0
    Path(args.output).write_text(text)
    return 0
