"""`minixla.lax`: structured control flow over pytrees, lowered to HLO while and conditional.

Loop state and branch operands travel as one tuple; the bodies are traced by child builders,
and values they close over (arrays of the enclosing trace) are captured as extra tuple elements
(see builder.py), so bodies may use them freely. The carry keeps its structure, shapes and
dtypes across iterations; a weakly typed body result (from a Python scalar) is cast to the
carry's dtype, anything else that changes a dtype is an error.
"""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .builder import Captures
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import _builder, add, asarray, astype, cast, less, subtract, typeof
from .numpy_creation import zeros
from .numpy_shape import expand_dims
from .ops_core import Clamp, DynamicUpdateSlice, GetTupleElement
from .pytree import flatten, unflatten
from .tracer import Tracer, tracing


def _leaves(tree) -> tuple[list[Tracer], object]:
    leaves, treedef = flatten(tree)
    return [asarray(leaf) for leaf in leaves], treedef


def _enter(builder, like: list[Tracer]) -> list[Tracer]:
    return [Tracer(op, t.weak) for op, t in zip(builder.state(), like)]


def _match(what: str, out, like: Tracer) -> Tracer:
    """`out` with exactly the shape and dtype of the carry element `like`."""
    value = asarray(out)
    if value.shape != like.shape:
        raise FrontendShapeError(f"{what} has shape {value.shape}, but the carry has {like.shape}")
    if value.dtype != like.dtype:
        if not value.weak:
            raise FrontendTypeError(
                f"{what} has dtype {value.dtype}, but the carry has "
                f"{like.dtype}; cast it with .astype"
            )
        value = cast(value, like.dtype)
    return value


def _same_tree(what: str, got, want) -> None:
    if got != want:
        raise FrontendTypeError(f"{what} must have the structure {want}, got {got}")


def _loop(builder, init: list[Tracer], cond_fn, body_fn) -> list:
    """The HLO while over flat state `init`; cond_fn/body_fn take and return flat lists of
    tracers, body_fn with {capture index: new value} for captured buffers it updates.
    Returns the while op and the captures."""
    caps = Captures([t.op.shape for t in init])
    cond_b, body_b = builder.child("cond", caps), builder.child("body", caps)
    with tracing(cond_b):
        pred = asarray(cond_fn(_enter(cond_b, init)))
        if pred.shape != () or pred.dtype != np.bool_:
            raise FrontendTypeError(
                f"the loop condition must return a boolean scalar, got "
                f"{pred.dtype}{list(pred.shape)}"
            )
    with tracing(body_b):
        outs, overrides = body_fn(_enter(body_b, init))
    root = [o.op for o in outs]
    for j in range(caps.num_state, len(caps.shapes)):  # captured values pass through
        root.append(overrides[j].op if j in overrides else body_b.tuple_element(j))
    attrs = {"condition": cond_b.build(pred.op), "body": body_b.build(root)}
    state = builder.emit("tuple", [t.op for t in init] + caps.outer)
    return builder.emit("while", [state], attrs), caps


@api
def while_loop(cond_fun, body_fun, init_val):
    """Repeats `val = body_fun(val)` while `cond_fun(val)`; returns the final val."""
    init, treedef = _leaves(init_val)

    def body(state):
        out, out_tree = flatten(body_fun(unflatten(treedef, state)))
        _same_tree("while_loop body_fun output", out_tree, treedef)
        return [
            _match(f"body_fun output leaf {i}", o, t) for i, (o, t) in enumerate(zip(out, init))
        ], {}

    loop, _ = _loop(_builder(), init, lambda s: cond_fun(unflatten(treedef, s)), body)
    return unflatten(
        treedef, [Tracer(GetTupleElement(loop, i), t.weak) for i, t in enumerate(init)]
    )


@api
def fori_loop(lower, upper, body_fun, init_val):
    """`for i in range(lower, upper): val = body_fun(i, val)`; bounds may be traced."""
    index_dtype, _ = dt.result_type(*(typeof(b) for b in (lower, upper)))
    if dt.kind(index_dtype) != dt.INT:
        raise FrontendTypeError(f"fori_loop bounds must be integers, got {index_dtype}")
    start = cast(lower, index_dtype)

    def cond(carry):
        return less(carry[0], cast(upper, index_dtype))

    def body(carry):
        return add(carry[0], cast(1, index_dtype)), body_fun(carry[0], carry[1])

    return while_loop(cond, body, (start, init_val))[1]


