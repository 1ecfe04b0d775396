"""Shape inference: the result shape XLA's rules give an instruction, from its operands,
attributes and called computations.

`infer_shape(instr)` dispatches on the opcode table's `infer` name through `RULES`; an empty
name means the op's shape cannot be derived and the declared one is taken as is. Results carry
no layout (callers add default layouts). The parser calls this when the text omits a shape, and
the verifier compares it with the declared shape. Rules live by family in shape_rules_*.py;
control-flow and leaf rules are here.
"""

from __future__ import annotations

from typing import Callable

from ..errors import ShapeError
from . import shape_rules_base as base
from . import shape_rules_compute as compute
from . import shape_rules_movement as movement
from .opcodes import OPCODES
from .shape_rules_base import (
    SignatureError,
    array,
    check_reducer,
    check_signature,
    fail,
    fmt,
    require_declared,
)
from .shapes import Shape


# -- control flow and calls -----------------------------------------------------------------
def while_(instr) -> Shape:
    """condition: T -> pred[], body: T -> T; the result is the loop state T."""
    state = instr.operand(0).shape
    check_signature(instr, "condition", [state], array("pred", ()))
    check_signature(instr, "body", [state], state)
    return state.without_layout()


def scan(instr) -> Shape:
    """to_apply: (the inputs' slices along `dimensions`, the carries) -> (the step's outputs,
    the new carries); the result is the outputs stacked along that dim, then the carries (a
    tuple, unless to_apply returns one value: then that value, stacked or carried)."""
    shapes = [base.operand_array(instr, i) for i in range(instr.operand_count)]
    carried = instr.attrs.get("num_carries", 0)
    if not 0 <= carried < len(shapes):
        raise fail(
            instr,
            f"num_carries={carried} must leave at least one of the {len(shapes)} operands to scan",
        )
    inputs, carries = shapes[: len(shapes) - carried], shapes[len(shapes) - carried :]
    dims = list(instr.attrs["dimensions"])
    if len(dims) != 1 or not all(0 <= dims[0] < s.rank for s in inputs):
        raise fail(instr, f"dimensions={dims} must name one dim of every input")
    axis = dims[0]
    length = inputs[0].dims[axis]
    if any(s.dims[axis] != length for s in inputs):
        raise fail(instr, f"the inputs differ in dim {axis}")
    slices = [array(s.element_type, s.dims[:axis] + s.dims[axis + 1 :]) for s in inputs]
    comp = check_signature(instr, "to_apply", slices + carries)
    root = comp.root.shape
    results = list(root.tuple_shapes) if root.is_tuple else [root]
    outputs, updated = results[: len(results) - carried], results[len(results) - carried :]
    if len(updated) != carried or any(not a.compatible(b) for a, b in zip(updated, carries)):
        raise fail(
            instr,
            f"to_apply=%{comp.name} must return its outputs, then the {carried} carries "
            "as they came in",
        )
    stacked = [array(o.element_type, o.dims[:axis] + (length,) + o.dims[axis:]) for o in outputs]
    values = stacked + [c.without_layout() for c in carries]
    return Shape.tuple_of(values) if root.is_tuple else values[0]  # one value: not a tuple


def conditional(instr) -> Shape:
    """A pred selector picks true/false_computation, an s32 one branch_computations[i]; branch
    i takes operand i+1 and every branch returns the same shape."""
    selector = base.scalar_of(instr, 0, " (the branch selector)")
    if selector.dtype == "pred":
        names = ["true_computation", "false_computation"]
        branches = [instr.attrs.get(name) for name in names]
        if None in branches:
            raise fail(instr, "a pred selector needs true_computation and false_computation")
    elif selector.dtype == "s32":
        branches = list(instr.attrs.get("branch_computations") or [])
        names = [f"branch_computations[{i}]" for i in range(len(branches))]
        if not branches:
            raise fail(instr, "an s32 selector needs branch_computations")
    else:
        raise fail(instr, f"the selector must be pred[] or s32[], got {fmt(selector)}")
    if instr.operand_count != len(branches) + 1:
        raise fail(
            instr,
            f"{len(branches)} branches need {len(branches)} operands after the "
            f"selector, got {instr.operand_count - 1}",
        )
    for i, (name, comp) in enumerate(zip(names, branches)):
        # every branch must return what the first one does
        result = branches[0].root.shape if i else None
        _check_call(instr, name, comp, [instr.operand(i + 1).shape], result)
    return branches[0].root.shape.without_layout()


def _check_call(instr, label: str, comp, params, result) -> None:
    got = comp.parameter_shapes
    if len(got) != len(params) or not all(base.same(a, b) for a, b in zip(got, params)):
        raise fail(
            instr,
            f"{label}=%{comp.name} takes ({', '.join(fmt(s) for s in got)}), "
            f"given ({', '.join(fmt(s) for s in params)})",
            SignatureError,
        )
    if not comp.has_root or (result is not None and not base.same(comp.root.shape, result)):
        root = fmt(comp.root.shape) if comp.has_root else "nothing"
        raise fail(
            instr, f"{label}=%{comp.name} returns {root}, expected {fmt(result)}", SignatureError
        )


