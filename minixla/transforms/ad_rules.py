"""Differentiation rules for elementwise ops, data movement and reductions: one `Rule` per
opcode, JVP and VJP side by side.

A rule sees the instruction being differentiated, its primal operand values (`args`, XlaOps of
the current trace), its primal result `out`, and either the operand tangents (`jvp`: returns
the result tangent) or the result cotangent (`vjp`: returns one cotangent per operand). None is
a symbolic zero in both directions. Elementwise ops declare their partial derivatives once
(`elementwise`) and get both directions from them. Contractions, windows, indexing and
sorting are in ad_rules_contract.py, control flow in ad_control.py; autodiff.py joins the
tables into `RULES`.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import numpy as mnp
from ..ir.opcodes import ELEMENTWISE as ELEMENTWISE_KIND
from ..ir.opcodes import OPCODES
from . import ad_emit as E
from .ad_emit import T, emit
from .tracing import emit_like


@dataclass(frozen=True)
class Rule:
    jvp: Callable | None = None  # (instr, args, out, tangents) -> tangent | None
    vjp: Callable | None = None  # (instr, args, out, ct, residual) -> [ct | None]
    forward: Callable | None = None  # (instr, args) -> (out, residual), for residuals
    jvp_full: Callable | None = None  # (instr, args, tangents) -> (out, tangent)
    nondiff: bool = False  # the result has no tangent (ints, preds, constants)


NONDIFF = Rule(nondiff=True)


def linear(instr, args, tangents, positions):
    """The op itself applied to tangents in `positions` (other operands kept as primals)."""
    if all(tangents[i] is None for i in positions):
        return None
    ops = [
        (tangents[i] if tangents[i] is not None else E.zeros(a.shape)) if i in positions else a
        for i, a in enumerate(args)
    ]
    return emit_like(instr, ops)


# -- elementwise ----------------------------------------------------------------------------
def _scale(value, partial):
    """value * partial, where the partial may be the Python number 1 or -1."""
    if isinstance(partial, (int, float)) and partial in (1, -1):
        return value if partial == 1 else emit("negate", [value])
    return (T(value) * partial).op


def elementwise(partials) -> Rule:
    """A rule from `partials(*operands, out) -> [d out / d operand_i]` over Tracers; an entry
    may be 1 or -1 (no multiply) or None (no dependence)."""

    def jvp(instr, args, out, tangents):
        total = None
        for p, t in zip(partials(*map(T, args), T(out)), tangents):
            if p is not None and t is not None:
                total = E.add(total, _scale(t, p))
        return total

    def vjp(instr, args, out, ct, _):
        return [None if p is None else _scale(ct, p) for p in partials(*map(T, args), T(out))]

    return Rule(jvp, vjp)


def _like(x, value):
    return mnp.full_like(x, value)


def _pow_partials(x, y, out):
    safe_x = mnp.where(x == 0, _like(x, 1), x)
    dx = mnp.where(y == 0, _like(x, 0), y * mnp.power(x, y - 1))
    return [dx, out * mnp.log(safe_x)]


def _max_partials(x, y, out, greater=True):
    """Ties split the gradient in half, as JAX does."""
    win = (x > y) if greater else (x < y)
    half = mnp.where(x == y, _like(x, 0.5), _like(x, 0))
    dx = mnp.where(win, _like(x, 1), half)
    return [dx, 1 - dx]


def _clamp_partials(lo, x, hi, out):
    zero, one = _like(x, 0), _like(x, 1)
    d_lo = mnp.where((lo > x) & (lo < hi), one, zero)
    d_x = mnp.where((x > lo) & (x < hi), one, zero)
    d_hi = mnp.where(hi < x, one, zero)
    return [d_lo, d_x, d_hi]


# The elementwise derivatives that need code; every other elementwise op states its partials
# in its row of the opcode table (OpDef.partials), read by `row_partials`.
ELEMENTWISE = {
    "power": _pow_partials,
    "maximum": _max_partials,
    "minimum": lambda x, y, out: _max_partials(x, y, out, greater=False),
    "clamp": _clamp_partials,
}

_OPERANDS = ("x", "y", "z")
_ARITHMETIC = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


class FormulaError(ValueError):
    """A row's partial-derivative formula uses something the formula language lacks."""


def _formula_value(node, names: dict):
    """A formula's value over Tracers: numbers stay Python numbers (1 and -1 then cost no
    multiply), names are operands or `out`, calls emit the named opcode."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_formula_value(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        left, right = _formula_value(node.left, names), _formula_value(node.right, names)
        return _ARITHMETIC[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        opcode = node.func.id.replace("_", "-")
        row = OPCODES.get(opcode)
        if row is None or row.kind != ELEMENTWISE_KIND or not row.accepts_arity(len(node.args)):
            raise FormulaError(f"{node.func.id} is not an elementwise opcode of that arity")
        operands = [_formula_value(arg, names) for arg in node.args]
        return T(emit(opcode, [E.op_of(v) for v in operands]))
    raise FormulaError(f"unsupported formula syntax: {ast.unparse(node)}")


def row_partials(opcode: str):
    """`partials(*operands, out)` from the row's formulas; "0" gives None (no dependence)."""
    row = OPCODES[opcode]
    assert row.partials is not None
    trees = [ast.parse(formula, mode="eval").body for formula in row.partials]

    def partials(*values):
        names = dict(zip(_OPERANDS, values[:-1]), out=values[-1])
        return [
            None
            if isinstance(tree, ast.Constant) and tree.value == 0
            else _formula_value(tree, names)
            for tree in trees
        ]

    return partials


