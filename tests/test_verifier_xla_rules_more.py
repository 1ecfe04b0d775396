"""More HloVerifier and parser rules from XLA, each with a module it rejects (naming the rule
and the instruction) and a close one it accepts: operand counts, literal ranges, execution
threads, async ops, output_to_operand_aliasing, buffers, collectives, I/O shapes, shardings of
control flow, custom calls, result_accuracy and computation signatures."""

import pytest

import minixla
from minixla.errors import HloParseError, VerificationError


def module(body: str, head: str = "", header: str = "") -> str:
    return f"HloModule m{header}\n{head}ENTRY e {{\n{body}\n}}\n"


def rejects(body: str, rule: str, head: str = "", header: str = "", name: str = "") -> None:
    with pytest.raises(VerificationError, match=rule) as info:
        minixla.parse_hlo_module(module(body, head, header))
    assert name in str(info.value)


def accepts(body: str, head: str = "", header: str = "") -> None:
    minixla.parse_hlo_module(module(body, head, header))


def parse_error(body: str, message: str, head: str = "") -> HloParseError:
    with pytest.raises(HloParseError, match=message) as info:
        minixla.parse_hlo_module(module(body, head), verify=False)
    return info.value


@pytest.mark.parametrize(
    "literal",
    [
        "f32[] constant(1e39)",
        "f16[] constant(70000)",
        "f16[] constant(-65520)",
        "bf16[] constant(1e100)",
        "f64[] constant(1.8e308)",
        "c64[] constant((1e100, 0))",
        "f8e4m3fn[] constant(500)",
        "f32[2] constant({1, -1e40})",
        "s8[] constant(128)",
        "u32[] constant(4294967296)",
    ],
)
def test_literals_out_of_range_are_located_parse_errors(literal):
    error = parse_error(f"  ROOT c = {literal}", "out of range")
    assert str(error).startswith("3:")  # line 3, the constant's line, then the column


def test_literals_in_range_and_infinities_parse_to_their_values():
    values = {
        "f16[] constant(-65505)": -65504.0,
        "bf16[] constant(-65505)": -65536.0,
        "f32[] constant(-inf)": float("-inf"),
        "f8e4m3fn[] constant(448)": 448.0,
        "u64[] constant(-1)": 2**64 - 1,
        "f64[] constant(1e-400)": 0.0,
    }
    for literal, want in values.items():
        root = minixla.parse_hlo_module(module(f"  ROOT c = {literal}")).entry.root
        assert float(root.literal) == float(want), literal


def test_nan_payloads_need_a_type_with_payload_bits():
    parse_error("  ROOT c = f8e4m3fn[1] constant({nan(0x1)})", "no NaN payloads")
    root = minixla.parse_hlo_module(module("  ROOT c = f32[1] constant({nan(0x1)})")).entry.root
    assert root.literal.view("uint32")[0] == 0x7F800001


def test_operand_counts_have_minimums():
    error = parse_error("  ROOT c = f32[] conditional()", "at least 1 operands")
    assert str(error).startswith("3:")


def test_computation_signature_must_match_the_root():
    with pytest.raises(HloParseError, match="returns f32\\[1\\] in its signature"):
        minixla.parse_hlo_module(
            "HloModule m\nENTRY e () -> f32[1] {\n  ROOT c = f32[1,2] constant({{1, 2}})\n}\n"
        )


THREADED = 'f {\n  x = f32[] parameter(0)\n  ROOT n = f32[] negate(x)\n}, execution_thread="t"\n'


def test_calls_stay_on_the_callers_thread():
    rejects(
        "  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f",
        "execution thread",
        THREADED,
        name="%c",
    )
    accepts(
        "  p = f32[] parameter(0)\n"
        '  s = ((f32[]), f32[], s32[]) async-start(p), calls=f, async_execution_thread="t"\n'
        "  ROOT d = f32[] async-done(s)",
        THREADED,
    )


ASYNC = (
    "a {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n"
    "b {\n  x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x)\n}\n"
)
START = "  p = f32[2] parameter(0)\n  s = ((f32[2]), f32[2], s32[]) async-start(p), calls=a\n"


