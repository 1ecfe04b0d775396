"""Regions with their own differentiation rules: stop_gradient, checkpoint (remat) with its
policies, custom_vjp and custom_jvp.

Each region is traced once and emitted as an HLO `call` of the traced computation, which
`SPECIAL_CALLS` maps to the region's rule; the call rule in ad_control.py defers to it. Outside
any differentiation the call is just the function.
"""

from __future__ import annotations

import functools

from ..frontend import numpy_api as mnp
from ..frontend.errors import FrontendTypeError
from ..frontend.numpy_creation import zeros
from ..frontend.pytree import flatten, unflatten
from ..frontend.tracer import Tracer, current_builder
from . import ad_emit as E
from .ad_control import SPECIAL_CALLS
from .api import _linearize
from .autodiff import DifferentiationError, as_ct_list, backward, forward, jvp_walk, unpack
from .tracing import trace


# -- regions with their own rules: traced once, emitted as an HLO call ---------------------
def _emit_region(fun, args, kwargs, rule, name: str):
    traced = trace(fun, args, kwargs, name=name)
    SPECIAL_CALLS[traced.computation] = rule
    rule.traced = traced
    state = E.emit("tuple", traced.operands)
    call = E.emit("call", [state], {"to_apply": traced.computation})
    outs = [
        Tracer(E.emit("get-tuple-element", [call], {"index": i}), w)
        for i, w in enumerate(traced.out_weak)
    ]
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
        return forward(self.traced.computation, params)[0][id(self.traced.computation.root)], None


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
        saved = {
            key: values[key]
            for key in (id(i) for i in comp.instructions if self.policy(i))
            if key in values
        }
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
        return functools.partial(
            checkpoint, policy=policy, prevent_cse=prevent_cse, static_argnums=static_argnums
        )
    if static_argnums:
        raise FrontendTypeError(
            "checkpoint: static_argnums is not supported; close over static values instead"
        )

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
            raise DifferentiationError(
                f"custom_vjp fwd {fwd.__name__}{_where(fwd)} must return a pair (output, residuals)"
            )
        out, res = result
        leaves, tree = flatten(out)
        if tree != self.traced.out_tree:
            raise DifferentiationError(
                f"custom_vjp fwd {fwd.__name__}{_where(fwd)} returned "
                f"an output of structure {tree}, but the function "
                f"returns {self.traced.out_tree}"
            )
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
                f"{type(got).__name__}"
                + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else "")
            )
        leaves, tree = flatten(tuple(got))
        want_leaves, want_tree = flatten(diff)
        if tree != want_tree:
            raise DifferentiationError(
                f"custom_vjp bwd {bwd.__name__}{_where(bwd)} returned "
                f"cotangents of structure {tree}, the arguments have "
                f"{want_tree}"
            )
        result = []
        for k, (leaf, arg) in enumerate(zip(leaves, self.traced.args)):
            value = mnp.asarray(leaf)
            if value.shape != arg.shape:
                raise DifferentiationError(
                    f"custom_vjp bwd {bwd.__name__}{_where(bwd)}: "
                    f"cotangent leaf {k} has shape {value.shape}, the "
                    f"argument has {arg.shape}"
                )
            result.append(mnp.cast(value, arg.dtype).op)
        return [result + [None] * len(self.traced.captured)]

    def jvp_full(self, instr, params, tangents):
        raise DifferentiationError(
            "a custom_vjp function does not support forward mode "
            "(jvp, jacfwd, hessian); use custom_jvp"
        )


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
            raise FrontendTypeError(
                f"custom_vjp {self.fun.__name__}: call defvjp(fwd, bwd) before using it"
            )
        if current_builder() is None:
            return self.fun(*args)
        rule = _CustomVJP(self, args)
        return _emit_region(
            lambda *d: self.fun(*rule.merge(d)), rule.diff, None, rule, "custom_vjp"
        )


class _CustomJVP(_Region):
    def __init__(self, owner, args):
        self.owner = owner
        self.nondiff, self.diff, self.merge = _split_nondiff(args, owner.nondiff_argnums)

    def _user_jvp(self, primals, tangents):
        rule = self.owner.jvp_rule
        nondiff = [self.nondiff[i] for i in sorted(self.nondiff)]
        result = rule(*nondiff, tuple(primals), tuple(tangents))
        if not (isinstance(result, tuple) and len(result) == 2):
            raise DifferentiationError(
                f"custom_jvp rule {rule.__name__}{_where(rule)} must "
                f"return a pair (primal_out, tangent_out)"
            )
        out, t_out = result
        out_leaves, tree = flatten(out)
        t_leaves, t_tree = flatten(t_out)
        if tree != self.traced.out_tree or t_tree != tree:
            raise DifferentiationError(
                f"custom_jvp rule {rule.__name__}{_where(rule)} "
                f"returned structures {tree} and {t_tree}, the "
                f"function returns {self.traced.out_tree}"
            )
        return out_leaves, t_leaves

    def jvp_full(self, instr, params, tangents):
        args = _leaf_tracers(params, self.traced.num_args)
        ts = as_ct_list(tangents[0], len(params[0]))[: self.traced.num_args]
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
        outs, _, _, back = _linearize(tangent_map, tuple(unflatten(self.traced.in_tree, blank)[0]))
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
            raise FrontendTypeError(
                f"custom_jvp {self.fun.__name__}: call defjvp(rule) before using it"
            )
        if current_builder() is None:
            return self.fun(*args)
        rule = _CustomJVP(self, args)
        return _emit_region(
            lambda *d: self.fun(*rule.merge(d)), rule.diff, None, rule, "custom_jvp"
        )
