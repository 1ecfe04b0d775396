"""Typos are errors: unknown instruction attributes (unless lenient), unknown compile options,
out-of-range command-line numbers."""

import pytest

import minixla
from minixla.cli import main
from minixla.errors import HloParseError, UnsupportedError

SORT = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT s = f32[4] sort(p), dimensions={0}, is_stabel=true, to_apply=cmp
}
"""


def test_an_unknown_attribute_is_an_error_at_its_position():
    with pytest.raises(HloParseError) as info:
        minixla.parse_hlo_module(SORT)
    assert (info.value.line, info.value.column) == (9, 44)
    assert "unknown attribute is_stabel for sort" in info.value.reason
    assert "is_stable" in info.value.reason  # the message lists what sort takes


def test_lenient_parsing_keeps_and_reports_it():
    module = minixla.parse_module(SORT, strict=False)
    assert module.unknown_attributes == ["9:44: sort s: is_stabel"]
    assert "is_stabel=true" in module.to_text()


def test_cli_lenient_flag_reports_on_stderr(tmp_path, capsys):
    path = tmp_path / "sort.hlo"
    path.write_text(SORT)
    assert main(["opt", str(path)]) == 1
    assert "unknown attribute is_stabel" in capsys.readouterr().err
    assert main(["opt", str(path), "--lenient"]) == 0
    assert "kept 1 unknown attribute(s): 9:44: sort s: is_stabel" in capsys.readouterr().err


def test_attributes_of_other_opcodes_are_rejected_too():
    text = "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0), dimensions={0}\n}\n"
    with pytest.raises(HloParseError, match="unknown attribute dimensions for parameter"):
        minixla.parse_hlo_module(text)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_unknown_compile_options_list_the_known_ones(backend):
    text = "HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n"
    with pytest.raises(UnsupportedError) as info:
        minixla.compile(text, backend=backend, dump_too="/tmp/x")
    message = str(info.value)
    assert "unknown compile option dump_too" in message and "dump_to" in message
    minixla.compile(text, backend=backend, verify=True)  # a known one is fine


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--iterations", "0"),
        ("--iterations", "-3"),
        ("--seed", "-1"),
        ("--rtol", "-1e-3"),
        ("--atol", "nan"),
        ("--iterations", "two"),
    ],
)
def test_cli_numbers_are_range_checked(flag, value, tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
    with pytest.raises(SystemExit) as info:
        main(["run", str(path), flag, value])
    assert info.value.code == 2
    assert f"argument {flag}" in capsys.readouterr().err