def test_async_continuations():
    rejects(
        "  p = f32[2] parameter(0)\n  s = (f32[2], f32[2], s32[]) async-start(p), calls=a\n"
        "  ROOT d = f32[2] async-done(s)",
        "async shape",
        ASYNC,
        name="%s",
    )
    rejects(
        START + "  d = f32[2] async-done(s)\n  ROOT e = f32[2] async-done(d)",
        "not the async-done",
        ASYNC,
        name="%e",
    )
    rejects(START + "  ROOT d = f32[2] async-done(s), calls=b", "async computation", ASYNC)
    rejects(
        START + '  ROOT d = f32[2] async-done(s), async_execution_thread="x"', "async thread", ASYNC
    )
    rejects(
        START + "  u = (f32[2], f32[2], s32[]) async-update(s)\n  ROOT d = f32[2] async-done(u)",
        "async shape",
        ASYNC,
        name="%u",
    )
    accepts(
        START + "  u = ((f32[2]), f32[2], s32[]) async-update(s)\n"
        "  ROOT d = f32[2] async-done(u), calls=a",
        ASYNC,
    )


PAIR = (
    "t {\n  x = f32[3] parameter(0)\n  y = f32[3] parameter(1)\n"
    "  ROOT r = (f32[3], f32[3]) tuple(x, y)\n}\n"
)
LATE = "  p = f32[3] parameter(0)\n  s = ((f32[3], f32[3]), (), s32[]) async-start(p, p), calls=t\n"


def test_late_bound_async_outputs():
    accepts(
        LATE + "  u = ((f32[3], f32[3]), (f32[3]), s32[]) async-update(s)\n"
        "  v = ((f32[3], f32[3]), (f32[3], f32[3]), s32[]) async-update(u)\n"
        "  ROOT d = (f32[3], f32[3]) async-done(v)",
        PAIR,
    )
    rejects(
        LATE + "  u = ((f32[3], f32[3]), (f32[9]), s32[]) async-update(s)\n"
        "  ROOT d = (f32[9]) async-done(u)",
        "outputs bound so far",
        PAIR,
        name="%u",
    )
    rejects(
        LATE + "  u = ((f32[3], f32[3]), (f32[3]), s32[]) async-update(s)\n"
        "  ROOT d = (f32[3]) async-done(u)",
        "every output must be bound",
        PAIR,
    )
    rejects(
        "  s = ((), f32[3], s32[]) async-start(), calls=a\n  ROOT d = f32[3] async-done(s)",
        "1 operands, 0 were passed",
        "a {\n  x = f32[3] parameter(0)\n  ROOT n = f32[3] negate(x)\n}\n",
    )


STATE = "(((f32[2]), f32[2], s32[]))"
LOOP = f"""cond {{
  s = {STATE} parameter(0)
  ROOT c = pred[] constant(false)
}}
body {{
  s = {STATE} parameter(0)
  g = ((f32[2]), f32[2], s32[]) get-tuple-element(s), index=0
  ROOT t = {STATE} tuple(g)
}}
a1 {{
  ROOT p = f32[2] parameter(0)
}}
"""
NEGATE = "a2 {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n"
SAME = "a2 {\n  ROOT q = f32[2] parameter(0)\n}\n"
THROUGH = (
    "  p = f32[2] parameter(0)\n  s = ((f32[2]), f32[2], s32[]) async-start(p), calls=a1\n"
    f"  i = {STATE} tuple(s)\n  w = {STATE} while(i), condition=cond, body=body\n"
    "  g = ((f32[2]), f32[2], s32[]) get-tuple-element(w), index=0\n"
)


def test_async_state_through_a_loop_keeps_its_computation():
    rejects(
        THROUGH + "  ROOT d = f32[2] async-done(g), calls=a2",
        "its state comes from %s",
        LOOP + NEGATE,
        name="%d",
    )
    accepts(THROUGH + "  ROOT d = f32[2] async-done(g), calls=a1", LOOP + NEGATE)
    accepts(THROUGH + "  ROOT d = f32[2] async-done(g), calls=a2", LOOP + SAME)  # equal
    rejects(
        START + "  u = ((f32[2]), f32[2], s32[]) async-update(s)\n  ROOT d = f32[2] async-done(s)",
        "continuations|neither continued",
        ASYNC,
    )


