"""The public differentiation API, JAX's names and signatures: grad, value_and_grad, vjp, jvp,
linearize, jacfwd, jacrev, hessian (stop_gradient, checkpoint and the custom rules are in
regions.py).

Every function traces the user's function into HLO (tracing.py) and emits the differentiated
program into the enclosing trace with autodiff.py; outside any trace it runs under a cached
`jit` (`staged`). So they compose with each other and with `jit` in any order.
"""

from __future__ import annotations

import functools

import numpy as np

from ..frontend import numpy_api as mnp
from ..frontend.numpy_creation import zeros
from ..frontend.numpy_shape import reshape, stack
from ..frontend.errors import FrontendTypeError
from ..frontend.pytree import flatten, unflatten
from ..frontend.tracer import Tracer, current_builder
from . import ad_emit as E
from .autodiff import as_ct_list, backward, forward, jvp_walk, unpack
from .tracing import trace, staged


def _argnums(argnums, nargs: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise FrontendTypeError(
                f"{name}: argnums {argnums} but the function got {nargs} positional arguments"
            )
    return tuple(i % nargs for i in nums)


def _check_float_inputs(tree, name: str, argnums) -> None:
    for k, leaf in enumerate(flatten(tree)[0]):
        dtype, _ = mnp.typeof(leaf)
        if not np.issubdtype(dtype, np.floating):
            raise FrontendTypeError(
                f"{name} requires real floating-point inputs, but argnums={argnums} leaf {k} "
                f"has dtype {dtype}; differentiate with respect to float arguments only (cast "
                f"with .astype(float) or move the argument out of argnums)"
            )


def _linearize(fun, primals: tuple, kwargs=None):
    """Traces fun(*primals), replays it for reverse mode; returns (output tracers, out_tree,
    backward) with backward(list of output cotangents) -> list of input cotangents."""
    traced = trace(fun, primals, kwargs, name="vjp")
    comp = traced.computation
    values, residuals = forward(comp, [traced.operands])
    outs = [Tracer(v, w) for v, w in zip(unpack(values[id(comp.root)]), traced.out_weak)]

    def backward_fn(out_cts: list) -> list:
        got = backward(comp, values, residuals, list(out_cts)).get(0)
        cts = as_ct_list(got, len(traced.operands))[: traced.num_args]
        return [
            Tracer(c if c is not None else E.zeros(a.op.shape), a.weak)
            for c, a in zip(cts, traced.args)
        ]

    return outs, traced.out_tree, traced.in_tree, backward_fn


def _count_first(pair_tree, leaves) -> int:
    """How many of a traced (output, aux) pair's leaves belong to the output."""
    out, _ = unflatten(pair_tree, list(range(len(leaves))))
    return len(flatten(out)[0])


def _split_aux(fun, has_aux: bool, name: str):
    """fun as a function returning (differentiated output, aux)."""
    if not has_aux:
        return lambda *a, **k: (fun(*a, **k), None)

    def split(*a, **k):
        out = fun(*a, **k)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise FrontendTypeError(
                f"{name}(has_aux=True): the function must return a pair "
                f"(output, aux), got {type(out).__name__}"
            )
        return out

    return split


def _with_args(fun, args, nums):
    """fun of the arguments in `nums` only, the others fixed."""

    def partial(*diff):
        full = list(args)
        for i, value in zip(nums, diff):
            full[i] = value
        return full

    return partial


def value_and_grad(fun, argnums=0, has_aux: bool = False):
    """(fun(*args), d fun / d args[argnums]); fun must return a real scalar."""
    split = _split_aux(fun, has_aux, "value_and_grad")

    @functools.wraps(fun)
    def transformed(*args, **kwargs):
        nums = _argnums(argnums, len(args), "grad")
        diff = tuple(args[i] for i in nums)
        _check_float_inputs(diff, "grad", argnums)
        merge = _with_args(fun, args, nums)
        outs, out_tree, in_tree, back = _linearize(lambda *d: split(*merge(*d), **kwargs), diff)
        (value, aux), n_out = unflatten(out_tree, outs), _count_first(out_tree, outs)
        if n_out != 1 or outs[0].shape != () or not np.issubdtype(outs[0].dtype, np.floating):
            got = outs[0] if n_out == 1 else f"a pytree of {n_out} arrays"
            raise FrontendTypeError(
                f"grad requires a real scalar output, got {got}; use "
                f"vjp or jacrev for other outputs"
            )
        cts = back([E.full(outs[0].op.shape, 1)] + [None] * (len(outs) - 1))
        grads, _ = unflatten(in_tree, cts)
        grads = grads[0] if isinstance(argnums, int) else grads
        return ((value, aux) if has_aux else value), grads

    return staged(transformed)


def grad(fun, argnums=0, has_aux: bool = False):
    """d fun / d args[argnums] (with has_aux: (gradient, aux))."""
    both = value_and_grad(fun, argnums, has_aux)

    @functools.wraps(fun)
    def transformed(*args, **kwargs):
        value, grads = both(*args, **kwargs)
        return (grads, value[1]) if has_aux else grads

    return transformed


def _vjp_inside(fun, primals, has_aux):
    split = _split_aux(fun, has_aux, "vjp")
    leaves, pair_tree, in_tree, back = _linearize(split, tuple(primals))
    n_out = _count_first(pair_tree, leaves)
    outs = leaves[:n_out]
    out, aux = unflatten(pair_tree, leaves)
    out_tree = flatten(out)[1]

    def vjp_fn(cotangent):
        leaves, tree = flatten(cotangent)
        if tree != out_tree:
            raise FrontendTypeError(
                f"vjp_fn: the cotangent must have the output's structure {out_tree}, got {tree}"
            )
        cts = []
        for k, (leaf, out) in enumerate(zip(leaves, outs)):
            ct = mnp.asarray(leaf)
            if ct.shape != out.shape:
                raise FrontendTypeError(
                    f"vjp_fn: cotangent leaf {k} has shape {ct.shape}, the output has {out.shape}"
                )
            cts.append(mnp.cast(ct, out.dtype).op if E.is_float(out.op.shape) else None)
        return unflatten(in_tree, back(cts + [None] * (len(leaves) - n_out)))[0]

    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def vjp(fun, *primals, has_aux: bool = False):
    """(fun(*primals), vjp_fn[, aux]): vjp_fn(cotangent) returns one cotangent per primal."""
    if current_builder() is not None:
        return _vjp_inside(fun, primals, has_aux)
    from ..frontend.jit import jit

    result = jit(
        lambda *p: _vjp_inside(fun, p, has_aux)[::2] if has_aux else _vjp_inside(fun, p, has_aux)[0]
    )(*primals)
    pullback = jit(lambda p, ct: _vjp_inside(fun, p, has_aux)[1](ct))

    def vjp_fn(cotangent):
        return pullback(tuple(primals), cotangent)

    if has_aux:
        return result[0], vjp_fn, result[1]
    return result, vjp_fn


def _jvp_inside(fun, primals, tangents):
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise FrontendTypeError("jvp: primals and tangents must be tuples or lists")
    p_leaves, p_tree = flatten(tuple(primals))
    t_leaves, t_tree = flatten(tuple(tangents))
    if p_tree != t_tree:
        raise FrontendTypeError(
            f"jvp: tangents must have the primals' structure {p_tree}, got {t_tree}"
        )
    traced = trace(fun, tuple(primals), name="jvp")
    ts = []
    for k, (t, a) in enumerate(zip(t_leaves, traced.args)):
        tangent = mnp.asarray(t)
        if tangent.shape != a.shape:
            raise FrontendTypeError(
                f"jvp: tangent leaf {k} has shape {tangent.shape}, the primal has {a.shape}"
            )
        ts.append(mnp.cast(tangent, a.dtype).op if E.is_float(a.op.shape) else None)
    ts += [None] * len(traced.captured)
    out, t_out = jvp_walk(traced.computation, [traced.operands], [ts])
    outs = unpack(out)
    t_out = as_ct_list(t_out, len(outs))
    primal_out = [Tracer(o, w) for o, w in zip(outs, traced.out_weak)]
    tangent_out = [
        Tracer(t if t is not None else E.zeros(o.shape), w)
        for t, o, w in zip(t_out, outs, traced.out_weak)
    ]
    return unflatten(traced.out_tree, primal_out), unflatten(traced.out_tree, tangent_out)


def jvp(fun, primals, tangents):
    """(fun(*primals), the directional derivative along `tangents`)."""
    return staged(lambda p, t: _jvp_inside(fun, p, t))(tuple(primals), tuple(tangents))


def linearize(fun, *primals):
    """(fun(*primals), f_jvp) with f_jvp(*tangents) the JVP at primals (recomputed per call)."""
    out = staged(fun)(*primals)
    return out, lambda *tangents: jvp(fun, primals, tangents)[1]


# -- Jacobians: one JVP per input element (jacfwd) or one VJP per output element (jacrev),
# unrolled in HLO; they can become a single vmapped JVP/VJP once vmap exists.
def _basis(leaves) -> list[list]:
    """One-hot tangents over all elements of `leaves`, leaf by leaf."""
    result = []
    for k, leaf in enumerate(leaves):
        for flat in range(int(np.prod(leaf.shape, dtype=np.int64))):
            one_hot = []
            for m, other in enumerate(leaves):
                basis = np.zeros(other.shape, other.dtype)
                if m == k:
                    basis.reshape(-1)[flat] = 1
                one_hot.append(basis)
            result.append(one_hot)
    return result


def jacfwd(fun, argnums=0, has_aux: bool = False):
    """The Jacobian by forward mode: out dims then input dims, like jax.jacfwd."""
    split = _split_aux(fun, has_aux, "jacfwd")

    def transformed(*args):
        nums = _argnums(argnums, len(args), "jacfwd")
        diff = tuple(args[i] for i in nums)
        _check_float_inputs(diff, "jacfwd", argnums)
        merge = _with_args(fun, args, nums)
        leaves, in_tree = flatten(diff)
        leaves = [mnp.asarray(leaf) for leaf in leaves]
        primal = lambda *d: split(*merge(*d))[0]  # noqa: E731
        columns, aux = [], None
        for one_hot in _basis([np.zeros(t.shape, t.dtype) for t in leaves]):
            tangents = unflatten(in_tree, [mnp.asarray(b) for b in one_hot])
            out, column = _jvp_inside(primal, diff, tangents)
            columns.append(flatten(column)[0])
        out_leaves, out_tree = flatten(out)
        if has_aux:
            aux = split(*merge(*diff))[1]
        jac = []
        for o, out_leaf in enumerate(out_leaves):
            per_input, start = [], 0
            for leaf in leaves:
                size = int(np.prod(leaf.shape, dtype=np.int64))
                cols = [columns[start + c][o] for c in range(size)]
                start += size
                block = (
                    stack(cols, axis=-1) if cols else zeros(out_leaf.shape + (0,), out_leaf.dtype)
                )
                per_input.append(reshape(block, out_leaf.shape + leaf.shape))
            jac.append(
                unflatten(in_tree, per_input)[0]
                if isinstance(argnums, int)
                else unflatten(in_tree, per_input)
            )
        result = unflatten(out_tree, jac)
        return (result, aux) if has_aux else result

    return staged(transformed)


def jacrev(fun, argnums=0, has_aux: bool = False):
    """The Jacobian by reverse mode: out dims then input dims, like jax.jacrev."""
    split = _split_aux(fun, has_aux, "jacrev")

    def transformed(*args):
        nums = _argnums(argnums, len(args), "jacrev")
        diff = tuple(args[i] for i in nums)
        _check_float_inputs(diff, "jacrev", argnums)
        merge = _with_args(fun, args, nums)
        leaves, pair_tree, in_tree, back = _linearize(lambda *d: split(*merge(*d)), diff)
        n_out = _count_first(pair_tree, leaves)
        outs = leaves[:n_out]
        out_value, aux = unflatten(pair_tree, leaves)
        out_tree = flatten(out_value)[1]
        jac = []
        for o, out in enumerate(outs):
            rows = []
            for one_hot in _basis([np.zeros(out.shape, out.dtype)]):
                cts = [None] * len(leaves)
                cts[o] = mnp.asarray(one_hot[0]).op
                rows.append(back(cts))
            in_leaves = flatten(diff)[0]
            per_input = []
            for m, leaf in enumerate(in_leaves):
                leaf = mnp.asarray(leaf)
                block = (
                    stack([r[m] for r in rows]) if rows else zeros((0,) + leaf.shape, leaf.dtype)
                )
                per_input.append(reshape(block, out.shape + leaf.shape))
            tree = unflatten(in_tree, per_input)[0]
            jac.append(tree[0] if isinstance(argnums, int) else tree)
        result = unflatten(out_tree, jac)
        return (result, aux) if has_aux else result

    return staged(transformed)


def hessian(fun, argnums=0):
    """jacfwd(jacrev(fun))."""
    return jacfwd(jacrev(fun, argnums), argnums)
