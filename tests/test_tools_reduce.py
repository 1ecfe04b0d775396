"""`minixla reduce`: a 200-instruction module with a planted bug shrinks to a handful."""

import random
import shutil

import pytest

from minixla.cli import main
from minixla.passes.algsimp import ALGSIMP
from minixla.passes.patterns import Rule, m
from minixla.text import parse_hlo_module
from minixla.tools.reduce import Reducer, count_instructions, differs_predicate, raises_predicate


def generated_module(count: int = 200, seed: int = 0) -> str:
    """A chain of elementwise ops with random side inputs; a call in the middle holds
    max(x, -y), the pattern the planted rule gets wrong."""
    rng = random.Random(seed)
    lines = [
        "HloModule generated",
        "",
        "planted {",
        "  x = f32[8] parameter(0)",
        "  y = f32[8] parameter(1)",
        "  ny = f32[8] negate(y)",
        "  ROOT mx = f32[8] maximum(x, ny)",
        "}",
        "",
        "ENTRY main {",
    ]
    names = [f"p{i}" for i in range(3)]
    lines += [f"  p{i} = f32[8] parameter({i})" for i in range(3)]
    while len(names) < count - 1:
        name = f"v{len(names)}"
        op = rng.choice(["add", "multiply", "subtract", "tanh", "sine", "cosine"])
        if len(names) == count // 2:
            lines.append(f"  {name} = f32[8] call({names[-1]}, {names[-7]}), to_apply=planted")
        elif op in ("tanh", "sine", "cosine"):
            lines.append(f"  {name} = f32[8] {op}({names[-1]})")
        else:
            lines.append(f"  {name} = f32[8] {op}({names[-1]}, {rng.choice(names[:-1])})")
        names.append(name)
    return "\n".join(lines + [f"  ROOT out = f32[8] tanh({names[-1]})", "}", ""])


def _drop_negated(root, x, y):
    return x  # wrong on purpose: max(x, -y) -> x


def _raise(root, x, y):
    raise RuntimeError("planted crash in max_negate")


@pytest.fixture
def wrong_rule(monkeypatch):
    rule = Rule(
        "max_negate", m.Maximum(m.Any("x"), m.Negate(m.Any("y"))), _drop_negated, ("root", "x", "y")
    )
    monkeypatch.setattr(ALGSIMP, "rules", ALGSIMP.rules + [rule])


@pytest.fixture
def crashing_rule(monkeypatch):
    rule = Rule(
        "max_negate", m.Maximum(m.Any("x"), m.Negate(m.Any("y"))), _raise, ("root", "x", "y")
    )
    monkeypatch.setattr(ALGSIMP, "rules", ALGSIMP.rules + [rule])


@pytest.fixture
def generated_file(tmp_path):
    path = tmp_path / "generated.hlo"
    path.write_text(generated_module())
    return path


PASSES = ["call-inliner", "algsimp"]


def test_a_planted_wrong_rule_shrinks_to_at_most_ten_instructions(wrong_rule):
    module = parse_hlo_module(generated_module())
    assert count_instructions(module) >= 200
    interesting = differs_predicate("interpreter", PASSES)
    result = Reducer(interesting).reduce(module)
    assert result.instructions <= 10 and not result.stopped
    assert interesting(result.module)  # the bug is still there
    text = result.module.to_text()
    assert "maximum(" in text and "negate(" in text and "call(" not in text
    assert result.accepted.get("inline") == 1 and result.accepted.get("shape", 0) >= 1
    assert "f32[8]" not in text  # shapes shrank too


def test_reduction_is_deterministic(wrong_rule):
    runs = [
        Reducer(differs_predicate("interpreter", PASSES)).reduce(
            parse_hlo_module(generated_module(60, seed=1))
        )
        for _ in range(2)
    ]
    assert runs[0].module.to_text() == runs[1].module.to_text()
    assert runs[0].tests == runs[1].tests


def test_the_cli_prints_the_module_and_how_it_shrank(
    crashing_rule, generated_file, capsys, tmp_path
):
    out_file = tmp_path / "small.hlo"
    assert (
        main(
            [
                "reduce",
                str(generated_file),
                "--predicate",
                "raises:planted crash",
                "--backend",
                "interpreter",
                "--passes",
                "call-inliner,algsimp",
                "-o",
                str(out_file),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    summary = out.splitlines()[-1]
    assert summary.startswith("reduced 204 -> ") and "1 computations" in summary
    small = parse_hlo_module(out_file.read_text())
    assert count_instructions(small) <= 10
    assert raises_predicate("planted crash", "interpreter", PASSES)(small)


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_a_shell_test_command_drives_the_reduction(generated_file, capsys):
    assert main(["reduce", str(generated_file), "--test", "grep -q maximum {}"]) == 0
    out = capsys.readouterr().out
    assert "maximum(" in out
    small = parse_hlo_module(out[: out.rindex("reduced")])
    assert count_instructions(small) == 3  # two parameters and the maximum


def test_the_budget_bounds_the_work(wrong_rule):
    result = Reducer(differs_predicate("interpreter", PASSES), max_tests=5).reduce(
        parse_hlo_module(generated_module())
    )
    assert result.tests == 5 and result.stopped == "5 tests"


def test_errors_are_one_line(generated_file, capsys):
    assert main(["reduce", str(generated_file), "--predicate", "interpreter-differs"]) == 1
    assert main(["reduce", str(generated_file), "--predicate", "sometimes"]) == 1
    assert main(["reduce", str(generated_file), "--predicate", "raises:x", "--passes", "nah"]) == 1
    errors = capsys.readouterr().err.splitlines()
    assert errors[0] == (
        "minixla reduce: the test does not hold for the input module; nothing to reduce"
    )
    assert errors[1].startswith("minixla reduce: unknown predicate 'sometimes'")
    assert errors[2].startswith("minixla reduce: unknown pass 'nah'")
    assert len(errors) == 3


@pytest.mark.skipif(shutil.which("grep") is None, reason="needs grep")
def test_fusions_are_undone_and_called_computations_shrink(tmp_path, capsys):
    from pathlib import Path
    from minixla.passes.pipelines import cpu_pipeline

    mlp = Path(__file__).resolve().parents[1] / "examples" / "mlp.hlo"
    module = parse_hlo_module(mlp.read_text())
    cpu_pipeline().run(module)
    assert "fusion(" in module.to_text()
    path = tmp_path / "fused.hlo"
    path.write_text(module.to_text())
    assert main(["reduce", str(path), "--test", "grep -q 'exponential(' {}"]) == 0
    out = capsys.readouterr().out
    assert "accepted: " in out and "inline 1" in out
    small = parse_hlo_module(out[: out.rindex("reduced")])
    assert count_instructions(small) == 2 and "fusion" not in small.to_text()


def test_a_bug_in_dead_code_is_still_reduced():
    module = parse_hlo_module("""HloModule dead
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  unused = f32[4] sine(a)
  s = f32[4] add(a, b)
  ROOT n = f32[4] negate(s)
}
""")
    has_sine = lambda m: any(i.opcode == "sine" for i in m.all_instructions())  # noqa: E731
    result = Reducer(has_sine).reduce(module)
    assert result.module.entry.root.opcode == "sine" and result.instructions == 2