def test_async_sugar_continues_the_op_it_started():
    parse_error(
        "  p = f32[2] parameter(0)\n"
        '  s = ((f32[2]), f32[2], s32[]) custom-call-start(p), custom_call_target="f"\n'
        "  ROOT d = f32[2] add-done(s)",
        "continues an async custom-call",
    )


def test_output_to_operand_aliasing():
    call = '  p = f32[4] parameter(0)\n  ROOT c = f32[4] custom-call(p), custom_call_target="f"'
    rejects(call + ", output_to_operand_aliasing={{}: (1, {})}", "operand 1 does not exist")
    rejects(call + ", output_to_operand_aliasing={{0}: (0, {})}", "does not exist in")
    rejects(
        call.replace("ROOT c = f32[4]", "ROOT c = s32[4]")
        + ", output_to_operand_aliasing={{}: (0, {})}",
        "output_to_operand_aliasing",
    )
    accepts(call + ", output_to_operand_aliasing={{}: (0, {})}")
    rejects(
        START.replace("calls=a", "calls=a, output_to_operand_aliasing={{}: (0, {})}")
        + "  ROOT d = f32[2] async-done(s)",
        "whole result",
        ASYNC,
    )


PIN = (
    '  p = f32[4] parameter(0)\n  b = b(f32[4]) custom-call(p), custom_call_target="Pin", '
    "output_to_operand_aliasing={{}: (0, {})}\n"
)
UNPIN = 'custom_call_target="Unpin", output_to_operand_aliasing={{}: (0, {})}'


def test_buffers():
    accepts(PIN + f"  ROOT v = f32[4] custom-call(b), {UNPIN}")
    rejects(
        PIN + '  ROOT v = f32[4] custom-call(b), custom_call_target="Unpin"', "Unpin must alias"
    )
    rejects(
        PIN + f"  a = b(f32[4]) add(b, b)\n  ROOT v = f32[4] custom-call(a), {UNPIN}",
        "add cannot produce a buffer",
        name="%a",
    )
    rejects(
        PIN + '  r = f32[4] custom-call(b), custom_call_target="read"\n'
        "  ROOT t = (f32[4]) tuple(r)",
        "appears 0 times",
    )
    rejects(
        PIN + '  n = b(f32[4]) custom-call(p), custom_call_target="make"\n'
        f"  ROOT v = f32[4] custom-call(n), {UNPIN}",
        "no operand passed in",
    )
    rejects(
        "  p = b(f32[4]) parameter(0)\n  ROOT v = f32[4] custom-call(p), " + UNPIN,
        "entry parameters cannot be buffers",
    )


ADD = "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n"


def test_collectives():
    p = "  p = f32[8] parameter(0)\n"
    rejects(
        p + "  ROOT r = f32[8] all-reduce(p), replica_groups={{0,1}}, "
        "use_global_device_ids=true, to_apply=add",
        "needs a channel_id",
        ADD,
    )
    rejects(
        p + "  ROOT r = f32[8] all-reduce(p), replica_groups={}, channel_id=1, "
        "use_global_device_ids=true, to_apply=add",
        "non-empty replica_groups",
        ADD,
    )
    rejects(
        p + "  ROOT g = f32[16] all-gather(p, p), dimensions={0}, replica_groups={{0,1}}",
        "returns a tuple of 2",
    )
    rejects(
        p + "  ROOT a = (f32[8], f32[8], f32[8]) all-to-all(p, p, p), replica_groups={{0,1}}",
        "one per member",
    )
    rejects(
        p + "  ROOT c = f32[8] collective-permute(p), source_target_pairs={{0,1},{0,2}}",
        "device 0 is a source more than once",
    )
    accepts(p + "  ROOT c = f32[8] collective-permute(p), source_target_pairs={{0,1},{1,0}}")
    rejects(
        p + "  a = f32[8] all-reduce(p), replica_groups={}, to_apply=add\n"
        "  b = f32[8] all-reduce(p), replica_groups={}, to_apply=add, constrain_layout=true\n"
        "  ROOT t = (f32[8], f32[8]) tuple(a, b)",
        "constrain_layout",
        ADD,
    )


