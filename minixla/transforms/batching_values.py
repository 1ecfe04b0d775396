"""Batched values and the walk that batches a traced computation (the core of `vmap`).

A value is `(op, bdim)`: an XlaOp plus the dimension holding the batch, or `bdim=None` when the
value does not depend on a batched input (it stays unbatched and is broadcast only where an op
needs it). Tuple-shaped values are Python lists of values. `Batching.run` walks a computation in
post order and emits its batched form into the current trace with a table of per-opcode rules
(batching_rules.py).
"""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedError
from ..frontend.errors import FrontendError
from ..frontend.tracer import current_builder
from ..ir import Shape
from .tracing import emit_like


class BatchingError(FrontendError, UnsupportedError):
    """An op `vmap` cannot batch (no rule, or an unsupported combination of batched operands)."""


def emit(opcode, operands, attrs=None, shape=None):
    """One instruction in the current trace."""
    return current_builder().emit(opcode, list(operands), attrs or {}, shape=shape)


def constant(value, dtype: str):
    return current_builder().constant(np.asarray(value, Shape.array(dtype).numpy_dtype))


def is_batched(value) -> bool:
    if isinstance(value, list):
        return any(map(is_batched, value))
    return value[1] is not None


def flags_of(value):
    """The structure of `value` with True where batched."""
    if isinstance(value, list):
        return [flags_of(v) for v in value]
    return value[1] is not None


def expand(value):
    """`value` with unbatched tuple-shaped ops split into lists of their elements."""
    if isinstance(value, list):
        return [expand(v) for v in value]
    op, bdim = value
    if op.shape.is_tuple:
        return [
            expand((emit("get-tuple-element", [op], {"index": i}), None))
            for i in range(len(op.shape.tuple_shapes))
        ]
    return value


def flags_like(shape: Shape, flags):
    if shape.is_tuple and not isinstance(flags, list):
        return [flags_like(s, flags) for s in shape.tuple_shapes]
    return flags


def or_flags(a, b):
    if isinstance(a, list):
        return [or_flags(x, y) for x, y in zip(a, b)]
    return a or b


def any_flag(flags) -> bool:
    return any(map(any_flag, flags)) if isinstance(flags, list) else bool(flags)


def all_true(flags):
    return [all_true(f) for f in flags] if isinstance(flags, list) else True


def batched_flags(comp, param_flags: list):
    """Which outputs of `comp` depend on batched inputs (a conservative dataflow walk)."""
    flags: dict[int, object] = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            flag = flags_like(instr.shape, param_flags[instr.parameter_number])
        elif instr.opcode == "tuple":
            flag = [flags[id(o)] for o in instr.operands]
        elif instr.opcode == "get-tuple-element":
            inner = flags[id(instr.operand(0))]
            flag = inner[instr.attrs["index"]] if isinstance(inner, list) else inner
        elif instr.opcode == "while":
            flag = while_flags(instr, flags_like(instr.shape, flags[id(instr.operand(0))]))
        else:
            flag = any(any_flag(flags[id(o)]) for o in instr.operands)
        flags[id(instr)] = flag
    return flags[id(comp.root)]


def while_flags(instr, state):
    cond, body = instr.attrs["condition"], instr.attrs["body"]
    while True:
        new = or_flags(state, flags_like(body.root.shape, batched_flags(body, [state])))
        if new == state:
            break
        state = new
    if any_flag(batched_flags(cond, [state])):
        return all_true(state)
    return state


