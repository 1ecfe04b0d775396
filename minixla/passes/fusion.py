"""fusion: producer-consumer loop fusion, reduction fusion and multi-output fusion.

The result is XLA's representation (xla-reference.md 4.1): a `fusion` instruction with
`kind=kLoop` (an elementwise loop over the output) or `kind=kInput` (a reduction root fed by a
loop over its input), `calls=%fused_computation.N`, whose fused computation has parameters
`param_i` for the fusion's operands i. A multi-output fusion has a `tuple` root and its users
read `get-tuple-element`s; all of its outputs share one iteration space (the output dims of a
loop, the input dims of a reduction), so one loop nest computes them all.

The algorithm is XLA's InstructionFusion: visit consumers before producers and pull in each
fusible operand, duplicating cheap producers with several users. Then sibling multi-output
fusion merges fusions that read the same operand, and producer-consumer multi-output fusion
fuses a producer that cannot be duplicated into a user, exporting its value as an extra output.
Every refusal is recorded in `decisions` with its reason (see fusion_cost.py).
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .fusion_cost import (
    Decision,
    can_multi_output_fuse,
    is_expensive,
    is_loop_fusible,
    is_reduction_root,
    should_fuse,
    consumer_reuses,
    Duplication,
    is_fusion_consumer,
)
from .hlo_utils import NameUniquer, inline_computation, sequential_computations


@register_pass
class InstructionFusion(Pass):
    name = "fusion"

    def __init__(self, multi_output: bool = True):
        self.multi_output = multi_output
        self.decisions: list[tuple[str, str, Decision]] = []  # (producer, consumer, refusal)
        self.duplication: Duplication | None = None  # of the computation being fused

    def run(self, module: HloModule) -> bool:
        self.module, self.names = module, NameUniquer(module)
        self.touched: dict[int, HloComputation] = {}
        changed = False
        for comp in sequential_computations(module):
            changed |= self._fuse_computation(comp)
            if self.multi_output and self._multi_output(comp):
                self._fuse_computation(comp)  # e.g. scalar constants now next to a fusion
                self._drop_unread_outputs(comp)
                changed = True
        self.names = NameUniquer(module)  # forget the names of instructions fused away
        for fused in self.touched.values():
            if fused.parent is not None:
                self._rename_parameters(fused)
        return changed

    # -- producer-consumer loop fusion ----------------------------------------------------
    def _fuse_computation(self, comp: HloComputation) -> bool:
        order = comp.post_order()
        position = {id(instr): k for k, instr in enumerate(order)}
        self.duplication = Duplication(order)
        changed = False
        for consumer in reversed(order):
            if consumer.parent is not comp or not is_fusion_consumer(consumer):
                continue
            current = consumer
            while True:
                refusals = []
                candidates = sorted(
                    {id(o): o for o in current.operands}.values(),
                    key=lambda o: -position.get(id(o), -1),
                )
                for producer in candidates:
                    decision = should_fuse(producer, current, self.duplication)
                    if decision:
                        current = self.fuse(producer, current)
                        changed = True
                        break
                    if producer.opcode != "parameter":
                        refusals.append((producer.name, current.name, decision))
                else:
                    self.decisions.extend(refusals)
                    break
        return changed

    def fuse(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        """Clones `producer` into `consumer` (wrapped into a fusion first if needed); the
        producer is removed when the fusion was its only user. Returns the fusion."""
        fusion = consumer if consumer.opcode == "fusion" else self._wrap(consumer)
        fused = fusion.attrs["calls"]
        operands = list(fusion.operands)
        duplicate = any(u is not fusion for u in producer.users)
        if self.duplication is not None:
            self.duplication.record(producer, fusion)
        args = [self._parameter_for(fused, operands, o) for o in producer.operands]
        if producer.opcode == "fusion":  # a scalar loop fusion: its ops join the consumer's
            clone = inline_computation(producer.attrs["calls"], args, fused, self.names)
        else:
            name = self.names(producer.name) if duplicate else producer.name
            clone = fused.add_instruction(producer.clone(args, name=name))
        for i, operand in enumerate(operands):
            if operand is producer:
                fused.parameter(i).replace_all_uses_with(clone)
        roots = _dedupe(fused, [fused.root]) if producer.opcode == "fusion" else [fused.root]
        new = self._rebuild(fusion, operands, roots)
        if not producer.users:
            producer.computation.remove_instruction(producer)
            self._forget(producer)
        return new

    def _wrap(self, consumer: HloInstruction) -> HloInstruction:
        fused = HloComputation(self.names("fused_computation"))
        operands: list[HloInstruction] = []
        args = [self._parameter_for(fused, operands, o) for o in consumer.operands]
        fused.add_instruction(consumer.clone(args, name=consumer.name))
        fused.root = fused.instructions[-1]
        self.module.add_computation(fused)
        self.touched[id(fused)] = fused
        kind = "kInput" if is_reduction_root(consumer) else "kLoop"
        attrs = {"kind": kind, "calls": fused}
        if "metadata" in consumer.attrs:
            attrs["metadata"] = consumer.attrs["metadata"]
        fusion = HloInstruction(
            "fusion", consumer.shape, operands, attrs, name=self.names("fusion")
        )
        consumer.computation.replace_instruction(consumer, fusion)
        return fusion

    def _parameter_for(self, fused: HloComputation, operands: list, operand: HloInstruction):
        """The fused parameter reading `operand`, added (with the operand) when missing."""
        for i, existing in enumerate(operands):
            if existing is operand:
                return fused.parameter(i)
        operands.append(operand)
        param = HloInstruction.parameter(
            len(operands) - 1, operand.shape, name=self.names(f"param_{len(operands) - 1}")
        )
        return fused.add_instruction(param)

    def _rebuild(self, fusion: HloInstruction, operands: list, roots: list) -> HloInstruction:
        """Replaces `fusion` by one over `operands` (unused ones dropped) with outputs `roots`;
        users of the old fusion are left to the caller when the output arity changes."""
        fused = fusion.attrs["calls"]
        old_root = fused.root
        if len(roots) == 1:
            fused.root = roots[0]
        else:
            shape_tuple = HloInstruction(
                "tuple", _tuple_shape(roots), roots, name=self.names("tuple")
            )
            fused.root = fused.add_instruction(shape_tuple)
        if old_root is not fused.root and old_root.opcode == "tuple" and not old_root.users:
            fused.remove_instruction(old_root)
        fused.remove_dead()
        kept: list = []
        params = [fused.parameter(i) for i in range(len(operands))]
        for operand, param in zip(operands, params):
            if param.users:
                param.parameter_number = len(kept)
                kept.append(operand)
            else:
                fused.remove_instruction(param)
        outputs = fused.root.operands if fused.root.opcode == "tuple" else [fused.root]
        reduces = [r.operand(0) if r.opcode == "get-tuple-element" else r for r in outputs]
        kind = "kInput" if any(r.opcode == "reduce" for r in reduces) else "kLoop"
        attrs = dict(fusion.attrs, kind=kind)
        new = HloInstruction("fusion", fused.root.shape, kept, attrs, name=fusion.name)
        comp = fusion.computation
        comp.add_instruction(new)
        if fusion.shape == new.shape:
            comp.replace_instruction(fusion, new)
        self.touched[id(fused)] = fused
        return new

    # -- multi-output fusion --------------------------------------------------------------
    def _multi_output(self, comp: HloComputation) -> bool:
        changed = False
        progress = True
        # (id, id, rule) -> (a, b, refusal) of pairs refused while both live: their own sizes and
        # dependence decide, and merges make new instructions, so a refusal stays valid (the
        # scan restarts after every merge; an unrolled loop has thousands of sibling pairs)
        self._refused: dict[tuple[int, int, str], tuple] = {}
        while progress:
            progress = False
            order = comp.post_order()
            self._position = {id(instr): k for k, instr in enumerate(order)}
            for instr in order:
                if self._try_producer_consumer(instr) or self._try_siblings(instr):
                    progress = changed = True
                    break
        self._refused = {}
        return changed

    def _drop_unread_outputs(self, comp: HloComputation) -> None:
        """An exported value whose readers were all merged into the same fusion later is
        read by no one: stop writing it."""
        for fusion in list(comp.instructions):
            if fusion.opcode != "fusion" or not fusion.shape.is_tuple or fusion.is_root():
                continue
            fused = fusion.attrs["calls"]
            if fused.root.opcode != "tuple" or any(
                u.opcode != "get-tuple-element" for u in fusion.users
            ):
                continue
            for gte in list(fusion.users):
                if not gte.users and not gte.is_root():
                    comp.remove_instruction(gte)
            read = sorted({u.attrs["index"] for u in fusion.users})
            if len(read) == len(fused.root.operands) or not read:
                continue
            outputs = [fused.root.operand(k) for k in read]
            new = self._rebuild(fusion, list(fusion.operands), outputs)
            for gte in list(fusion.users):
                if len(outputs) == 1:
                    gte.replace_all_uses_with(new)
                    comp.remove_instruction(gte)
                else:
                    comp.replace_instruction(gte, self._gte(new, read.index(gte.attrs["index"])))
            comp.remove_instruction(fusion)

    def _depends(self, later: HloInstruction, earlier: HloInstruction) -> bool:
        """Whether `later` depends on `earlier`: a search that enters only instructions after
        `earlier` in this scan's post order, where any path between them lies."""
        position = self._position
        floor = position[id(earlier)]
        if position[id(later)] <= floor:
            return later is earlier
        stack, seen = [later], {id(later)}
        while stack:
            for dep in (*(node := stack.pop()).operands, *node.control_predecessors):
                if dep is earlier:
                    return True
                if id(dep) not in seen and position[id(dep)] > floor:
                    seen.add(id(dep))
                    stack.append(dep)
        return False

    def _refusal(self, a: HloInstruction, b: HloInstruction, decide) -> Decision:
        """decide(a, b), remembered when it refuses."""
        key = (id(a), id(b), decide.__name__)  # a sibling refusal says nothing of export
        known = self._refused.get(key)
        if known is not None and known[0] is a and known[1] is b:
            return known[2]
        decision = decide(a, b)
        if not decision:
            self._refused[key] = (a, b, decision)
            self.decisions.append((b.name, a.name, decision))
        return decision

    def _try_producer_consumer(self, producer: HloInstruction) -> bool:
        """Fuses a producer that stays outside (it has other users) into one user fusion and
        exports its value, so it is computed once and read from memory by the others. A
        multi-output loop fusion joins a user of its outputs the same way (two chains that
        feed each other, like a cipher's rounds, become one loop)."""
        if producer.is_root() or producer.control_predecessors or producer.control_successors:
            return False
        is_loop = producer.opcode == "fusion" and producer.attrs.get("kind") == "kLoop"
        if producer.shape.is_tuple:
            if not is_loop or any(u.opcode != "get-tuple-element" for u in producer.users):
                return False
            users = [user for gte in producer.users for user in gte.users]
        else:
            if len(producer.distinct_users()) < 2:
                return False
            if not (is_loop or is_loop_fusible(producer) and producer.opcode != "constant"):
                return False
            users = producer.users
        for consumer in {id(u): u for u in users}.values():
            if not is_fusion_consumer(consumer):
                continue
            if self._refusal(consumer, producer, self._exportable):
                self._merge(self._as_fusion(consumer), producer, producer_consumer=True)
                return True
        return False

    def _exportable(self, consumer: HloInstruction, producer: HloInstruction) -> Decision:
        decision = can_multi_output_fuse(producer, consumer)
        if decision and is_expensive(producer) and consumer_reuses(producer, consumer):
            return Decision(False, "the consumer would recompute an expensive producer")
        if decision and any(
            not _reads(o, producer) and self._depends(o, producer) for o in consumer.operands
        ):
            return Decision(False, "fusing would create a cycle")
        return decision

    def _try_siblings(self, shared: HloInstruction) -> bool:
        """Merges two fusions that read the same non-scalar operand (it is then read once)."""
        if not shared.shape.is_array or shared.shape.rank == 0:
            return False
        users = [u for u in shared.distinct_users() if is_fusion_consumer(u)]
        for i, first in enumerate(users):
            for second in users[i + 1 :]:
                if (first.shape.is_tuple and first.is_root()) or (
                    second.shape.is_tuple and second.is_root()
                ):
                    continue
                if self._refusal(first, second, self._mergeable):
                    self._merge(self._as_fusion(first), second, producer_consumer=False)
                    return True
        return False

    def _mergeable(self, first: HloInstruction, second: HloInstruction) -> Decision:
        decision = can_multi_output_fuse(first, second)
        if decision and (self._depends(second, first) or self._depends(first, second)):
            return Decision(False, "siblings depend on each other")
        return decision

    def _as_fusion(self, instr: HloInstruction) -> HloInstruction:
        return instr if instr.opcode == "fusion" else self._wrap(instr)

    def _merge(
        self, target: HloInstruction, source: HloInstruction, *, producer_consumer: bool
    ) -> HloInstruction:
        """Absorbs `source` into fusion `target`; source's outputs become extra outputs."""
        fused = target.attrs["calls"]
        operands = list(target.operands)
        args = [self._parameter_for(fused, operands, o) for o in source.operands]
        source_outputs = self._absorb(fused, source, args)
        if producer_consumer:  # the target read the producer through parameters
            for i, operand in enumerate(operands):
                if operand is source:
                    fused.parameter(i).replace_all_uses_with(source_outputs[0])
                elif _reads(operand, source):
                    output = source_outputs[operand.attrs["index"]]
                    fused.parameter(i).replace_all_uses_with(output)
        new = self._combine(target, source, operands, source_outputs)
        for old in (target, source):
            if old.parent is not None:
                old.parent.remove_instruction(old)
        self._forget(source)
        return new

    def _combine(
        self, target: HloInstruction, source: HloInstruction, operands: list, source_outputs: list
    ) -> HloInstruction:
        """Rebuilds fusion `target` with `source`'s outputs (already in its computation) after
        its own; the users of both read the new fusion."""
        fused = target.attrs["calls"]
        target_outputs = self._outputs(fused, fused.root)
        outputs = _dedupe(fused, target_outputs + source_outputs)
        new = self._rebuild(target, operands, outputs)
        self._redirect(target, new, 0)
        self._redirect(source, new, len(target_outputs))
        return new

    def _absorb(self, fused: HloComputation, source: HloInstruction, args: list) -> list:
        """Clones `source` (a fusion's computation, or one op) into `fused` over `args`;
        returns its outputs there."""
        if source.opcode == "fusion":
            root = inline_computation(source.attrs["calls"], args, fused, self.names)
            return self._outputs(fused, root)
        clone = source.clone(args, name=self.names(source.name))
        return [fused.add_instruction(clone)]

    def _forget(self, source: HloInstruction) -> None:
        """Drops the fused computation of a fusion merged away."""
        if source.opcode == "fusion":
            self.module.remove_computation(source.attrs["calls"])
            self.touched.pop(id(source.attrs["calls"]), None)

    def _outputs(self, fused: HloComputation, root: HloInstruction) -> list:
        """One value per output of a fused computation: a tuple's operands, or the elements of
        a root that returns a tuple itself (a variadic reduce, a sort), which users read by
        index like a tuple's."""
        if root.opcode == "tuple":
            return list(root.operands)
        if not root.shape.is_tuple:
            return [root]
        return [
            fused.add_instruction(
                HloInstruction(
                    "get-tuple-element",
                    shape,
                    [root],
                    {"index": i},
                    name=self.names("get-tuple-element"),
                )
            )
            for i, shape in enumerate(root.shape.tuple_shapes)
        ]

    def _redirect(self, old: HloInstruction, new: HloInstruction, base: int) -> None:
        """Points old's users at `new`'s outputs starting at tuple index `base`."""
        comp = new.computation
        if not old.shape.is_tuple:
            gte = self._gte(new, base)
            old.replace_all_uses_with(gte)
            return
        for user in list(old.users):  # a multi-output fusion is read only through gtes
            comp.replace_instruction(user, self._gte(new, base + user.attrs["index"]))

    def _gte(self, fusion: HloInstruction, index: int) -> HloInstruction:
        gte = HloInstruction(
            "get-tuple-element",
            fusion.shape.tuple_shapes[index],
            [fusion],
            {"index": index},
            name=self.names("get-tuple-element"),
        )
        return fusion.computation.add_instruction(gte)

    def _rename_parameters(self, fused: HloComputation) -> None:
        params = fused.parameters
        for param in params:
            self.names.release(param.name)
        for param in params:
            param.name = self.names(f"param_{param.parameter_number}")


def _reads(operand: HloInstruction, producer: HloInstruction) -> bool:
    """Is `operand` the producer's value, or one output of a multi-output producer?"""
    if operand is producer:
        return True
    return operand.opcode == "get-tuple-element" and operand.operand(0) is producer


def _dedupe(fused: HloComputation, outputs: list) -> list:
    """Merges identical instructions in a fused computation (siblings often recompute the same
    cheap producers); returns `outputs` with merged instructions replaced."""
    seen: dict[tuple, list[HloInstruction]] = {}
    replaced: dict[int, HloInstruction] = {}
    for instr in fused.post_order():
        if instr.opcode == "parameter":
            continue
        key = (instr.opcode, tuple(id(o) for o in instr.operands))
        twin = next((c for c in seen.get(key, []) if c.same_op(instr)), None)
        if twin is None:
            seen.setdefault(key, []).append(instr)
            continue
        instr.replace_all_uses_with(twin)
        replaced[id(instr)] = twin
    return [replaced.get(id(o), o) for o in outputs]


def _tuple_shape(elements) -> Shape:
    return Shape.tuple_of([e.shape for e in elements])
