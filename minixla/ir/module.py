"""HloModule: computations, the entry, and the header (layout, aliasing, donors, other flags)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from ..errors import VerificationError
from .computation import HloComputation
from .shapes import Shape


@dataclass(frozen=True)
class AliasEntry:
    """Output `output_index` may (or must) share the buffer of parameter `param_number`
    at `param_index`: one entry of `input_output_alias`."""

    output_index: tuple[int, ...]
    param_number: int
    param_index: tuple[int, ...] = ()
    kind: str = "may-alias"  # or "must-alias"


@dataclass(frozen=True)
class ProgramShape:
    parameters: tuple[Shape, ...]
    result: Shape

    def __str__(self) -> str:
        return "{(" + ", ".join(map(str, self.parameters)) + ")->" + str(self.result) + "}"


class NameUniquer:
    """Hands out instruction and computation names not yet used in a module (XLA's `name.N`);
    the verifier requires instruction names to be unique module-wide."""

    def __init__(self, module: "HloModule | None" = None):
        self.used: set[str] = set()
        # per stem, a suffix below which every `stem.N` is taken (until one is released), so
        # thousands of `p`s (a module of nested calls) do not each count up from 1
        self._taken_below: dict[str, int] = {}
        if module is not None:
            self.used.update(c.name for c in module.computations)
            self.used.update(i.name for i in module.all_instructions())

    def __call__(self, base: str) -> str:
        name = base
        if name in self.used:
            stem = re.sub(r"\.\d+$", "", base) or "instr"
            n = self._taken_below.get(stem, 1)
            name = f"{stem}.{n}"
            while name in self.used:
                n += 1
                name = f"{stem}.{n}"
            self._taken_below[stem] = n
        self.used.add(name)
        return name

    def release(self, name: str) -> None:
        """Makes `name` free to hand out again."""
        self.used.discard(name)
        self._taken_below.pop(re.sub(r"\.\d+$", "", name) or "instr", None)

    fresh = __call__


@dataclass
class HloModule:
    name: str
    computations: list[HloComputation] = field(default_factory=list)
    _entry: HloComputation | None = field(default=None, repr=False)
    entry_computation_layout: ProgramShape | None = None
    input_output_alias: list[AliasEntry] = field(default_factory=list)
    buffer_donors: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)
    is_scheduled: bool = False
    # Other header attributes (replica_count, frontend_attributes, ...) kept as raw text.
    header_attrs: dict[str, str] = field(default_factory=dict)
    # FileNames / FunctionNames / FileLocations / StackFrames tables, kept verbatim.
    stack_frame_text: str = ""
    # `LINE:COL: opcode name: attribute` for attributes a lenient parse kept without knowing
    unknown_attributes: list[str] = field(default_factory=list)

    # -- structure ------------------------------------------------------------------------
    def add_computation(self, comp: HloComputation, *, entry: bool = False) -> HloComputation:
        comp.parent = self
        self.computations.append(comp)
        if entry:
            self.set_entry(comp)
        return comp

    @property
    def entry(self) -> HloComputation:
        """The entry computation; a module without one is still being built."""
        if self._entry is None:
            raise VerificationError(f"module {self.name} has no entry computation")
        return self._entry

    @property
    def has_entry(self) -> bool:
        return self._entry is not None

    def set_entry(self, comp: HloComputation) -> None:
        if self._entry is not None:
            self._entry.is_entry = False
        comp.is_entry = True
        self._entry = comp

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(f"no computation named {name}")

    def remove_computation(self, comp: HloComputation) -> None:
        self.computations.remove(comp)
        comp.parent = None

    def computation_post_order(self, orders: dict | None = None) -> list[HloComputation]:
        """Callees before callers, the entry last; unreachable computations come first.
        `orders`, when given, receives each visited computation's instruction post-order by
        the computation's id (the printer's order too, so it is worked out once)."""
        order: list[HloComputation] = []
        seen: set[int] = set()

        def visit(comp: HloComputation) -> None:
            stack = [(comp, False)]
            while stack:
                current, expanded = stack.pop()
                if expanded:
                    order.append(current)
                    continue
                if id(current) in seen:
                    continue
                seen.add(id(current))
                stack.append((current, True))
                instructions = current.post_order()
                if orders is not None:
                    orders[id(current)] = instructions
                callees = [c for instr in instructions for c in instr.called_computations]
                for callee in reversed(callees):
                    if id(callee) not in seen:
                        stack.append((callee, False))

        called = {id(c) for comp in self.computations for c in comp.called_computations()}
        for comp in self.computations:
            if id(comp) not in called and comp is not self._entry:
                visit(comp)
        if self._entry is not None:
            visit(self._entry)
        order.extend(c for c in self.computations if id(c) not in seen)  # cycles: keep all
        return order

    def remove_unreachable_computations(self) -> bool:
        reachable: set[int] = set()
        stack = [self.entry]
        while stack:
            comp = stack.pop()
            if id(comp) in reachable:
                continue
            reachable.add(id(comp))
            stack.extend(comp.called_computations())
        dead = [c for c in self.computations if id(c) not in reachable]
        for comp in dead:
            self.remove_computation(comp)
        return bool(dead)

    def all_instructions(self):
        for comp in self.computations:
            yield from comp.instructions

    # -- layouts --------------------------------------------------------------------------
    def program_shape(self) -> ProgramShape:
        """The entry's parameter and result shapes, with layouts (header's, else defaults)."""
        if self.entry_computation_layout is not None:
            return self.entry_computation_layout
        return ProgramShape(
            tuple(p.shape.with_default_layout() for p in self.entry.parameters),
            self.entry.root.shape.with_default_layout(),
        )

    # -- copying, equality, fingerprint ---------------------------------------------------
    def clone(self, name: str | None = None) -> "HloModule":
        copy = HloModule(
            name or self.name,
            entry_computation_layout=self.entry_computation_layout,
            input_output_alias=list(self.input_output_alias),
            buffer_donors=list(self.buffer_donors),
            is_scheduled=self.is_scheduled,
            header_attrs=dict(self.header_attrs),
            stack_frame_text=self.stack_frame_text,
        )
        mapping: dict[int, HloComputation] = {}
        for comp in self.computation_post_order():
            new = comp.clone(computation_map=mapping)
            mapping[id(comp)] = new
        for comp in self.computations:  # keep the original computation order
            copy.add_computation(mapping[id(comp)], entry=comp is self._entry)
        return copy

    def structurally_equal(self, other: "HloModule") -> bool:
        mine, theirs = self.computation_post_order(), other.computation_post_order()
        if len(mine) != len(theirs):
            return False
        if (
            self.program_shape() != other.program_shape()
            or self.input_output_alias != other.input_output_alias
            or self.buffer_donors != other.buffer_donors
        ):
            return False
        return all(a.structurally_equal(b) for a, b in zip(mine, theirs))

    def fingerprint(self) -> str:
        """A stable hash of the program: names, metadata and computation order do not count."""
        from .printer import canonical_text

        return hashlib.sha256(canonical_text(self).encode()).hexdigest()

    def to_text(self, **options) -> str:
        from .printer import module_to_text

        return module_to_text(self, **options)

    def __str__(self) -> str:
        return self.to_text()

    def __repr__(self) -> str:
        return f"<HloModule {self.name}: {len(self.computations)} computations>"
