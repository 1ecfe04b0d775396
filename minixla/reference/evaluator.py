"""The reference evaluator: walks a computation in post order, one NumPy handler per opcode.

Values are NumPy arrays in logical (row-major) order whatever the layout, tuples of values for
tuple shapes, and None for tokens. Handlers never mutate their inputs, so loop-carried values
and constants can be shared freely.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

from ..errors import (
    ExecutionError,
    MinixlaError,
    ResourceExhaustedError,
    UnsupportedError,
    at_instruction,
)
from ..ir.computation import HloComputation
from ..ir.dtypes import from_numpy
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import ELEMENTWISE
from .denormals import flushed
from .random_stream import RandomStream

Value = Any  # np.ndarray | tuple[Value, ...] | None
Handler = Callable[["Evaluator", HloInstruction, list], Value]

# opcode -> handler; filled by the ops_* modules (see handlers()).
_HANDLERS: dict[str, Handler] = {}


def handlers() -> dict[str, Handler]:
    if not _HANDLERS:
        from . import ops_basic, ops_collective, ops_control, ops_indexing, ops_linalg, ops_reduce

        for table in (
            ops_basic.HANDLERS,
            ops_control.HANDLERS,
            ops_indexing.HANDLERS,
            ops_linalg.HANDLERS,
            ops_reduce.HANDLERS,
            ops_collective.HANDLERS,
        ):
            _HANDLERS.update(table)
    return _HANDLERS


# Opcodes the interpreter declines, and why (compile names them; see docs/ops.md).
DECLINED: dict[str, str] = {
    "dynamic-reshape": "dynamic shapes are not supported",
    "set-dimension-size": "dynamic shapes are not supported",
    "infeed": "no host transfer queue",
    "outfeed": "no host transfer queue",
    "send": "no peers to send to",
    "send-done": "no peers to send to",
    "recv": "no peers to receive from",
    "recv-done": "no peers to receive from",
    "ragged-all-to-all": "not implemented yet",
    "ragged-dot": "not implemented yet",
    "stochastic-convert": "not implemented yet",
    "rng-get-and-update-state": "stateful RNG is expanded by XLA before backends see it",
}


# Python frames the interpreter may use: each level of call nesting takes a few.
DEEP_RECURSION_LIMIT = 20000

# Besides elementwise ops, what a scalar computation may hold and still run on whole arrays.
_SCALAR_PLUMBING = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})


def unsupported_opcodes(module: HloModule) -> list[str]:
    table = handlers()
    return sorted(
        {
            i.opcode + (f" ({DECLINED[i.opcode]})" if i.opcode in DECLINED else "")
            for i in module.all_instructions()
            if i.opcode != "parameter" and i.opcode not in table
        }
    )


# ops that hand values to computations or pass them on as they are: never converted
_PASS_ON = frozenset(
    {
        "call",
        "fusion",
        "while",
        "conditional",
        "custom-call",
        "tuple",
        "get-tuple-element",
        "bitcast",
        "bitcast-convert",
        "async-start",
        "async-update",
        "async-done",
        "opt-barrier",
        "parameter",
        "constant",
    }
)


def _is_float(value) -> bool:
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "fV":
        return False
    if value.dtype.kind == "f":
        return True
    try:  # ml_dtypes' narrow types are kind 'V' (ints and floats alike)
        return from_numpy(value.dtype).is_float
    except MinixlaError:
        return False


def _mixed_floats(instr, operands) -> bool:
    """Mixed precision (the verifier allows it): float operands of different widths."""
    return len({o.dtype for o in operands if _is_float(o)}) > 1


def _widened(operands) -> list:
    """XLA's float normalization: compute in the widest float of the operands."""
    widest = max((o.dtype for o in operands if _is_float(o)), key=lambda d: d.itemsize)
    return [o.astype(widest) if _is_float(o) else o for o in operands]


def _as_declared(instr, value):
    """A float result of another width than declared (mixed precision) converted to it."""
    shape = instr.shape
    if (
        not (
            _is_float(value)
            and shape is not None
            and shape.is_array
            and shape.element_type.is_float
        )
        or value.dtype == shape.element_type.numpy
    ):
        return value
    return value.astype(shape.element_type.numpy)


