"""`minixla run FILE.hlo`: compile a module, run it on given or seeded random inputs, optionally
compare against another backend and time it (XLA's run_hlo_module)."""

from __future__ import annotations

import argparse
import time

import numpy as np

from .common import ToolError, add_lenient_flag, bounded, default_backend, load_module


def _limits(args) -> dict:
    limit = args.max_while_iterations
    return {} if limit is None else {"max_while_iterations": limit}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO or StableHLO text file ('-' reads stdin)")
    parser.add_argument(
        "--backend",
        default=None,
        help="backend to run on (default: cpu when available, else interpreter)",
    )
    parser.add_argument(
        "--inputs",
        metavar="FILE.npz",
        help="arguments arg0, arg1, ... (default: seeded random inputs)",
    )
    parser.add_argument("--seed", type=bounded(int, 0), default=0, help="seed for random inputs")
    parser.add_argument(
        "--compare",
        nargs="?",
        const="interpreter",
        metavar="BACKEND",
        help="check the results against BACKEND (default: interpreter)",
    )
    parser.add_argument("--rtol", type=bounded(float, 0.0), default=1e-5)
    parser.add_argument("--atol", type=bounded(float, 0.0), default=1e-5)
    parser.add_argument("--iterations", type=bounded(int, 1), default=1, help="runs to time")
    add_lenient_flag(parser)
    parser.add_argument(
        "--print",
        action="store_true",
        dest="print_results",
        help="print the full results (default: a summary)",
    )
    parser.add_argument("--metrics", action="store_true", help="print the metrics report")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.add_argument(
        "--max-while-iterations",
        type=bounded(int, 1),
        default=None,
        metavar="N",
        help="fail a while loop that runs more than N iterations",
    )


def load_inputs(path: str, count: int) -> list:
    try:
        data = np.load(path)
    except (OSError, ValueError) as exc:
        raise ToolError(f"cannot read inputs {path}: {exc}") from None
    missing = [f"arg{i}" for i in range(count) if f"arg{i}" not in data]
    if missing:
        raise ToolError(f"{path} lacks {', '.join(missing)}")
    return [data[f"arg{i}"] for i in range(count)]


def flatten(result) -> list[np.ndarray]:
    if isinstance(result, tuple):
        return [leaf for item in result for leaf in flatten(item)]
    return [np.asarray(result)]


def compare_results(got, want, rtol: float, atol: float) -> str | None:
    """None when they match; else one line naming the first bad output and its max error."""
    got, want = flatten(got), flatten(want)
    for i, (a, b) in enumerate(zip(got, want)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"output {i}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}"
        if a.dtype.kind in "biu":
            if not np.array_equal(a, b):
                return f"output {i}: {int(np.sum(a != b))} elements differ"
            continue
        a64, b64 = (
            a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64),
        )
        nan_ok = np.isnan(a64) == np.isnan(b64)
        finite = ~np.isnan(b64)
        error = np.abs(a64 - b64, where=finite, out=np.zeros(a64.shape))
        error = np.where(np.isinf(b64) & (a64 == b64), 0, error)
        bad = ~nan_ok | (error > atol + rtol * np.abs(np.where(np.isinf(b64), 0, b64)))
        if np.any(bad):
            return (
                f"output {i}: max abs error {np.nanmax(np.where(bad, error, 0)):.3g} "
                f"({int(np.sum(bad))} of {a.size} elements out of tolerance)"
            )
    return None


def summarize(result) -> str:
    lines = []
    for i, leaf in enumerate(flatten(result)):
        text = f"out{i}: {leaf.dtype}{list(leaf.shape)}"
        if leaf.size and leaf.dtype.kind in "fciu" or leaf.dtype.kind == "V":
            values = leaf.astype(np.float64) if leaf.dtype.kind != "c" else np.abs(leaf)
            text += (
                f" min={np.nanmin(values):.6g} max={np.nanmax(values):.6g} "
                f"mean={np.nanmean(values):.6g}"
            )
        lines.append(text)
    return "\n".join(lines)


def main(args) -> int:
    from ..backends.compile import compile
    from ..runtime.inputs import fresh_copies, random_arguments
    from .progress import Progress

    progress = Progress.for_command(("parse", "passes", "codegen", "run"), quiet=args.quiet)
    with progress.phase("parse"):
        module = load_module(args.file, strict=not args.lenient)
    backend = args.backend or default_backend()
    start = time.perf_counter()
    with progress.compile():
        executable = compile(module, backend=backend, **_limits(args))
    compile_seconds = time.perf_counter() - start
    count = len(module.entry.parameters)
    inputs = load_inputs(args.inputs, count) if args.inputs else random_arguments(module, args.seed)
    times = []
    result = None
    donates = bool(module.input_output_alias or module.buffer_donors)
    with progress.phase("run"):
        for _ in range(args.iterations):
            run_inputs = fresh_copies(inputs) if donates else inputs  # donated ones are consumed
            start = time.perf_counter()
            result = executable(*run_inputs)
            times.append(time.perf_counter() - start)
    print(
        f"{module.name} on {backend}: compiled in {compile_seconds * 1e3:.1f} ms, "
        f"ran in {np.median(times) * 1e3:.3f} ms (median of {len(times)})"
    )
    if args.print_results:
        with np.printoptions(threshold=1000, linewidth=100):
            for i, leaf in enumerate(flatten(result)):
                print(f"out{i} = {leaf!r}")
    else:
        print(summarize(result))
    if args.compare:
        reference = compile(module, backend=args.compare, **_limits(args))(*fresh_copies(inputs))
        problem = compare_results(result, reference, args.rtol, args.atol)
        if problem:
            raise ToolError(f"mismatch against {args.compare}: {problem}")
        print(f"matches {args.compare} (rtol={args.rtol}, atol={args.atol})")
    if args.metrics:
        from ..runtime.metrics import report

        print(report())
    return 0
