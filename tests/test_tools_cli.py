"""Every `minixla` command: one-line errors, usage errors, progress output, the installed script."""

import io
import shutil
import subprocess
from pathlib import Path

import pytest

from minixla.cli import main
from minixla.tools.common import ToolError
from minixla.tools.progress import Progress

ROOT = Path(__file__).resolve().parents[1]
MLP = ROOT / "examples" / "mlp.hlo"
BAD = "HloModule m\nENTRY e {\n  ROOT p = f32[] parmeter(0)\n}\n"

# command -> argv with FILE where the input file goes
COMMANDS = {
    "run": ["run", "FILE", "--backend", "interpreter"],
    "opt": ["opt", "FILE"],
    "graph": ["graph", "FILE"],
    "diff": ["diff", "FILE", str(MLP)],
    "diff-second": ["diff", str(MLP), "FILE"],
    "bisect": ["bisect", "FILE"],
    "reduce": ["reduce", "FILE", "--predicate", "interpreter-differs"],
    "explain-fusion": ["explain-fusion", "FILE"],
}


def one_line_error(capsys, command: str) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    assert captured.err.startswith(f"minixla {command}: ")
    return captured.err[len(f"minixla {command}: ") :].rstrip("\n")


def argv(key: str, file) -> list[str]:
    return [str(file) if a == "FILE" else a for a in COMMANDS[key]]


@pytest.mark.parametrize("key", COMMANDS)
def test_a_missing_file_is_one_line(key, tmp_path, capsys):
    missing = tmp_path / "missing.hlo"
    assert main(argv(key, missing)) == 1
    assert one_line_error(capsys, COMMANDS[key][0]) == f"no such file: {missing}"


@pytest.mark.parametrize("key", COMMANDS)
def test_an_unparsable_file_is_one_line_with_its_position(key, tmp_path, capsys):
    bad = tmp_path / "bad.hlo"
    bad.write_text(BAD)
    assert main(argv(key, bad)) == 1
    assert one_line_error(capsys, COMMANDS[key][0]) == f"{bad}:3:18: unknown opcode 'parmeter'"


@pytest.mark.parametrize(
    "args",
    [
        ["graph", str(MLP), "--bogus"],
        ["diff", str(MLP)],
        ["cache"],
        ["backends", "--bogus"],
        ["run"],
        ["nope"],
    ],
)
def test_bad_flags_are_usage_errors_with_status_2(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith("minixla")


def test_debug_shows_the_exception(tmp_path):
    with pytest.raises(ToolError, match="no such file"):
        main(["graph", "--debug", str(tmp_path / "missing.hlo")])


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_reports_each_phase_on_a_terminal():
    stream = Terminal()
    progress = Progress.for_command(("parse", "passes", "codegen", "run"), stream=stream)
    with progress.phase("parse"):
        pass
    with progress.compile():
        pass
    with progress.phase("run"):
        pass
    lines = [line.split("\r\x1b[K")[-1] for line in stream.getvalue().split("\n")[:-1]]
    assert [line.split()[:2] for line in lines] == [
        ["[1/4]", "parse"],
        ["[2/4]", "passes"],
        ["[3/4]", "codegen"],
        ["[4/4]", "run"],
    ]
    assert all(line.endswith(" ms") for line in lines)
    assert set(progress.seconds) == {"parse", "passes", "codegen", "run"}


def test_progress_is_silent_when_piped_or_quiet():
    piped, quiet = io.StringIO(), Terminal()
    for progress in (
        Progress.for_command(("parse",), stream=piped),
        Progress.for_command(("parse",), stream=quiet, quiet=True),
    ):
        with progress.phase("parse"):
            pass
    assert piped.getvalue() == "" and quiet.getvalue() == ""


def test_progress_erases_its_line_when_a_phase_fails():
    stream = Terminal()
    with pytest.raises(ValueError):
        with Progress(("parse",), stream).phase("parse"):
            raise ValueError
    assert stream.getvalue().endswith("\r\x1b[K")


def test_run_prints_no_progress_when_stderr_is_captured(capsys):
    assert main(["run", str(MLP), "--backend", "interpreter"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "mlp_forward on interpreter" in captured.out


@pytest.mark.skipif(shutil.which("minixla") is None, reason="the minixla script is not installed")
def test_the_installed_script(tmp_path):
    same = subprocess.run(
        ["minixla", "diff", str(MLP), str(MLP)], capture_output=True, text=True, cwd=tmp_path
    )
    assert (same.returncode, same.stdout, same.stderr) == (0, "", "")
    missing = subprocess.run(
        ["minixla", "graph", "missing.hlo"], capture_output=True, text=True, cwd=tmp_path
    )
    assert missing.returncode == 1
    assert missing.stderr == "minixla graph: no such file: missing.hlo\n"
