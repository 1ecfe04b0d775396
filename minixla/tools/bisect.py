"""`minixla bisect FILE.hlo --backend cpu`: the first pass (and rewrite) that breaks a program.

The backend's pipeline (the CPU pipeline for the interpreter, which has none) runs pass by pass
on a copy of the module, keeping a snapshot after every pass that changed it. Each snapshot is
checked on the same seeded inputs against the interpreter's results for the unoptimized module:

- `--backend interpreter`: the interpreter runs each snapshot; the first one whose results
  differ (or that fails verification or cannot run) names the guilty pass.
- any other backend: the backend compiles each snapshot with no passes of its own. If even the
  unoptimized module disagrees, a kernel is wrong and the first wrong instruction is named;
  otherwise a binary search finds a pass after which the backend stops matching.

When the guilty pass is rule-based (it rewrites through passes/patterns.py), it is rerun from
its input with the engine stopped after k rule applications, and a binary search on k finds the
single rewrite that breaks the program. The report ends with that step's before/after diff.
Exit status follows `minixla diff`: 0 when nothing breaks, 1 when a culprit is reported.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from ..errors import MinixlaError
from .common import ToolError, load_module


@dataclass
class PassStep:
    """One pass run that changed the module: its label, the pass and the module around it."""

    label: str
    pass_: object
    before: object
    after: object | None  # None: the pass raised `error`
    error: str = ""


class _Recorded:
    """Stands in for a leaf pass inside the pipeline tree and snapshots what it changed."""

    def __init__(self, inner, label: str, recorder: "_Recorder"):
        self.inner, self.label, self.recorder = inner, label, recorder
        self.name = inner.name
        self.runs = 0

    def run(self, module) -> bool:
        self.runs += 1
        label = f"{self.label} (run {self.runs})"
        before = self.recorder.current
        try:
            changed = bool(self.inner.run(module))
        except Exception as exc:  # noqa: BLE001 - a crashing pass is a finding, not a crash
            self.recorder.steps.append(
                PassStep(label, self.inner, before, None, f"{type(exc).__name__}: {exc}")
            )
            raise _StopRecording from None
        self.recorder.runs += 1
        if changed:
            self.recorder.current = module.clone()
            self.recorder.steps.append(PassStep(label, self.inner, before, self.recorder.current))
        return changed


class _StopRecording(Exception):
    pass


@dataclass
class _Recorder:
    current: object
    steps: list[PassStep] = field(default_factory=list)
    runs: int = 0


def record_steps(module, pipeline) -> tuple[list[PassStep], int]:
    """Runs `pipeline` (a pass or a pipeline, whose leaf passes get wrapped in place) on a copy
    of `module`; returns the steps that changed it and the number of pass runs."""
    from ..passes.base import Pipeline, run_pipeline

    if not hasattr(pipeline, "passes"):
        pipeline = Pipeline(pipeline.name, [pipeline])
    recorder = _Recorder(module.clone())
    _wrap(pipeline, pipeline.name, recorder)
    try:
        run_pipeline(pipeline, module.clone(), verify=False)
    except _StopRecording:
        pass
    return recorder.steps, recorder.runs


def _wrap(item, path: str, recorder: _Recorder) -> None:
    for i, inner in enumerate(item.passes):
        if hasattr(inner, "passes"):  # a nested Pipeline or FixedPoint
            _wrap(inner, f"{path}/{inner.name}", recorder)
        else:
            item.passes[i] = _Recorded(inner, f"{path}/{inner.name}", recorder)


# -- checking a module against the reference ---------------------------------------------------


class Oracle:
    """The interpreter's results for the unoptimized module, and checks of other modules."""

    def __init__(self, module, backend: str, seed: int, rtol: float, atol: float):
        from ..runtime.inputs import random_arguments

        self.backend, self.rtol, self.atol = backend, rtol, atol
        try:
            self.inputs = random_arguments(module, seed)
            self.reference = self.run(module, "interpreter")
        except Exception as exc:  # noqa: BLE001 - without a reference there is nothing to bisect
            raise ToolError(
                f"the interpreter cannot run the unoptimized module, so there is "
                f"no reference: {type(exc).__name__}: {_first_line(exc)}"
            ) from None

    def run(self, module, backend: str):
        from ..backends.compile import compile
        from ..runtime.inputs import fresh_copies  # a donating module consumes its inputs

        return compile(module.clone(), backend=backend, passes=[])(*fresh_copies(self.inputs))

    def problem(self, module, backend: str | None = None) -> str | None:
        """None when `module` on `backend` (default: the oracle's) gives the reference results;
        else one line saying what goes wrong."""
        from ..ir.verifier import verify
        from .run import compare_results

        try:
            verify(module)
        except MinixlaError as exc:
            return f"the module fails verification: {_first_line(exc)}"
        backend = backend or self.backend
        try:
            got = self.run(module, backend)
        except Exception as exc:  # noqa: BLE001 - any failure to run is a finding
            return f"{backend} cannot run it: {type(exc).__name__}: {_first_line(exc)}"
        mismatch = compare_results(got, self.reference, self.rtol, self.atol)
        return None if mismatch is None else f"{backend} results differ: {mismatch}"


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


