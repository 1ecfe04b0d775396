"""Programs too large to run are refused at compile time with the byte count; deep call
nesting runs on the interpreter."""

import numpy as np
import pytest

import minixla
from minixla.cli import main

HUGE_PARAMETER = "HloModule m\nENTRY e {\n  ROOT x = f32[1000000000000] parameter(0)\n}"
HUGE_BROADCAST = """HloModule m
ENTRY e {
  c = f32[] constant(1)
  ROOT b = f32[100000,100000] broadcast(c), dimensions={}
}"""
PAST_INT64 = "HloModule m\nENTRY e {\n  ROOT x = f32[99999999999999999999] parameter(0)\n}"


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize(
    "text,name,size", [(HUGE_PARAMETER, "%x", 4 * 10**12), (HUGE_BROADCAST, "%b", 4 * 10**10)]
)
def test_values_over_the_budget_are_refused_with_their_size(backend, text, name, size):
    with pytest.raises(minixla.ResourceExhaustedError, match=f"{name}: .* needs {size} bytes"):
        minixla.compile(text, backend=backend, memory_budget_bytes=1 << 30)


def test_the_budget_comes_from_the_environment(monkeypatch):
    small = "HloModule m\nENTRY e {\n  ROOT x = f32[1024] parameter(0)\n}"
    minixla.compile(small, backend="interpreter")
    monkeypatch.setenv("MINIXLA_MEMORY_BUDGET_BYTES", "4000")
    with pytest.raises(
        minixla.ResourceExhaustedError, match="4096 bytes, over the memory budget of 4000 bytes"
    ):
        minixla.compile(small, backend="interpreter")


def test_sizes_past_64_bits_are_refused_whatever_the_budget():
    with pytest.raises(minixla.ResourceExhaustedError, match="more than a 64-bit size"):
        minixla.compile(PAST_INT64, backend="interpreter", memory_budget_bytes=1 << 200)


def test_the_cli_reports_a_too_large_program_in_one_line(tmp_path, capsys):
    path = tmp_path / "huge.hlo"
    path.write_text(HUGE_BROADCAST)
    assert main(["run", str(path), "--backend", "interpreter"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs 40000000000 bytes" in err[0] and "Traceback" not in err[0]


def nested_calls(depth: int) -> str:
    lines = ["HloModule m", "c0 {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] negate(p)\n}"]
    for i in range(1, depth):
        lines.append(
            f"c{i} {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] call(p), to_apply=c{i - 1}\n}}"
        )
    lines.append(
        f"ENTRY e {{\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] call(p), "
        f"to_apply=c{depth - 1}\n}}"
    )
    return "\n".join(lines)


def test_hundreds_of_nested_calls_run_on_the_interpreter():
    exe = minixla.compile(nested_calls(1500), backend="interpreter")
    np.testing.assert_array_equal(exe(np.ones(2, np.float32)), [-1, -1])


SPIN = """HloModule spin
cond {
  p = s32[] parameter(0)
  ROOT c = pred[] compare(p, s32[] constant(-1)), direction=NE
}
body {
  p = s32[] parameter(0)
  ROOT n = s32[] add(p, s32[] constant(1))
}
ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=body
}"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_max_while_iterations_stops_a_runaway_loop_on_every_backend(backend):
    exe = minixla.compile(SPIN, backend=backend, max_while_iterations=500)
    with pytest.raises(minixla.ExecutionError, match=r"while %w ran more than 500 iterations"):
        exe(np.int32(0))
    assert exe(np.int32(-400)) == -1  # 399 iterations are within the bound


def test_the_cli_bounds_loops(tmp_path, capsys):
    path = tmp_path / "spin.hlo"
    path.write_text(SPIN)
    args = ["run", str(path), "--backend", "cpu", "--quiet", "--max-while-iterations"]
    assert main(args + ["100"]) == 1
    assert "while %w ran more than 100 iterations" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(args + ["0"])
