"""Malformed HLO text gives HloParseError with line, column and a caret, never a crash."""

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minixla
from conformance_paths import hlo_files

GOOD = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(1)
  b = f32[4] broadcast(c), dimensions={}
  ROOT a = f32[4] add(p, b)
}
"""


def parse_error(text: str) -> minixla.HloParseError:
    with pytest.raises(minixla.HloParseError) as info:
        minixla.parse_hlo_module(text, verify=False)
    return info.value


def test_error_reports_line_column_and_caret():
    error = parse_error(GOOD.replace("add(p, b)", "add(p, q)"))
    assert (error.line, error.column) == (6, 26)  # q is the 26th character
    assert "unknown operand 'q'" in str(error)
    lines = str(error).splitlines()
    assert lines[1] == "  ROOT a = f32[4] add(p, q)"
    assert lines[2] == " " * 25 + "^"


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("add(p, b)", "addd(p, b)", "unknown opcode 'addd'"),
        ("f32[4] add", "f33[4] add", "unknown element type 'f33'"),
        ("dimensions={}", "dimensions={x}", "expected an integer"),
        ("constant(1)", "constant({1, 2})", "expected a f32 value"),
        ("f32[4] parameter(0)", "f32[4]{1,0} parameter(0)", "not a permutation"),
        ("ROOT a", "ROOT ROOT a", "expected '=', found 'a'"),
        ("b)\n}\n", "b)\n", "expected an instruction name, found end of input"),
    ],
)
def test_malformed_inputs_raise_parse_errors(old, new, message):
    assert old in GOOD
    error = parse_error(GOOD.replace(old, new))
    assert message in str(error)
    assert error.line >= 1 and error.column >= 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("HloModule m\nENTRY e {\n  ROOT c = u8[] constant(256)\n}", "out of range for u8"),
        ("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1})\n}", "needs 2"),
        ("HloModule m\nENTRY e {\n  ROOT c = s32[] constant(1.5)\n}", "not an integer"),
        ("HloModule m\nENTRY e {\n  ROOT c = pred[] constant(2)\n}", "pred values"),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] reshape(p, p)\n}",
            "reshape takes 1 operands, got 2",
        ),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT t = f32[2] transpose(p)\n}",
            "missing required attribute dimensions",
        ),
        (
            "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  p = f32[2] parameter(1)\n}",
            "defined twice",
        ),
        ("HloModule m\n", "expected at least one computation"),
        (
            "HloModule m\nENTRY e {\n  ROOT r = f32[] call(), to_apply=nowhere\n}",
            "unknown computation 'nowhere'",
        ),
        (
            'HloModule m\nENTRY e {\n  ROOT c = f32[] custom-call(), custom_call_target="x\n}',
            "unexpected character",
        ),
    ],
)
def test_specific_messages(text, message):
    assert message in str(parse_error(text))


def test_non_string_input_is_a_type_error():
    with pytest.raises(TypeError):
        minixla.parse_hlo_module(b"HloModule m")


def _corpus_texts() -> list[str]:
    files = hlo_files()
    return [f.read_text() for f in files[::7]] or [GOOD]


CORPUS = _corpus_texts()
TOKEN_SPLIT = " ,(){}[]=\n"


def _mutate(text: str, rnd: random.Random, kind: str) -> str:
    if kind == "truncate":
        return text[: rnd.randrange(len(text))]
    if kind == "swap" and len(text) > 2:
        i = rnd.randrange(len(text) - 1)
        return text[:i] + text[i + 1] + text[i] + text[i + 2 :]
    if kind == "deep":
        depth = rnd.choice([50, 500, 5000])
        return text.replace("parameter(0)", "parameter(" + "(" * depth + "0" + ")" * depth + ")", 1)
    if kind == "nested_literal":
        depth = rnd.choice([10, 2000])
        return text + "\nENTRY z {\n ROOT c = f32[1] constant(" + "{" * depth + "}" * depth + ")\n}"
    tokens = []
    current = ""
    for char in text:
        if char in TOKEN_SPLIT:
            tokens.extend([current, char])
            current = ""
        else:
            current += char
    tokens.append(current)
    i = rnd.randrange(len(tokens))
    if kind == "delete":
        del tokens[i]
    elif kind == "duplicate":
        tokens.insert(i, tokens[i])
    else:  # replace a token with another one from the text
        tokens[i] = rnd.choice(tokens)
    return "".join(tokens)


@settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    index=st.integers(0, len(CORPUS) - 1),
    seed=st.integers(0, 2**32 - 1),
    kind=st.sampled_from(
        ["truncate", "swap", "delete", "duplicate", "replace", "deep", "nested_literal"]
    ),
)
def test_fuzzed_modules_only_raise_minixla_errors(index, seed, kind):
    text = _mutate(CORPUS[index], random.Random(seed), kind)
    try:
        minixla.parse_hlo_module(text)
    except (minixla.HloParseError, minixla.VerificationError):
        pass
