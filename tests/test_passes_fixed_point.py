"""FixedPoint stops when a round changes nothing, and says so when its cap stops it first."""

from __future__ import annotations

import logging

import minixla
from minixla.passes import FixedPoint, Pass
from minixla.passes.base import run_pipeline

TEXT = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}"""


class NegateTwice(Pass):
    """Wraps the root in two negates each run: always 'changes', never converges."""

    name = "negate-twice"

    def run(self, module) -> bool:
        comp = module.entry
        root = comp.root
        once = comp.add_instruction(
            minixla.HloInstruction("negate", root.shape, [root], name=f"n{len(comp)}")
        )
        comp.root = comp.add_instruction(
            minixla.HloInstruction("negate", root.shape, [once], name=f"n{len(comp)}")
        )
        return True


class Nothing(Pass):
    name = "nothing"

    def run(self, module) -> bool:
        return False


def test_a_fixed_point_that_converges_reports_no_cap(caplog):
    pipeline = FixedPoint("quiet", [Nothing()], max_iterations=4)
    with caplog.at_level(logging.WARNING, logger="minixla.passes"):
        report = run_pipeline(pipeline, minixla.parse_hlo_module(TEXT), verify=False)
    assert pipeline.iterations == 1
    assert report.capped == [] and caplog.records == []


def test_a_fixed_point_stopped_by_its_cap_says_which_passes_still_changed(caplog):
    module = minixla.parse_hlo_module(TEXT)
    pipeline = FixedPoint("loop", [Nothing(), NegateTwice()], max_iterations=3)
    with caplog.at_level(logging.WARNING, logger="minixla.passes"):
        report = run_pipeline(pipeline, module, verify=False)
    assert pipeline.iterations == 3
    assert report.capped == [("loop", ["negate-twice"])]
    assert [r.getMessage() for r in caplog.records] == [
        "fixed point loop stopped after 3 rounds with passes still changing the module: "
        "negate-twice"
    ]
    assert "fixed point loop stopped at its cap; still changing: negate-twice" in str(report)
    assert sum(i.opcode == "negate" for i in module.entry.instructions) == 7
