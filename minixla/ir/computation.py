"""HloComputation: a list of instructions with a root, parameters numbered from 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from ..errors import VerificationError
from .instruction import HloInstruction
from .shapes import Shape

if TYPE_CHECKING:
    from .module import HloModule


def dependencies(roots, *, include_roots: bool = False) -> set[int]:
    """ids of every instruction the roots depend on through operands and control predecessors."""
    seen: set[int] = set()
    stack = (
        list(roots)
        if include_roots
        else [d for r in roots for d in (*r.operands, *r.control_predecessors)]
    )
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.operands)
        stack.extend(node.control_predecessors)
    return seen


class HloComputation:
    def __init__(
        self,
        name: str,
        instructions=(),
        root: HloInstruction | None = None,
        *,
        execution_thread: str = "",
    ):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self._root: HloInstruction | None = None
        self.parent: HloModule | None = None
        self.is_entry = False
        self.execution_thread = execution_thread
        for instr in instructions:
            self.add_instruction(instr)
        self._root = root

    @property
    def root(self) -> HloInstruction:
        """The result instruction; until one is set, the last instruction added."""
        if self._root is not None:
            return self._root
        if not self.instructions:
            raise VerificationError(f"computation {self.name} is empty: it has no root")
        return self.instructions[-1]

    @root.setter
    def root(self, instr: HloInstruction | None) -> None:
        self._root = instr

    @property
    def has_root(self) -> bool:
        return self._root is not None or bool(self.instructions)

    @property
    def module(self) -> HloModule:
        """The module holding this computation (`parent`, for code that needs one)."""
        if self.parent is None:
            raise VerificationError(f"computation {self.name} is not in a module")
        return self.parent

    # -- queries --------------------------------------------------------------------------
    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number or 0)

    def parameter(self, number: int) -> HloInstruction:
        for instr in self.instructions:
            if instr.opcode == "parameter" and instr.parameter_number == number:
                return instr
        raise IndexError(f"computation {self.name} has no parameter {number}")

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.parameters]

    @property
    def result_shape(self) -> Shape:
        return self.root.shape

    def instruction(self, name: str) -> HloInstruction:
        for instr in self.instructions:
            if instr.name == name:
                return instr
        raise KeyError(f"no instruction named {name} in computation {self.name}")

    def __iter__(self) -> Iterator[HloInstruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def post_order(self) -> list[HloInstruction]:
        """Operands (and control predecessors) before users, as XLA's MakeInstructionPostOrder.

        DFS from every instruction without users, in instruction-list order, so dead
        instructions, unused parameters and side-effecting ops are all included.
        """
        order: list[HloInstruction] = []
        visited: set[int] = set()
        for start in self.instructions:
            if start.users or start.control_successors:
                continue
            stack = [(start, False)]
            while stack:
                instr, expanded = stack.pop()
                if expanded:
                    order.append(instr)
                    continue
                if id(instr) in visited:
                    continue
                visited.add(id(instr))
                stack.append((instr, True))
                children = instr._operands  # the list itself: this walk runs on every print
                if instr.control_predecessors:
                    children = [*children, *instr.control_predecessors]
                for child in reversed(children):
                    if id(child) not in visited:
                        stack.append((child, False))
        if len(order) != len(self.instructions):  # cycles leave some out; keep every instruction
            order.extend(i for i in self.instructions if id(i) not in visited)
        return order

    def called_computations(self) -> list["HloComputation"]:
        seen: dict[int, HloComputation] = {}
        for instr in self.instructions:
            for comp in instr.called_computations:
                seen.setdefault(id(comp), comp)
        return list(seen.values())

    # -- mutation -------------------------------------------------------------------------
    def add_instruction(self, instr: HloInstruction) -> HloInstruction:
        instr.parent = self
        self.instructions.append(instr)
        return instr

    def add_instructions(self, instrs) -> None:
        for instr in instrs:
            self.add_instruction(instr)

    def remove_instruction(self, instr: HloInstruction) -> None:
        """Removes an instruction that has no users (and is not the root)."""
        if instr.users:
            raise ValueError(
                f"cannot remove %{instr.name}: it still has users {[u.name for u in instr.users]}"
            )
        if instr is self.root:
            raise ValueError(f"cannot remove %{instr.name}: it is the root of {self.name}")
        instr.drop_operands()
        instr.drop_control_dependencies()
        # Rewrites mostly remove what they added last: look there first, so a pass removing
        # one instruction per rewrite stays linear in a long computation.
        instructions = self.instructions
        for k in range(len(instructions) - 1, max(len(instructions) - 256, 0) - 1, -1):
            if instructions[k] is instr:
                del instructions[k]
                break
        else:
            instructions.remove(instr)
        instr.parent = None

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> None:
        """Adds `new` if needed, redirects old's uses to it and removes `old`."""
        if new.parent is None:
            self.add_instruction(new)
        old.replace_all_uses_with(new)
        for pred in list(old.control_predecessors):
            pred.add_control_dependency_to(new)
        for succ in list(old.control_successors):
            new.add_control_dependency_to(succ)
        self.remove_instruction(old)

    def remove_dead(self) -> bool:
        """Removes instructions nothing live depends on. Live: the root, parameters and
        side-effecting instructions, and everything they reach through operands and control
        predecessors."""
        # Every instruction reaches a sink through its users and control successors; when
        # every sink is live (the root, a parameter, a side effect), so is everything.
        sinks = [i for i in self.instructions if not i.users and not i.control_successors]
        if all(i is self.root or i.opcode == "parameter" or i.has_side_effect() for i in sinks):
            return False
        roots = [self.root] + [
            i for i in self.instructions if i.opcode == "parameter" or i.has_side_effect()
        ]
        live = dependencies(roots, include_roots=True)
        dead = [i for i in reversed(self.post_order()) if id(i) not in live]
        for instr in dead:  # users come before their operands in this order
            instr.drop_control_dependencies()
            self.remove_instruction(instr)
        return bool(dead)

    # -- copying and equality -------------------------------------------------------------
    def clone(
        self, name: str | None = None, computation_map: dict | None = None
    ) -> "HloComputation":
        """A deep copy of the instructions; called computations are remapped through
        `computation_map` when given (used when cloning a whole module)."""
        mapping: dict[int, HloInstruction] = {}
        copy = HloComputation(name or self.name, execution_thread=self.execution_thread)
        for instr in self.post_order():
            new = instr.clone([mapping[id(o)] for o in instr.operands])
            if computation_map:
                for attr in instr.opdef.calls:
                    value = instr.attrs.get(attr)
                    if isinstance(value, (list, tuple)):
                        new.attrs[attr] = [computation_map.get(id(c), c) for c in value]
                    elif value is not None:
                        new.attrs[attr] = computation_map.get(id(value), value)
            mapping[id(instr)] = new
            copy.add_instruction(new)
        for instr in self.instructions:
            for pred in instr.control_predecessors:
                mapping[id(pred)].add_control_dependency_to(mapping[id(instr)])
        copy.root = mapping[id(self.root)]
        copy.is_entry = self.is_entry
        return copy

    def structurally_equal(self, other: "HloComputation", *, compare_names: bool = False) -> bool:
        """Same graph: instructions match pairwise along the post-order from the root."""
        mine, theirs = self.post_order(), other.post_order()
        if len(mine) != len(theirs):
            return False
        index = {id(instr): i for i, instr in enumerate(mine)}
        their_index = {id(instr): i for i, instr in enumerate(theirs)}
        for a, b in zip(mine, theirs):
            if compare_names and a.name != b.name:
                return False
            if not a.same_op(b):
                return False
            if [index[id(o)] for o in a.operands] != [their_index[id(o)] for o in b.operands]:
                return False
            if [index[id(o)] for o in a.control_predecessors] != [
                their_index[id(o)] for o in b.control_predecessors
            ]:
                return False
        return index[id(self.root)] == their_index[id(other.root)]

    def to_text(self) -> str:
        from .printer import computation_to_text

        return computation_to_text(self)

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"