class Batching:
    """Emits batched programs for one batch size."""

    def __init__(self, size: int, rules: dict, declined: dict | None = None):
        self.size = size
        self.rules = rules  # opcode -> rule(batching, instr, operand values) -> value
        self.declined = declined or {}  # opcode -> why it has no rule

    # -- the walk -----------------------------------------------------------------------------
    def run(self, comp, params: list):
        """The value of `comp`'s root, given one value per parameter."""
        values: dict[int, object] = {}
        for instr in comp.post_order():
            if instr.opcode == "parameter":
                values[id(instr)] = params[instr.parameter_number]
                continue
            args = [values[id(o)] for o in instr.operands]
            values[id(instr)] = self.apply(instr, args)
        return values[id(comp.root)]

    def apply(self, instr, args):
        if instr.opcode in ("tuple", "get-tuple-element"):
            return self.rules[instr.opcode](self, instr, args)
        if not any(map(is_batched, args)):
            return emit_like(instr, [self.materialize(a) for a in args]), None
        rule = self.rules.get(instr.opcode)
        if rule is None:
            why = f": {self.declined[instr.opcode]}" if instr.opcode in self.declined else ""
            raise BatchingError(
                f"vmap has no batching rule for the HLO op {instr.opcode} (%{instr.name}){why}"
            )
        return rule(self, instr, args)

    # -- value helpers ------------------------------------------------------------------------
    def materialize(self, value):
        """An unbatched value as one XlaOp (lists become HLO tuples)."""
        if isinstance(value, list):
            return emit("tuple", [self.materialize(v) for v in value])
        return value[0]

    def shape(self, shape: Shape, bdim: int = 0) -> Shape:
        dims = list(shape.dims)
        dims.insert(bdim, self.size)
        return Shape.array(shape.dtype, dims)

    def front(self, value):
        """The op of a batched value with the batch moved to dimension 0."""
        op, bdim = value
        if bdim == 0:
            return op
        perm = [bdim] + [d for d in range(op.rank) if d != bdim]
        return emit("transpose", [op], {"dimensions": tuple(perm)})

    def batched(self, value):
        """The op of `value` with the batch at dimension 0, broadcast there if unbatched."""
        op, bdim = value
        if bdim is not None:
            return self.front(value)
        return emit(
            "broadcast",
            [op],
            {"dimensions": tuple(range(1, op.rank + 1))},
            shape=self.shape(op.shape),
        )

    def full(self, value, dims):
        """`batched(value)` broadcast to [size, *dims] (scalars of clamp/select/pad)."""
        op = self.batched(value)
        if op.rank == len(dims) + 1:
            return op
        shape = Shape.array(op.dtype, (self.size, *dims))
        return emit("broadcast", [op], {"dimensions": (0,)}, shape=shape)

    def result(self, op, bdim=0):
        """A rule's output: tuple-shaped ops become lists of batched elements."""
        if op.shape.is_tuple:
            return [
                (emit("get-tuple-element", [op], {"index": i}), bdim)
                for i in range(len(op.shape.tuple_shapes))
            ]
        return op, bdim

    def conform(self, value, flags):
        """`value` batched at 0 where `flags` says, unbatched elsewhere."""
        value = expand(value)
        if isinstance(value, list):
            return [self.conform(v, f) for v, f in zip(value, flags)]
        if flags:
            return self.batched(value), 0
        if value[1] is not None:
            raise BatchingError("internal: a value expected unbatched is batched")
        return value

    def select(self, pred, on_true, on_false):
        """Lane-wise choice between two values of one structure; `pred` is pred[size]."""
        if isinstance(on_true, list):
            return [self.select(pred, t, f) for t, f in zip(on_true, on_false)]
        dims = on_true[0].dims[1:] if on_true[1] is not None else on_true[0].dims
        a, b = self.full(on_true, dims), self.full(on_false, dims)
        mask = emit("broadcast", [pred], {"dimensions": (0,)}, shape=Shape.array("pred", a.dims))
        return emit("select", [mask, a, b]), 0

    def lane(self, value, index: int):
        """Lane `index` of a batched value, as an unbatched op."""
        op = self.front(value)
        limits = [(0, d, 1) for d in op.dims]
        limits[0] = (index, index + 1, 1)
        piece = emit("slice", [op], {"slice": tuple(limits)})
        return emit("reshape", [piece], shape=Shape.array(op.dtype, op.dims[1:]))
