"""`minixla explain-fusion`: every edge fused or refused with the pass's reason; counts add up."""

import json
from pathlib import Path

import pytest

from minixla.cli import main
from minixla.text import parse_hlo_module
from minixla.tools.explain_fusion import FUSED, NO_DECISION, PARAMETER, explain_fusion
from test_tools_reduce import generated_module

ROOT = Path(__file__).resolve().parents[1]

CHAIN = """HloModule chain

ENTRY main {
  a = f32[16] parameter(0)
  b = f32[16] parameter(1)
  s = f32[16] add(a, b)
  n = f32[16] negate(s)
  ROOT m = f32[16] multiply(n, b)
}
"""

REFUSALS = """HloModule refusals

ENTRY main {
  a = f32[8,8] parameter(0)
  b = f32[8,8] parameter(1)
  e = f32[8,8] exponential(a)
  u = f32[8,8] add(e, b)
  v = f32[8,8] multiply(e, b)
  d = f32[8,8] dot(u, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  r = f32[64] reshape(e)
  w = f32[64] negate(r)
  ROOT t = (f32[8,8], f32[8,8], f32[64]) tuple(d, e, w)
}
"""


def module_edges(module) -> int:
    """Distinct producer -> consumer pairs, counted straight from the module, outside the
    computations that reduce and the like apply per element (fusion does not look there)."""
    per_element = {
        id(c)
        for comp in module.computations
        for instr in comp.instructions
        if instr.opcode not in ("call", "while", "conditional")
        for c in instr.called_computations
    }
    return sum(
        len({id(o) for o in instr.operands})
        for comp in module.computations
        if id(comp) not in per_element
        for instr in comp.instructions
    )


def test_a_chain_fuses_into_one_loop_with_its_bytes_saved():
    report = explain_fusion(parse_hlo_module(CHAIN), as_is=True)
    assert (report.edges, report.fused) == (5, 2)
    assert report.outcomes[PARAMETER] == 3
    [fusion] = report.fusions
    assert (fusion.kind, fusion.members) == ("kLoop", ["s (add)", "n (negate)", "m (multiply)"])
    # s and n stay in registers: each 64 bytes, written once and read once
    assert fusion.bytes_saved == 2 * (64 + 64)


def test_each_refusal_carries_the_pass_reason():
    report = explain_fusion(parse_hlo_module(REFUSALS), as_is=True)
    assert report.outcomes["dot cannot head a fusion"] == 2  # u -> d, v -> d
    assert report.outcomes["tuple cannot head a fusion"] == 3
    # e joins u and v (one loop exports it); r's loop runs over other dims and would recompute it
    assert (
        report.outcomes["exponential is expensive and has other users: fusing would recompute it"]
        == 1
    )
    assert sorted(f.members for f in report.fusions) == [
        ["e.2 (exponential)", "v (multiply)", "u.1 (add)"],
        ["r (reshape)", "w (negate)"],
    ]
    assert sum(report.outcomes.values()) == report.edges == module_edges(parse_hlo_module(REFUSALS))


@pytest.mark.parametrize(
    "text",
    [CHAIN, REFUSALS, generated_module(), (ROOT / "examples" / "mlp.hlo").read_text()],
    ids=["chain", "refusals", "generated", "mlp"],
)
def test_the_counts_add_up_to_the_module_edges(text):
    module = parse_hlo_module(text)
    report = explain_fusion(module, as_is=True)
    assert report.edges == module_edges(module)
    assert sum(report.outcomes.values()) == report.edges
    assert report.fused == report.outcomes[FUSED] > 0
    assert NO_DECISION not in report.outcomes
    prepared = explain_fusion(module)  # after the passes before fusion: still every edge
    assert sum(prepared.outcomes.values()) == prepared.edges


def test_the_cli_prints_groups_and_writes_json(tmp_path, capsys):
    path, dump = tmp_path / "refusals.hlo", tmp_path / "report.json"
    path.write_text(REFUSALS)
    assert main(["explain-fusion", str(path), "--as-is", "--json", str(dump)]) == 0
    out = capsys.readouterr().out
    data = json.loads(dump.read_text())
    assert out.startswith(
        f"refusals: {data['edges']} producer-consumer edges: {data['fused']} fused, "
    )
    assert "     2  dot cannot head a fusion: %u -> %d, %v -> %d" in out
    assert data["fused"] + sum(data["unfused"].values()) == data["edges"]