class Evaluator:
    """Evaluates computations of one module. `max_while_iterations` guards runaway loops."""

    def __init__(
        self,
        module: HloModule,
        *,
        max_while_iterations: int | None = None,
        flush_denormals: bool = False,
    ):
        self.module = module
        self.max_while_iterations = max_while_iterations
        # Subnormal arguments, constants and results become zeros of their sign (XLA:CPU).
        self.flush = flushed if flush_denormals else None
        self.table = handlers()
        self._vectorizable: dict[int, bool] = {}
        self.random_stream = RandomStream()  # `rng` draws here unless an executable runs

    def run(self, args) -> Value:
        """Evaluates the entry computation. Called computations nest as Python calls, so the
        recursion limit is raised while running; deeper nesting is a located error."""
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
        try:
            return self.evaluate(self.module.entry, args)
        except RecursionError:
            raise ExecutionError(
                f"{self.module.name}: called computations nest deeper than "
                f"the interpreter follows (about "
                f"{DEEP_RECURSION_LIMIT // 4} levels); inline them first "
                f"(the call-inliner pass)"
            ) from None
        finally:
            sys.setrecursionlimit(limit)

    def evaluate(self, comp: HloComputation, args) -> Value:
        if len(args) != len(comp.parameters):
            raise ExecutionError(
                f"computation {comp.name} takes {len(comp.parameters)} arguments, got {len(args)}"
            )
        values: dict[int, Value] = {}
        for instr in comp.post_order():
            if instr.opcode == "parameter":
                value = args[instr.parameter_number]
                values[id(instr)] = value if self.flush is None else self.flush(value)
                continue
            values[id(instr)] = self.apply(instr, [values[id(o)] for o in instr.operands])
            if self.flush is not None:
                values[id(instr)] = self.flush(values[id(instr)])
        return values[id(comp.root)]

    def apply(self, instr, operands: list) -> Value:
        """`instr` on its operands' values: mixed-precision float operands computed in the
        widest of them, the result in the declared type. Backends run their fallbacks here."""
        handler = self.table.get(instr.opcode)
        if handler is None:
            raise UnsupportedError(
                f"the interpreter does not implement {instr.opcode} (instruction %{instr.name})"
            )
        if instr.opcode not in _PASS_ON and _mixed_floats(instr, operands):
            operands = _widened(operands)
        try:
            value = handler(self, instr, operands)
            return value if instr.opcode in _PASS_ON else _as_declared(instr, value)
        except MinixlaError as exc:
            at_instruction(exc, instr)
            raise
        except MemoryError as exc:  # a temporary larger than the machine (a huge window)
            raise ResourceExhaustedError(
                f"the interpreter ran out of memory evaluating {instr.opcode} %{instr.name}: {exc}"
            ) from None

    def apply_scalar(self, comp: HloComputation, args) -> Value:
        """Runs a scalar computation (to_apply of reduce, map, scatter, sort...) on arrays of
        operands. A computation of elementwise ops broadcasts, so one call covers many
        elements; any other (a dot, a reduce, a reshape of its scalars) runs per element."""
        if self._elementwise(comp):
            return self.evaluate(comp, args)
        arrays = [np.asarray(a) for a in args]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        if shape == ():
            return self.evaluate(comp, arrays)
        arrays = [np.broadcast_to(a, shape) for a in arrays]
        results = [self.evaluate(comp, [a[index] for a in arrays]) for index in np.ndindex(shape)]
        if isinstance(results[0], tuple):
            return tuple(
                np.array([r[k] for r in results]).reshape(shape) for k in range(len(results[0]))
            )
        return np.array(results).reshape(shape)

    def _elementwise(self, comp: HloComputation) -> bool:
        known = self._vectorizable.get(id(comp))
        if known is None:
            known = all(
                i.opdef.kind == ELEMENTWISE or i.opcode in _SCALAR_PLUMBING
                for i in comp.instructions
            )
            self._vectorizable[id(comp)] = known
        return known


def as_dtype(value: np.ndarray, shape) -> np.ndarray:
    """Casts a handler's result to the instruction's element type (no-op when it matches)."""
    dtype = shape.numpy_dtype
    return value if value.dtype == dtype else value.astype(dtype)
