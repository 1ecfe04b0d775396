"""`minixla diff`: structural matching by name and shape, then by opcode and operands."""

from pathlib import Path

import pytest

import minixla
from minixla.cli import main
from minixla.tools.diff import diff_modules, format_diff

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp.hlo"


def edited(tmp_path, *edits, name="b.hlo") -> Path:
    text = MLP.read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_module_against_itself_is_empty_and_exits_0(capsys):
    assert main(["diff", str(MLP), str(MLP)]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_reprinted_module_is_the_same(tmp_path, capsys):
    reprinted = tmp_path / "b.hlo"
    reprinted.write_text(minixla.parse_hlo_module(MLP.read_text()).to_text())
    assert main(["diff", str(MLP), str(reprinted)]) == 0


def test_a_changed_instruction_is_listed_and_exits_1(tmp_path, capsys):
    b = edited(tmp_path, ("maximum(%hb, %zeros)", "minimum(%hb, %zeros)"))
    assert main(["diff", str(MLP), str(b)]) == 1
    out = capsys.readouterr().out
    assert "  ! %relu = f32[8,32]{1,0} maximum(%hb, %zeros)\n" in out
    assert "  > %relu = f32[8,32]{1,0} minimum(%hb, %zeros)\n" in out
    assert out.rstrip().endswith("0 added, 0 removed, 1 changed, 0 renamed")


def test_added_and_removed_instructions(tmp_path, capsys):
    b = edited(
        tmp_path,
        (
            "%e = f32[8,4]{1,0} exponential(%shifted)",
            "%e0 = f32[8,4]{1,0} exponential(%shifted)\n  %e = f32[8,4]{1,0} negate(%e0)",
        ),
    )
    assert main(["diff", str(MLP), str(b)]) == 1
    out = capsys.readouterr().out
    assert "  + %e0 = f32[8,4]{1,0} exponential(%shifted)" in out
    assert "  ! %e = f32[8,4]{1,0} exponential(%shifted)" in out


def test_renamed_instructions_match_by_opcode_and_operands(tmp_path, capsys):
    b = edited(tmp_path, ("%bias", "%biased"))
    result = diff_modules(
        minixla.parse_hlo_module(MLP.read_text()), minixla.parse_hlo_module(b.read_text())
    )
    entry = result.computations[0]
    assert [(a.name, b.name) for a, b in entry.renamed] == [("bias", "biased")]
    assert not entry.changed and not entry.added and not entry.removed
    assert "  = %bias renamed %biased" in format_diff(result)
    assert main(["diff", str(MLP), str(b)]) == 1
    assert main(["diff", str(MLP), str(b), "--ignore-names"]) == 0


def test_called_computations_are_compared(tmp_path, capsys):
    b = edited(tmp_path, ("ROOT %s = f32[] add(%x, %y)", "ROOT %s = f32[] multiply(%x, %y)"))
    assert main(["diff", str(MLP), str(b)]) == 1
    out = capsys.readouterr().out
    assert "computation %add:\n  ! %s = f32[] add(%x, %y)" in out
    assert "  ! %sum = " in out  # its caller changes with it


def test_quiet_prints_nothing(tmp_path, capsys):
    b = edited(tmp_path, ("constant(-inf)", "constant(-1e9)"))
    assert main(["diff", "-q", str(MLP), str(b)]) == 1
    assert capsys.readouterr() == ("", "")


@pytest.mark.parametrize("which", [0, 1])
def test_trouble_names_the_file_on_one_line(tmp_path, capsys, which):
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[] parmeter(0)\n}\n")
    files = [str(MLP), str(bad)] if which else [str(bad), str(MLP)]
    assert main(["diff", *files]) == 1
    err = capsys.readouterr().err
    assert err == f"minixla diff: {bad}:3:18: unknown opcode 'parmeter'\n"
