"""layout-assignment: give every array a physical layout, CPU style (xla-reference.md 6.2).

Constraints, strongest first: the entry computation layout (parameters and result), custom-call
`operand_layout_constraints`, the operand layout an existing `bitcast` was written against, and
row-major operands for every op that is not layout-agnostic (dot, reduce, broadcast, ...).
Elementwise ops follow their operands' layout; a `transpose` takes the layout that keeps its
operand's physical order and becomes a `bitcast` (no data moves); control-flow bodies get their
caller's layouts. A `copy` to the required layout is inserted only where a producer's layout
differs from what a user (or the entry result) needs. Values are unchanged: layouts only say
where elements live.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule, ProgramShape
from ..ir.opcodes import ELEMENTWISE
from ..ir.shapes import Layout, Shape, default_layout
from .base import Pass, register_pass
from .hlo_utils import (
    NameUniquer,
    element,
    fused_computations,
    make_tuple,
    remove_if_dead,
    sequential_computations,
)

# Producers that cost the same in any layout: retarget them instead of copying (single user).
RELAYOUTABLE = ("broadcast", "iota")


def with_layouts(shape: Shape, like: Shape | None = None) -> Shape:
    """`shape` with every array leaf's layout taken from `like` (default layout if None)."""
    if shape.is_tuple:
        likes = (
            like.tuple_shapes
            if like is not None and like.is_tuple
            else [None] * len(shape.tuple_shapes)
        )
        return Shape.tuple_of([with_layouts(s, o) for s, o in zip(shape.tuple_shapes, likes)])
    if not shape.is_array:
        return shape
    if like is not None and like.is_array and like.layout is not None and like.rank == shape.rank:
        return shape.with_layout(like.layout)
    return shape.with_layout(default_layout(shape.rank))


def transposed_layout(layout: Layout, permutation) -> Layout:
    """The result layout under which transpose(permutation) is a bitcast: result dim i is
    operand dim permutation[i], so walk the operand's dims from minor to major."""
    inverse = {d: i for i, d in enumerate(permutation)}
    return Layout(tuple(inverse[d] for d in layout.minor_to_major))