# -- the searches --------------------------------------------------------------------------------


@dataclass
class Finding:
    """What bisect found; `step` is None when the unoptimized module already goes wrong."""

    problem: str
    step: PassStep | None = None
    step_index: int = 0
    rule: object | None = None  # the guilty RuleApplication
    rule_index: int = 0
    rule_count: int = 0
    rule_before: object | None = None
    rule_after: object | None = None
    instruction: str = ""  # the first wrong instruction, for backend bugs
    meaning_changed: bool = True  # the interpreter sees the change too


def first_bad_step(steps: list[PassStep], oracle: Oracle) -> tuple[int, str] | None:
    """(index, problem) of the first bad step: linear for the interpreter (cheap and exact),
    else a binary search between a good start and a bad end (few backend compiles)."""
    if not steps:
        return None
    if oracle.backend == "interpreter":
        for index, step in enumerate(steps):
            problem = step.error or oracle.problem(step.after)
            if problem:
                return index, problem
        return None
    last = steps[-1]
    end = last.error or oracle.problem(last.after)
    if end is None:
        return None
    good, bad, problem = -1, len(steps) - 1, end
    while bad - good > 1:
        mid = (good + bad) // 2
        found = oracle.problem(steps[mid].after)
        if found:
            bad, problem = mid, found
        else:
            good = mid
    return bad, problem


def bisect_rules(step: PassStep, problem, finding: Finding) -> None:
    """Finds the single rule application inside `step` after which `problem(module)` (None
    for a good module, else why not) starts to report something."""
    from ..passes.patterns import limit_rule_applications

    def run_with(limit: int | None):
        module = step.before.clone()
        with limit_rule_applications(limit) as budget:
            try:
                step.pass_.run(module)
            except Exception:  # noqa: BLE001 - a pass that raises on a prefix is not bisectable
                return None, budget.applied
        return module, budget.applied

    full, applied = run_with(None)
    if full is None or not applied or not problem(full):
        return  # not rule-based, or the failure needs more than the rules
    good, bad = 0, len(applied)
    while bad - good > 1:
        mid = (good + bad) // 2
        module, _ = run_with(mid)
        if module is None or problem(module):
            bad = mid
        else:
            good = mid
    finding.rule, finding.rule_index, finding.rule_count = applied[bad - 1], bad, len(applied)
    finding.rule_before = run_with(good)[0]
    finding.rule_after = run_with(bad)[0]


def blame_raising_rule(step: PassStep, finding: Finding) -> None:
    """For a pass that raised: the rule application the engine was in when it did, if any."""
    from ..passes.patterns import limit_rule_applications

    module = step.before.clone()
    with limit_rule_applications() as budget:
        try:
            step.pass_.run(module)
        except Exception:  # noqa: BLE001 - the raise being explained
            pass
        else:
            return  # it does not raise again
    if budget.trying is None:
        return  # it raised outside the rule engine
    finding.rule, finding.rule_index = budget.trying, len(budget.applied) + 1
    finding.rule_before = step.before.clone()
    with limit_rule_applications(len(budget.applied)):
        step.pass_.run(finding.rule_before)


def first_wrong_instruction(module, oracle: Oracle) -> str:
    """The first instruction (post order) whose value on the backend differs from the
    interpreter's on the same module, as HLO text plus the difference; "" when none is found."""
    from ..ir.instruction import HloInstruction
    from ..ir.shapes import Shape
    from .run import compare_results

    probe = module.clone()
    entry = probe.entry
    values = [
        i
        for i in entry.post_order()
        if i.shape.is_array and i.opcode not in ("parameter", "constant")
    ]
    if not values:
        return ""
    root = HloInstruction(
        "tuple", Shape.tuple_of([i.shape for i in values]), values, name="bisect.probe"
    )
    entry.add_instruction(root)
    entry.root = root
    probe.entry_computation_layout = None
    probe.input_output_alias = []
    try:
        want = oracle.run(probe, "interpreter")
        got = oracle.run(probe, oracle.backend)
    except Exception:  # noqa: BLE001 - the probe is a best effort
        return ""
    for instr, a, b in zip(values, got, want):
        mismatch = compare_results(a, b, oracle.rtol, oracle.atol)
        if mismatch:
            return f"{instr.to_text()}: {mismatch.removeprefix('output 0: ')}"
    return ""


