"""`minixla bisect`: planted wrong rewrite rules, passes and kernels are named, with their diff."""

import pytest

from minixla.backends import available
from minixla.cli import main
from minixla.passes.algsimp import ALGSIMP
from minixla.passes.base import Pass, Pipeline, make_pipeline
from minixla.passes.patterns import Rule, limit_rule_applications, m, new, rewrite
from minixla.text import parse_hlo_module
from minixla.tools.bisect import bisect

needs_cpu = pytest.mark.skipif(available().get("cpu") is not True, reason="no cpu backend")

SIMPLIFIABLE = """HloModule planted

ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  na = f32[4] negate(a)
  nna = f32[4] negate(na)
  nb = f32[4] negate(b)
  s = f32[4] add(nna, nb)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  prod = f32[4] multiply(s, ones)
  d = f32[4] divide(prod, b)
  ROOT r = f32[4] exponential(d)
}
"""


def _divide_as_multiply(root, x, y):
    return new("multiply", root.shape, x, y)  # wrong on purpose: x / y -> x * y


WRONG_RULE = Rule(
    "divide_as_multiply", m.Divide(m.Any("x"), m.Any("y")), _divide_as_multiply, ("root", "x", "y")
)


@pytest.fixture
def planted_rule(monkeypatch):
    """algsimp with a wrong rule at the end of its table (it fires after the right ones)."""
    monkeypatch.setattr(ALGSIMP, "rules", ALGSIMP.rules + [WRONG_RULE])


@pytest.fixture
def module_file(tmp_path):
    path = tmp_path / "planted.hlo"
    path.write_text(SIMPLIFIABLE)
    return path


def test_the_engine_stops_after_k_applications_and_names_each():
    module = parse_hlo_module(SIMPLIFIABLE)
    with limit_rule_applications(2) as budget:
        rewrite(module, ALGSIMP)
    assert [str(a) for a in budget.applied] == [
        "algsimp.negate_negate on %nna",
        "algsimp.add_negate on %s",
    ]
    entry = module.entry.to_text()
    assert "negate(%na)" not in entry and "multiply(%s, %ones)" in entry  # third one not made
    with limit_rule_applications() as unlimited:
        rewrite(parse_hlo_module(SIMPLIFIABLE), ALGSIMP)
    assert len(unlimited.applied) == 3 and unlimited.trying is None  # nothing left running


def test_a_planted_rule_is_named_down_to_the_rewrite(planted_rule, module_file, capsys):
    assert main(["bisect", str(module_file)]) == 1
    out = capsys.readouterr().out
    assert "first bad pass: cpu/simplification/algsimp (run 1)" in out
    assert "guilty rewrite: algsimp.divide_as_multiply on %d (application 4 of" in out
    # the diff of that single rewrite: one changed instruction
    assert "  ! %d = f32[4]{0} divide(%s, %b)" in out
    assert "  > %d = f32[4]{0} multiply(%s, %b)" in out
    assert "0 added, 0 removed, 1 changed" in out


