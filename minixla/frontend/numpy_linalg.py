"""`minixla.numpy` products: matmul, dot, tensordot, inner, outer and einsum, all lowered to
HLO dot (dot_general) plus the broadcasts, reductions and transposes NumPy's rules imply."""

from __future__ import annotations

import numpy as np

from . import dtypes as dt
from .eager import api
from .errors import FrontendShapeError, FrontendTypeError
from .numpy_api import broadcast_shapes, broadcast_to, cast, multiply, typeof
from .numpy_creation import eye
from .numpy_reduce import sum as _sum
from .numpy_shape import expand_dims, normalize_axis, ravel, reshape, squeeze, transpose
from .ops_core import Dot
from .tracer import Tracer


def _operands(name: str, *values) -> tuple[list[Tracer], bool]:
    dtype, weak = dt.result_type(*(typeof(v) for v in values))
    if dtype == np.bool_:
        raise FrontendTypeError(f"{name} does not accept bool operands")
    return [cast(v, dtype, weak) for v in values], weak


def dot_general(a: Tracer, b: Tracer, contracting, batch=((), ()), weak=False) -> Tracer:
    """HLO dot: result dims are batch dims, then a's free dims, then b's."""
    (ca, cb), (ba, bb) = contracting, batch
    for i, j in zip(ca, cb):
        if a.shape[i] != b.shape[j]:
            raise FrontendShapeError(
                f"contracting dimension {i} of shape {a.shape} (size "
                f"{a.shape[i]}) does not match dimension {j} of shape "
                f"{b.shape} (size {b.shape[j]})"
            )
    op = Dot(
        a.op,
        b.op,
        lhs_contracting=tuple(ca),
        rhs_contracting=tuple(cb),
        lhs_batch=tuple(ba),
        rhs_batch=tuple(bb),
    )
    return Tracer(op, weak)


@api
def matmul(x, y) -> Tracer:
    (a, b), weak = _operands("matmul", x, y)
    if a.ndim == 0 or b.ndim == 0:
        raise FrontendShapeError("matmul: operands must not be scalars (use multiply)")
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    a = expand_dims(a, 0) if vec_a else a
    b = expand_dims(b, -1) if vec_b else b
    if a.shape[-1] != b.shape[-2]:
        raise FrontendShapeError(
            f"matmul: shapes {x_shape(x)} and {x_shape(y)} are not "
            f"aligned: {a.shape[-1]} (dim {a.ndim - 1}) != "
            f"{b.shape[-2]} (dim {b.ndim - 2})"
        )
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = broadcast_to(a, batch + a.shape[-2:])
    b = broadcast_to(b, batch + b.shape[-2:])
    n = len(batch)
    out = dot_general(a, b, ((n + 1,), (n,)), (tuple(range(n)), tuple(range(n))), weak)
    if vec_a:
        out = squeeze(out, -2)
    if vec_b:
        out = squeeze(out, -1)
    return out


def x_shape(value) -> tuple[int, ...]:
    return value.shape if isinstance(value, Tracer) else np.shape(value)


@api
def dot(x, y) -> Tracer:
    (a, b), weak = _operands("dot", x, y)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    contract_b = 0 if b.ndim == 1 else b.ndim - 2
    if a.shape[-1] != b.shape[contract_b]:
        raise FrontendShapeError(
            f"dot: shapes {a.shape} and {b.shape} not aligned: "
            f"{a.shape[-1]} (dim {a.ndim - 1}) != "
            f"{b.shape[contract_b]} (dim {contract_b})"
        )
    return dot_general(a, b, ((a.ndim - 1,), (contract_b,)), weak=weak)


@api
def vdot(x, y) -> Tracer:
    return dot(ravel(x), ravel(y))


@api
def inner(x, y) -> Tracer:
    (a, b), weak = _operands("inner", x, y)
    if a.ndim == 0 or b.ndim == 0:
        return multiply(a, b)
    return dot_general(a, b, ((a.ndim - 1,), (b.ndim - 1,)), weak=weak)


