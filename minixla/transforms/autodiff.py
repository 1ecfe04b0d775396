"""Automatic differentiation of traced HLO: forward mode (`jvp_walk`) and reverse mode
(`forward` then `backward`).

Reverse mode replays the computation into the current trace (`forward`), keeping every primal
value (they are ordinary values of the enclosing computation, so later passes free what the
backward sweep does not read) plus the residuals some rules add (a while loop's per-iteration
carries, a sort's permutation). `backward` then walks the instructions in reverse post order,
summing the cotangents of every use (fan-out) and asking each opcode's rule for its operands'
cotangents. None stands for a zero everywhere; integer and boolean values never carry one.

Values of tuple type are kept unpacked as Python lists where that is free (a `tuple`
instruction's value is the list of its operands), so get-tuple-element costs nothing; `pack`
builds a real tuple when an instruction needs one.
"""

from __future__ import annotations

from ..frontend.errors import FrontendError
from ..ir import HloComputation, HloInstruction
from . import ad_emit as E
from .ad_control import RULES as CONTROL_RULES
from .ad_rules import RULES as OP_RULES
from .ad_rules import Rule
from .ad_rules_contract import RULES as CONTRACTION_RULES
from .tracing import emit_like

# The rule of every differentiable opcode: elementwise ops, data movement and reductions
# (ad_rules.py), contractions, windows, indexing and sorting (ad_rules_contract.py), control
# flow and calls (ad_control.py).
RULES: dict[str, Rule] = {**OP_RULES, **CONTRACTION_RULES, **CONTROL_RULES}

_COLLECTIVE = "collectives are not differentiable yet"
# Opcodes without a rule, and why (tuple and get-tuple-element are handled by the walkers).
DECLINED: dict[str, str] = {
    **{
        op: _COLLECTIVE
        for op in [
            "all-gather",
            "all-gather-start",
            "all-gather-done",
            "all-reduce",
            "all-reduce-start",
            "all-reduce-done",
            "all-to-all",
            "collective-broadcast",
            "collective-permute",
            "collective-permute-start",
            "collective-permute-done",
            "reduce-scatter",
            "ragged-all-to-all",
        ]
    },
    **{
        op: "asynchronous pairs appear only after scheduling"
        for op in ["async-start", "async-update", "async-done", "copy-start", "copy-done"]
    },
    **{op: "complex numbers are not differentiable yet" for op in ["complex", "real", "imag"]},
    **{
        op: "host transfers and peer-to-peer ops have no derivative"
        for op in ["infeed", "outfeed", "send", "send-done", "recv", "recv-done"]
    },
    **{op: "dynamic shapes are not supported" for op in ["dynamic-reshape", "set-dimension-size"]},
    **{
        op: "no rule yet; write one with minixla.custom_vjp"
        for op in [
            "batch-norm-grad",
            "batch-norm-inference",
            "batch-norm-training",
            "fft",
            "map",
            "ragged-dot",
            "scaled-dot",
            "scan",
            "topk",
        ]
    },
    "rng-get-and-update-state": "stateful RNG is expanded before differentiation",
}


class DifferentiationError(FrontendError):
    """An instruction that cannot be differentiated, or a custom rule that broke its contract."""


def ad_error(instr: HloInstruction, reason: str) -> DifferentiationError:
    return DifferentiationError(
        f"cannot differentiate HLO {instr.opcode} (%{instr.name}): {reason}"
    )


def rule_for(instr: HloInstruction) -> Rule:
    rule = RULES.get(instr.opcode)
    if rule is None:
        raise ad_error(instr, DECLINED.get(instr.opcode, "the opcode has no differentiation rule"))
    return rule


# -- tuple values ---------------------------------------------------------------------------
def pack(value):
    """An XlaOp for a value that may be an unpacked tuple (a list)."""
    if isinstance(value, list):
        return E.emit("tuple", [pack(v) for v in value])
    return value


def unpack(value) -> list:
    """The elements of a tuple-typed value."""
    if isinstance(value, list):
        return value
    return [
        E.emit("get-tuple-element", [value], {"index": i})
        for i in range(len(value.shape.tuple_shapes))
    ]


def differentiable(shape) -> bool:
    return shape.is_tuple or E.is_float(shape)


# -- reverse mode ---------------------------------------------------------------------------
def forward(comp: HloComputation, params: list, overrides: dict | None = None):
    """Replays `comp` on `params` (one value per parameter number) into the current trace;
    returns (values, residuals), both keyed by id(instruction). `overrides` supplies values
    to reuse instead of recomputing (checkpoint policies)."""
    values: dict[int, object] = {}
    residuals: dict[int, object] = {}
    for instr in comp.post_order():
        key = id(instr)
        if overrides and key in overrides:
            values[key] = overrides[key]
        elif instr.opcode == "parameter":
            values[key] = params[instr.parameter_number]
        elif instr.opcode == "tuple":
            values[key] = [values[id(o)] for o in instr.operands]
        elif instr.opcode == "get-tuple-element":
            values[key] = unpack(values[id(instr.operand(0))])[instr.attrs["index"]]
        else:
            args = [values[id(o)] for o in instr.operands]
            rule = RULES.get(instr.opcode)
            if rule is not None and rule.forward is not None:
                values[key], residuals[key] = rule.forward(instr, args)
            else:
                values[key] = emit_like(instr, [pack(a) for a in args])
    return values, residuals