@register_pass
class LayoutAssignment(Pass):
    name = "layout-assignment"

    def run(self, module: HloModule) -> bool:
        self.names = NameUniquer(module)
        self.changed = False
        self.done: set[int] = set()
        self.declared = {id(i): i.shape for i in module.all_instructions()}
        program = module.program_shape()
        entry = module.entry
        for param in entry.parameters:
            self._set_shape(
                param, with_layouts(param.shape, program.parameters[param.parameter_number or 0])
            )
        self._assign(entry)
        result = with_layouts(entry.root.shape, program.result)
        self._set_root(entry, self._coerce(entry.root, result, None))
        new_program = ProgramShape(tuple(p.shape for p in entry.parameters), entry.root.shape)
        if module.entry_computation_layout != new_program:
            module.entry_computation_layout = new_program
            self.changed = True
        fused = fused_computations(module)
        control = {id(c) for c in sequential_computations(module)}
        for comp in module.computations:  # per-element computations: scalars, default layouts
            if id(comp) not in fused and id(comp) not in control:
                for instr in comp.instructions:
                    self._set_shape(instr, with_layouts(instr.shape, instr.shape))
        return self.changed

    # -- per computation ------------------------------------------------------------------
    def _assign(self, comp: HloComputation) -> None:
        self.done.add(id(comp))
        for instr in comp.post_order():
            if instr.parent is comp:
                self._assign_instruction(instr)

    def _assign_instruction(self, instr: HloInstruction) -> None:
        op = instr.opcode
        if op == "parameter":
            if instr.shape.is_array and instr.shape.layout is None:
                self._set_shape(instr, with_layouts(instr.shape))
        elif op == "tuple":
            self._set_shape(instr, Shape.tuple_of([o.shape for o in instr.operands]))
        elif op == "get-tuple-element":
            self._set_shape(instr, instr.operand(0).shape.tuple_shapes[instr.attrs["index"]])
        elif op in ("opt-barrier", "domain", "add-dependency"):
            self._set_shape(instr, instr.operand(0).shape)
        elif op == "bitcast":
            self._bitcast(instr)
        elif op == "transpose":
            self._transpose(instr)
        elif op in ("while", "conditional", "call", "fusion"):
            self._control_flow(instr)
        elif op == "custom-call":
            self._custom_call(instr)
        elif instr.opdef.kind == ELEMENTWISE and instr.shape.is_array:
            self._elementwise(instr)
        else:
            for i, operand in enumerate(instr.operands):
                self._coerce(operand, with_layouts(operand.shape), instr, i)
            self._set_shape(instr, with_layouts(instr.shape))

    def _elementwise(self, instr: HloInstruction) -> None:
        """Follow the operands: the first same-rank operand that is not a cheap splat leads."""
        rank = instr.shape.rank
        peers = [(i, o) for i, o in enumerate(instr.operands) if o.shape.rank == rank]
        leaders = [o for _, o in peers if o.opcode not in RELAYOUTABLE + ("constant",)]
        leader = next(iter(leaders or [o for _, o in peers]), None)
        if instr.opcode == "copy" and self.declared[id(instr)].layout is not None:
            layout = self.declared[id(instr)].layout  # a copy says which layout it wants
        elif leader is not None and leader.shape.layout is not None and rank:
            layout = leader.shape.layout
        else:
            layout = default_layout(rank)
        if instr.opcode != "copy":
            for i, operand in peers:
                self._coerce(operand, operand.shape.with_layout(layout), instr, i)
        self._set_shape(instr, instr.shape.with_layout(layout))

    def _transpose(self, instr: HloInstruction) -> None:
        operand = instr.operand(0)
        layout = operand.shape.layout or default_layout(operand.shape.rank)
        if layout.tiles or not layout.is_default_extras:
            self._coerce(operand, with_layouts(operand.shape), instr, 0)
            self._set_shape(instr, with_layouts(instr.shape))
            return
        shape = instr.shape.with_layout(transposed_layout(layout, instr.attrs["dimensions"]))
        bitcast = HloInstruction("bitcast", shape, [operand], name=self.names("bitcast"))
        for key in ("metadata",):
            if key in instr.attrs:
                bitcast.attrs[key] = instr.attrs[key]
        # a bitcast user reads the transpose in its declared layout, not in this one
        self.declared[id(bitcast)] = self.declared.get(id(instr))
        instr.computation.replace_instruction(instr, bitcast)
        self.changed = True

    def _bitcast(self, instr: HloInstruction) -> None:
        """An existing bitcast means "reinterpret the operand as declared": keep both sides."""
        operand = instr.operand(0)
        self._coerce(operand, with_layouts(operand.shape, self.declared.get(id(operand))), instr, 0)
        self._set_shape(instr, with_layouts(instr.shape, self.declared[id(instr)]))

    def _custom_call(self, instr: HloInstruction) -> None:
        constraints = instr.attrs.get("operand_layout_constraints")
        for i, operand in enumerate(instr.operands):
            want = constraints[i] if constraints else None
            self._coerce(operand, with_layouts(operand.shape, want), instr, i)
        self._set_shape(instr, with_layouts(instr.shape, self.declared[id(instr)]))

    def _control_flow(self, instr: HloInstruction) -> None:
        op = instr.opcode
        if op == "while":
            body, cond = instr.attrs["body"], instr.attrs["condition"]
            state = self._enter(body, [instr.operand(0)], instr)[0]
            self._enter(cond, [instr.operand(0)], instr)
            self._set_root(body, self._coerce(body.root, state, None))
            self._set_shape(instr, state)
        elif op == "conditional":
            branches = instr.called_computations
            result = with_layouts(instr.shape)
            for b, branch in enumerate(branches):
                self._enter(branch, [instr.operand(b + 1)], instr, first=b + 1)
                self._set_root(branch, self._coerce(branch.root, result, None))
            self._set_shape(instr, result)
        else:  # call and fusion: the callee's result layout is the instruction's
            callee = instr.called_computations[0]
            self._enter(callee, list(instr.operands), instr)
            self._set_shape(instr, callee.root.shape)

    def _enter(
        self, callee: HloComputation, operands, caller: HloInstruction, first: int = 0
    ) -> list[Shape]:
        """Gives callee's parameters its operands' layouts (or, when the callee was already
        assigned for another caller, copies the operands to its layouts); assigns the callee."""
        params = callee.parameters
        if id(callee) in self.done:
            for k, (param, operand) in enumerate(zip(params, operands)):
                self._coerce(operand, param.shape, caller, first + k)
            return [p.shape for p in params]
        for param, operand in zip(params, operands):
            self._set_shape(param, operand.shape)
        self._assign(callee)
        return [p.shape for p in params]

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def _set_root(comp: HloComputation, root: HloInstruction) -> None:
        old, comp.root = comp.root, root
        if old is not root:
            remove_if_dead(old)

    def _set_shape(self, instr: HloInstruction, shape: Shape) -> None:
        if instr.shape != shape:
            instr.shape = shape
            self.changed = True

    def _coerce(
        self, instr: HloInstruction, want: Shape, user: HloInstruction | None, index: int = 0
    ) -> HloInstruction:
        """Makes `user`'s operand `index` (or, without a user, the returned value) have the
        layouts of `want`, inserting copies (and tuples of them) where they differ."""
        fixed = self._relayout(instr, want)
        if fixed is not instr and user is not None:
            user.replace_operand(index, fixed)
            self.changed = True
        return fixed

    def _relayout(self, instr: HloInstruction, want: Shape) -> HloInstruction:
        shape = instr.shape
        if shape.is_tuple:
            if _same_layouts(shape, want):
                return instr
            parts = [
                self._relayout(element(instr, i, self.names), w)
                for i, w in enumerate(want.tuple_shapes)
            ]
            self.changed = True
            return make_tuple(parts, instr.computation, self.names)
        if not shape.is_array or shape.layout == want.layout:
            return instr
        if instr.opcode in RELAYOUTABLE and len(instr.users) <= 1 and not instr.is_root():
            self._set_shape(instr, shape.with_layout(want.layout))
            return instr
        copy = HloInstruction(
            "copy", shape.with_layout(want.layout), [instr], name=self.names("copy")
        )
        self.changed = True
        return instr.computation.add_instruction(copy)


def _same_layouts(a: Shape, b: Shape) -> bool:
    if a.is_tuple:
        return b.is_tuple and all(
            _same_layouts(x, y) for x, y in zip(a.tuple_shapes, b.tuple_shapes)
        )
    return not a.is_array or a.layout == b.layout
