"""Algebraic simplifier rules for reductions and dots.

A reduction's combination order is unspecified in HLO, so merging two reductions may round
differently; no rule here changes which elements are combined, or adds an init value more or
fewer times unless that init is an exact identity of the reducer.
"""

from __future__ import annotations

from ..ir.attrs import Raw
from .patterns import RuleSet, all_ones, highest, lowest, m, new, values_equal

REDUCE = RuleSet("algsimp")
X = m.Any("x")

_REDUCERS = ("add", "multiply", "maximum", "minimum", "and", "or")


def reducer_opcode(comp) -> str | None:
    """`add` (etc.) when `comp` is (a, b) -> a op b on scalars, else None."""
    params = comp.parameters
    root = comp.root
    if len(params) != 2 or root.opcode not in _REDUCERS or len(comp.instructions) != 3:
        return None
    if {id(o) for o in root.operands} != {id(p) for p in params} or root.shape.rank != 0:
        return None
    return root.opcode


def is_identity(init, opcode: str, *, exact: bool) -> bool:
    """Whether constant `init` is the identity of `opcode`. For float add only -0.0 is exact
    (0.0 + -0.0 = +0.0); with `exact=False` +0.0 counts too, which is right wherever the init
    is combined with other elements anyway."""
    if init.opcode != "constant":
        return False
    etype = init.shape.element_type
    if opcode == "add":
        if etype.is_float:
            return values_equal(init.literal, -0.0, etype) or (
                not exact and values_equal(init.literal, 0.0, etype)
            )
        return values_equal(init.literal, 0, etype)
    value = {"multiply": 1, "maximum": lowest, "minimum": highest, "and": all_ones, "or": 0}[opcode]
    return values_equal(init.literal, value, etype)


@REDUCE.rule(m.Reduce(m.Reduce(X, m.Any("inner_init"), name="inner"), m.Any("init")))
def reduce_of_reduce(root, inner, x, inner_init, init):
    # reduce(reduce(x, dims=d1), dims=d2) -> reduce(x, dims=d1 + d2), same reducer, identity init
    opcode = reducer_opcode(root.attrs["to_apply"])
    if opcode is None or reducer_opcode(inner.attrs["to_apply"]) != opcode:
        return None
    if inner.users != [root] or root.shape.element_type != x.shape.element_type:
        return None
    if not (is_identity(init, opcode, exact=False) and inner_init.same_op(init)):
        return None
    inner_dims = set(inner.attrs["dimensions"])
    kept = [d for d in range(x.shape.rank) if d not in inner_dims]
    dims = tuple(sorted(inner_dims | {kept[d] for d in root.attrs["dimensions"]}))
    return new("reduce", root.shape, x, init, dimensions=dims, to_apply=root.attrs["to_apply"])


@REDUCE.rule(m.Reduce(X, m.Any("init")))
def reduce_trivial(root, x, init):
    # reduce(x, identity) over no dims, or only size-1 dims -> reshape(x)
    reduced = [x.shape.dims[d] for d in root.attrs["dimensions"]]
    if any(size != 1 for size in reduced):
        return None
    opcode = reducer_opcode(root.attrs["to_apply"])
    if opcode is None or not is_identity(init, opcode, exact=True):
        return None
    if root.shape.element_type != x.shape.element_type:
        return None
    return x if x.shape.dims == root.shape.dims else new("reshape", root.shape, x)


def _fold_transpose(dot, side: str):
    """dot attributes with `side`'s transpose folded into its dimension numbers, or None when
    that would reorder the dot's free dims in the result."""
    operand = dot.operand(0 if side == "lhs" else 1)
    perm = operand.attrs["dimensions"]
    batch = tuple(dot.attrs.get(f"{side}_batch_dims", ()))
    contracting = tuple(dot.attrs.get(f"{side}_contracting_dims", ()))
    free = [perm[d] for d in range(len(perm)) if d not in batch + contracting]
    if free != sorted(free):
        return None
    attrs = dict(dot.attrs)
    attrs[f"{side}_contracting_dims"] = tuple(perm[d] for d in contracting)
    if batch:
        attrs[f"{side}_batch_dims"] = tuple(perm[d] for d in batch)
    return attrs


@REDUCE.rule(m.Dot(m.Transpose(m.Any("a")), m.Any("b")))
def dot_of_transposed_lhs(root, a, b):
    # dot(transpose(a), b) -> dot(a, b) with the permutation in the lhs dimension numbers
    attrs = _fold_transpose(root, "lhs") if root.operand(0).opcode == "transpose" else None
    return None if attrs is None else new("dot", root.shape, a, b, **attrs)


@REDUCE.rule(m.Dot(m.Any("a"), m.Transpose(m.Any("b"))))
def dot_of_transposed_rhs(root, a, b):
    # dot(a, transpose(b)) -> dot(a, b) with the permutation in the rhs dimension numbers
    attrs = _fold_transpose(root, "rhs") if root.operand(1).opcode == "transpose" else None
    return None if attrs is None else new("dot", root.shape, a, b, **attrs)


@REDUCE.rule(m.Transpose(m.Dot(m.Any("a"), m.Any("b"), name="dot")))
def transpose_of_dot(root, dot, a, b):
    # transpose(dot(a, b)) putting b's free dims before a's -> dot(b, a): the product is
    # computed in the transposed order directly, with no transpose of the result after it
    if dot.users != [root]:
        return None
    attrs = dot.attrs
    batch = len(attrs.get("lhs_batch_dims", ()))
    lhs_free = a.shape.rank - batch - len(attrs.get("lhs_contracting_dims", ()))
    rhs_free = b.shape.rank - batch - len(attrs.get("rhs_contracting_dims", ()))
    swapped = (
        tuple(range(batch))
        + tuple(batch + lhs_free + i for i in range(rhs_free))
        + tuple(batch + i for i in range(lhs_free))
    )
    if tuple(root.attrs["dimensions"]) != swapped or not (lhs_free and rhs_free):
        return None
    flipped = {}
    for name, value in attrs.items():
        side, _, rest = name.partition("_")
        if side in ("lhs", "rhs") and rest in ("batch_dims", "contracting_dims"):
            flipped[f"{'rhs' if side == 'lhs' else 'lhs'}_{rest}"] = value
        elif name == "operand_precision" and isinstance(value, Raw):
            flipped[name] = Raw("{" + ",".join(reversed(value.text.strip("{}").split(","))) + "}")
        elif name == "operand_precision" and value is not None:
            return None
        else:
            flipped[name] = value
    return new("dot", root.shape, b, a, **flipped)
