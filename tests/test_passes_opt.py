"""`minixla opt`: passes, pipelines, --diff, -v, and one-line errors with exit status 1."""

import pytest

from minixla.cli import main

TEXT = """HloModule m
ENTRY main {
  x = s32[4] parameter(0)
  z = s32[4] broadcast(s32[] constant(0)), dimensions={}
  ROOT r = s32[4] add(x, z)
}
"""


@pytest.fixture
def hlo(tmp_path):
    path = tmp_path / "m.hlo"
    path.write_text(TEXT)
    return str(path)


def test_opt_prints_the_optimized_module(hlo, capsys):
    assert main(["opt", hlo, "--passes", "algsimp,dce"]) == 0
    out = capsys.readouterr().out
    assert "ROOT %x = s32[4]{0} parameter(0)" in out and "add" not in out


def test_opt_diff_and_report(hlo, capsys):
    assert main(["opt", hlo, "--passes", "algsimp", "--diff", "-v"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("---") and "-  ROOT %r = s32[4]{0} add(%x, %z)" in captured.out
    assert "algsimp" in captured.err and "changed" in captured.err


def test_opt_unknown_pass_lists_known_ones(hlo, capsys):
    assert main(["opt", hlo, "--passes", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown pass 'nope'" in err and "algsimp" in err


def test_opt_missing_file_and_parse_error(tmp_path, capsys):
    assert main(["opt", str(tmp_path / "missing.hlo"), "--passes", "dce"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY main {\n  ROOT x = f32[ parameter(0)\n}\n")
    assert main(["opt", str(bad), "--passes", "dce"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:3:" in err


def test_opt_bad_flag_exits_2(hlo):
    with pytest.raises(SystemExit) as info:
        main(["opt", hlo, "--no-such-flag"])
    assert info.value.code == 2


def test_opt_unknown_pipeline(hlo, capsys):
    assert main(["opt", hlo, "--pipeline", "nope"]) == 1
    assert "unknown pipeline 'nope'" in capsys.readouterr().err


def test_opt_pipeline_by_pass_name(hlo, capsys):
    assert main(["opt", hlo, "--pipeline", "algsimp"]) == 0
    assert "add" not in capsys.readouterr().out
