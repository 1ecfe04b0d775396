"""while-loop-simplifier: remove, unroll or shrink while loops whose behaviour is known.

As XLA's WhileLoopSimplifier and WhileLoopInvariantCodeMotion:
- a loop whose result is unused and whose body and condition have no side effects is dead;
- a loop whose condition is false on its (constant) init runs zero times: it is its init;
- a loop that runs exactly once (condition true on the init, false after one body step) is
  its body, inlined;
- body instructions that depend only on loop-invariant state (elements the body passes
  through unchanged), constants and iotas are computed once before the loop and carried in
  the state.
Trip counts come from evaluating the condition (and the body's effect on the elements the
condition reads) with the interpreter, only when those elements start as constants.
"""

from __future__ import annotations

import numpy as np

from ..reference.evaluator import Evaluator
from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import SIDE_EFFECT
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .hlo_utils import (
    NameUniquer,
    element,
    inline_computation,
    make_tuple,
    remove_if_dead,
    sequential_computations,
)

UNKNOWN = object()
MAX_EVALUATED_ELEMENTS = 4096  # never materialize big arrays to learn a trip count
NOT_HOISTED = (
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "broadcast",
    "iota",
    "while",
    "conditional",
    "call",
    "custom-call",
    "rng",
    "rng-bit-generator",
    "after-all",
    "infeed",
    "outfeed",
    "send",
    "recv",
)


def has_side_effects(comp: HloComputation) -> bool:
    for instr in comp.instructions:
        if instr.opdef.has(SIDE_EFFECT) or any(
            has_side_effects(c) for c in instr.called_computations
        ):
            return True
    return False