@api
def scan(f, init, xs=None, length: int | None = None, reverse: bool = False):
    """`carry, y = f(carry, x)` over the leading axis of `xs`; returns (carry, stacked ys)."""
    carry, carry_tree = _leaves(init)
    xs_leaves, xs_tree = _leaves(xs)
    lengths = {x.shape[0] for x in xs_leaves if x.ndim}
    if (
        any(x.ndim == 0 for x in xs_leaves)
        or len(lengths) > 1
        or (length is not None and lengths and lengths != {length})
    ):
        raise FrontendShapeError(
            f"scan: xs leaves need one common leading axis length, got "
            f"{[x.shape for x in xs_leaves]} (length={length})"
        )
    n = length if length is not None else lengths.pop() if lengths else None
    if n is None:
        raise FrontendShapeError("scan needs xs or an explicit length")
    builder = _builder()
    index_dtype = dt.default_dtype(dt.INT)
    counter = cast(0, index_dtype)
    y_tree, buffers = [], []

    def body(state):
        i = state[0]
        at = subtract(n - 1, i) if reverse else i
        x = unflatten(xs_tree, [leaf[at] for leaf in xs_leaves])
        new_carry, y = f(unflatten(carry_tree, state[1:]), x)
        out, out_tree = flatten(new_carry)
        _same_tree("scan carry output", out_tree, carry_tree)
        outs = [
            _match(f"scan carry output leaf {k}", o, t) for k, (o, t) in enumerate(zip(out, carry))
        ]
        ys, tree = _leaves(y)
        y_tree.append(tree)
        overrides = {}
        for y_leaf in ys:
            with tracing(builder):  # the stacked output starts as zeros outside the loop
                buffer = zeros((n,) + y_leaf.shape, y_leaf.dtype)
            index = _builder().captures.index_of(buffer.op)
            start = [asarray(at).op] + [cast(0, index_dtype).op] * y_leaf.ndim
            row = expand_dims(y_leaf, 0)
            overrides[index] = Tracer(DynamicUpdateSlice(asarray(buffer).op, row.op, start))
            buffers.append((index, y_leaf.weak))
        return [add(i, cast(1, index_dtype))] + outs, overrides

    loop, _ = _loop(builder, [counter] + carry, lambda s: less(s[0], cast(n, index_dtype)), body)
    final = [Tracer(GetTupleElement(loop, 1 + k), t.weak) for k, t in enumerate(carry)]
    stacked = [Tracer(GetTupleElement(loop, index), weak) for index, weak in buffers]
    return unflatten(carry_tree, final), unflatten(y_tree[0], stacked)


def _branches(selector: Tracer, branches, operands):
    """One HLO conditional: every branch gets the same tuple (operands, then captures)."""
    builder = _builder()
    args, treedef = _leaves(operands)
    caps = Captures([t.op.shape for t in args])
    traced = []
    for k, fn in enumerate(branches):
        child = builder.child(f"branch_{k}", caps)
        with tracing(child):
            out, out_tree = flatten(fn(*unflatten(treedef, _enter(child, args))))
            traced.append((child, out_tree, [asarray(o) for o in out]))
    out_tree = traced[0][1]
    for _, tree, _ in traced[1:]:
        _same_tree("every branch output", tree, out_tree)
    types = [
        dt.result_type(*((o.dtype, o.weak) for o in leaf))
        for leaf in zip(*(outs for _, _, outs in traced))
    ]
    comps = []
    for k, (child, _, outs) in enumerate(traced):
        with tracing(child):
            root = []
            for i, (o, (dtype, _weak)) in enumerate(zip(outs, types)):
                if o.shape != traced[0][2][i].shape:
                    raise FrontendShapeError(
                        f"branch {k} output leaf {i} has shape {o.shape}, "
                        f"branch 0 gives {traced[0][2][i].shape}"
                    )
                root.append(cast(o, dtype).op)
        comps.append(child.build(root))
    state = builder.emit("tuple", [t.op for t in args] + caps.outer)
    if selector.dtype == np.bool_:
        attrs = {"true_computation": comps[0], "false_computation": comps[1]}
    else:
        attrs = {"branch_computations": comps}
    result = builder.emit("conditional", [selector.op] + [state] * len(comps), attrs)
    return unflatten(
        out_tree, [Tracer(GetTupleElement(result, i), weak) for i, (_, weak) in enumerate(types)]
    )


def _scalar(value, what: str) -> Tracer:
    tracer = asarray(value)
    if tracer.shape != ():
        raise FrontendShapeError(f"{what} must be a scalar, got shape {tracer.shape}")
    return tracer


@api
def cond(pred, true_fun, false_fun, *operands):
    """`true_fun(*operands)` if pred else `false_fun(*operands)`, as an HLO conditional."""
    return _branches(
        astype(_scalar(pred, "cond's predicate"), bool), [true_fun, false_fun], operands
    )


@api
def switch(index, branches, *operands):
    """`branches[index](*operands)`, the index clamped into range as JAX does."""
    branches = list(branches)
    if not branches:
        raise FrontendTypeError("switch needs at least one branch")
    index = cast(_scalar(index, "switch's index"), np.int32)
    low, high = (_builder().constant(np.asarray(v, np.int32)) for v in (0, len(branches) - 1))
    return _branches(Tracer(Clamp(low, index.op, high)), branches, operands)


@api
def select(pred, on_true, on_false):
    from .numpy_api import where

    return where(pred, on_true, on_false)


@api
def dynamic_slice(operand, start_indices, slice_sizes):
    from .ops_core import DynamicSlice

    tracer = asarray(operand)
    starts = [cast(s, np.int32).op for s in start_indices]
    return Tracer(DynamicSlice(tracer.op, starts, slice_sizes), tracer.weak)


@api
def dynamic_update_slice(operand, update, start_indices):
    tracer = asarray(operand)
    starts = [cast(s, np.int32).op for s in start_indices]
    return Tracer(DynamicUpdateSlice(tracer.op, cast(update, tracer.dtype).op, starts), tracer.weak)
