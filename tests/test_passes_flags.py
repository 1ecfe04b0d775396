"""XLA_FLAGS and MINIXLA_FLAGS: XLA's dump flags work in both, other XLA flags are ignored with
one warning, typos in MINIXLA_FLAGS are errors; `minixla opt` honours them too."""

import warnings

import numpy as np
import pytest

import minixla
from minixla.cli import main
from minixla.passes import flags
from minixla.passes.base import DumpOptions
from minixla.passes.flags import FlagError, read_flags

TEXT = """HloModule scaled
ENTRY main {
  x = f32[4] parameter(0)
  one = f32[] constant(1)
  ones = f32[4] broadcast(one), dimensions={}
  ROOT y = f32[4] multiply(x, ones)
}
"""


def test_xla_spellings_fill_the_same_settings():
    options = DumpOptions.from_flags(
        "",
        "--xla_dump_to=/tmp/d --xla_dump_hlo_pass_re=.* --xla_dump_hlo_as_dot "
        "--xla_dump_hlo_as_text=false --xla_dump_hlo_as_html=true "
        "--xla_dump_hlo_module_re=^sc",
    )
    assert options == DumpOptions(
        dump_to="/tmp/d", pass_re=".*", module_re="^sc", as_text=False, as_dot=True, as_html=True
    )
    assert read_flags("--xla_force_host_platform_device_count=8", "") == {"device_count": 8}


def test_minixla_flags_win_over_xla_flags():
    assert read_flags("--dump_to=mine", "--xla_dump_to=xla")["dump_to"] == "mine"


def test_other_xla_flags_are_reported_once_and_ignored(monkeypatch):
    monkeypatch.setattr(flags, "_reported", set())
    with pytest.warns(UserWarning, match="xla_cpu_use_thunk_runtime has no meaning"):
        assert read_flags("", "--xla_cpu_use_thunk_runtime=false") == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_flags("--xla_cpu_use_thunk_runtime=false", "")  # already reported: silent


@pytest.mark.parametrize(
    "own, xla, message",
    [
        ("--dump_too=x", "", "unknown MINIXLA_FLAGS flag --dump_too"),
        ("--xla_dump_hlo_as_dot=maybe", "", "expected true or false"),
        ("", "--xla_force_host_platform_device_count=0", "at least 1"),
        ("", "--xla_dump_to", "needs a value"),
    ],
)
def test_bad_flags_are_errors(own, xla, message):
    with pytest.raises(FlagError, match=message):
        read_flags(own, xla)


def test_xla_flags_dump_a_compilation(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "XLA_FLAGS", f"--xla_dump_to={tmp_path} --xla_dump_hlo_pass_re=.* --xla_dump_hlo_as_html"
    )
    monkeypatch.delenv("MINIXLA_FLAGS", raising=False)
    exe = minixla.compile(TEXT, passes=["algsimp", "dce"])
    np.testing.assert_array_equal(exe(np.arange(4, dtype=np.float32)), [0, 1, 2, 3])
    names = sorted(p.name.split(".", 2)[2] for p in tmp_path.iterdir())
    assert "after_optimizations.txt" in names and "after_optimizations.html" in names
    assert "0001.custom.after_algsimp.txt" in names
    after = next(tmp_path.glob("*.after_optimizations.txt")).read_text()
    assert "multiply" not in after  # what the dump shows is the optimized module


def test_module_re_selects_which_modules_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_FLAGS", f"--dump_to={tmp_path} --xla_dump_hlo_module_re=other")
    minixla.compile(TEXT, passes=["dce"])
    assert list(tmp_path.iterdir()) == []


def test_opt_honours_dump_flags(tmp_path, monkeypatch, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(TEXT)
    dumps = tmp_path / "dumps"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={dumps} --xla_dump_hlo_pass_re=algsimp")
    assert main(["opt", str(path), "-p", "algsimp,dce"]) == 0
    names = sorted(p.name.split(".", 2)[2] for p in dumps.iterdir())
    assert names == [
        "0001.opt.after_algsimp.txt",
        "after_optimizations.txt",
        "before_optimizations.txt",
    ]