@register_pass
class WhileLoopSimplifier(Pass):
    name = "while-loop-simplifier"

    def run(self, module: HloModule) -> bool:
        self.names = NameUniquer(module)
        self.evaluator = Evaluator(module)
        changed = False
        for comp in sequential_computations(module):
            for loop in [i for i in comp.post_order() if i.opcode == "while"]:
                if loop.parent is comp:
                    changed |= self.simplify(loop)
        if changed:
            module.remove_unreachable_computations()
        return changed

    def simplify(self, loop: HloInstruction) -> bool:
        comp, body, cond = loop.computation, loop.attrs["body"], loop.attrs["condition"]
        if has_side_effects(body) or has_side_effects(cond):
            return False
        if not loop.users and not loop.is_root():
            remove_if_dead(loop)
            return True
        trips = self.trip_count(loop)
        if trips == 0:
            comp.replace_instruction(loop, loop.operand(0))
            return True
        if trips == 1:
            root = inline_computation(body, [loop.operand(0)], comp, self.names)
            comp.replace_instruction(loop, root)
            return True
        return self.hoist_invariants(loop)

    # -- trip counts ----------------------------------------------------------------------
    def trip_count(self, loop: HloInstruction) -> int | None:
        """0 or 1 when provable from constant init elements, else None."""
        init, body, cond = loop.operand(0), loop.attrs["body"], loop.attrs["condition"]
        if init.opcode != "tuple":
            return None
        state = {
            k: o.literal
            for k, o in enumerate(init.operands)
            if o.opcode == "constant" and not o.elided
        }
        first = self._evaluate(cond, state, [None])
        if first is UNKNOWN:
            return None
        if not bool(first[0]):
            return 0
        read = {
            u.attrs["index"] for u in cond.parameter(0).users if u.opcode == "get-tuple-element"
        }
        if body.root.opcode != "tuple":
            return None
        after = self._evaluate(body, state, [body.root.operand(k) for k in sorted(read)])
        if after is UNKNOWN:
            return None
        second = self._evaluate(cond, dict(zip(sorted(read), after)), [None])
        return 1 if second is not UNKNOWN and not bool(second[0]) else None

    def _evaluate(self, comp: HloComputation, state: dict, wanted: list):
        """Values of `wanted` instructions of comp (None: the root) given known state elements;
        UNKNOWN when they depend on anything else."""
        targets = [comp.root if w is None else w for w in wanted]
        needed: set[int] = set()
        stack = list(targets)
        while stack:
            node = stack.pop()
            if id(node) not in needed:
                needed.add(id(node))
                stack.extend(node.operands)
        values: dict[int, object] = {}
        for instr in comp.post_order():
            if id(instr) not in needed:
                continue
            if instr.opcode == "parameter":
                values[id(instr)] = UNKNOWN
            elif instr.opcode == "get-tuple-element" and instr.operand(0).opcode == "parameter":
                values[id(instr)] = state.get(instr.attrs["index"], UNKNOWN)
            else:
                operands = [values[id(o)] for o in instr.operands]
                too_big = instr.shape.is_array and instr.shape.numel() > MAX_EVALUATED_ELEMENTS
                if too_big or instr.shape.is_tuple or any(o is UNKNOWN for o in operands):
                    values[id(instr)] = UNKNOWN
                else:
                    handler = self.evaluator.table.get(instr.opcode)
                    values[id(instr)] = (
                        UNKNOWN
                        if handler is None
                        else np.asarray(handler(self.evaluator, instr, operands))
                    )
        results = [values[id(t)] for t in targets]
        return UNKNOWN if any(r is UNKNOWN for r in results) else results

    # -- loop-invariant code motion -------------------------------------------------------
    def hoist_invariants(self, loop: HloInstruction) -> bool:
        body, comp = loop.attrs["body"], loop.computation
        param, root = body.parameter(0), body.root
        if root.opcode != "tuple" or not loop.shape.is_tuple:
            return False
        callers = [
            i
            for c in loop.computation.module.computations
            for i in c.instructions
            if body in i.called_computations or loop.attrs["condition"] in i.called_computations
        ]
        if len(callers) != 1:
            return False  # the state shape of a shared body or condition cannot change
        invariant = {
            k
            for k, o in enumerate(root.operands)
            if o.opcode == "get-tuple-element" and o.operand(0) is param and o.attrs["index"] == k
        }
        hoisted = self._hoistable(body, param, invariant)
        exported = [
            i
            for i in body.post_order()
            if id(i) in hoisted and (i is root or any(id(u) not in hoisted for u in i.users))
        ]
        if not exported:
            return False
        # Compute the hoisted instructions once, before the loop, from the init elements.
        init = loop.operand(0)
        mapping: dict[int, HloInstruction] = {}

        def outside(instr: HloInstruction) -> HloInstruction:
            if id(instr) not in mapping:
                if instr.opcode == "get-tuple-element" and instr.operand(0) is param:
                    mapping[id(instr)] = element(init, instr.attrs["index"], self.names)
                else:
                    clone = instr.clone(
                        [outside(o) for o in instr.operands], name=self.names(instr.name)
                    )
                    mapping[id(instr)] = comp.add_instruction(clone)
            return mapping[id(instr)]

        for instr in exported:
            outside(instr)
        count = len(loop.shape.tuple_shapes)
        elements = [element(init, k, self.names) for k in range(count)]
        new_init = make_tuple(elements + [mapping[id(e)] for e in exported], comp, self.names)
        shape = new_init.shape
        # Inside, read them from the new state elements, passed through unchanged.
        param.shape = shape
        loop.attrs["condition"].parameter(0).shape = shape
        carried = []
        for k, instr in enumerate(exported):
            gte = HloInstruction(
                "get-tuple-element",
                instr.shape,
                [param],
                {"index": count + k},
                name=self.names("get-tuple-element"),
            )
            carried.append(body.add_instruction(gte))
            instr.replace_all_uses_with(carried[-1])
        new_root = make_tuple(list(body.root.operands) + carried, body, self.names)
        old_root, body.root = body.root, new_root
        remove_if_dead(old_root)
        body.remove_dead()
        self._reshape_loop(loop, new_init, shape, count)
        return True

    def _hoistable(self, body, param, invariant) -> set[int]:
        hoisted: set[int] = set()
        for instr in body.post_order():
            if instr.opcode in NOT_HOISTED or instr.opdef.has(SIDE_EFFECT):
                continue
            if (
                all(self._invariant_operand(o, param, invariant, hoisted) for o in instr.operands)
                and instr.operands
            ):
                hoisted.add(id(instr))
        return hoisted

    @staticmethod
    def _invariant_operand(operand, param, invariant, hoisted) -> bool:
        # an iota is as invariant as a constant: the gather of a diagonal whose indices are
        # built from iotas (jnp.diag) leaves the body with them
        if id(operand) in hoisted or operand.opcode in ("constant", "iota"):
            return True
        if operand.opcode == "broadcast" and operand.operand(0).opcode == "constant":
            return True
        return (
            operand.opcode == "get-tuple-element"
            and operand.operand(0) is param
            and operand.attrs["index"] in invariant
        )

    def _reshape_loop(self, loop, new_init, shape: Shape, count: int) -> None:
        """Widens the loop's state; users that read the whole old tuple get it rebuilt."""
        old_init = loop.operand(0)
        loop.replace_operand(0, new_init)
        remove_if_dead(old_init)
        loop.shape = shape
        outside = [u for u in loop.users if u.opcode != "get-tuple-element"]
        if outside or loop.is_root():
            comp = loop.computation
            gtes = [
                HloInstruction(
                    "get-tuple-element",
                    shape.tuple_shapes[k],
                    [loop],
                    {"index": k},
                    name=self.names("get-tuple-element"),
                )
                for k in range(count)
            ]
            old = make_tuple([comp.add_instruction(g) for g in gtes], comp, self.names)
            for user in outside:
                user.replace_operand_with(loop, old)
            if loop.is_root():
                comp.root = old
