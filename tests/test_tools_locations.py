"""`minixla --version`, `python -m minixla`, and errors that point at the instruction's line."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.cli import main
from minixla.errors import ExecutionError, VerificationError

ROOT = Path(__file__).resolve().parents[1]


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"minixla {minixla.__version__}"


def test_python_dash_m_minixla_is_the_command():
    done = subprocess.run(
        [sys.executable, "-m", "minixla", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == f"minixla {minixla.__version__}"


BAD_SHAPE = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT b = f32[5] negate(p)\n}\n"


def test_verifier_errors_carry_the_instruction_line(tmp_path, capsys):
    with pytest.raises(VerificationError) as info:
        minixla.parse_hlo_module(BAD_SHAPE)
    assert (info.value.line, info.value.column) == (4, 8)
    path = tmp_path / "bad.hlo"
    path.write_text(BAD_SHAPE)
    assert main(["run", str(path), "--backend", "interpreter"]) == 1
    assert capsys.readouterr().err.startswith(
        f"minixla run: {path}:4:8: computation %e, instruction %b"
    )


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_custom_call_errors_carry_the_instruction_line(backend, tmp_path, capsys):
    path = tmp_path / "cc.hlo"
    path.write_text(
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
        '  ROOT c = f32[4] custom-call(p), custom_call_target="nope"\n}\n'
    )
    assert main(["run", str(path), "--backend", backend]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"minixla run: {path}:4:8: custom-call target 'nope'")


def test_interpreter_errors_carry_the_instruction_line():
    text = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT b = s16[8] bitcast(p)\n}\n"
    with pytest.raises(ExecutionError, match="element width") as info:
        minixla.compile(text)(np.zeros(4, np.float32))
    assert (info.value.line, info.value.column) == (4, 8)


def test_instructions_from_mlir_carry_the_op_line():
    text = (
        "func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.negate %a : (tensor<4xf32>) -> tensor<5xf32>\n"
        "  return %0 : tensor<5xf32>\n}\n"
    )
    with pytest.raises(VerificationError) as info:
        minixla.parse_module(text)
    assert (info.value.line, info.value.column) == (2, 8)


def test_run_reads_stdin_with_a_dash(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(BAD_SHAPE.replace("f32[5]", "f32[4]")))
    assert main(["run", "-", "--backend", "interpreter", "--quiet"]) == 0
    assert "out0: float32[4]" in capsys.readouterr().out
