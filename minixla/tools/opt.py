"""`minixla opt FILE.hlo --passes dce,cse,algsimp`: run passes and print the module (hlo-opt).

`--pipeline NAME` runs a backend's own pipeline (or a pipeline registered as a pass) instead;
`--diff` prints a unified diff against the input instead of the module, `-v` prints the pass
report to stderr. `--memory-limit BYTES` runs the rematerialization pass with that limit (after
the other passes, unless they name it) and prints what it recomputed as `//` comments after the
module. FILE may be `-` for stdin. This is what the RUN lines of tests/hlo/ call.
"""

from __future__ import annotations

import argparse
import difflib
import sys

from .common import ToolError, add_lenient_flag, load_module


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO or StableHLO text file, or - for stdin")
    add_lenient_flag(parser)
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--passes",
        "-p",
        default="",
        help="comma-separated pass names, run in order (e.g. dce,cse,algsimp)",
    )
    which.add_argument(
        "--pipeline",
        metavar="NAME",
        help="a backend's pipeline (e.g. cpu) or a registered pipeline",
    )
    parser.add_argument(
        "--memory-limit",
        type=int,
        metavar="BYTES",
        default=None,
        help="rematerialize until the peak temporary memory is at most BYTES",
    )
    parser.add_argument("--diff", action="store_true", help="print a unified diff, not the module")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print the pass report to stderr"
    )
    parser.add_argument(
        "--no-verify",
        action="store_true",
        help="do not verify the input or the module between passes",
    )


def build_pipeline(args):
    from ..passes.base import PassError, make_pipeline

    if args.pipeline:
        return _named_pipeline(args.pipeline)
    names = [n.strip() for n in args.passes.split(",") if n.strip()]
    try:
        return make_pipeline(names, "opt")
    except PassError as exc:
        raise ToolError(str(exc)) from None


def _named_pipeline(name: str):
    from .. import backends
    from ..passes.base import PASSES, get_pass

    if name in backends.names():
        pipeline = backends.get(name).pipeline
        if pipeline is None:
            raise ToolError(f"backend {name!r} has no pass pipeline")
        return pipeline()
    get_pass("dce")  # loads the built-in pass registry
    if name in PASSES:
        return get_pass(name)
    with_pipelines = [b for b in backends.names() if _has_pipeline(b)]
    known = ", ".join(with_pipelines + sorted(PASSES))
    raise ToolError(f"unknown pipeline {name!r}; known: {known}")


def _has_pipeline(name: str) -> bool:
    from .. import backends

    try:
        return backends.get(name).pipeline is not None
    except backends.BackendError:
        return False


def _load(path: str, verify: bool, strict: bool = True):
    return load_module(path, verify=verify, strict=strict)


def main(args) -> int:
    from ..passes.base import DumpOptions, run_pipeline

    module = _load(args.file, not args.no_verify, not args.lenient)
    pipeline = build_pipeline(args)
    remats = []
    if args.memory_limit is not None:
        pipeline, remats = _with_memory_limit(pipeline, args.memory_limit)
    before = module.to_text()
    report = run_pipeline(
        pipeline, module, verify=not args.no_verify, dump=DumpOptions.from_flags()
    )  # MINIXLA_FLAGS / XLA_FLAGS dumps
    after = module.to_text()
    if args.diff:
        name = "<stdin>" if args.file == "-" else args.file
        sys.stdout.writelines(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                f"{name} (before)",
                f"{name} (after)",
            )
        )
    else:
        sys.stdout.write(after)
    for remat in remats:
        sys.stdout.write("".join(f"// {line}\n" for line in remat.report.lines()))
    if args.verbose:
        print(report, file=sys.stderr)
    return 0


def _with_memory_limit(pipeline, limit: int):
    from ..passes.base import Pipeline
    from ..passes.rematerialization import Rematerialization

    if limit < 0:
        raise ToolError(f"--memory-limit must be a non-negative number of bytes, got {limit}")
    remats = [
        p for p in getattr(pipeline, "passes", [pipeline]) if isinstance(p, Rematerialization)
    ]
    for remat in remats:
        remat.memory_limit_bytes = limit
    if remats:
        return pipeline, remats
    remat = Rematerialization(limit)
    return Pipeline(pipeline.name, [pipeline, remat]), [remat]
