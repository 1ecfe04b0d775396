"""minixla.testing itself: matcher messages, FileCheck, no-change checks and value comparison."""

import numpy as np
import pytest

import minixla
from minixla.testing import (
    assert_matches,
    assert_same_results,
    check_hlo,
    check_pass,
    m,
    random_inputs,
    run_pass,
)

TEXT = """HloModule m
ENTRY main {
  x = f32[8] parameter(0)
  one = f32[] constant(1)
  ones = f32[8] broadcast(one), dimensions={}
  ROOT sum = f32[8] add(ones, x)
}
"""


def root():
    return minixla.parse_hlo_module(TEXT).entry.root


def test_matcher_matches_commutatively_and_captures():
    captures = assert_matches(
        root(), m.Add(m.Parameter(0, name="p"), m.Broadcast(m.ConstantScalar(1), name="b"))
    )
    assert captures["p"].name == "x" and captures["b"].name == "ones"
    assert_matches(root(), m.Add(m.Any(), m.Splat(1)))
    assert_matches(root(), m.Op("add"))
    assert_matches(root(), m.Shape(m.Add(), "f32[8]"))


def test_matcher_failure_says_where_and_why():
    with pytest.raises(AssertionError) as info:
        assert_matches(root(), m.Add(m.Parameter(0), m.Broadcast(m.ConstantScalar(0))))
    message = str(info.value)
    assert "root.operand(0).operand(0)" in message
    assert "%one = f32[] constant(1)" in message and "not all 0" in message


def test_matcher_repeated_capture_must_be_the_same_instruction():
    assert not m.Add(m.Any("x"), m.Any("x")).match(root())
    explanation = m.Multiply(m.Any(), m.Any()).explain(root())
    assert "opcode is add, wanted multiply" in str(explanation)


def test_check_hlo_reports_filecheck_output():
    check_hlo("a = add(b)\nc = mul(a)", "CHECK: add\nCHECK-NEXT: mul")
    with pytest.raises(AssertionError, match="Couldn't match"):
        check_hlo("a = add(b)", "CHECK: subtract")


def test_check_pass_no_change_expectation():
    check_pass("dce", TEXT, expected=None)
    with pytest.raises(AssertionError, match="reported a change"):
        check_pass("algsimp", TEXT.replace("constant(1)", "constant(-0.0)"), expected=None)


def test_run_pass_returns_module_and_changed():
    module, changed = run_pass("cse", TEXT)
    assert not changed and module.entry.root.name == "sum"


def test_assert_same_results_detects_a_difference():
    other = TEXT.replace("add(ones, x)", "multiply(ones, x)")
    assert_same_results(TEXT, TEXT)
    with pytest.raises(AssertionError, match="elements differ"):
        assert_same_results(TEXT, other)


def test_assert_same_results_nan_aware():
    text = TEXT.replace("constant(1)", "constant(nan)")
    assert_same_results(text, text)


def test_random_inputs_keep_indices_in_bounds():
    module = minixla.parse_hlo_module("""HloModule m
ENTRY main {
  x = f32[10,4] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  k = s64[] parameter(3)
  c = s32[] convert(k)
  ROOT r = f32[3,4] dynamic-slice(x, i, c), dynamic_slice_sizes={3,4}
}
""")
    for seed in range(20):
        x, i, j, k = random_inputs(module, seed=seed)
        assert 0 <= i <= 7 and k == 0 and x.dtype == np.float32
        assert i.dtype == np.int32 and j.dtype == np.int32 and k.dtype == np.int64


# -- the differential items of tests/hlo RUN lines (minixla/testing/lit.py) ---------------------
def hlo_file(tmp_path, body: str, header: str = "HloModule m", markers: str = ""):
    path = tmp_path / "case.hlo"
    path.write_text(
        f"// RUN: minixla opt %s --passes algsimp | filecheck %s\n{markers}"
        f"{header}\nENTRY main {{\n{body}\n}}\n"
    )
    return path


def test_differential_passes_when_the_rewrite_keeps_values(tmp_path):
    from minixla.testing import lit

    path = hlo_file(
        tmp_path,
        """  x = f32[8] parameter(0)
  one = f32[] constant(1)
  ones = f32[8] broadcast(one), dimensions={}
  ROOT p = f32[8] multiply(x, ones)""",
    )
    lit.run_differential(lit.run_lines(path.read_text())[0], path)


@pytest.mark.parametrize(
    "after, tolerance, differs",
    [
        ("ROOT n = f32[8] negate(x)", "", True),
        (
            "ROOT n = f32[8] multiply(x, f32[8] broadcast(f32[] constant(1.0000001)), dimensions={})",
            "",
            True,
        ),
        (
            "ROOT n = f32[8] multiply(x, f32[8] broadcast(f32[] constant(1.0000001)), dimensions={})",
            "// DIFF-TOLERANCE: 1e-6\n",
            False,
        ),
    ],
)
def test_differential_compares_exactly_unless_told(
    tmp_path, monkeypatch, after, tolerance, differs
):
    from minixla.testing import lit

    path = hlo_file(
        tmp_path, "  x = f32[8] parameter(0)\n  ROOT c = f32[8] copy(x)", markers=tolerance
    )
    monkeypatch.setattr(
        lit,
        "optimized_text",
        lambda command, p: (
            "HloModule m\nENTRY main {\n  x = f32[8] parameter(0)\n  " + after + "\n}\n"
        ),
    )
    command = lit.run_lines(path.read_text())[0]
    if differs:
        with pytest.raises(lit.RunFailure, match="interpreter results differ"):
            lit.run_differential(command, path)
    else:
        lit.run_differential(command, path)


def test_differential_tells_minus_zero_from_zero(tmp_path, monkeypatch):
    from minixla.testing import lit

    path = hlo_file(
        tmp_path,
        "  x = f32[8] parameter(0)\n  ROOT z = f32[8] multiply(x, "
        "f32[8] broadcast(f32[] constant(0)), dimensions={})",
    )
    monkeypatch.setattr(
        lit,
        "optimized_text",
        lambda command, p: (
            "HloModule m\nENTRY main {\n  x = f32[8] parameter(0)\n"
            "  ROOT z = f32[8] broadcast(f32[] constant(0)), dimensions={}\n}\n"
        ),
    )
    with pytest.raises(lit.RunFailure, match="differ"):  # x * 0 is -0 for negative x
        lit.run_differential(lit.run_lines(path.read_text())[0], path)


@pytest.mark.parametrize(
    "header, markers, reason",
    [
        ("HloModule m", "// NO-DIFF: only the text matters here\n", "NO-DIFF: only the text"),
        ("HloModule m, num_partitions=2", "", "runs on several devices"),
    ],
)
def test_differential_skips_with_a_reason(tmp_path, header, markers, reason):
    from minixla.testing import lit

    path = hlo_file(
        tmp_path,
        "  x = f32[8] parameter(0)\n  ROOT n = f32[8] negate(x)",
        header=header,
        markers=markers,
    )
    with pytest.raises(pytest.skip.Exception, match=reason):
        lit.run_differential(lit.run_lines(path.read_text())[0], path)


def test_only_run_lines_with_an_opt_stage_get_a_differential():
    from minixla.testing.lit import has_opt_stage

    assert has_opt_stage("minixla opt %s --passes dce | filecheck %s")
    assert has_opt_stage("minixla-opt %s | filecheck %s")
    assert not has_opt_stage("filecheck %s")