@api
def outer(x, y) -> Tracer:
    return multiply(expand_dims(ravel(x), 1), expand_dims(ravel(y), 0))


@api
def tensordot(x, y, axes=2) -> Tracer:
    (a, b), weak = _operands("tensordot", x, y)
    if isinstance(axes, int):
        ca, cb = range(a.ndim - axes, a.ndim), range(axes)
    else:
        ca, cb = ([axes_i] if isinstance(axes_i, int) else axes_i for axes_i in axes)
    ca = tuple(normalize_axis(i, a.ndim) for i in ca)
    cb = tuple(normalize_axis(i, b.ndim) for i in cb)
    return dot_general(a, b, (ca, cb), weak=weak)


# -- einsum ---------------------------------------------------------------------------------
def _parse(subscripts: str, ranks: list[int]) -> tuple[list[str], str]:
    """Input terms and output labels, with '...' spelled out as fresh upper-case labels
    (aligned to the right, as NumPy broadcasts them) and the implicit output filled in."""
    subscripts = subscripts.replace(" ", "")
    inputs, arrow, output = subscripts.partition("->")
    raw = inputs.split(",")
    if len(raw) != len(ranks):
        raise FrontendShapeError(f"einsum: {len(raw)} terms for {len(ranks)} operands")
    pool = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in subscripts]
    ell = max((rank - (len(t) - 3) for t, rank in zip(raw, ranks) if "..." in t), default=0)
    fresh = "".join(pool[:ell])
    terms = []
    for term, rank in zip(raw, ranks):
        if "..." in term:
            n = rank - (len(term) - 3)
            term = term.replace("...", fresh[ell - n :] if n > 0 else "")
        if len(term) != rank:
            raise FrontendShapeError(
                f"einsum: term {term!r} does not match an operand of rank {rank}"
            )
        terms.append(term)
    if arrow:
        return terms, output.replace("...", fresh)
    letters = "".join(terms)
    once = sorted(c for c in set(letters) if letters.count(c) == 1 and c not in fresh)
    return terms, fresh + "".join(once)


def _diagonal(t: Tracer, labels: str) -> tuple[Tracer, str]:
    """Repeated labels within one term ('ii') take the diagonal."""
    for label in labels:
        while labels.count(label) > 1:
            p = labels.index(label)
            q = labels.index(label, p + 1)
            n = t.shape[p]
            shape = [1] * t.ndim
            shape[p], shape[q] = n, n
            t = _sum(multiply(t, reshape(eye(n, dtype=t.dtype), shape)), q)
            labels = labels[:q] + labels[q + 1 :]
    return t, labels


@api
def einsum(subscripts: str, *operands) -> Tracer:
    tracers, weak = _operands("einsum", *operands)
    terms, output = _parse(subscripts, [t.ndim for t in tracers])
    pairs = [_diagonal(t, term) for t, term in zip(tracers, terms)]
    # sum out labels no other operand or the output needs
    for i, (t, labels) in enumerate(pairs):
        others = output + "".join(l for j, (_, l) in enumerate(pairs) if j != i)
        axes = [k for k, c in enumerate(labels) if c not in others]
        if axes:
            pairs[i] = (_sum(t, tuple(axes)), "".join(c for c in labels if c in others))
    acc, labels = pairs[0]
    for k in range(1, len(pairs)):
        t, lb = pairs[k]
        needed = output + "".join(l for _, l in pairs[k + 1 :])
        batch = [c for c in labels if c in lb and c in needed]
        contract = [c for c in labels if c in lb and c not in needed]
        acc = dot_general(
            acc,
            t,
            ([labels.index(c) for c in contract], [lb.index(c) for c in contract]),
            ([labels.index(c) for c in batch], [lb.index(c) for c in batch]),
            weak,
        )
        labels = (
            "".join(batch)
            + "".join(c for c in labels if c not in batch + contract)
            + "".join(c for c in lb if c not in batch + contract)
        )
    missing = [c for c in output if c not in labels]
    if missing:
        raise FrontendShapeError(f"einsum: output labels {missing} appear in no operand")
    return transpose(acc, [labels.index(c) for c in output])
