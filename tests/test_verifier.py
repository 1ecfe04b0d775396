"""The verifier: each rule accepts a good module and rejects a broken one with a message that
names the computation, the instruction and the rule; every conformance module verifies."""

from pathlib import Path

import pytest

import minixla
from minixla import VerificationError, parse_hlo_module, verify
from minixla.ir import HloInstruction, Shape

CONFORMANCE = Path(__file__).resolve().parents[2] / "shared/conformance"
ADD = "add { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT s = f32[] add(x, y) }"


def module(body: str, *computations: str, header: str = ""):
    text = f"HloModule m{header}\n" + "\n".join(computations) + "\nENTRY main {\n" + body + "\n}\n"
    return parse_hlo_module(text, verify=False)


def rejects(mod, *fragments: str) -> str:
    with pytest.raises(VerificationError) as info:
        verify(mod)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_verify_is_exported_and_accepts_a_good_module():
    assert minixla.verify is verify
    mod = module(
        "a = f32[2] parameter(0)\nROOT n = f32[2] negate(a)",
        header=", entry_computation_layout={(f32[2]{0})->f32[2]{0}}",
    )
    assert verify(mod) is None


def test_add_of_mismatched_dims_names_the_instruction_and_rule():
    mod = module("a = f32[2] parameter(0)\nb = f32[3] parameter(1)\nROOT bad = f32[2] add(a, b)")
    message = rejects(
        mod,
        "computation %main",
        "%bad = f32[2]{0} add(%a, %b)",
        "shape inference failed",
        "identical dims",
    )
    assert message.startswith("computation %main, instruction ")


def test_declared_shape_must_match_the_inferred_one():
    mod = module("a = f32[2] parameter(0)\nROOT n = f32[3] negate(a)")
    rejects(mod, "shape mismatch: declared f32[3], inferred f32[2]")
    mod = module("a = f32[2] parameter(0)\nROOT c = s32[2] compare(a, a), direction=EQ")
    rejects(mod, "declared s32[2], inferred pred[2]")


def test_parse_verifies_by_default():
    text = "HloModule m\nENTRY e {\na = f32[2] parameter(0)\nROOT n = f32[3] negate(a)\n}"
    with pytest.raises(VerificationError, match="shape mismatch"):
        parse_hlo_module(text)
    parse_hlo_module(text, verify=False)


def test_reduce_with_a_wrong_to_apply():
    wrong = "wrong { x = f32[] parameter(0)\n ROOT n = f32[] negate(x) }"
    mod = module(
        "a = f32[4] parameter(0)\nz = f32[] constant(0)\n"
        "ROOT r = f32[] reduce(a, z), dimensions={0}, to_apply=wrong",
        wrong,
    )
    rejects(
        mod,
        "%r = f32[] reduce",
        "called computation signature",
        "to_apply=%wrong takes 1 parameters, expected 2",
    )


def test_layout_changes_of_copy_and_bitcast_are_allowed():
    mod = module(
        "a = f32[2,3]{1,0} parameter(0)\nc = f32[2,3]{0,1} copy(a)\n"
        "b = s32[3,2]{1,0} bitcast(c)\nROOT f = f32[6]{0} bitcast(b)"
    )
    verify(mod)
    # XLA's default (not layout-sensitive) verifier compares no sizes either; compiling such a
    # bitcast is refused (tests/test_xla_suite_syntax.py)
    verify(module("a = f32[2,3] parameter(0)\nROOT b = f64[6] bitcast(a)"))


def test_dot_may_declare_a_wider_result_type():
    verify(
        module(
            "a = s8[2,3] parameter(0)\nb = s8[3,4] parameter(1)\n"
            "ROOT d = s32[2,4] dot(a, b), lhs_contracting_dims={1}, "
            "rhs_contracting_dims={0}"
        )
    )


def test_duplicate_parameter_numbers():
    mod = module("a = f32[2] parameter(0)\nb = f32[2] parameter(0)\nROOT s = f32[2] add(a, b)")
    rejects(mod, "computation %main", "numbered 0..n-1 exactly once", "[0] appear more")
    mod = module("a = f32[2] parameter(0)\nb = f32[2] parameter(2)\nROOT s = f32[2] add(a, b)")
    rejects(mod, "have gaps")


def test_entry_computation_layout_mismatch():
    body = "a = f32[2] parameter(0)\nROOT n = f32[2] negate(a)"
    rejects(
        module(body, header=", entry_computation_layout={(f32[3]{0})->f32[2]{0}}"),
        "entry_computation_layout mismatch",
        "%a = f32[2]{0} parameter(0)",
        "f32[3]",
    )
    rejects(
        module(body, header=", entry_computation_layout={(f32[2]{0})->s32[2]{0}}"),
        "the layout's result is s32[2]",
    )
    rejects(
        module(body, header=", entry_computation_layout={()->f32[2]{0}}"),
        "has 0 parameters, the entry computation 1",
    )


def test_input_output_alias_and_buffer_donors():
    body = "a = f32[2] parameter(0)\nb = s32[] parameter(1)\nROOT t = (f32[2], s32[]) tuple(a, b)"
    verify(module(body, header=", input_output_alias={ {0}: (0, {}, may-alias) }"))
    # shapes and sizes may differ (XLA compares byte sizes only when layout-sensitive);
    # buffer assignment takes such an alias only where the byte sizes agree
    verify(module(body, header=", input_output_alias={ {1}: (0, {}, may-alias) }"))
    rejects(
        module(
            "a = (f32[2]) parameter(0)\nROOT t = (f32[2]) tuple(get-tuple-element(a), index=0)",
            header=", input_output_alias={ {}: (0, {}) }",
        ),
        "input_output_alias",
        "only arrays alias",
    )
    rejects(
        module(body, header=", input_output_alias={ {0}: (5, {}, may-alias) }"),
        "parameter 5 does not exist",
    )
    rejects(
        module(body, header=", input_output_alias={ {2}: (0, {}, may-alias) }"),
        "shape index {2} does not exist",
    )
    verify(module(body, header=", buffer_donor={ (1, {}) }"))
    rejects(
        module(body, header=", buffer_donor={ (2, {}) }"),
        "buffer_donor",
        "parameter 2 does not exist",
    )