def _formula_rule(opcode: str) -> Rule:
    if all(formula == "0" for formula in OPCODES[opcode].partials or ()):
        return NONDIFF
    return elementwise(row_partials(opcode))


FORMULA_RULES = {op: _formula_rule(op) for op, row in OPCODES.items() if row.partials is not None}

# Results with no tangent that the table does not cover as elementwise (JAX gives zeros too).
NONDIFFERENTIABLE = [
    "iota",
    "constant",
    "rng",
    "rng-bit-generator",
    "parameter",
    "get-dimension-size",
    "partition-id",
    "replica-id",
    "after-all",
]


def _select_vjp(instr, args, out, ct, _):
    pred = args[0]
    zero = E.zeros(ct.shape)
    if pred.rank == 0 and ct.rank:  # HLO's scalar predicate selects whole arrays
        pred = E.broadcast_in_dim(pred, ct.shape.with_dtype("pred"), ())
    return [None, emit("select", [pred, ct, zero]), emit("select", [pred, zero, ct])]


def _convert_vjp(instr, args, out, ct, _):
    return [E.convert(ct, args[0].dtype) if E.is_float(args[0].shape) else None]


# -- data movement --------------------------------------------------------------------------
def _broadcast_vjp(instr, args, out, ct, _):
    dims = tuple(instr.attrs["dimensions"])
    summed = E.reduce_sum(ct, [d for d in range(ct.rank) if d not in dims])
    order = sorted(dims)
    return [E.transpose(summed, [order.index(d) for d in dims])]


def _reshape_vjp(instr, args, out, ct, _):
    return [E.reshape(ct, args[0].dims)]


def _transpose_vjp(instr, args, out, ct, _):
    perm = instr.attrs["dimensions"]
    return [E.transpose(ct, list(np.argsort(perm)))]


def _slice_vjp(instr, args, out, ct, _):
    operand = args[0].shape
    if ct.shape.numel() == 0:
        return [E.zeros(operand)]
    config = []
    for (start, _limit, stride), size, n in zip(instr.attrs["slice"], operand.dims, ct.dims):
        last = start + (n - 1) * stride
        config.append((start, size - last - 1, stride - 1))
    return [emit("pad", [ct, E.scalar(0, ct.dtype)], {"padding": tuple(config)})]


def _pad_vjp(instr, args, out, ct, _):
    config = instr.attrs["padding"]
    unpad = tuple((-lo, -hi, 0) for lo, hi, _ in config)
    trimmed = emit("pad", [ct, E.scalar(0, ct.dtype)], {"padding": unpad})
    spec = tuple((0, d, interior + 1) for d, (_, _, interior) in zip(trimmed.dims, config))
    operand_ct = emit("slice", [trimmed], {"slice": spec})
    total = E.reduce_sum(ct, range(ct.rank))
    inner = E.reduce_sum(operand_ct, range(operand_ct.rank))
    return [operand_ct, emit("subtract", [total, inner])]


def _concatenate_vjp(instr, args, out, ct, _):
    dim = instr.attrs["dimensions"][0]
    cts, start = [], 0
    for a in args:
        spec = tuple(
            (start, start + a.dims[dim], 1) if d == dim else (0, n, 1)
            for d, n in enumerate(ct.dims)
        )
        cts.append(emit("slice", [ct], {"slice": spec}))
        start += a.dims[dim]
    return cts


def _reverse_vjp(instr, args, out, ct, _):
    return [emit("reverse", [ct], dict(instr.attrs))]


def _dynamic_slice_vjp(instr, args, out, ct, _):
    starts = args[1:]
    ct_operand = emit("dynamic-update-slice", [E.zeros(args[0].shape), ct, *starts])
    return [ct_operand] + [None] * len(starts)


def _dynamic_update_slice_vjp(instr, args, out, ct, _):
    update, starts = args[1], args[2:]
    ct_operand = emit("dynamic-update-slice", [ct, E.zeros(update.shape), *starts])
    ct_update = emit("dynamic-slice", [ct, *starts], {"dynamic_slice_sizes": update.dims})
    return [ct_operand, ct_update] + [None] * len(starts)


# -- reductions -----------------------------------------------------------------------------
def reducer_kind(comp) -> str | None:
    """add / maximum / minimum / multiply for a scalar binary reducer; "replace" for a
    scatter combiner that returns its update; None otherwise."""
    root = comp.root
    if (
        root.opcode == "parameter"
        and root.attrs.get("parameter_number", root.parameter_number) == 1
    ):
        return "replace"
    if (
        root.opcode in ("add", "maximum", "minimum", "multiply", "or", "and")
        and all(o.opcode == "parameter" for o in root.operands)
        and len(comp.parameters) == 2
    ):
        return root.opcode
    return None


