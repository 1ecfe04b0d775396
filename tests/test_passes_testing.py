"""minixla.testing itself: matcher messages, FileCheck, no-change checks and value comparison."""
import numpy as np
import pytest

import minixla
from minixla.testing import (assert_matches, assert_same_results, check_hlo, check_pass, m,
                             random_inputs, run_pass)

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
    captures = assert_matches(root(), m.Add(m.Parameter(0, name="p"),
                                            m.Broadcast(m.ConstantScalar(1), name="b")))
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
