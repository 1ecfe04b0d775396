"""The public differentiation API, JAX's names and signatures: grad, value_and_grad, vjp, jvp,
linearize, jacfwd, jacrev, hessian, stop_gradient, checkpoint (remat), custom_vjp, custom_jvp.

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
from .ad_control import SPECIAL_CALLS
from .autodiff import DifferentiationError, as_ct_list, backward, forward, jvp_walk, unpack
from .tracing import trace, staged


def _argnums(argnums, nargs: int, name: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for i in nums:
        if not -nargs <= i < nargs:
            raise FrontendTypeError(f"{name}: argnums {argnums} but the function got {nargs} "
                                    f"positional arguments")
    return tuple(i % nargs for i in nums)


def _check_float_inputs(tree, name: str, argnums) -> None:
    for k, leaf in enumerate(flatten(tree)[0]):
        dtype, _ = mnp.typeof(leaf)
        if not np.issubdtype(dtype, np.floating):
            raise FrontendTypeError(
                f"{name} requires real floating-point inputs, but argnums={argnums} leaf {k} "
                f"has dtype {dtype}; differentiate with respect to float arguments only (cast "
                f"with .astype(float) or move the argument out of argnums)")


def _linearize(fun, primals: tuple, kwargs=None):
    """Traces fun(*primals), replays it for reverse mode; returns (output tracers, out_tree,
    backward) with backward(list of output cotangents) -> list of input cotangents."""
    traced = trace(fun, primals, kwargs, name="vjp")
    comp = traced.computation
    values, residuals = forward(comp, [traced.operands])
    outs = [Tracer(v, w) for v, w in zip(unpack(values[id(comp.root)]), traced.out_weak)]

    def backward_fn(out_cts: list) -> list:
        got = backward(comp, values, residuals, list(out_cts)).get(0)
        cts = as_ct_list(got, len(traced.operands))[:traced.num_args]
        return [Tracer(c if c is not None else E.zeros(a.op.shape), a.weak)
                for c, a in zip(cts, traced.args)]
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
            raise FrontendTypeError(f"{name}(has_aux=True): the function must return a pair "
                                    f"(output, aux), got {type(out).__name__}")
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
            raise FrontendTypeError(f"grad requires a real scalar output, got {got}; use "
                                    f"vjp or jacrev for other outputs")
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
            raise FrontendTypeError(f"vjp_fn: the cotangent must have the output's structure "
                                    f"{out_tree}, got {tree}")
        cts = []
        for k, (leaf, out) in enumerate(zip(leaves, outs)):
            ct = mnp.asarray(leaf)
            if ct.shape != out.shape:
                raise FrontendTypeError(f"vjp_fn: cotangent leaf {k} has shape {ct.shape}, "
                                        f"the output has {out.shape}")
            cts.append(mnp.cast(ct, out.dtype).op if E.is_float(out.op.shape) else None)
        return unflatten(in_tree, back(cts + [None] * (len(leaves) - n_out)))[0]
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def vjp(fun, *primals, has_aux: bool = False):
    """(fun(*primals), vjp_fn[, aux]): vjp_fn(cotangent) returns one cotangent per primal."""
    if current_builder() is not None:
        return _vjp_inside(fun, primals, has_aux)
    from ..frontend.jit import jit
    result = jit(lambda *p: _vjp_inside(fun, p, has_aux)[::2] if has_aux
                 else _vjp_inside(fun, p, has_aux)[0])(*primals)
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
        raise FrontendTypeError(f"jvp: tangents must have the primals' structure {p_tree}, "
                                f"got {t_tree}")
    traced = trace(fun, tuple(primals), name="jvp")
    ts = []
    for k, (t, a) in enumerate(zip(t_leaves, traced.args)):
        tangent = mnp.asarray(t)
        if tangent.shape != a.shape:
            raise FrontendTypeError(f"jvp: tangent leaf {k} has shape {tangent.shape}, the "
                                    f"primal has {a.shape}")
        ts.append(mnp.cast(tangent, a.dtype).op if E.is_float(a.op.shape) else None)
    ts += [None] * len(traced.captured)
    out, t_out = jvp_walk(traced.computation, [traced.operands], [ts])
    outs = unpack(out)
    t_out = as_ct_list(t_out, len(outs))
    primal_out = [Tracer(o, w) for o, w in zip(outs, traced.out_weak)]
    tangent_out = [Tracer(t if t is not None else E.zeros(o.shape), w)
                   for t, o, w in zip(t_out, outs, traced.out_weak)]
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
                block = stack(cols, axis=-1) if cols else zeros(
                    out_leaf.shape + (0,), out_leaf.dtype)
                per_input.append(reshape(block, out_leaf.shape + leaf.shape))
            jac.append(unflatten(in_tree, per_input)[0] if isinstance(argnums, int)
                       else unflatten(in_tree, per_input))
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
                block = stack([r[m] for r in rows]) if rows else zeros(
                    (0,) + leaf.shape, leaf.dtype)
                per_input.append(reshape(block, out.shape + leaf.shape))
            tree = unflatten(in_tree, per_input)[0]
            jac.append(tree[0] if isinstance(argnums, int) else tree)
        result = unflatten(out_tree, jac)
        return (result, aux) if has_aux else result
    return staged(transformed)


def hessian(fun, argnums=0):
    """jacfwd(jacrev(fun))."""
    return jacfwd(jacrev(fun, argnums), argnums)


# -- regions with their own rules: traced once, emitted as an HLO call ---------------------
def _emit_region(fun, args, kwargs, rule, name: str):
    traced = trace(fun, args, kwargs, name=name)
    SPECIAL_CALLS[traced.computation] = rule
    rule.traced = traced
    state = E.emit("tuple", traced.operands)
    call = E.emit("call", [state], {"to_apply": traced.computation})
    outs = [Tracer(E.emit("get-tuple-element", [call], {"index": i}), w)
            for i, w in enumerate(traced.out_weak)]
    return unflatten(traced.out_tree, outs)


class _Region:
    """Default behaviour of a special call: the region itself, inlined."""

    traced = None

    def forward(self, instr, params):
        comp = self.traced.computation
        values, residuals = forward(comp, params)
        return values[id(comp.root)], (values, residuals)

    def vjp(self, instr, params, ct, residual):
        values, residuals = residual
        return [backward(self.traced.computation, values, residuals, ct).get(0)]

    def jvp_full(self, instr, params, tangents):
        return jvp_walk(self.traced.computation, params, tangents)


class _StopGradient(_Region):
    def vjp(self, instr, params, ct, residual):
        return [None]

    def jvp_full(self, instr, params, tangents):
        return forward(self.traced.computation, params)[0][id(self.traced.computation.root)], \
            None


def stop_gradient(x):
    """x, with a zero derivative (for a pytree of arrays)."""
    if current_builder() is None:
        return x
    return _emit_region(lambda v: v, (x,), None, _StopGradient(), "stop_gradient")


# -- checkpoint ------------------------------------------------------------------------------
class checkpoint_policies:  # noqa: N801 - JAX's name
    """What a checkpointed region saves for the backward pass; a policy is a function of the
    HLO instruction (JAX's are functions of the primitive) returning True to save it."""

    @staticmethod
    def nothing_saveable(instr) -> bool:
        return False

    @staticmethod
    def everything_saveable(instr) -> bool:
        return True

    @staticmethod
    def dots_saveable(instr) -> bool:
        return instr.opcode in ("dot", "convolution")

    @staticmethod
    def dots_with_no_batch_dims_saveable(instr) -> bool:
        return instr.opcode == "dot" and not instr.attrs.get("lhs_batch_dims")


class _Checkpoint(_Region):
    def __init__(self, policy):
        self.policy = policy or checkpoint_policies.nothing_saveable

    def forward(self, instr, params):
        comp = self.traced.computation
        values, _ = forward(comp, params)
        saved = {key: values[key] for key in
                 (id(i) for i in comp.instructions if self.policy(i)) if key in values}
        return values[id(comp.root)], (params, saved)

    def vjp(self, instr, params, ct, residual):
        inputs, saved = residual
        # the recomputation reads its inputs through a barrier, so CSE cannot merge it with
        # the forward pass and undo the rematerialization
        barrier = E.emit("opt-barrier", [E.emit("tuple", list(inputs[0]))])
        comp = self.traced.computation
        values, residuals = forward(comp, [unpack(barrier)], overrides=saved)
        return [backward(comp, values, residuals, ct).get(0)]


def checkpoint(fun=None, *, policy=None, prevent_cse: bool = True, static_argnums=()):
    """fun, whose intermediate values are recomputed in the backward pass instead of saved
    (except those `policy` saves). Alias: remat."""
    if fun is None:
        return functools.partial(checkpoint, policy=policy, prevent_cse=prevent_cse,
                                 static_argnums=static_argnums)
    if static_argnums:
        raise FrontendTypeError("checkpoint: static_argnums is not supported; close over "
                                "static values instead")

    @functools.wraps(fun)
    def wrapped(*args, **kwargs):
        if current_builder() is None:
            return fun(*args, **kwargs)
        return _emit_region(fun, args, kwargs, _Checkpoint(policy), "checkpoint")
    return wrapped


remat = checkpoint


# -- custom rules ----------------------------------------------------------------------------
def _where(fn) -> str:
    code = getattr(fn, "__code__", None)
    return f" (defined at {code.co_filename}:{code.co_firstlineno})" if code else ""


def _split_nondiff(args, nondiff_argnums):
    nondiff = {i: args[i] for i in nondiff_argnums}
    diff = tuple(a for i, a in enumerate(args) if i not in nondiff)

    def merge(d):
        it = iter(d)
        return [nondiff[i] if i in nondiff else next(it) for i in range(len(args))]
    return nondiff, diff, merge


def _leaf_tracers(params, count: int) -> list[Tracer]:
    """The argument leaves among a region call's inputs (its tuple parameter's elements)."""
    return [Tracer(v) for v in params[0][:count]]


class _CustomVJP(_Region):
    def __init__(self, owner, args):
        self.owner = owner
        self.nondiff, self.diff, self.merge = _split_nondiff(args, owner.nondiff_argnums)

    def _diff_args(self, params):
        leaves = _leaf_tracers(params, self.traced.num_args)
        return unflatten(self.traced.in_tree, leaves)[0]

    def forward(self, instr, params):
        fwd = self.owner.fwd
        result = fwd(*self.merge(self._diff_args(params)))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise DifferentiationError(f"custom_vjp fwd {fwd.__name__}{_where(fwd)} must "
                                       f"return a pair (output, residuals)")
        out, res = result
        leaves, tree = flatten(out)
        if tree != self.traced.out_tree:
            raise DifferentiationError(f"custom_vjp fwd {fwd.__name__}{_where(fwd)} returned "
                                       f"an output of structure {tree}, but the function "
                                       f"returns {self.traced.out_tree}")
        return [mnp.asarray(leaf).op for leaf in leaves], res

    def vjp(self, instr, params, ct, res):
        bwd = self.owner.bwd
        outs = self.traced.outputs
        ct = as_ct_list(ct, len(outs))
        cts = [Tracer(c if c is not None else E.zeros(o.shape)) for c, o in zip(ct, outs)]
        nondiff = [self.nondiff[i] for i in sorted(self.nondiff)]
        got = bwd(*nondiff, res, unflatten(self.traced.out_tree, cts))
        diff = self.diff
        if not isinstance(got, (tuple, list)) or len(got) != len(diff):
            raise DifferentiationError(
                f"custom_vjp bwd {bwd.__name__}{_where(bwd)} must return a tuple with one "
                f"cotangent per differentiable argument ({len(diff)}), got "
                f"{type(got).__name__}" + (f" of length {len(got)}"
                                           if isinstance(got, (tuple, list)) else ""))
        leaves, tree = flatten(tuple(got))
        want_leaves, want_tree = flatten(diff)
        if tree != want_tree:
            raise DifferentiationError(f"custom_vjp bwd {bwd.__name__}{_where(bwd)} returned "
                                       f"cotangents of structure {tree}, the arguments have "
                                       f"{want_tree}")
        result = []
        for k, (leaf, arg) in enumerate(zip(leaves, self.traced.args)):
            value = mnp.asarray(leaf)
            if value.shape != arg.shape:
                raise DifferentiationError(f"custom_vjp bwd {bwd.__name__}{_where(bwd)}: "
                                           f"cotangent leaf {k} has shape {value.shape}, the "
                                           f"argument has {arg.shape}")
            result.append(mnp.cast(value, arg.dtype).op)
        return [result + [None] * len(self.traced.captured)]

    def jvp_full(self, instr, params, tangents):
        raise DifferentiationError("a custom_vjp function does not support forward mode "
                                   "(jvp, jacfwd, hessian); use custom_jvp")


class custom_vjp:  # noqa: N801 - JAX's name
    """A function with a hand-written reverse-mode rule: `f.defvjp(fwd, bwd)` with
    fwd(*args) -> (out, residuals) and bwd(*nondiff_args, residuals, ct) -> tuple of one
    cotangent per differentiable argument."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.fwd = self.bwd = None

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args):
        if self.fwd is None:
            raise FrontendTypeError(f"custom_vjp {self.fun.__name__}: call defvjp(fwd, bwd) "
                                    f"before using it")
        if current_builder() is None:
            return self.fun(*args)
        rule = _CustomVJP(self, args)
        return _emit_region(lambda *d: self.fun(*rule.merge(d)), rule.diff, None, rule,
                            "custom_vjp")


class _CustomJVP(_Region):
    def __init__(self, owner, args):
        self.owner = owner
        self.nondiff, self.diff, self.merge = _split_nondiff(args, owner.nondiff_argnums)

    def _user_jvp(self, primals, tangents):
        rule = self.owner.jvp_rule
        nondiff = [self.nondiff[i] for i in sorted(self.nondiff)]
        result = rule(*nondiff, tuple(primals), tuple(tangents))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise DifferentiationError(f"custom_jvp rule {rule.__name__}{_where(rule)} must "
                                       f"return a pair (primal_out, tangent_out)")
        out, t_out = result
        out_leaves, tree = flatten(out)
        t_leaves, t_tree = flatten(t_out)
        if tree != self.traced.out_tree or t_tree != tree:
            raise DifferentiationError(f"custom_jvp rule {rule.__name__}{_where(rule)} "
                                       f"returned structures {tree} and {t_tree}, the "
                                       f"function returns {self.traced.out_tree}")
        return out_leaves, t_leaves

    def jvp_full(self, instr, params, tangents):
        args = _leaf_tracers(params, self.traced.num_args)
        ts = as_ct_list(tangents[0], len(params[0]))[:self.traced.num_args]
        ts = [Tracer(t if t is not None else E.zeros(a.op.shape)) for t, a in zip(ts, args)]
        primals = unflatten(self.traced.in_tree, args)[0]
        tangent_tree = unflatten(self.traced.in_tree, ts)[0]
        out, t_out = self._user_jvp(primals, tangent_tree)
        return [mnp.asarray(o).op for o in out], [mnp.asarray(t).op for t in t_out]

    def vjp(self, instr, params, ct, residual):
        # the rule's tangent output is linear in the tangents: its VJP is the transpose
        args = _leaf_tracers(params, self.traced.num_args)
        primals = unflatten(self.traced.in_tree, args)[0]

        def tangent_map(*ts):
            return self._user_jvp(primals, ts)[1]
        blank = [zeros(a.shape, a.dtype) for a in args]
        outs, _, _, back = _linearize(tangent_map, tuple(unflatten(self.traced.in_tree,
                                                                   blank)[0]))
        cts = as_ct_list(ct, len(outs))
        got = [c.op for c in back(cts)]
        return [got + [None] * len(self.traced.captured)]


class custom_jvp:  # noqa: N801 - JAX's name
    """A function with a hand-written forward-mode rule: `f.defjvp(rule)` with
    rule(*nondiff_args, primals, tangents) -> (primal_out, tangent_out). Reverse mode
    transposes the rule (its tangent output must be linear in the tangents)."""

    def __init__(self, fun, nondiff_argnums=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = tuple(nondiff_argnums)
        self.jvp_rule = None

    def defjvp(self, rule):
        self.jvp_rule = rule
        return rule

    def __call__(self, *args):
        if self.jvp_rule is None:
            raise FrontendTypeError(f"custom_jvp {self.fun.__name__}: call defjvp(rule) "
                                    f"before using it")
        if current_builder() is None:
            return self.fun(*args)
        rule = _CustomJVP(self, args)
        return _emit_region(lambda *d: self.fun(*rule.merge(d)), rule.diff, None, rule,
                            "custom_jvp")
