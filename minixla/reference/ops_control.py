"""Interpreter handlers: tuples, control flow, calls and custom calls."""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError
from ..ir.attrs import backend_config_string
from .custom_call import CustomCallError, lookup_custom_call


def _tuple(ev, instr, ops):
    return tuple(ops)


def _get_tuple_element(ev, instr, ops):
    return ops[0][instr.attrs["index"]]


def _while(ev, instr, ops):
    condition, body = instr.attrs["condition"], instr.attrs["body"]
    state = ops[0]
    iterations = 0
    while bool(np.asarray(ev.evaluate(condition, [state]))):
        state = ev.evaluate(body, [state])
        iterations += 1
        if ev.max_while_iterations is not None and iterations > ev.max_while_iterations:
            raise ExecutionError(
                f"while %{instr.name} ran more than "
                f"{ev.max_while_iterations} iterations (max_while_iterations)"
            )
    return state


def _scan(ev, instr, ops):
    """XLA's scan: at each index along `dimensions` (from the end with `is_reverse`), the body
    maps (the inputs' slices there, the carries) to (the step's outputs, the new carries);
    the result is the outputs stacked along that dim, then the last carries."""
    (axis,) = instr.attrs["dimensions"]
    carried = instr.attrs.get("num_carries", 0)
    inputs, carries = ops[: len(ops) - carried], list(ops[len(ops) - carried :])
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    out_shapes = shapes[: len(shapes) - carried]
    length = inputs[0].shape[axis]  # the shape rule requires an input
    steps = range(length - 1, -1, -1) if instr.attrs.get("is_reverse") else range(length)
    outputs: list[list] = [[None] * length for _ in out_shapes]
    for i in steps:
        result = ev.evaluate(
            instr.attrs["to_apply"], [np.take(x, i, axis=axis) for x in inputs] + carries
        )
        result = list(result) if isinstance(result, tuple) else [result]
        if len(result) != len(out_shapes) + carried:
            raise ExecutionError(
                f"scan %{instr.name}: to_apply returns {len(result)} values, the scan has "
                f"{len(out_shapes)} outputs and {carried} carries"
            )
        for column, value in zip(outputs, result):
            column[i] = value
        carries = result[len(out_shapes) :]
    stacked = [
        np.stack(column, axis=axis) if length else np.empty(shape.dims, shape.numpy_dtype)
        for column, shape in zip(outputs, out_shapes)
    ]
    values = stacked + carries
    return tuple(values) if instr.shape.is_tuple else values[0]


def _conditional(ev, instr, ops):
    selector = np.asarray(ops[0])
    if "branch_computations" in instr.attrs:
        branches = instr.attrs["branch_computations"]
        index = int(selector)
        if not 0 <= index < len(branches):  # XLA runs the last branch for out-of-range indices
            index = len(branches) - 1
    else:
        branches = [instr.attrs["true_computation"], instr.attrs["false_computation"]]
        index = 0 if bool(selector) else 1
    return ev.evaluate(branches[index], [ops[1 + index]])


def _call(ev, instr, ops):
    return ev.evaluate(instr.attrs["to_apply"], ops)


def _fusion(ev, instr, ops):
    comp = instr.attrs["calls"]
    return ev.evaluate(comp, ops[: len(comp.parameters)])  # operands after them go unused


def _identity(ev, instr, ops):
    return ops[0]


def _after_all(ev, instr, ops):
    return None


def _custom_call(ev, instr, ops):
    target = instr.attrs["custom_call_target"]
    fn = lookup_custom_call(target, "interpreter")
    config = backend_config_string(instr.attrs.get("backend_config"))
    result = fn(*ops, result_shape=instr.shape, backend_config=config)
    return check_result(result, instr.shape, f"custom-call {target!r}")


def check_result(value, shape, what: str):
    """Validates a value produced by user code against the instruction's shape."""
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise CustomCallError(f"{what} must return a tuple of {len(shape.tuple_shapes)}")
        return tuple(check_result(v, s, what) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token:
        return None
    array = np.asarray(value)
    if array.shape != shape.dims or array.dtype != shape.numpy_dtype:
        raise CustomCallError(
            f"{what} returned {array.dtype}{list(array.shape)}, but the "
            f"instruction's shape is {shape}"
        )
    return array


def _async_context(ev, instr, operands: tuple):
    """The value of an async-start/-update: ((operands bound so far), output, state...). The
    wrapped computation runs here once every operand and the whole output are bound, else
    at the async-done; an output or state not computed is zeros of its shape."""
    comp, shape = instr.attrs["calls"], instr.shape
    output = shape.tuple_shapes[1]
    if len(operands) == len(comp.parameters) and output.compatible(comp.root.shape):
        result = ev.evaluate(comp, list(operands))
    else:
        result = _zeros(output)
    return (operands, result, *(_zeros(s) for s in shape.tuple_shapes[2:]))


def _zeros(shape):
    if shape.is_tuple:
        return tuple(_zeros(s) for s in shape.tuple_shapes)
    return None if shape.is_token else np.zeros(shape.dims, shape.numpy_dtype)


def _async_start(ev, instr, ops):
    return _async_context(ev, instr, tuple(ops))


def _async_update(ev, instr, ops):
    if len(ops) == 1 and instr.shape.tuple_shapes[1].compatible(
        instr.operand(0).shape.tuple_shapes[1]
    ):
        return ops[0]  # nothing newly bound: the value goes on as it is
    return _async_context(ev, instr, tuple(ops[0][0]) + tuple(ops[1:]))


def _async_done(ev, instr, ops):
    comp, context = instr.attrs.get("calls"), instr.operand(0).shape
    if comp is None or context.tuple_shapes[1].compatible(comp.root.shape):
        return ops[0][1]  # computed where the output was bound
    return ev.evaluate(comp, list(ops[0][0]))


def _copy_start(ev, instr, ops):
    return (ops[0], ops[0], np.zeros((), np.uint32))


def _copy_done(ev, instr, ops):
    return ops[0][1]


HANDLERS = {
    "tuple": _tuple,
    "get-tuple-element": _get_tuple_element,
    "while": _while,
    "scan": _scan,
    "conditional": _conditional,
    "call": _call,
    "fusion": _fusion,
    "opt-barrier": _identity,
    "add-dependency": _identity,
    "domain": _identity,
    "after-all": _after_all,
    "custom-call": _custom_call,
    "async-start": _async_start,
    "async-update": _async_update,
    "async-done": _async_done,
    "copy-start": _copy_start,
    "copy-done": _copy_done,
}