def test_the_correct_pipeline_changes_nothing(module_file, capsys):
    assert main(["bisect", str(module_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("planted: no pass changes the results on interpreter (")


def test_without_rule_bisection_the_pass_diff_is_shown(planted_rule, module_file, capsys):
    assert main(["bisect", str(module_file), "--no-rules", "--passes", "dce,algsimp"]) == 1
    out = capsys.readouterr().out
    assert "first bad pass: passes/algsimp (run 1), changing step 1 of 1" in out
    assert "guilty rewrite" not in out and "--- before passes/algsimp (run 1)" in out


class _DropsRoot(Pass):
    name = "drops-root"

    def run(self, module) -> bool:
        entry = module.entry
        entry.root = entry.root.operand(0)  # valid, but computes the wrong value
        return True


class _Raises(Pass):
    name = "raises"

    def run(self, module) -> bool:
        raise RuntimeError("internal error in the pass")


def test_a_non_rule_pass_is_named_by_its_pipeline_path():
    pipeline = Pipeline("p", [make_pipeline(["dce"], "inner"), _DropsRoot()])
    finding, steps, runs = bisect(parse_hlo_module(SIMPLIFIABLE), "interpreter", pipeline=pipeline)
    assert finding.step.label == "p/drops-root (run 1)" and finding.rule is None
    assert (steps, runs) == (1, 2)


def test_a_pass_that_raises_is_the_culprit():
    pipeline = Pipeline("p", [_Raises()])
    finding, _, _ = bisect(parse_hlo_module(SIMPLIFIABLE), "interpreter", pipeline=pipeline)
    assert finding.step.label == "p/raises (run 1)"
    assert finding.step.error == "RuntimeError: internal error in the pass"


@needs_cpu
def test_a_planted_rule_is_found_through_the_cpu_backend(planted_rule, monkeypatch):
    monkeypatch.setenv("MINIXLA_CACHE", "0")
    finding, _, _ = bisect(parse_hlo_module(SIMPLIFIABLE), "cpu")
    assert finding.problem.startswith("cpu results differ")
    assert finding.meaning_changed and str(finding.rule) == "algsimp.divide_as_multiply on %d"


@needs_cpu
def test_a_planted_wrong_kernel_is_named(monkeypatch, module_file, capsys):
    from minixla.backends.codegen import scalar
    from minixla.runtime import compile_memo

    right = scalar.SCALAR["divide"]

    def wrong_divide(ctx, instr, args):  # x / y emitted as x * y
        return ctx.cast(f"{args[0]} * {args[1]}", instr.shape.dtype)

    monkeypatch.setitem(scalar.SCALAR, "divide", wrong_divide)
    monkeypatch.setenv("MINIXLA_CACHE", "0")
    assert main(["bisect", str(module_file), "--backend", "cpu"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("the unoptimized module already goes wrong on cpu: cpu results differ")
    assert "first wrong instruction (cpu kernel): %d = f32[4]{0} divide(%prod, %b):" in out
    monkeypatch.setitem(scalar.SCALAR, "divide", right)
    compile_memo.clear()  # the programs compiled with the planted rule are memoized
    assert main(["bisect", str(module_file), "--backend", "cpu"]) == 0


def test_bad_options_are_one_line_errors(module_file, capsys):
    assert main(["bisect", str(module_file), "--passes", "no-such-pass"]) == 1
    assert main(["bisect", str(module_file), "--backend", "nope"]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 2 and all(e.startswith("minixla bisect: unknown ") for e in errors)


def test_the_documented_broken_rule_is_found_and_reduced(monkeypatch):
    """docs/debugging.md's walk-through: examples/broken_rule.py on examples/layer.hlo."""
    import importlib.util
    from pathlib import Path
    from minixla.tools.reduce import Reducer, differs_predicate

    examples = Path(__file__).resolve().parents[1] / "examples"
    spec = importlib.util.spec_from_file_location("broken_rule", examples / "broken_rule.py")
    broken = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(broken)
    monkeypatch.setattr(ALGSIMP, "rules", list(ALGSIMP.rules))
    broken.plant()
    module = parse_hlo_module((examples / "layer.hlo").read_text())
    finding, _, _ = bisect(module, "interpreter")
    assert str(finding.rule) == "algsimp.subtract_negate_fast on %shifted"
    assert finding.step.label == "cpu/simplification/algsimp (run 1)"
    result = Reducer(differs_predicate("interpreter", ["algsimp"])).reduce(module)
    assert result.instructions == 4


@needs_cpu
def test_a_kernel_wrong_only_when_fused_is_pinned_on_the_fusion_pass(monkeypatch):
    from minixla.backends.codegen import scalar

    right = scalar.SCALAR["negate"]

    def negate_wrong_in_fusions(ctx, instr, args):  # a lone negate stays right
        if instr.parent is not None and instr.parent.name.startswith("fused_computation"):
            return args[0]
        return right(ctx, instr, args)

    monkeypatch.setitem(scalar.SCALAR, "negate", negate_wrong_in_fusions)
    monkeypatch.setenv("MINIXLA_CACHE", "0")
    module = parse_hlo_module("""HloModule fused_only
ENTRY main {
  a = f32[16] parameter(0)
  b = f32[16] parameter(1)
  s = f32[16] add(a, b)
  n = f32[16] negate(s)
  ROOT m = f32[16] multiply(n, b)
}
""")
    finding, _, _ = bisect(module, "cpu")
    assert finding.step.label == "cpu/fusion (run 1)"
    assert not finding.meaning_changed and finding.rule is None
    assert finding.instruction.startswith("%fusion = f32[16]{0} fusion(")


def test_a_rule_that_raises_is_named_with_the_instruction_it_was_rewriting(
    monkeypatch, module_file, capsys
):
    def crash(root, x, y):
        raise RuntimeError("planted crash")

    rule = Rule("divide_crash", m.Divide(m.Any("x"), m.Any("y")), crash, ("root", "x", "y"))
    monkeypatch.setattr(ALGSIMP, "rules", ALGSIMP.rules + [rule])
    assert main(["bisect", str(module_file)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "first bad pass: cpu/simplification/algsimp (run 1), changing step 1 of 1",
        "  the pass raised RuntimeError: planted crash",
        "guilty rewrite: algsimp.divide_crash on %d (application 4 of the pass run, which raised)",
        "  it was rewriting: %d = f32[4]{0} divide(%s, %b)",
    ]