def call(instr) -> Shape:
    """call and fusion: the computation's parameters map 1:1 to the operands."""
    called = instr.called_computations
    if len(called) != 1:
        raise fail(instr, f"must call exactly one computation, calls {len(called)}")
    label = "calls" if instr.opcode == "fusion" else "to_apply"
    operands = [o.shape for o in instr.operands]
    if instr.opcode == "fusion":
        # XLA's verifier lets a fusion pass more operands than its computation takes (the
        # extra ones unused), never fewer
        operands = operands[: len(called[0].parameters)]
    _check_call(instr, label, called[0], operands, None)
    return called[0].root.shape.without_layout()


def all_reduce(instr) -> Shape:
    shapes = base.operand_arrays(instr)
    if not shapes:
        raise fail(instr, "needs at least one operand")
    types = {s.element_type for s in shapes}
    if len(types) == 1 and instr.attrs.get("to_apply") is not None:
        check_reducer(
            instr,
            "to_apply",
            [shapes[0].element_type],
            [shapes[0].element_type],
            ignore_fp_precision=True,
        )
    results = [s.without_layout() for s in shapes]
    return results[0] if len(results) == 1 else Shape.tuple_of(results)


# -- leaves ---------------------------------------------------------------------------------
def rng_bit_generator(instr) -> Shape:
    """(new state, random bits): the declared shape, whose state must match the operand's."""
    target = require_declared(instr)
    state = instr.operand(0).shape
    if (
        not target.is_tuple
        or len(target.tuple_shapes) != 2
        or not base.same(target.tuple_shapes[0], state)
    ):
        raise fail(instr, f"result must be ({fmt(state)}, bits), got {fmt(target)}")
    return target.without_layout()


def u32_scalar(instr) -> Shape:
    return array("u32", ())


def token(instr) -> Shape:
    """after-all orders after its operands, whatever they are (XLA's verifier checks only the
    token result), e.g. `after-all(%add)` makes a token once %add is computed."""
    return Shape.token()


RULES: dict[str, Callable] = {
    "elementwise": base.elementwise,
    "abs": base.abs_,
    "is_finite": base.is_finite,
    "complex_part": base.complex_part,
    "convert": base.convert,
    "bitcast_convert": base.bitcast_convert,
    "complex": base.complex_,
    "compare": base.compare,
    "select": base.select,
    "clamp": base.clamp,
    "map": base.map_,
    "scan": scan,
    "same_as_operand": base.same_as_operand,
    "broadcast": movement.broadcast,
    "reshape": movement.reshape,
    "dynamic_reshape": movement.dynamic_reshape,
    "transpose": movement.transpose,
    "bitcast": movement.bitcast,
    "slice": movement.slice_,
    "dynamic_slice": movement.dynamic_slice,
    "dynamic_update_slice": movement.dynamic_update_slice,
    "concatenate": movement.concatenate,
    "pad": movement.pad,
    "gather": movement.gather,
    "scatter": movement.scatter,
    "tuple": movement.tuple_,
    "get_tuple_element": movement.get_tuple_element,
    "get_dimension_size": movement.get_dimension_size,
    "set_dimension_size": movement.set_dimension_size,
    "iota": movement.iota,
    "reduce": compute.reduce,
    "reduce_window": compute.reduce_window,
    "select_and_scatter": compute.select_and_scatter,
    "sort": compute.sort,
    "topk": compute.topk,
    "dot": compute.dot,
    "scaled_dot": compute.scaled_dot,
    "convolution": compute.convolution,
    "fft": compute.fft,
    "triangular_solve": compute.triangular_solve,
    "batch_norm_training": compute.batch_norm_training,
    "batch_norm_grad": compute.batch_norm_grad,
    "while_": while_,
    "conditional": conditional,
    "call": call,
    "rng_bit_generator": rng_bit_generator,
    "u32_scalar": u32_scalar,
    "token": token,
    "all_reduce": all_reduce,
}


# rules that take `mixed=True`: floats of different widths may meet (XLA's ShapeInference
# allows it; its verifier only with allow_mixed_precision)
MIXED_PRECISION_RULES = frozenset(
    {
        "elementwise",
        "compare",
        "select",
        "clamp",
        "map",
        "dynamic_update_slice",
        "concatenate",
        "pad",
        "reduce",
        "reduce_window",
    }
)


def infer_shape(instr, *, allow_mixed_precision: bool = False) -> Shape:
    """The result shape of `instr` (without layout); raises ShapeError naming the op and the
    constraint its operands or attributes break. With `allow_mixed_precision`, floating-point
    operands of different widths meet where XLA's ShapeInference lets them."""
    opdef = OPCODES.get(instr.opcode)
    if opdef is None:
        raise ShapeError(f"unknown opcode {instr.opcode!r}")
    if not opdef.infer:
        return instr.shape
    rule = RULES.get(opdef.infer)
    if rule is None:
        raise ShapeError(
            f"{instr.opcode}: the opcode table names an unknown shape rule {opdef.infer!r}"
        )
    if not opdef.accepts_arity(instr.operand_count):
        raise fail(instr, f"wrong number of operands ({instr.operand_count})")
    try:
        if allow_mixed_precision and opdef.infer in MIXED_PRECISION_RULES:
            return rule(instr, mixed=True)
        return rule(instr)
    except KeyError as exc:  # a required attribute the rule reads is absent
        raise fail(instr, f"missing attribute {exc.args[0]}") from None
    except TypeError as exc:  # an attribute of the wrong kind (e.g. kept as raw text)
        raise fail(instr, f"malformed attribute: {exc}") from None
