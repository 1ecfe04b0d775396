"""HloInstruction: one node of a computation's dataflow graph.

The IR is mutable, as in XLA: passes rewire operands (`replace_operand`,
`replace_all_uses_with`) and add or remove instructions in place; every instruction keeps an
up-to-date list of its users. See docs/ir.md for why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import VerificationError
from .opcodes import OPCODES, OpDef
from .shapes import Shape

if TYPE_CHECKING:
    from .computation import HloComputation


class HloInstruction:
    __slots__ = (
        "name",
        "opcode",
        "shape",
        "_operands",
        "users",
        "attrs",
        "parent",
        "literal",
        "parameter_number",
        "control_predecessors",
        "control_successors",
        "location",
        "elided",
        "__weakref__",
    )

    def __init__(
        self,
        opcode: str,
        shape: Shape,
        operands=(),
        attrs: dict | None = None,
        *,
        name: str = "",
        literal: Any = None,
        parameter_number: int | None = None,
    ):
        if opcode not in OPCODES:
            from ..errors import UnsupportedError

            raise UnsupportedError(f"unknown opcode {opcode!r}")
        self.name = name or opcode
        self.opcode = opcode
        self.shape = shape
        self._operands: list[HloInstruction] = []
        self.users: list[HloInstruction] = []
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.parent: HloComputation | None = None
        self.literal = literal  # constant's value: np.ndarray (logical order) or tuple of them
        self.parameter_number = parameter_number
        self.control_predecessors: list[HloInstruction] = []
        self.control_successors: list[HloInstruction] = []
        self.location: tuple[int, int] | None = None  # (line, column) in the parsed text
        # a constant read as `{...}`: XLA printed it without its values, so `literal` holds
        # zeros that stand for nothing; it prints back as `{...}` and never runs
        self.elided = False
        for operand in operands:
            self.append_operand(operand)

    # -- construction helpers -------------------------------------------------------------
    @staticmethod
    def parameter(number: int, shape: Shape, name: str = "") -> "HloInstruction":
        return HloInstruction(
            "parameter", shape, name=name or f"p{number}", parameter_number=number
        )

    @staticmethod
    def constant(value, shape: Shape | None = None, name: str = "") -> "HloInstruction":
        from .dtypes import from_numpy

        if shape is None:
            value = np.asarray(value)
            shape = Shape.array(from_numpy(value.dtype), value.shape)
        elif not shape.is_tuple:
            value = np.asarray(value, dtype=shape.numpy_dtype).reshape(shape.dims)
        return HloInstruction("constant", shape, name=name or "constant", literal=value)

    # -- properties -----------------------------------------------------------------------
    @property
    def computation(self) -> "HloComputation":
        """The computation holding this instruction (`parent`, for code that needs one)."""
        if self.parent is None:
            raise VerificationError(f"%{self.name} is not in a computation")
        return self.parent

    @property
    def opdef(self) -> OpDef:
        return OPCODES[self.opcode]

    @property
    def operands(self) -> tuple["HloInstruction", ...]:
        return tuple(self._operands)

    def operand(self, i: int) -> "HloInstruction":
        return self._operands[i]

    @property
    def operand_count(self) -> int:
        return len(self._operands)

    @property
    def called_computations(self) -> list["HloComputation"]:
        """Computations this instruction calls, in attribute print order."""
        out: list = []
        for attr in self.opdef.calls:
            value = self.attrs.get(attr)
            if value is None:
                continue
            out.extend(value if isinstance(value, (list, tuple)) else [value])
        return out

    def set_called_computation(self, attr: str, comp) -> None:
        self.attrs[attr] = comp

    def has_side_effect(self, _memo: dict | None = None) -> bool:
        """Side-effecting itself, or calling a computation that contains such an instruction."""
        if self.opdef.has("side_effect") or self.attrs.get("custom_call_has_side_effect"):
            return True
        memo = {} if _memo is None else _memo
        for comp in self.called_computations:
            if id(comp) not in memo:
                memo[id(comp)] = False  # guards against (invalid) recursion
                memo[id(comp)] = any(i.has_side_effect(memo) for i in comp.instructions)
            if memo[id(comp)]:
                return True
        return False

    def distinct_users(self) -> list["HloInstruction"]:
        """Each user once, in the order of first use (`users` lists a user once per operand
        slot that reads this instruction)."""
        return list({id(u): u for u in self.users}.values())

    def is_root(self) -> bool:
        return self.parent is not None and self.parent.root is self

    # -- graph mutation -------------------------------------------------------------------
    def append_operand(self, operand: "HloInstruction") -> None:
        self._operands.append(operand)
        operand.users.append(self)

    def replace_operand(self, index: int, new: "HloInstruction") -> None:
        old = self._operands[index]
        if old is new:
            return
        self._operands[index] = new
        old.users.remove(self)
        new.users.append(self)

    def replace_operand_with(self, old: "HloInstruction", new: "HloInstruction") -> None:
        for i, operand in enumerate(self._operands):
            if operand is old:
                self.replace_operand(i, new)

    def replace_all_uses_with(self, new: "HloInstruction") -> None:
        """Makes every user (and the computation root, if this is it) use `new` instead."""
        if new is self:
            return
        for user in list(self.users):
            if user is not new:
                user.replace_operand_with(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def drop_operands(self) -> None:
        for operand in self._operands:
            if self in operand.users:
                operand.users.remove(self)
        self._operands = []

    def add_control_dependency_to(self, successor: "HloInstruction") -> None:
        if successor not in self.control_successors:
            self.control_successors.append(successor)
            successor.control_predecessors.append(self)

    def drop_control_dependencies(self) -> None:
        for pred in self.control_predecessors:
            pred.control_successors.remove(self)
        for succ in self.control_successors:
            succ.control_predecessors.remove(self)
        self.control_predecessors = []
        self.control_successors = []

    # -- comparison -----------------------------------------------------------------------
    def same_op(self, other: "HloInstruction", *, layout_sensitive: bool = True) -> bool:
        """Same opcode, shape, attributes and literal; operands and names are not compared.

        Called computations compare by structure, so this is usable for CSE and equality.
        """
        if self.opcode != other.opcode or self.parameter_number != other.parameter_number:
            return False
        if layout_sensitive and self.shape != other.shape:
            return False
        if not layout_sensitive and not self.shape.compatible(other.shape):
            return False
        keys = self.attrs.keys() - _NOT_COMPARED
        if keys != other.attrs.keys() - _NOT_COMPARED:
            return False
        for key in keys:
            if not _attr_equal(self.attrs[key], other.attrs[key]):
                return False
        if self.elided or other.elided:  # `{...}` equals only `{...}` (CSE keeps them apart)
            return self.elided and other.elided
        return _literal_equal(self.literal, other.literal)

    def clone(self, operands=None, name: str | None = None) -> "HloInstruction":
        """A detached copy with the given operands (default: the same operands)."""
        copy = HloInstruction(
            self.opcode,
            self.shape,
            self._operands if operands is None else operands,
            self.attrs,
            name=self.name if name is None else name,
            literal=self.literal,
            parameter_number=self.parameter_number,
        )
        copy.attrs.pop("control-predecessors", None)
        copy.location = self.location
        copy.elided = self.elided
        return copy

    def to_text(self) -> str:
        from .printer import instruction_to_text

        return instruction_to_text(self)

    def __repr__(self) -> str:
        return f"<HloInstruction %{self.name} = {self.shape} {self.opcode}>"


# Not part of what an instruction computes (as in XLA's HloInstruction::Identical).
_NOT_COMPARED = frozenset({"control-predecessors", "metadata"})


def _attr_equal(a, b) -> bool:
    from .computation import HloComputation

    if isinstance(a, HloComputation) and isinstance(b, HloComputation):
        return a is b or a.structurally_equal(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_attr_equal(x, y) for x, y in zip(a, b))
    return a == b


def _literal_equal(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (
            isinstance(a, tuple)
            and isinstance(b, tuple)
            and len(a) == len(b)
            and all(_literal_equal(x, y) for x, y in zip(a, b))
        )
    a, b = np.asarray(a), np.asarray(b)
    # Compare bit patterns so NaN payloads and -0.0 count.
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
