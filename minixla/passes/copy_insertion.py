"""copy-insertion: the copies (and orderings) that make buffer sharing across control flow
correct, and no more.

A while loop's init, body parameter, body root and result share one buffer (dataflow.py), and
so do a conditional's branch roots and result. As XLA's CopyInsertion (xla-reference.md 5.3):
1. give every control-flow computation a single caller (FlattenCallGraph) and inline `call`s;
2. add a `copy` for every loop init element, every body root element that is not the same
   parameter element passed through, and every branch root element; copy entry outputs that
   are read-only (an unaliased parameter, a constant) or returned twice;
3. schedule, then remove each loop/branch copy whose removal leaves its buffer free of
   interference: no value still needed when another value overwrites the storage
   (`dataflow.interference`), except an in-place reader at the very writer. Control edges pin
   the order that made the removal safe, so later schedules keep it.
A loop that updates its state in place (dynamic-update-slice into a loop-carried array) keeps
no copy at all.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from .base import Pass, register_pass
from .dataflow import Dataflow, HloValue, Timeline, interference
from .hlo_utils import (
    CONTROL_FLOW,
    NameUniquer,
    ancestors,
    element,
    inline_computation,
    make_tuple,
    remove_if_dead,
    sequential_computations,
)
from .scheduling import Scheduler


@register_pass
class CopyInsertion(Pass):
    name = "copy-insertion"

    def run(self, module: HloModule) -> bool:
        self.module, self.names = module, NameUniquer(module)
        changed = self._inline_calls()
        while self._flatten_call_graph():
            changed = True
        candidates: list[HloInstruction] = []
        for comp in sequential_computations(module):
            for instr in list(comp.instructions):
                if instr.opcode == "while":
                    candidates += self._copy_loop(instr)
                elif instr.opcode == "conditional":
                    for branch in instr.called_computations:
                        candidates += self._copy_root(branch, lambda i, v: True)
        while self._fix_entry_root(Dataflow(module)):
            changed = True
        if not candidates:
            return changed
        Scheduler().run(module)
        kept = [copy for copy in candidates if not self._try_remove(copy)]
        return changed or bool(kept) or len(candidates) > 0

    # -- adding copies --------------------------------------------------------------------
    def _copy_loop(self, loop: HloInstruction) -> list[HloInstruction]:
        """Copies the init elements, snapshots each updated state element when the body
        starts and copies it back at the root: correct in any order, and each copy is then
        a candidate for removal."""
        init, body = loop.operand(0), loop.attrs["body"]
        made: list[HloInstruction] = []
        loop.replace_operand(0, self._copy_leaves(init, lambda index, leaf: True, made))
        remove_if_dead(init)
        flow = Dataflow(self.module)
        param = body.parameter(0)
        updated = [
            index
            for index, leaf in param.shape.leaves()
            if leaf.is_array and flow.value_at(body.root, index) is not flow.value_at(param, index)
        ]
        root_copies = self._copy_root(body, lambda index, leaf: index in updated)
        snapshots = [self._snapshot(param, index) for index in updated if len(index) == 1]
        for snapshot, copy in zip(snapshots, root_copies):
            if snapshot is not None:
                snapshot.add_control_dependency_to(copy)
        return root_copies + [s for s in snapshots if s is not None] + made

    def _snapshot(self, param: HloInstruction, index) -> HloInstruction | None:
        """Makes every reader of state element `index` read a copy taken at body start."""
        readers = [
            u
            for u in param.users
            if u.opcode == "get-tuple-element" and u.attrs["index"] == index[0]
        ]
        if (
            len(readers)
            != len(param.users)
            - sum(
                1
                for u in param.users
                if u.opcode == "get-tuple-element" and u.attrs["index"] != index[0]
            )
            or not readers
        ):
            return None  # the whole state tuple is read somewhere: leave it
        gte = readers[0]
        copy = param.computation.add_instruction(
            HloInstruction("copy", gte.shape, [gte], name=self.names("copy"))
        )
        for reader in readers:
            for user in list(reader.users):
                if user is not copy:
                    user.replace_operand_with(reader, copy)
            if reader is reader.computation.root:
                reader.computation.root = copy
            if reader is not gte:
                remove_if_dead(reader)
        return copy

    def _copy_root(self, comp: HloComputation, wanted) -> list[HloInstruction]:
        made: list[HloInstruction] = []
        old = comp.root
        comp.root = self._copy_leaves(old, wanted, made)
        if old is not comp.root:
            remove_if_dead(old)
        return made

    def _copy_leaves(self, instr: HloInstruction, wanted, made: list, index=()):
        """`instr` with each array leaf for which wanted(index, leaf) holds copied."""
        shape = instr.shape
        if shape.is_tuple:
            parts = [element(instr, i, self.names) for i in range(len(shape.tuple_shapes))]
            new = [self._copy_leaves(p, wanted, made, index + (i,)) for i, p in enumerate(parts)]
            if all(a is b for a, b in zip(new, parts)) and instr.opcode == "tuple":
                return instr
            return make_tuple(new, instr.computation, self.names)
        if not shape.is_array or not wanted(index, shape):
            return instr
        copy = HloInstruction("copy", shape, [instr], name=self.names("copy"))
        made.append(instr.computation.add_instruction(copy))
        return copy

    def _fix_entry_root(self, flow: Dataflow) -> bool:
        """Outputs must be writable storage of their own: copy read-only or repeated ones."""
        entry = self.module.entry
        aliased = {
            (e.output_index, e.param_number, e.param_index) for e in self.module.input_output_alias
        }
        sets = flow.buffer_sets()
        seen: set[int] = set()
        for index, leaf in entry.root.shape.leaves():
            if not leaf.is_array:
                continue
            value = flow.value_at(entry.root, index)
            buffer = flow.buffer_of(value)
            passthrough = (
                value.instr.opcode == "parameter"
                and value.instr.parent is entry
                and (index, value.instr.parameter_number, value.index) in aliased
            )
            read_only = any(flow.is_read_only(v) for v in sets[buffer])
            bad = buffer in seen or (read_only and not passthrough)
            seen.add(buffer)
            if bad:
                self._copy_root(entry, lambda i, _leaf, want=index: i == want)
                return True
        return False

    # -- removing the copies that are not needed ------------------------------------------
    def _try_remove(self, copy: HloInstruction) -> bool:
        comp = copy.parent
        if comp is None:
            return False
        source = copy.operand(0)
        uses = [(user, i) for user in copy.users for i, o in enumerate(user.operands) if o is copy]
        preds, succs = list(copy.control_predecessors), list(copy.control_successors)
        was_root = copy is comp.root
        position = comp.instructions.index(copy)
        copy.replace_all_uses_with(source)
        comp.remove_instruction(copy)  # also drops its control edges
        flow, timeline = Dataflow(self.module), Timeline(self.module)
        value = flow.value_at(source)
        members = [v for v in flow.values if flow.buffer_of(v) == flow.buffer_of(value)]
        ranges = {v.id: timeline.live_range(flow, v) for v in members}
        if interference(flow, ranges, members) is None:
            self._pin_order(flow, members, ranges)
            return True
        comp.instructions.insert(position, copy)  # undo
        copy.parent = comp
        copy.append_operand(source)
        for user, i in uses:
            user.replace_operand(i, copy)
        for pred in preds:
            pred.add_control_dependency_to(copy)
        for succ in succs:
            copy.add_control_dependency_to(succ)
        if was_root:
            comp.root = copy
        return False

    def _pin_order(self, flow: Dataflow, members: list[HloValue], ranges) -> None:
        """Adds control edges so that every value of the buffer is defined, and all its
        readers run, before the next write into the buffer, whatever the schedule."""
        for write in members:
            if write.is_phi or flow.is_read_only(write):
                continue
            time = ranges[write.id][0]
            for older in members:
                if older is write or ranges[older.id][0] >= time:
                    continue
                if not older.is_phi and older.instr.opcode != "parameter":
                    self._order(flow, older.instr, write.instr)
                for user, _, _ in older.uses:
                    self._order(flow, user, write.instr)

    def _order(self, flow: Dataflow, first: HloInstruction, second: HloInstruction) -> None:
        chain = {}
        node: HloInstruction | None = first
        while node is not None:
            chain[id(node.parent)] = node
            node = flow.caller.get(id(node.parent))
        node = second
        while node is not None and id(node.parent) not in chain:
            node = flow.caller.get(id(node.parent))
        if node is None:
            return
        before = chain[id(node.parent)]
        if before is node or before in node.control_predecessors or id(before) in ancestors(node):
            return
        before.add_control_dependency_to(node)

    # -- call graph -----------------------------------------------------------------------
    def _inline_calls(self) -> bool:
        """Inlines every `call` in the control-flow computations (XLA's CallInliner)."""
        changed = False
        progress = True
        while progress:
            progress = False
            for comp in sequential_computations(self.module):
                for instr in list(comp.instructions):
                    if instr.opcode == "call" and instr.parent is comp:
                        root = inline_computation(
                            instr.attrs["to_apply"], instr.operands, comp, self.names
                        )
                        comp.replace_instruction(instr, root)
                        progress = changed = True
        if changed:
            self.module.remove_unreachable_computations()
        return changed

    def _flatten_call_graph(self) -> bool:
        """Clones a control-flow computation for every caller after its first one."""
        seen: set[int] = set()
        for comp in reversed(sequential_computations(self.module)):  # callers first
            for instr in comp.instructions:
                if instr.opcode not in CONTROL_FLOW:
                    continue
                for attr in instr.opdef.calls:
                    callee = instr.attrs.get(attr)
                    if callee is None:
                        continue
                    callees = callee if isinstance(callee, (list, tuple)) else [callee]
                    fresh = [self._clone_if_seen(c, seen) for c in callees]
                    if any(a is not b for a, b in zip(fresh, callees)):
                        instr.attrs[attr] = fresh if isinstance(callee, (list, tuple)) else fresh[0]
                        return True  # the clone's own callees are visited next round
        return False

    def _clone_if_seen(self, comp: HloComputation, seen: set[int]) -> HloComputation:
        if id(comp) not in seen:
            seen.add(id(comp))
            return comp
        clone = comp.clone(name=self.names(comp.name))
        for instr in clone.instructions:
            instr.name = self.names(instr.name)
        self.module.add_computation(clone)
        seen.add(id(clone))
        return clone