def _accumulate(cts: dict, instr: HloInstruction, ct) -> None:
    if ct is None or not differentiable(instr.shape):
        return
    if instr.shape.is_tuple:
        ct = as_ct_list(ct, len(instr.shape.tuple_shapes))
        old = cts.get(id(instr))
        cts[id(instr)] = ct if old is None else [add_ct(a, b) for a, b in zip(old, ct)]
        return
    cts[id(instr)] = E.add(cts.get(id(instr)), E.fit(ct, instr.shape))


def add_ct(a, b):
    if a is None or b is None:
        return b if a is None else a
    if isinstance(a, list) or isinstance(b, list):
        return [add_ct(x, y) for x, y in zip(as_ct_list(a, None), as_ct_list(b, None))]
    return E.add(a, b)


def as_ct_list(ct, n: int | None) -> list:
    if isinstance(ct, list):
        return ct
    if ct is None:
        return [None] * n
    return unpack(ct)


def is_zero(ct) -> bool:
    if isinstance(ct, list):
        return all(is_zero(c) for c in ct)
    return ct is None


def backward(comp: HloComputation, values: dict, residuals: dict, root_ct) -> dict:
    """The cotangents of `comp`'s parameters (by number) given the root's cotangent."""
    cts: dict[int, object] = {}
    _accumulate(cts, comp.root, root_ct)
    param_cts: dict[int, object] = {}
    for instr in reversed(comp.post_order()):
        ct = cts.pop(id(instr), None)
        if is_zero(ct):
            continue
        if instr.opcode == "parameter":
            param_cts[instr.parameter_number] = ct
        elif instr.opcode == "tuple":
            for operand, c in zip(instr.operands, ct):
                _accumulate(cts, operand, c)
        elif instr.opcode == "get-tuple-element":
            operand = instr.operand(0)
            spread = [None] * len(operand.shape.tuple_shapes)
            spread[instr.attrs["index"]] = ct
            _accumulate(cts, operand, spread)
        else:
            rule = rule_for(instr)
            if rule.nondiff:
                continue
            if rule.vjp is None:
                raise ad_error(instr, "the opcode has no reverse-mode (VJP) rule")
            args = [values[id(o)] for o in instr.operands]
            operand_cts = rule.vjp(instr, args, values[id(instr)], ct, residuals.get(id(instr)))
            for operand, c in zip(instr.operands, operand_cts):
                _accumulate(cts, operand, c)
    return param_cts


# -- forward mode ---------------------------------------------------------------------------
def jvp_walk(comp: HloComputation, params: list, param_tangents: list):
    """(root value, root tangent) of `comp` on `params` with tangents `param_tangents` (one
    per parameter; lists for tuple parameters; None for zero)."""
    values: dict[int, object] = {}
    tangents: dict[int, object] = {}
    for instr in comp.post_order():
        key = id(instr)
        if instr.opcode == "parameter":
            values[key] = params[instr.parameter_number]
            tangents[key] = param_tangents[instr.parameter_number]
            continue
        if instr.opcode == "tuple":
            values[key] = [values[id(o)] for o in instr.operands]
            tangents[key] = [tangents[id(o)] for o in instr.operands]
            continue
        if instr.opcode == "get-tuple-element":
            index = instr.attrs["index"]
            values[key] = unpack(values[id(instr.operand(0))])[index]
            t = tangents[id(instr.operand(0))]
            tangents[key] = None if t is None else as_ct_list(t, None)[index]
            continue
        args = [values[id(o)] for o in instr.operands]
        ts = [tangents[id(o)] if differentiable(o.shape) else None for o in instr.operands]
        rule = RULES.get(instr.opcode)
        if is_zero(ts) or not differentiable(instr.shape) or (rule is not None and rule.nondiff):
            values[key], tangents[key] = emit_like(instr, [pack(a) for a in args]), None
            continue
        rule = rule_for(instr)
        if rule.jvp_full is not None:
            values[key], tangents[key] = rule.jvp_full(instr, args, ts)
            continue
        if rule.jvp is None:
            raise ad_error(instr, "the opcode has no forward-mode (JVP) rule")
        values[key] = emit_like(instr, [pack(a) for a in args])
        tangents[key] = rule.jvp(instr, args, values[key], ts)
    return values[id(comp.root)], tangents[id(comp.root)]
