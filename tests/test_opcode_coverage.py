"""Every row of the opcode table is implemented or explicitly declined, with a reason, by each
layer that keeps a per-opcode table: the reference semantics, automatic differentiation,
batching, and the builder's functions. A new row fails here until each layer decides."""

from __future__ import annotations

import pytest

import minixla
from minixla.frontend import ops
from minixla.ir.opcodes import CONTROL_FLOW, FORWARDING, OPCODES, opcodes_with
from minixla.reference.evaluator import DECLINED as REFERENCE_DECLINED
from minixla.reference.evaluator import handlers
from minixla.transforms import autodiff, batching_rules

# Ops every walker handles itself (a parameter is an input; tuples are how values are grouped).
WALKED = {
    "reference": {"parameter"},
    "autodiff": {"tuple", "get-tuple-element"},
    "batching": set(),
    "builder": set(),
}

LAYERS = {
    "reference": (lambda: handlers(), REFERENCE_DECLINED),
    "autodiff": (lambda: autodiff.RULES, autodiff.DECLINED),
    "batching": (lambda: batching_rules.BATCHING_RULES, batching_rules.DECLINED),
    "builder": (lambda: ops.OPCODE_FUNCTIONS, ops.NO_FUNCTION),
}


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_every_row_is_implemented_or_declined_with_a_reason(layer):
    implemented, declined = LAYERS[layer][0](), LAYERS[layer][1]
    undecided = [
        op
        for op in OPCODES
        if op not in implemented and op not in declined and op not in WALKED[layer]
    ]
    both = [op for op in OPCODES if op in implemented and op in declined]
    assert not undecided, f"{layer}: no rule and no declined reason for {undecided}"
    assert not both, f"{layer}: both a rule and a declined reason for {both}"
    assert all(isinstance(why, str) and len(why) > 10 for why in declined.values())
    assert set(declined) <= set(OPCODES), f"{layer} declines unknown opcodes"


def test_declined_batching_names_the_reason():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT d = f32[4] domain(p), domain={kind="sharding", entry={replicated}, exit={replicated}}
}"""
    module = minixla.parse_hlo_module(text)
    from minixla.transforms.batching_values import Batching, BatchingError

    batching = Batching(3, batching_rules.BATCHING_RULES, batching_rules.DECLINED)
    with pytest.raises(BatchingError, match="domain .*no rule yet"):
        batching.apply(module.entry.root, [(None, 0)])  # one operand batched along dim 0


def test_row_traits_name_the_ops_passes_treat_alike():
    assert CONTROL_FLOW == {"while", "conditional", "call"}
    assert {"tuple", "get-tuple-element", "bitcast", "opt-barrier"} <= FORWARDING
    assert "add" not in FORWARDING
    # f(f(x)) = f(x): the simplifier folds the repeat for exactly these
    assert opcodes_with("idempotent", arity=1) == {
        "abs",
        "sign",
        "floor",
        "ceil",
        "round-nearest-afz",
        "round-nearest-even",
    }


@pytest.mark.parametrize(
    "opcode",
    sorted(
        op
        for op, row in OPCODES.items()
        if row.kind == "elementwise"
        and row.arity in (1, 2)
        and row.shape_optional
        and set(row.required_attrs) <= {"exponent_bits", "mantissa_bits"}
    ),
)
def test_element_kinds_of_the_row_are_what_the_verifier_accepts(opcode):
    """The fuzzer and the front ends draw operand types from the row, so it must not lie."""
    row = OPCODES[opcode]
    for dtype, kind in (("f32", "float"), ("s32", "signed"), ("u32", "unsigned"), ("pred", "pred")):
        params = "".join(f"  p{i} = {dtype}[2] parameter({i})\n" for i in range(row.arity))
        operands = ", ".join(f"p{i}" for i in range(row.arity))
        text = f"HloModule m\nENTRY e {{\n{params}  ROOT r = {opcode}({operands})\n}}\n"
        if opcode == "reduce-precision":
            text = text.replace("(p0)", "(p0), exponent_bits=5, mantissa_bits=10")
        if kind in row.kinds:
            minixla.parse_hlo_module(text)
        else:
            with pytest.raises(minixla.MinixlaError, match="element type"):
                minixla.parse_hlo_module(text)
