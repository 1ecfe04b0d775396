"""`minixla explain-fusion FILE.hlo`: why each producer-consumer edge was fused or not.

The module first goes through the CPU pipeline's passes that come before `fusion` (unless
`--as-is`), so the fusion pass sees what it sees in a real compile. Then the fusion pass runs
and every edge (a distinct producer -> consumer operand pair in the computations fusion works
on) lands in exactly one bucket: fused into a fusion, or left unfused with a reason. Reasons
are the pass's own `Decision`s (fusion_cost.py), plus the cases the pass never asks about:
a producer that is a parameter, a consumer that cannot head a fusion. For each fusion the
report gives its kind, members and the bytes it saves by an estimate: every member value that
is not an output would have been written to memory once and read back by each of its users.
`--json FILE` writes the same report as data.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field

from .common import ToolError, load_module

FUSED = "fused"
PARAMETER = "producer is a parameter (its value is read from memory)"
MERGED = "merged into an identical instruction"
NO_DECISION = "left unfused with no recorded decision"


@dataclass(frozen=True)
class _Tag:
    """Marks where an instruction came from; kept in `metadata`, which clones keep and
    equality ignores, so tagging does not change what fusion decides."""

    index: int
    metadata: object = None


@dataclass
class FusionInfo:
    name: str
    kind: str
    members: list[str]
    bytes_saved: int


@dataclass
class FusionReport:
    module: str
    edges: int = 0
    outcomes: Counter = field(default_factory=Counter)  # FUSED or a reason -> edge count
    examples: dict[str, list[str]] = field(default_factory=dict)  # reason -> a few "p -> c"
    fusions: list[FusionInfo] = field(default_factory=list)

    @property
    def fused(self) -> int:
        return self.outcomes[FUSED]

    def as_dict(self) -> dict:
        return {
            "module": self.module,
            "edges": self.edges,
            "fused": self.fused,
            "unfused": {r: n for r, n in self.outcomes.items() if r != FUSED},
            "examples": self.examples,
            "fusions": [vars(f) for f in self.fusions],
        }


def explain_fusion(module, *, as_is: bool = False, multi_output: bool = True) -> FusionReport:
    """Runs fusion on a copy of `module` (after the CPU passes before it unless `as_is`)."""
    from ..passes.fusion import InstructionFusion
    from ..passes.hlo_utils import sequential_computations

    module = module.clone()
    if not as_is:
        try:
            _prepare(module)
        except Exception as exc:  # noqa: BLE001 - a crashing pass is reported, not raised
            raise ToolError(
                f"a pass before fusion failed ({type(exc).__name__}: "
                f"{_first_line(exc)}); try --as-is, or minixla bisect"
            ) from None
    originals = _tag(module, sequential_computations(module))
    edges = [(c.operands[i], c, i) for c in originals for i in _first_uses(c)]
    fusion = InstructionFusion(multi_output=multi_output)
    try:
        fusion.run(module)
    except Exception as exc:  # noqa: BLE001
        raise ToolError(
            f"the fusion pass failed ({type(exc).__name__}: {_first_line(exc)})"
        ) from None
    top, copies, fusions = _locate(module, originals)
    decisions = Decisions(fusion.decisions, edges)
    report = FusionReport(module.name, len(edges))
    for producer, consumer, position in edges:
        outcome = _outcome(producer, consumer, position, top, copies, decisions)
        report.outcomes[outcome] += 1
        shown = report.examples.setdefault(outcome, [])
        if outcome != FUSED and len(shown) < 3:
            shown.append(f"%{producer.name} -> %{consumer.name}")
    report.examples.pop(FUSED, None)
    report.fusions = [_describe(f) for f in fusions]
    return report


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _prepare(module) -> None:
    from ..passes.base import Pipeline, run_pipeline
    from ..passes.pipelines import cpu_pipeline

    passes = cpu_pipeline().passes
    before = passes[: [p.name for p in passes].index("fusion")]
    run_pipeline(Pipeline("before-fusion", before), module, verify=False)


def _tag(module, computations) -> list:
    """Tags every instruction of `computations`; returns them, indexed by tag."""
    originals = []
    for comp in computations:
        for instr in comp.post_order():
            instr.attrs["metadata"] = _Tag(len(originals), instr.attrs.get("metadata"))
            originals.append(instr)
    return originals


def _tag_of(instr) -> int | None:
    tag = instr.attrs.get("metadata")
    return tag.index if isinstance(tag, _Tag) else None


def _locate(module, originals):
    """Where each original lives after fusion: `top` (tag -> itself, still unfused), `copies`
    (tag -> [(member, fusion)]), and the fusion instructions."""
    from ..passes.hlo_utils import sequential_computations

    top, copies, fusions = {}, {}, []
    for comp in sequential_computations(module):
        for instr in comp.instructions:
            index = _tag_of(instr)
            if instr.opcode == "fusion":
                fusions.append(instr)
                for member in instr.attrs["calls"].instructions:
                    if _tag_of(member) is not None:
                        copies.setdefault(_tag_of(member), []).append((member, instr))
                if index is not None and originals[index].opcode != "fusion":
                    continue  # a new fusion carries its first consumer's metadata
            if index is not None:
                top[index] = instr
    return top, copies, fusions


def _first_uses(instr) -> list[int]:
    """The operand positions where each distinct operand first appears."""
    seen: set[int] = set()
    return [i for i, o in enumerate(instr.operands) if not (id(o) in seen or seen.add(id(o)))]


def _outcome(producer, consumer, position, top, copies, decisions) -> str:
    from ..passes.fusion import is_fusion_consumer

    index = _tag_of(consumer)
    at_top, placed = top.get(index), copies.get(index)
    if at_top is not None and consumer.opcode == "fusion":
        # a fusion from the input, rebuilt or not: fused when the producer now lives in it
        if any(f is at_top for _, f in copies.get(_tag_of(producer), [])):
            return FUSED
        where = (at_top.name, consumer.name)
    elif at_top is not None:  # still a lone instruction (copies of it elsewhere do not count)
        if producer.opcode != "parameter" and not is_fusion_consumer(consumer):
            return f"{consumer.opcode} cannot head a fusion"
        where = (consumer.name,)
    elif placed:
        member, fusion = next(((m, f) for m, f in placed if m.name == consumer.name), placed[0])
        if member.operand(position).opcode != "parameter":
            return FUSED
        where = (fusion.name, consumer.name)
    else:
        return MERGED
    if producer.opcode == "parameter":
        return PARAMETER
    return decisions.reason(producer, consumer, where)


class Decisions:
    """The fusion pass's refusals, found by the names producer and consumer had then."""

    def __init__(self, refusals, edges):
        self.exact = {(p, c): d.reason for p, c, d in refusals}
        self.by_producer: dict[str, list[tuple[str, str]]] = {}
        for p, c, d in refusals:
            self.by_producer.setdefault(p, []).append((c, d.reason))
        self.consumers: dict[int, set[str]] = {}  # producer -> its consumers' names
        for producer, consumer, _ in edges:
            self.consumers.setdefault(id(producer), set()).add(consumer.name)

    def reason(self, producer, consumer, where) -> str:
        for name in where:
            if (producer.name, name) in self.exact:
                return self.exact[(producer.name, name)]
        # The consumer's fusion was merged into another since: take the last refusal of this
        # producer by a fusion (not by one of its other consumers).
        others = self.consumers.get(id(producer), set()) - {consumer.name}
        found = [r for c, r in self.by_producer.get(producer.name, []) if c not in others]
        return found[-1] if found else NO_DECISION