def bisect(
    module,
    backend: str,
    *,
    pipeline=None,
    seed: int = 0,
    rtol: float = 1e-5,
    atol: float = 1e-5,
    rules: bool = True,
) -> tuple[Finding | None, int, int]:
    """(finding or None, changing steps, pass runs) for `module` through `pipeline` (default:
    the backend's, or the CPU pipeline when the backend has none)."""
    from ..backends import get

    get(backend)  # an unknown or unavailable backend is an error, not a finding
    oracle = Oracle(module, backend, seed, rtol, atol)
    if backend != "interpreter":
        start = oracle.problem(module)
        if start:
            return (
                Finding(
                    start,
                    instruction=first_wrong_instruction(module, oracle),
                    meaning_changed=False,
                ),
                0,
                0,
            )
    steps, runs = record_steps(module, pipeline or default_pipeline(backend))
    found = first_bad_step(steps, oracle)
    if found is None:
        return None, len(steps), runs
    index, problem = found
    step = steps[index]
    finding = Finding(problem, step, index)
    if step.after is not None and backend != "interpreter":
        finding.meaning_changed = oracle.problem(step.after, "interpreter") is not None
        if not finding.meaning_changed:
            finding.instruction = first_wrong_instruction(step.after, oracle)
    if rules and step.after is None:
        blame_raising_rule(step, finding)
    if rules and step.after is not None and finding.meaning_changed:
        # the interpreter sees the change too, so it checks each prefix (no backend compiles)
        bisect_rules(step, lambda m: oracle.problem(m, "interpreter"), finding)
    return finding, len(steps), runs


def default_pipeline(backend: str):
    from ..backends import get

    target = get(backend)
    if target.pipeline is not None:
        return target.pipeline()
    from ..passes.pipelines import cpu_pipeline

    return cpu_pipeline()


# -- the report and the command ------------------------------------------------------------------


def format_finding(finding: Finding, backend: str, steps: int) -> str:
    from .diff import diff_modules, format_diff

    if finding.step is None:
        lines = [f"the unoptimized module already goes wrong on {backend}: {finding.problem}"]
        if finding.instruction:
            lines.append(f"first wrong instruction ({backend} kernel): {finding.instruction}")
        return "\n".join(lines)
    step = finding.step
    lines = [f"first bad pass: {step.label}, changing step {finding.step_index + 1} of {steps}"]
    if step.after is None:
        lines.append(f"  the pass raised {step.error}")
        if finding.rule is not None:
            lines.append(
                f"guilty rewrite: {finding.rule} (application {finding.rule_index} "
                f"of the pass run, which raised)"
            )
            target = _find_instruction(finding.rule_before, finding.rule.instr)
            if target is not None:
                lines.append(f"  it was rewriting: {target.to_text()}")
        return "\n".join(lines)
    lines.append(f"  {finding.problem}")
    if backend != "interpreter" and finding.meaning_changed:
        lines.append(
            "  the interpreter sees the change too: the pass changed what the program computes"
        )
    if not finding.meaning_changed:
        lines.append(
            f"  the interpreter still agrees after this pass: {backend} miscompiles "
            f"what it produced"
        )
        if finding.instruction:
            lines.append(f"first wrong instruction ({backend} kernel): {finding.instruction}")
    before, after, what = step.before, step.after, step.label
    if finding.rule is not None:
        lines.append(
            f"guilty rewrite: {finding.rule} (application {finding.rule_index} of "
            f"{finding.rule_count} in this pass run)"
        )
        before, after, what = finding.rule_before, finding.rule_after, str(finding.rule)
    lines.append(f"--- before {what}\n+++ after {what}")
    lines.append(format_diff(diff_modules(before, after)))
    return "\n".join(lines)


def _find_instruction(module, name: str):
    return next((i for i in module.all_instructions() if i.name == name), None)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO text file")
    parser.add_argument(
        "--backend",
        default="interpreter",
        help="backend whose pipeline and results are checked (default: "
        "interpreter, which checks each pass's output with the "
        "interpreter through the CPU pipeline)",
    )
    parser.add_argument(
        "--passes", metavar="P1,P2", help="bisect these passes instead of the backend's pipeline"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the random inputs")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-5)
    parser.add_argument(
        "--no-rules",
        action="store_true",
        help="stop at the pass; do not bisect its rule applications",
    )


def main(args) -> int:
    from ..passes.base import make_pipeline

    module = load_module(args.file)
    pipeline = None
    if args.passes:
        names = [n.strip() for n in args.passes.split(",") if n.strip()]
        if not names:
            raise ToolError("--passes names no pass")
        pipeline = make_pipeline(names, "passes")
    finding, steps, runs = bisect(
        module,
        args.backend,
        pipeline=pipeline,
        seed=args.seed,
        rtol=args.rtol,
        atol=args.atol,
        rules=not args.no_rules,
    )
    if finding is None:
        print(
            f"{module.name}: no pass changes the results on {args.backend} ({runs} pass runs, "
            f"{steps} changed the module; seed {args.seed})"
        )
        return 0
    print(format_finding(finding, args.backend, steps))
    return 1