@pytest.mark.parametrize(
    "attr, rule",
    [
        ("compare(a, a), direction=XX", "comparison direction"),
        ("compare(a, a), direction=LT, type=WEIRD", "comparison type"),
    ],
)
def test_comparison_attributes(attr, rule):
    rejects(module(f"a = f32[2] parameter(0)\nROOT c = pred[2] {attr}"), rule)


def test_attribute_ranges():
    rejects(
        module("a = f32[2,3] parameter(0)\nROOT t = f32[3,2] transpose(a), dimensions={1,1}"),
        "dimensions=[1, 1] must be unique",
    )
    rejects(
        module("a = f32[2,3] parameter(0)\nROOT r = f32[2,3] reverse(a), dimensions={2}"),
        "below the rank 2",
    )
    rejects(
        module(
            "a = f32[2] parameter(0)\nt = (f32[2]) tuple(a)\n"
            "ROOT g = f32[2] get-tuple-element(t), index=1"
        ),
        "tuple index",
    )
    rejects(module("ROOT i = s32[4] iota(), iota_dimension=1"), "iota dimension")
    rejects(
        module(
            "a = f32[2] parameter(0)\nROOT f = f32[2] fusion(a), kind=kFancy, calls=neg",
            "neg { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }",
        ),
        "fusion kind",
    )


def test_called_computation_signatures():
    ge = "ge { x = f32[] parameter(0)\n y = f32[] parameter(1)\n ROOT c = f32[] add(x, y) }"
    rejects(
        module(
            "a = f32[4,4] parameter(0)\ns = f32[2,2] parameter(1)\nz = f32[] constant(0)\n"
            "ROOT r = f32[4,4] select-and-scatter(a, s, z), window={size=2x2 stride=2x2}, "
            "select=ge, scatter=add",
            ge,
            ADD,
        ),
        r"select=%ge returns f32[]",
    )
    rejects(
        module(
            "a = f32[3] parameter(0)\nROOT s = f32[3] sort(a), dimensions={0}, to_apply=add", ADD
        ),
        "to_apply=%add returns f32[], expected pred[]",
    )
    rejects(
        module(
            "a = s32[3] parameter(0)\nROOT m = s32[3] map(a, a), dimensions={0}, to_apply=add", ADD
        ),
        "to_apply=%add parameter 0 is f32[], expected s32[]",
    )
    cond = "cond { p = f32[2] parameter(0)\n ROOT c = f32[] constant(0) }"
    body = "body { p = f32[2] parameter(0)\n ROOT n = f32[2] negate(p) }"
    rejects(
        module(
            "a = f32[2] parameter(0)\nROOT w = f32[2] while(a), condition=cond, body=body",
            cond,
            body,
        ),
        "condition=%cond returns f32[], expected pred[]",
    )


def test_structural_rules_on_programmatic_modules():
    mod = module(
        "a = f32[2] parameter(0)\nROOT n = f32[2] negate(a)",
        "other { p = f32[2] parameter(0)\n ROOT q = f32[2] negate(p) }",
    )
    other, entry = mod.computation("other"), mod.entry
    other.root.name = "n"  # names must be unique across the module
    rejects(mod, "instruction names must be unique", "also defined in %")
    other.root.name = "q"
    stray = HloInstruction("negate", entry.root.shape, [other.parameter(0)], name="stray")
    entry.add_instruction(stray)
    rejects(mod, "operands must belong to the same computation", "%p is not in %main")
    entry.instructions.remove(stray)
    stray.drop_operands()
    entry.root = HloInstruction.parameter(7, Shape.array("f32", (2,)), name="ghost")
    rejects(mod, "the root must be an instruction of the computation")


def test_operand_count_and_required_attributes():
    mod = module("a = f32[2] parameter(0)\nROOT n = f32[2] negate(a)")
    mod.entry.root.append_operand(mod.entry.parameter(0))
    rejects(mod, "%n = f32[2]{0} negate(%a, %a)", "operand count")
    mod = module("a = f32[2] parameter(0)\nROOT c = pred[2] compare(a, a), direction=LT")
    del mod.entry.root.attrs["direction"]
    rejects(mod, "required attribute", "compare needs direction")
    mod.entry.root.opcode = "no-such-op"
    rejects(mod, "%c (no-such-op)", "unknown opcode")


def test_recursion_is_rejected():
    mod = module(
        "a = f32[2] parameter(0)\nROOT c = f32[2] call(a), to_apply=f",
        "f { p = f32[2] parameter(0)\n ROOT q = f32[2] negate(p) }",
    )
    callee = mod.computation("f")
    callee.root.attrs["to_apply"] = callee
    callee.root.opcode = "call"
    rejects(mod, "computations may not call themselves", "%f -> %f")


def _conformance_files():
    if not CONFORMANCE.is_dir():
        return []
    return sorted(CONFORMANCE.glob("cases/*/*.hlo"))


@pytest.mark.skipif(not CONFORMANCE.is_dir(), reason="shared/conformance is not present")
@pytest.mark.parametrize("path", _conformance_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_conformance_modules_verify(path):
    verify(parse_hlo_module(path.read_text(), verify=True))
