"""Test helpers for passes: run a pass on HLO text, match structure, FileCheck, compare values.

module, changed = run_pass("algsimp", text)
assert_matches(module.entry.root, m.Add(m.Parameter(0), m.Broadcast(m.ConstantScalar(0))))
check_pass("algsimp", text, '''
    // CHECK: ROOT %{{.*}} = f32[8]{0} negate(%x)
''')
check_pass("algsimp", text, expected=None)       # the pass must not change anything
assert_same_results(before, after, seed=0)        # same values on the interpreter
"""

from __future__ import annotations

from ..passes.patterns import Mismatch, Pattern, m
from .compare import assert_same_results, compare_values, random_inputs, run_interpreter
from .filecheck import check_hlo, run_filecheck

__all__ = [
    "Mismatch",
    "Pattern",
    "assert_matches",
    "assert_same_results",
    "check_hlo",
    "check_pass",
    "compare_values",
    "m",
    "random_inputs",
    "rule_pass",
    "run_filecheck",
    "run_interpreter",
    "run_pass",
]


def rule_pass(rules, *names: str):
    """A pass that runs only the named rules of a RuleSet (to test one rule in isolation)."""
    from ..passes.base import Pass
    from ..passes.patterns import RuleSet, rewrite

    chosen = [r for r in rules.rules if r.name in names]
    missing = set(names) - {r.name for r in chosen}
    if missing:
        raise KeyError(f"no rule named {', '.join(sorted(missing))} in {rules.name}")
    subset = RuleSet(rules.name, chosen)

    class OnlyRules(Pass):
        name = f"{rules.name}[{','.join(names)}]"

        def run(self, module) -> bool:
            return rewrite(module, subset)

    return OnlyRules()


def _as_pass(pass_or_name):
    from ..passes.base import get_pass

    return get_pass(pass_or_name) if isinstance(pass_or_name, str) else pass_or_name


def _parse(text: str):
    from ..text.parser import parse_hlo_module

    return parse_hlo_module(text)


def run_pass(pass_or_name, hlo_text: str):
    """Parses `hlo_text`, runs the pass (a Pass or a registered name) and returns
    (module, changed). The module is verified after a change."""
    from ..ir.verifier import verify

    module = _parse(hlo_text)
    changed = bool(_as_pass(pass_or_name).run(module))
    if changed:
        verify(module)
    return module, changed


def check_pass(
    pass_or_name,
    hlo_text: str,
    expected: str | None = None,
    *,
    check_values: bool = True,
    rtol: float = 1e-6,
    atol: float = 1e-6,
):
    """Runs a pass on `hlo_text` and checks what it did; returns the resulting module.

    `expected=None` means "no change": the pass must report False and print the module exactly
    as before. Otherwise the pass must report a change and its output must satisfy the CHECK
    lines in `expected`. With `check_values`, the interpreter must also compute the same values
    before and after (skipped when the interpreter does not implement an op in the module)."""
    module, changed = run_pass(pass_or_name, hlo_text)
    before_text = _parse(hlo_text).to_text()
    if expected is None:
        assert not changed, f"the pass reported a change:\n{module.to_text()}"
        assert module.to_text() == before_text, (
            f"the pass reported no change but the module differs:\n{module.to_text()}"
        )
        return module
    assert changed, f"the pass reported no change:\n{before_text}"
    check_hlo(module.to_text(), expected)
    if check_values:
        _check_values(hlo_text, module, rtol, atol)
    return module


def _check_values(hlo_text: str, module, rtol: float, atol: float) -> None:
    from ..errors import UnsupportedError

    try:
        assert_same_results(_parse(hlo_text), module, rtol=rtol, atol=atol)
    except UnsupportedError:
        pass  # the interpreter cannot run this module yet; structure was still checked


def assert_matches(instr, pattern: Pattern) -> dict:
    """Asserts that `instr` matches `pattern`; returns the captures (name -> instruction).

    On failure the message names the path from `instr` to the mismatch, the instruction there
    and the reason, e.g. `at root.operand(1) (%c = f32[] constant(1)): not all 0`."""
    captures: dict = {}
    if pattern.match(instr, captures):
        return captures
    raise AssertionError(f"{pattern!r} does not match: {pattern.explain(instr)}")