def _describe(fusion) -> FusionInfo:
    fused = fusion.attrs["calls"]
    root = fused.root
    outputs = {id(o) for o in (root.operands if root.opcode == "tuple" else [root])}
    outputs.add(id(root))
    members = [i for i in fused.post_order() if i.opcode != "parameter"]
    saved = sum(
        i.shape.byte_size() * (1 + len(i.distinct_users()))
        for i in members
        if id(i) not in outputs and i.shape.is_array
    )
    return FusionInfo(
        fusion.name,
        fusion.attrs.get("kind", "?"),
        [f"{i.name} ({i.opcode})" for i in members if i.opcode != "tuple"],
        saved,
    )


def format_report(report: FusionReport) -> str:
    unfused = report.edges - report.fused
    lines = [
        f"{report.module}: {report.edges} producer-consumer edges: {report.fused} fused, "
        f"{unfused} not fused",
        f"fusions ({len(report.fusions)}):",
    ]
    for f in report.fusions:
        lines.append(
            f"  %{f.name}: {f.kind}, {len(f.members)} ops, ~{f.bytes_saved} bytes "
            f"saved: {', '.join(f.members)}"
        )
    lines.append("not fused, by reason:")
    reasons = sorted(
        ((n, r) for r, n in report.outcomes.items() if r != FUSED),
        key=lambda item: (-item[0], item[1]),
    )
    for count, reason in reasons:
        lines.append(
            f"  {count:4d}  {reason}: {', '.join(report.examples[reason])}"
            + (", ..." if count > len(report.examples[reason]) else "")
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="HLO text file")
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="fuse the module as written (default: run the CPU passes that "
        "come before fusion first)",
    )
    parser.add_argument(
        "--no-multi-output", action="store_true", help="producer-consumer fusion only"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the report as JSON")


def main(args) -> int:
    module = load_module(args.file)
    report = explain_fusion(module, as_is=args.as_is, multi_output=not args.no_multi_output)
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report.as_dict(), out, indent=1)
    return 0
