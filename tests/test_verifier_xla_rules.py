"""HloVerifier rules from XLA: compare types, rng, iota, select, conditional index, composite
calls, async and copy start/done pairs. XLA's own invalid modules are checked in
test_xla_invalid_modules.py."""

import pytest

import minixla
from minixla.errors import VerificationError


def rejects(body: str, rule: str, head: str = "") -> None:
    text = f"HloModule m\n{head}ENTRY e {{\n{body}\n}}\n"
    with pytest.raises(VerificationError, match=rule):
        minixla.parse_hlo_module(text)


def accepts(body: str, head: str = "") -> None:
    minixla.parse_hlo_module(f"HloModule m\n{head}ENTRY e {{\n{body}\n}}\n")


def test_compare_type_must_fit_the_operands():
    rejects(
        "  p = f32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=UNSIGNED",
        "comparison type",
    )
    rejects(
        "  p = pred[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=SIGNED",
        "comparison type",
    )
    rejects(
        "  p = s32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=UNSIGNED",
        "comparison type",
    )
    rejects(
        "  p = u32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=SIGNED",
        "comparison type",
    )
    rejects(
        "  p = s32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=TOTALORDER",
        "comparison type",
    )
    rejects(
        "  p = c64[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT",
        "comparison direction",
    )
    accepts("  p = c64[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=NE")
    accepts(
        "  p = pred[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=UNSIGNED"
    )
    accepts(
        "  p = f32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=LT, type=TOTALORDER"
    )


def test_rng_bounds_are_scalars_of_the_result_type():
    rejects(
        "  a = f32[2] parameter(0)\n  ROOT r = f32[4] rng(a, a), distribution=rng_uniform",
        "rng operands",
    )
    rejects(
        "  a = f32[] parameter(0)\n  b = f16[] parameter(1)\n  ROOT r = f32[4] rng(a, b), "
        "distribution=rng_uniform",
        "rng element type",
    )
    accepts("  a = f32[] parameter(0)\n  ROOT r = f32[4] rng(a, a), distribution=rng_uniform")


def test_iota_select_broadcast_and_conditional_rules():
    rejects("  ROOT i = pred[4] iota(), iota_dimension=0", "iota element type")
    rejects(
        "  p = pred[] parameter(0)\n  t = (f32[]) parameter(1)\n  ROOT s = (f32[]) select(p, t, t)",
        "select",
    )
    branch = "b {\n  x = () parameter(0)\n  ROOT c = f32[] constant(1)\n}\n"
    rejects(
        "  i = s64[] parameter(0)\n  t = () tuple()\n"
        "  ROOT c = f32[] conditional(i, t), branch_computations={b}",
        "conditional index",
        head=branch,
    )


def test_composite_calls_need_their_frontend_attributes():
    head = "f {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}\n"
    call = "  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f, is_composite=true"
    rejects(call, "composite call", head)
    rejects(
        call + ', frontend_attributes={composite.name="n",composite.version="-1"}',
        "non-negative",
        head,
    )
    accepts(
        call + ', frontend_attributes={composite.name="n",composite.attributes={},'
        'composite.version="1"}',
        head,
    )


ASYNC = "a {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n"


def test_async_start_must_match_its_computation_and_have_one_done():
    rejects(
        "  p = f32[3] parameter(0)\n  s = ((f32[3]), f32[2], u32[]) async-start(p), calls=a\n"
        "  ROOT d = f32[2] async-done(s), calls=a",
        "async operands",
        ASYNC,
    )
    rejects(
        "  p = f32[2] parameter(0)\n  ROOT s = ((f32[2]), f32[2], u32[]) async-start(p), calls=a",
        "async pair",
        ASYNC,
    )
    rejects(
        "  p = f32[2] parameter(0)\n  s = ((f32[2]), f32[2], u32[]) async-start(p), calls=a\n"
        "  d = f32[2] async-done(s), calls=a\n  e = f32[2] async-done(s), calls=a\n"
        "  ROOT t = (f32[2], f32[2]) tuple(d, e)",
        "continuations",
        ASYNC,
    )
    accepts(
        "  p = f32[2] parameter(0)\n  s = ((f32[2]), f32[2], u32[]) async-start(p), calls=a\n"
        "  ROOT d = f32[2] async-done(s), calls=a",
        ASYNC,
    )


def test_copy_start_and_done():
    rejects(
        "  p = f32[2,3]{1,0} parameter(0)\n"
        "  s = (f32[2,3]{0,1}, f32[2,3]{1,0}, u32[]) copy-start(p)\n"
        "  ROOT d = f32[3,2]{1,0} copy-done(s)",
        "copy-done shape",
    )
    rejects("  p = f32[2,3] parameter(0)\n  ROOT d = f32[2,3] copy-done(p)", "async pair")
    accepts(
        "  p = f32[2,3]{1,0} parameter(0)\n"
        "  s = (f32[2,3]{0,1}, f32[2,3]{1,0}, u32[]) copy-start(p)\n"
        "  ROOT d = f32[2,3]{0,1} copy-done(s)"
    )


_PINNED = """  p = f32[8] parameter(0)
  b0 = b(f32[8]) custom-call(p), custom_call_target="Pin", output_to_operand_aliasing={{}: (0, {})}
  t = (b(f32[8]), u32[]) custom-call(b0), custom_call_target="foo",
    output_to_operand_aliasing={{0}: (0, {})}
  b1 = b(f32[8]) get-tuple-element(t), index=0
  b2 = b(f32[8]) get-tuple-element(t), index=0
"""


def test_a_buffer_version_is_written_once():
    # Unpin after a writer takes the writer's result: one chain of versions.
    accepts(
        _PINNED
        + """  w = b(f32[8]) custom-call(b1), custom_call_target="writer",
    output_to_operand_aliasing={{}: (0, {})}
  ROOT v = f32[8] custom-call(w), custom_call_target="Unpin",
    output_to_operand_aliasing={{}: (0, {})}"""
    )
    # Two writers of the version `t` returned (seen through two get-tuple-elements and a tuple).
    rejects(
        _PINNED
        + """  w = (b(f32[8]), f32[8]) custom-call(tuple(b1, p)), custom_call_target="writer",
    output_to_operand_aliasing={{0}: (0, {0})}
  ROOT v = f32[8] custom-call(b2), custom_call_target="Unpin",
    output_to_operand_aliasing={{}: (0, {})}""",
        r"%v = .*buffer: the buffer %t\{0\} is written by %w and again by %v",
    )
