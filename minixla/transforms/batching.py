"""`minixla.vmap`: vectorizing map, as a transformation of the traced HLO.

`vmap(f)(xs)` traces `f` on one example (the batched axis removed), then `Batching` re-emits
the traced computation with a batch dimension, op by op, from the rules in batching_rules.py.
Values that do not depend on a batched input stay unbatched. The result is ordinary HLO in the
enclosing trace, so vmap nests, runs inside `jit`, and composes with other transformations;
outside any trace it runs under a cached `jit`.
"""

from __future__ import annotations

import functools

from ..frontend.errors import FrontendError, FrontendShapeError, FrontendTypeError
from ..frontend.numpy_api import asarray
from ..frontend.pytree import children_of, flatten, unflatten
from ..frontend.tracer import Tracer, current_builder
from ..ir import Shape
from .batching_rules import BATCHING_RULES, DECLINED
from .batching_values import Batching, BatchingError
from .tracing import staged, trace

__all__ = ["vmap", "BatchingError"]


def _check_axes_spec(spec, what: str) -> None:
    leaves, _ = flatten(spec)
    for leaf in leaves:
        if leaf is not None and not (isinstance(leaf, int) and not isinstance(leaf, bool)):
            raise FrontendTypeError(f"vmap {what} must be ints or None, got {leaf!r}")


def _axes_for(spec, tree, what: str) -> list:
    """One axis (int or None) per leaf of `tree`, from `spec`, a tree prefix of it."""
    axes: list = []
    _match_prefix(spec, tree, axes, what)
    return axes


def _match_prefix(spec, tree, axes: list, what: str) -> None:
    if spec is None or isinstance(spec, int):
        axes.extend([spec] * len(flatten(tree)[0]))
        return
    spec_def, tree_def = children_of(spec), children_of(tree)
    if spec_def is None or tree_def is None or spec_def[:2] != tree_def[:2]:
        raise FrontendTypeError(
            f"vmap {what} must be a tree prefix of the arguments: "
            f"{_describe(spec)} does not match {_describe(tree)}"
        )
    for s, t in zip(spec_def[2], tree_def[2]):
        _match_prefix(s, t, axes, what)


def _describe(tree) -> str:
    return str(flatten(tree)[1]) if tree is not None else "None"


def _example(leaf, axis: int, where: str):
    """One element of a batched argument leaf, and the leaf itself as a value."""
    value = asarray(leaf)
    rank = value.ndim
    if rank == 0:
        raise FrontendShapeError(
            f"vmap: {where} is a scalar, but in_axes maps it over "
            f"axis {axis}; use in_axes=None for it"
        )
    if not -rank <= axis < rank:
        raise FrontendShapeError(
            f"vmap: in_axes {axis} is out of range for {where} of shape {value.shape}"
        )
    axis %= rank
    builder = current_builder()
    limits = [(0, d, 1) for d in value.shape]
    limits[axis] = (0, 1, 1)
    piece = builder.emit("slice", [value.op], {"slice": tuple(limits)})
    dims = value.shape[:axis] + value.shape[axis + 1 :]
    one = builder.emit("reshape", [piece], shape=Shape.array(value.op.dtype, dims))
    return Tracer(one, value.weak), value, axis


def _batch_size(sizes: dict, axis_size) -> int:
    distinct = set(sizes.values())
    if axis_size is not None:
        distinct.add(axis_size)
    if not distinct:
        raise FrontendError("vmap needs at least one batched argument or an axis_size")
    if len(distinct) > 1:
        listing = ", ".join(f"{where} has size {n}" for where, n in sizes.items())
        extra = f" (axis_size={axis_size})" if axis_size is not None else ""
        raise FrontendShapeError(
            f"vmap got inconsistent sizes for the mapped axes: {listing}{extra}"
        )
    return distinct.pop()


def _place(batching: Batching, value, axis, where: str):
    """An output value with its batch at `axis` (or unbatched for None)."""
    op, bdim = value
    if axis is None:
        if bdim is not None:
            raise FrontendShapeError(
                f"vmap: {where} has out_axes=None but depends on a mapped input"
            )
        return op
    rank = op.rank + (0 if bdim is not None else 1)
    if not -rank <= axis < rank:
        raise FrontendShapeError(
            f"vmap: out_axes {axis} is out of range for {where} of rank {rank}"
        )
    axis %= rank
    op = batching.front(value) if bdim is not None else batching.batched(value)
    if axis == 0:
        return op
    perm = list(range(1, rank))
    perm.insert(axis, 0)
    return current_builder().emit("transpose", [op], {"dimensions": tuple(perm)})


def vmap(fun, in_axes=0, out_axes=0, axis_size: int | None = None):
    """Maps `fun` over an axis of its arguments: `vmap(f)(xs)[i] == f(xs[i])`.

    in_axes: an int, None (not mapped), or a tuple with one entry per positional argument,
    each a tree prefix of that argument; keyword arguments are mapped over axis 0.
    out_axes: the same, for the outputs. axis_size is needed only when nothing is mapped."""
    if not callable(fun):
        raise FrontendTypeError(f"vmap expects a function, got {type(fun).__name__}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    _check_axes_spec(in_axes, "in_axes")
    _check_axes_spec(out_axes, "out_axes")

    @functools.wraps(fun)
    def batched(*args, **kwargs):
        if isinstance(in_axes, tuple) and len(in_axes) != len(args):
            raise FrontendTypeError(
                f"vmap in_axes has {len(in_axes)} entries, but the "
                f"function got {len(args)} positional arguments"
            )
        axes = _axes_for(in_axes, tuple(args), "in_axes")
        axes += [0] * len(flatten(kwargs)[0])
        leaves, tree = flatten((tuple(args), dict(kwargs)))
        examples, inputs, sizes = [], [], {}
        for k, (leaf, axis) in enumerate(zip(leaves, axes)):
            if axis is None:
                examples.append(leaf)
                inputs.append(None)
                continue
            one, whole, axis = _example(leaf, axis, f"argument leaf {k}")
            examples.append(one)
            inputs.append((whole.op, axis))
            sizes[f"argument leaf {k}"] = whole.shape[axis]
        batching = Batching(_batch_size(sizes, axis_size), BATCHING_RULES, DECLINED)
        call_args, call_kwargs = unflatten(tree, examples)
        traced = trace(fun, call_args, call_kwargs, name="vmapped")
        operands = [
            given if given is not None else (t.op, None) for given, t in zip(inputs, traced.args)
        ]
        operands += [(op, None) for op in traced.captured]
        outs = batching.run(traced.computation, [operands])
        out_like = unflatten(traced.out_tree, list(range(traced.out_tree.num_leaves)))
        placed_axes = _axes_for(out_axes, out_like, "out_axes")
        results = [
            Tracer(_place(batching, value, axis, f"output leaf {k}"), weak)
            for k, (value, axis, weak) in enumerate(zip(outs, placed_axes, traced.out_weak))
        ]
        return unflatten(traced.out_tree, results)

    return staged(batched)
