"""`minixla diff A.hlo B.hlo`: a structural diff of two modules.

Computations pair up by name (the entries always pair). Inside a pair, instructions match first
by name and shape, then, for renamed ones, by opcode and already-matched operands (walking B in
post-order, so operands match before their users). What is left is added or removed; a matched
pair whose opcode, attributes, literal or operands differ is changed. Text moves, reordering and
layout-free reprinting do not count.

Exit status follows diff(1) where the CLI allows: 0 when the modules are the same, 1 when they
differ. Trouble (a missing or unparsable file) is an error, which every minixla command reports
as one line on stderr with status 1; a script that must tell "different" from "trouble" looks
at stderr, which stays empty for a difference.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from ..errors import HloParseError
from .common import ToolError, load_module


@dataclass
class ComputationDiff:
    name: str
    added: list = field(default_factory=list)  # instructions only in B
    removed: list = field(default_factory=list)  # instructions only in A
    changed: list = field(default_factory=list)  # (a, b) pairs that differ beyond the name
    renamed: list = field(default_factory=list)  # (a, b) pairs that differ only in the name
    order: list = field(default_factory=list)  # B's post-order, for printing

    def empty(self, ignore_names: bool = False) -> bool:
        return not (
            self.added or self.removed or self.changed or (self.renamed and not ignore_names)
        )


@dataclass
class ModuleDiff:
    computations: list[ComputationDiff] = field(default_factory=list)
    added: list = field(default_factory=list)  # computations only in B
    removed: list = field(default_factory=list)  # computations only in A

    def empty(self, ignore_names: bool = False) -> bool:
        return not (self.added or self.removed) and all(
            c.empty(ignore_names) for c in self.computations
        )

    def counts(self) -> dict[str, int]:
        return {
            key: sum(len(getattr(c, key)) for c in self.computations)
            for key in ("added", "removed", "changed", "renamed")
        }


def diff_modules(a, b) -> ModuleDiff:
    result = ModuleDiff()
    pairs = _pair_computations(a, b)
    paired_a = {id(ca) for ca, _ in pairs}
    paired_b = {id(cb) for _, cb in pairs}
    result.removed = [c for c in a.computations if id(c) not in paired_a]
    result.added = [c for c in b.computations if id(c) not in paired_b]
    result.computations = [diff_computations(ca, cb) for ca, cb in pairs]
    return result


def _pair_computations(a, b) -> list[tuple]:
    pairs = [(a.entry, b.entry)] if a.has_entry and b.has_entry else []
    used = {id(c) for pair in pairs for c in pair}
    by_name = {c.name: c for c in b.computations if id(c) not in used}
    for comp in a.computations:
        other = by_name.get(comp.name)
        if id(comp) not in used and other is not None:
            pairs.append((comp, other))
            used.add(id(other))
    # renamed computations: a leftover pair with the same structure
    left_b = [c for c in b.computations if id(c) not in used]
    for comp in [c for c in a.computations if id(c) not in {id(p[0]) for p in pairs}]:
        other = next((c for c in left_b if comp.structurally_equal(c)), None)
        if other is not None:
            pairs.append((comp, other))
            left_b.remove(other)
    return pairs


def diff_computations(ca, cb) -> ComputationDiff:
    match = _match(ca, cb)
    result = ComputationDiff(cb.name)
    matched_b = set()
    for ia in ca.post_order():
        ib = match.get(id(ia))
        if ib is None:
            result.removed.append(ia)
            continue
        matched_b.add(id(ib))
        if not _same(ia, ib, match):
            result.changed.append((ia, ib))
        elif ia.name != ib.name:
            result.renamed.append((ia, ib))
    result.order = cb.post_order()
    result.added = [ib for ib in result.order if id(ib) not in matched_b]
    return result


def _match(ca, cb) -> dict[int, object]:
    """id(instruction of A) -> its counterpart in B."""
    match: dict[int, object] = {}
    taken: set[int] = set()
    by_name = {i.name: i for i in cb.instructions}
    for ia in ca.instructions:
        ib = by_name.get(ia.name)
        if ib is not None and ib.shape == ia.shape:
            match[id(ia)] = ib
            taken.add(id(ib))
    # Renamed instructions: same opcode, same (matched) operands; operands match first.
    candidates: dict[tuple, list] = {}
    for ia in ca.post_order():
        if id(ia) not in match:
            candidates.setdefault(_key(ia, None), []).append(ia)
    back = {id(ib): ia for ia in ca.instructions for ib in [match.get(id(ia))] if ib is not None}
    for ib in cb.post_order():
        if id(ib) in taken:
            continue
        pool = candidates.get(_key(ib, back), [])
        ia = next((x for x in pool if x.same_op(ib)), pool[0] if pool else None)
        if ia is not None:
            pool.remove(ia)
            match[id(ia)] = ib
            back[id(ib)] = ia
            taken.add(id(ib))
    return match


def _key(instr, back: dict | None) -> tuple:
    """Opcode, parameter number and operands (B's operands mapped back to A's)."""
    operands = tuple(id(o) if back is None else id(back.get(id(o), o)) for o in instr.operands)
    return instr.opcode, instr.parameter_number, operands


def _same(ia, ib, match) -> bool:
    return (
        ia.same_op(ib)
        and len(ia.operands) == len(ib.operands)
        and all(match.get(id(oa)) is ob for oa, ob in zip(ia.operands, ib.operands))
    )


def format_diff(result: ModuleDiff, *, ignore_names: bool = False) -> str:
    lines: list[str] = []
    for comp in result.removed:
        lines.append(f"- computation %{comp.name} ({len(comp.instructions)} instructions)")
    for comp in result.added:
        lines.append(f"+ computation %{comp.name} ({len(comp.instructions)} instructions)")
    for comp in result.computations:
        if comp.empty(ignore_names):
            continue
        lines.append(f"computation %{comp.name}:")
        lines += [f"  - {i.to_text()}" for i in comp.removed]
        # then B's side in B's order, so the new program reads top to bottom
        entries = {id(i): [f"  + {i.to_text()}"] for i in comp.added}
        entries.update(
            {id(ib): [f"  ! {ia.to_text()}", f"  > {ib.to_text()}"] for ia, ib in comp.changed}
        )
        if not ignore_names:
            entries.update(
                {id(ib): [f"  = %{ia.name} renamed %{ib.name}"] for ia, ib in comp.renamed}
            )
        lines += [line for i in comp.order for line in entries.get(id(i), [])]
    counts = result.counts()
    if ignore_names:
        counts.pop("renamed")
    summary = ", ".join(f"{n} {key}" for key, n in counts.items())
    computations = len(result.added) + len(result.removed)
    if computations:
        summary += f"; {computations} computations added or removed"
    return "\n".join(lines + [summary])


def _load(path: str, verify: bool):
    try:
        return load_module(path, verify=verify)
    except HloParseError as exc:  # the CLI only knows one file name; say which one failed
        if not exc.line:
            raise ToolError(f"{path}: {exc.reason}") from None
        raise ToolError(f"{path}:{exc.line}:{exc.column}: {exc.reason}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A.hlo", help="the old module")
    parser.add_argument("b", metavar="B.hlo", help="the new module")
    parser.add_argument(
        "--ignore-names",
        action="store_true",
        help="renamed instructions do not count as differences",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print nothing; the exit status says whether they differ",
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="verify both modules first (off: diff can show broken output)",
    )


def main(args) -> int:
    a = _load(args.a, args.verify)
    b = _load(args.b, args.verify)
    result = diff_modules(a, b)
    if result.empty(args.ignore_names):
        return 0
    if not args.quiet:
        print(f"--- {args.a}\n+++ {args.b}")
        print(format_diff(result, ignore_names=args.ignore_names))
    return 1