def test_io_shapes_and_host_transfer_channels():
    rejects("  t = token[] after-all()\n  ROOT i = pred[] infeed(t)", "infeed shape")
    rejects("  t = token[] after-all()\n  ROOT r = f32[10] recv(t)", "recv shape")
    rejects(
        "  c = f32[] constant(0)\n  t = token[] after-all()\n"
        "  s = (f32[], u32[], token[]) send(c, t), channel_id=1, is_host_transfer=true\n"
        "  d = token[] send-done(s), channel_id=1, is_host_transfer=true\n"
        "  e = f32[2] constant({1, 2})\n"
        "  s2 = (f32[2], u32[], token[]) send(e, d), channel_id=1, is_host_transfer=true\n"
        "  ROOT d2 = token[] send-done(s2), channel_id=1, is_host_transfer=true",
        "host transfer channel",
    )


def test_control_flow_shardings_agree():
    body = (
        "body {\n  s = f32[] parameter(0), sharding={replicated}\n"
        "  ROOT n = f32[] negate(s)\n}\n"
        "cond {\n  s = f32[] parameter(0), sharding={maximal device=0}\n"
        "  ROOT c = pred[] constant(true)\n}\n"
    )
    rejects(
        "  p = f32[] parameter(0)\n  ROOT w = f32[] while(p), condition=cond, body=body",
        "inconsistent sharding",
        body,
    )
    accepts(
        "  p = f32[] parameter(0)\n  ROOT w = f32[] while(p), condition=cond, body=body",
        body.replace("maximal device=0", "replicated"),
    )


def test_custom_calls_and_result_accuracy():
    p = "  p = f32[4] parameter(0)\n"
    rejects(
        p + '  ROOT c = f32[4] custom-call(p), custom_call_target="f", '
        "api_version=API_VERSION_UNSPECIFIED",
        "api_version",
    )
    rejects(
        p + '  ROOT c = f32[4] custom-call(p, p), custom_call_target="f", '
        "operand_layout_constraints={f32[4]{0}}",
        "1 constraints for 2 operands",
    )
    rejects(
        p + '  ROOT c = f32[4] custom-call(p), custom_call_target="f", '
        "operand_layout_constraints={f32[5]{0}}",
        "its constraint",
    )
    rejects(
        '  ROOT c = u32[] custom-call(), custom_call_target="GetRngSeed"',
        "GetRngSeed takes 0 operands and returns u64",
    )
    accepts('  ROOT c = u64[] custom-call(), custom_call_target="GetRngSeed"')
    rejects(p + "  ROOT e = f32[4] exponential(p), result_accuracy={mode=high}", "result_accuracy")
    accepts(p + "  ROOT e = f32[4] exponential(p), result_accuracy={mode=highest}")
    accepts(
        p + "  ROOT e = f32[4] exponential(p), result_accuracy={tolerance={atol=0,rtol=0.5,ulps=2}}"
    )


def test_memory_spaces_origins_and_dynamic_reshape():
    rejects(
        "  x = f32[10]{0} parameter(0)\n  ROOT a = f32[10]{0} add(x, x)",
        "memory space",
        header=", input_output_alias={{}: (0, {}, must-alias)}, "
        "entry_computation_layout={(f32[10]{0:S(5)})->f32[10]{0}}",
    )
    rejects('  ROOT p = f32[] parameter(0), origin={({"a"}, {"b"})}', "origin")
    accepts('  ROOT p = (f32[], f32[]) parameter(0), origin={({"a"}, {"b"})}')
    rejects(
        "  a = f32[4,<=8] parameter(0)\n  n = s32[] parameter(1)\n"
        "  ROOT r = f32[4,<=7] dynamic-reshape(a, n, n)",
        "elements at its bounds",
    )
    rejects(
        "  a = bf16[4] parameter(0)\n  r = u32[4] parameter(1)\n"
        "  ROOT c = s32[4] stochastic-convert(a, r)",
        "bit width",
    )