def _reduce_kind(instr) -> str:
    from .autodiff import ad_error

    kind = reducer_kind(instr.attrs["to_apply"])
    if len(instr.operands) != 2 or kind not in ("add", "maximum", "minimum", "multiply"):
        raise ad_error(
            instr, "only sum, product, max and min reductions of one operand are differentiable"
        )
    return kind


def _kept(instr, rank: int) -> list[int]:
    return [d for d in range(rank) if d not in instr.attrs["dimensions"]]


def _extreme_mask(instr, args, out):
    """(mask of the elements equal to the reduced max/min, how many tie per result)."""
    x = args[0]
    wide = E.broadcast_in_dim(out, x.shape, _kept(instr, x.rank))
    mask = E.convert(emit("compare", [x, wide], {"direction": "EQ"}), x.dtype)
    return mask, E.reduce_sum(mask, instr.attrs["dimensions"])


def _product_of_others(instr, x):
    """For each element of x, the product of the other elements it is reduced with (exact
    when some are zero, unlike out / x): exclusive products from both ends."""
    from ..frontend.numpy_reduce import cumprod
    from ..frontend.numpy_shape import concatenate, flip

    dims = list(instr.attrs["dimensions"])
    kept = _kept(instr, x.rank)
    moved = E.transpose(x, kept + dims)
    n = int(np.prod([x.dims[d] for d in dims], dtype=np.int64))
    rows = T(E.reshape(moved, [x.dims[d] for d in kept] + [n]))
    ones = mnp.ones_like(rows[..., :1])

    def exclusive(values):
        return concatenate([ones, cumprod(values, axis=-1)[..., :-1]], axis=-1)

    others = exclusive(rows) * flip(exclusive(flip(rows, -1)), -1)
    back = E.reshape(others.op, moved.dims)
    return E.transpose(back, list(np.argsort(kept + dims)))


def _reduce_vjp(instr, args, out, ct, _):
    kind = _reduce_kind(instr)
    x = args[0]
    kept = _kept(instr, x.rank)
    if kind == "add":
        return [E.broadcast_in_dim(ct, x.shape, kept), E.reduce_sum(ct, range(ct.rank))]
    if kind == "multiply":
        wide = E.broadcast_in_dim(ct, x.shape, kept)
        return [emit("multiply", [wide, _product_of_others(instr, x)]), None]
    mask, count = _extreme_mask(instr, args, out)
    share = E.broadcast_in_dim(emit("divide", [ct, count]), x.shape, kept)
    return [emit("multiply", [share, mask]), None]


def _reduce_jvp(instr, args, out, tangents):
    kind = _reduce_kind(instr)
    tx = tangents[0]
    if tx is None:
        return None
    if kind == "add":
        return E.reduce_sum(tx, instr.attrs["dimensions"])
    if kind == "multiply":
        weighted = emit("multiply", [tx, _product_of_others(instr, args[0])])
        return E.reduce_sum(weighted, instr.attrs["dimensions"])
    mask, count = _extreme_mask(instr, args, out)
    summed = E.reduce_sum(emit("multiply", [tx, mask]), instr.attrs["dimensions"])
    return emit("divide", [summed, count])


# -- tuples ---------------------------------------------------------------------------------
def _identity_vjp(instr, args, out, ct, _):
    return [ct]


def _identity_jvp(instr, args, out, tangents):
    return tangents[0]


def linear_rule(positions, vjp) -> Rule:
    return Rule(lambda instr, args, out, tangents: linear(instr, args, tangents, positions), vjp)


RULES: dict[str, Rule] = {
    "add-dependency": Rule(
        lambda instr, args, out, ts: ts[0], lambda instr, args, out, ct, _: [ct, None]
    ),
    "domain": Rule(_identity_jvp, _identity_vjp),
    **FORMULA_RULES,
    **{opcode: elementwise(partials) for opcode, partials in ELEMENTWISE.items()},
    **{opcode: NONDIFF for opcode in NONDIFFERENTIABLE},
    "select": linear_rule([1, 2], _select_vjp),
    "convert": linear_rule([0], _convert_vjp),
    "broadcast": linear_rule([0], _broadcast_vjp),
    "reshape": linear_rule([0], _reshape_vjp),
    "bitcast": linear_rule([0], _reshape_vjp),
    "transpose": linear_rule([0], _transpose_vjp),
    "slice": linear_rule([0], _slice_vjp),
    "pad": linear_rule([0, 1], _pad_vjp),
    "concatenate": Rule(
        lambda instr, args, out, ts: linear(instr, args, ts, list(range(len(args)))),
        _concatenate_vjp,
    ),
    "reverse": linear_rule([0], _reverse_vjp),
    "dynamic-slice": linear_rule([0], _dynamic_slice_vjp),
    "dynamic-update-slice": linear_rule([0, 1], _dynamic_update_slice_vjp),
    "reduce": Rule(_reduce_jvp, _reduce_vjp),
}
