"""`minixla reduce FILE.hlo --test CMD | --predicate P`: shrink a module while a bug stays.

An HLO minimizer in the spirit of XLA's hlo-bisect and C-Reduce. A module is *interesting*
when the test holds: `--test CMD` runs a shell command on the candidate's file (`{}` in CMD
is the path, else it goes last) and exit status 0 means interesting; or a built-in predicate:

- `BACKEND-differs` (`cpu-differs`): BACKEND, with its pipeline (or `--passes`), gives other
  results than the interpreter on the unoptimized module, on seeded inputs;
- `raises:TEXT`: compiling for `--backend` (with its pipeline or `--passes`) and running on
  seeded inputs raises an error whose `Type: message` contains TEXT.

Reductions, tried in this order and repeated until a whole round changes nothing:
the root becomes an earlier instruction (smallest cone first); an instruction's uses go to a
new parameter, then to zeros (largest cone first, so whole subgraphs go at once); an
instruction is bypassed by an operand of its shape; calls and fusions are inlined; a
dimension size is shrunk everywhere (to 1, then halved). After each accepted step dead code,
unused parameters and unreachable computations go. Candidates are tried in a fixed order, so
the result depends only on the input and the test; `--max-tests` and `--max-seconds` bound
the work. Zeros and bypasses also apply inside called computations, whose signatures stay.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path


from .common import ToolError, load_module

# -- predicates ----------------------------------------------------------------------------------


def differs_predicate(backend: str, passes, seed: int = 0, rtol: float = 1e-5, atol: float = 1e-5):
    """Interesting: `backend` (after its pipeline or `passes`) disagrees with the interpreter."""

    def interesting(module) -> bool:
        from ..backends.compile import compile
        from ..runtime.inputs import random_arguments
        from .run import compare_results

        inputs = random_arguments(module, seed)
        try:
            want = compile(module.clone(), backend="interpreter", passes=[])(*inputs)
            got = compile(module.clone(), backend=backend, **_passes(passes))(*inputs)
        except Exception:  # noqa: BLE001 - a module that cannot run shows a different bug
            return False
        return compare_results(got, want, rtol, atol) is not None

    return interesting


def raises_predicate(text: str, backend: str, passes, seed: int = 0):
    """Interesting: compiling and running raises an error whose `Type: message` has `text`."""

    def interesting(module) -> bool:
        from ..backends.compile import compile
        from ..runtime.inputs import random_arguments

        try:
            inputs = random_arguments(module, seed)
            compile(module.clone(), backend=backend, **_passes(passes))(*inputs)
        except Exception as exc:  # noqa: BLE001 - looking for one error among all
            return text in f"{type(exc).__name__}: {exc}"
        return False

    return interesting


def command_predicate(command: str, timeout: float = 60.0):
    """Interesting: `command` on the candidate's file exits 0 (within `timeout` seconds)."""

    def interesting(module) -> bool:
        try:
            text = module.to_text()
        except Exception:  # noqa: BLE001 - a module that does not print cannot be tested
            return False
        with tempfile.TemporaryDirectory(prefix="minixla-reduce-") as folder:
            path = Path(folder) / "candidate.hlo"
            path.write_text(text)
            quoted = shlex.quote(str(path))
            line = command.replace("{}", quoted) if "{}" in command else f"{command} {quoted}"
            try:
                done = subprocess.run(line, shell=True, capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
        return done.returncode == 0

    return interesting


def _passes(passes) -> dict:
    return {} if passes is None else {"passes": list(passes)}


# -- the reducer ---------------------------------------------------------------------------------


@dataclass
class Reduction:
    module: object
    start_instructions: int
    start_computations: int
    tests: int = 0
    seconds: float = 0.0
    accepted: dict[str, int] = field(default_factory=dict)  # reduction kind -> times accepted
    stopped: str = ""  # why the search ended early, if it did

    @property
    def instructions(self) -> int:
        return count_instructions(self.module)

    def summary(self) -> str:
        steps = ", ".join(f"{kind} {n}" for kind, n in self.accepted.items()) or "none"
        text = (
            f"reduced {self.start_instructions} -> {self.instructions} instructions, "
            f"{self.start_computations} -> {len(self.module.computations)} computations, "
            f"in {self.tests} tests ({self.seconds:.1f} s); accepted: {steps}"
        )
        return text + (f"; stopped early: {self.stopped}" if self.stopped else "")


def count_instructions(module) -> int:
    return sum(len(c.instructions) for c in module.computations)


class _Budget(Exception):
    pass


class Reducer:
    def __init__(self, interesting, *, max_tests: int = 10_000, max_seconds: float = 600.0):
        self.interesting = interesting
        self.max_tests, self.max_seconds = max_tests, max_seconds

    def reduce(self, module) -> Reduction:
        from ..ir.verifier import verify

        start = time.perf_counter()
        self.deadline = start + self.max_seconds
        verify(module)
        result = Reduction(module.clone(), count_instructions(module), len(module.computations))
        self.result = result
        result.tests += 1
        if not self.interesting(result.module):
            raise ToolError("the test does not hold for the input module; nothing to reduce")
        try:
            self._first_interesting("dead code", lambda m: iter([m.clone()]))
            while self._round():
                pass
        except _Budget as exc:
            result.stopped = str(exc)
        result.seconds = time.perf_counter() - start
        return result

    def _round(self) -> bool:
        progress = False
        for kind, candidates in (
            ("root", self._new_roots),
            ("parameter", self._to_parameters),
            ("constant", self._to_constants),
            ("bypass", self._bypasses),
            ("inline", self._inline),
            ("shape", self._shrink_shapes),
        ):
            while self._first_interesting(kind, candidates):
                progress = True
        return progress

    def _first_interesting(self, kind: str, candidates) -> bool:
        from ..ir.verifier import verify

        size = count_instructions(self.result.module)
        for candidate in _safely(candidates(self.result.module)):
            if candidate is None:
                continue
            try:
                tidy(candidate)
                verify(candidate)
            except Exception:  # noqa: BLE001 - an invalid candidate is skipped
                continue
            if count_instructions(candidate) > size or (
                kind != "shape" and count_instructions(candidate) == size
            ):
                continue
            self._charge()
            if self.interesting(candidate):
                self.result.module = candidate
                self.result.accepted[kind] = self.result.accepted.get(kind, 0) + 1
                return True
        return False

    def _charge(self) -> None:
        if self.result.tests >= self.max_tests:
            raise _Budget(f"{self.max_tests} tests")
        if time.perf_counter() > self.deadline:
            raise _Budget(f"{self.max_seconds:g} s")
        self.result.tests += 1

    # -- candidate generators: each yields modified clones, in a fixed order -------------------
    @staticmethod
    def _new_roots(module):
        entry = module.entry
        order = sorted(
            (i for i in entry.post_order()[:-1] if i.opcode != "parameter"),
            key=lambda i: (_cone(i), i.name),
        )
        for instr in order:
            candidate = module.clone()
            candidate.entry.root = candidate.entry.instruction(instr.name)
            yield candidate

    @staticmethod
    def _replaceable(module, entry_only: bool = True):
        """(computation name, instruction) pairs a reduction may replace, largest cone first;
        beyond the entry a computation's signature stays, so only its body shrinks."""
        comps = [module.entry] if entry_only else module.computations
        found = [
            (c.name, i)
            for c in comps
            for i in c.post_order()
            if i.opcode != "parameter" and not i.shape.is_token and not i.has_side_effect()
        ]
        return sorted(
            found,
            key=lambda item: (item[0] != module.entry.name, -_cone(item[1]), item[0], item[1].name),
        )

    def _to_parameters(self, module):
        from ..ir.instruction import HloInstruction

        for _, instr in self._replaceable(module):
            if instr.opcode == "constant":
                continue
            candidate = module.clone()
            entry = candidate.entry
            old = entry.instruction(instr.name)
            number = len(entry.parameters)
            param = HloInstruction.parameter(number, old.shape, name=f"p.{old.name}")
            yield _replace(entry, old, param)

    def _to_constants(self, module):
        """Uses of an instruction go to zeros: a scalar constant, broadcast when it has rank
        (a splat, so shrinking shapes later needs no new literal)."""
        from ..ir.instruction import HloInstruction
        from ..ir.shapes import Shape

        for comp_name, instr in self._replaceable(module, entry_only=False):
            if instr.opcode in ("constant", "broadcast") or not instr.shape.is_array:
                continue
            candidate = module.clone()
            comp = candidate.computation(comp_name)
            old = comp.instruction(instr.name)
            zero = HloInstruction.constant(
                0, Shape.array(old.shape.dtype, ()), name=f"c.{old.name}"
            )
            if old.shape.rank:
                comp.add_instruction(zero)
                zero = HloInstruction(
                    "broadcast", old.shape, [zero], {"dimensions": ()}, name=f"b.{old.name}"
                )
            yield _replace(comp, old, zero)

    def _bypasses(self, module):
        for comp_name, instr in self._replaceable(module, entry_only=False):
            for position, operand in enumerate(instr.operands):
                if operand.shape != instr.shape or operand in instr.operands[:position]:
                    continue
                candidate = module.clone()
                comp = candidate.computation(comp_name)
                old = comp.instruction(instr.name)
                yield _replace(comp, old, old.operand(position))

    @staticmethod
    def _inline(module):
        """Every call inlined, then every fusion undone (its fused computation inlined)."""
        if any(i.opcode == "call" for i in module.all_instructions()):
            from ..passes.base import get_pass

            candidate = module.clone()
            get_pass("call-inliner").run(candidate)
            yield candidate
        if any(i.opcode == "fusion" for i in module.all_instructions()):
            yield _unfuse(module.clone())

    @staticmethod
    def _shrink_shapes(module):
        from ..text.parser import parse_hlo_module

        text = module.to_text()
        sizes = sorted(
            {
                int(d)
                for dims in _SHAPE.findall(text)
                for d in dims[1].split(",")
                if d and int(d) > 1
            },
            reverse=True,
        )
        for size in sizes:
            for smaller in dict.fromkeys((1, size // 2)):
                if not 1 <= smaller < size:
                    continue
                shrunk = _SHAPE.sub(lambda match, s=size, n=smaller: _resize(match, s, n), text)
                try:
                    yield parse_hlo_module(shrunk)
                except Exception:  # noqa: BLE001 - sizes that attributes pin stay as they are
                    yield None


def _safely(candidates):
    """The candidates until the generator fails: a reduction that cannot be built for this
    module (say, one whose text does not print) is skipped, not fatal."""
    while True:
        try:
            yield next(candidates)
        except StopIteration:
            return
        except Exception:  # noqa: BLE001
            return


_SHAPE = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")


def _resize(match, size: int, smaller: int) -> str:
    dims = [str(smaller) if d == str(size) else d for d in match.group(2).split(",")]
    return f"{match.group(1)}[{','.join(dims)}]"


def _cone(instr) -> int:
    from ..ir.computation import dependencies

    return len(dependencies([instr], include_roots=True))


def _replace(comp, old, new):
    if new.parent is None:
        comp.add_instruction(new)
    old.replace_all_uses_with(new)
    if comp.root is old:
        comp.root = new
    return comp.parent


def _unfuse(module):
    """Replaces each fusion instruction by the instructions of its fused computation."""
    from ..passes.hlo_utils import NameUniquer, inline_computation

    names = NameUniquer(module)
    for comp in list(module.computations):
        for fusion in [i for i in comp.post_order() if i.opcode == "fusion"]:
            root = inline_computation(fusion.attrs["calls"], list(fusion.operands), comp, names)
            _replace(comp, fusion, root)
            comp.remove_instruction(fusion)
    return module


def tidy(module):
    """Removes dead code, unused entry parameters (renumbering the rest) and unreachable
    computations; the entry signature is whatever remains."""
    entry = module.entry
    entry.remove_dead()
    for param in [p for p in entry.parameters if not p.users and p is not entry.root]:
        entry.remove_instruction(param)
    for number, param in enumerate(entry.parameters):
        param.parameter_number = number
    module.entry_computation_layout = None
    module.is_scheduled = False  # new parameters and constants sit outside any schedule
    module.input_output_alias = []
    module.buffer_donors = []
    module.remove_unreachable_computations()
    for comp in module.computations:
        if comp is not entry:
            comp.remove_dead()
    return module


# -- the command ---------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO text file")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--test",
        metavar="CMD",
        help="shell command; exit 0 means the candidate still shows the bug "
        "({} is the candidate's path, else it is appended)",
    )
    what.add_argument(
        "--predicate",
        metavar="P",
        help="built-in test: BACKEND-differs (cpu-differs) or raises:TEXT",
    )
    parser.add_argument(
        "--backend",
        default=None,
        help="backend raises:TEXT compiles for (default: cpu when available, else interpreter)",
    )
    parser.add_argument(
        "--passes", metavar="P1,P2", help="run these passes instead of the backend's pipeline"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the random inputs")
    parser.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds one --test run may take (longer: not interesting)",
    )
    parser.add_argument("--max-tests", type=int, default=10_000)
    parser.add_argument("--max-seconds", type=float, default=600.0)
    parser.add_argument("-o", "--output", metavar="FILE", help="also write the result here")


def make_predicate(args):
    if args.test is not None:
        if not args.test.strip():
            raise ToolError("--test needs a command")
        return command_predicate(args.test, args.timeout)
    from ..backends import get
    from .common import default_backend

    passes = None
    if args.passes:
        from ..passes.base import get_pass

        passes = [n.strip() for n in args.passes.split(",") if n.strip()]
        for name in passes:
            get_pass(name)  # an unknown name is an error now, not a dull predicate
    spec = args.predicate
    if spec.startswith("raises:") and spec != "raises:":
        backend = args.backend or default_backend()
        get(backend)
        return raises_predicate(spec[len("raises:") :], backend, passes, args.seed)
    if spec.endswith("-differs") and spec != "-differs":
        backend = spec[: -len("-differs")]
        get(backend)
        return differs_predicate(backend, passes, args.seed)
    raise ToolError(f"unknown predicate {spec!r} (known: BACKEND-differs, raises:TEXT)")


def main(args) -> int:
    module = load_module(args.file)
    predicate = make_predicate(args)
    result = Reducer(predicate, max_tests=args.max_tests, max_seconds=args.max_seconds).reduce(
        module
    )
    text = result.module.to_text()
    if args.output:
        Path(args.output).write_text(text)
    print(text)
    print(result.summary())
    return 0
