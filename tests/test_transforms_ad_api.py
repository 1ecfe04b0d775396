"""The differentiation API: grad, vjp, jvp, Jacobians, checkpoint, custom rules, composition
with jit and loops, and the errors for bad input."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax, nn

BACKEND = "interpreter"


def jit(fn):
    return minixla.jit(fn, backend=BACKEND)


def loss(params, x, y):
    hidden = mnp.tanh(x @ params["w"] + params["b"])
    return mnp.mean((hidden @ params["v"] - y) ** 2)


def loss_grads(params, x, y):
    """Hand-derived gradients of `loss`, in NumPy."""
    hidden = np.tanh(x @ params["w"] + params["b"])
    err = 2 * (hidden @ params["v"] - y) / y.size
    d_hidden = (err @ params["v"].T) * (1 - hidden**2)
    return {"w": x.T @ d_hidden, "b": d_hidden.sum(0), "v": hidden.T @ err}


R = np.random.default_rng(0)
PARAMS = {
    "w": R.standard_normal((3, 4)).astype(np.float32),
    "b": R.standard_normal(4).astype(np.float32),
    "v": R.standard_normal((4, 2)).astype(np.float32),
}
XS = R.standard_normal((5, 3)).astype(np.float32)
YS = R.standard_normal((5, 2)).astype(np.float32)


def assert_trees_close(got, want, rtol=1e-5, atol=1e-6):
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol)


def test_value_and_grad_of_a_pytree_outside_jit_runs_on_the_default_backend():
    value, grads = minixla.value_and_grad(loss)(PARAMS, XS, YS)
    hidden = np.tanh(XS @ PARAMS["w"] + PARAMS["b"])
    np.testing.assert_allclose(value, np.mean((hidden @ PARAMS["v"] - YS) ** 2), rtol=1e-5)
    assert_trees_close(grads, loss_grads(PARAMS, XS, YS))


def test_grad_inside_jit_with_argnums_and_has_aux():
    def with_aux(params, x, y):
        return loss(params, x, y), {"scale": mnp.sum(x)}

    @jit
    def step(params, x, y):
        (grads_p, grads_x), aux = minixla.grad(with_aux, argnums=(0, 1), has_aux=True)(params, x, y)
        return grads_p, grads_x, aux

    grads_p, grads_x, aux = step(PARAMS, XS, YS)
    assert_trees_close(grads_p, loss_grads(PARAMS, XS, YS))
    np.testing.assert_allclose(aux["scale"], XS.sum(), rtol=1e-5)
    assert grads_x.shape == XS.shape


def test_grad_of_grad_and_jit_of_grad():
    second = jit(minixla.grad(minixla.grad(lambda x: mnp.sin(x) * x)))
    x = np.float32(0.7)
    np.testing.assert_allclose(second(x), 2 * np.cos(x) - x * np.sin(x), rtol=1e-5)
    third = jit(minixla.grad(minixla.grad(minixla.grad(lambda x: x**4))))
    np.testing.assert_allclose(third(np.float32(2.0)), 48.0, rtol=1e-5)


def test_grad_inside_a_scan_body():
    def per_step(carry, x):
        g = minixla.grad(lambda w: mnp.sum(mnp.sin(w * x)))(carry)
        return carry - 0.1 * g, g

    run = jit(lambda w, xs: lax.scan(per_step, w, xs))
    w, xs = np.float32([0.5, 1.0]), np.float32([[1, 2], [3, 4], [5, 6]])
    got_w, got_g = run(w, xs)
    want_w, want_g = w.copy(), []
    for x in xs:
        g = np.cos(want_w * x) * x
        want_g.append(g)
        want_w = want_w - 0.1 * g
    np.testing.assert_allclose(got_g, np.stack(want_g), rtol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5)


def test_vjp_and_jvp_inside_and_outside_jit():
    f = lambda x, y: (mnp.sin(x) * y, x + y)  # noqa: E731
    x, y = np.float32([0.1, 0.2]), np.float32([1.5, -2.0])
    out, vjp_fn = minixla.vjp(f, x, y)
    np.testing.assert_allclose(out[0], np.sin(x) * y, rtol=1e-6)
    gx, gy = vjp_fn((np.ones(2, np.float32), np.full(2, 2, np.float32)))
    np.testing.assert_allclose(gx, np.cos(x) * y + 2, rtol=1e-6)
    np.testing.assert_allclose(gy, np.sin(x) + 2, rtol=1e-6)
    primal, tangent = minixla.jvp(f, (x, y), (np.ones(2, np.float32), np.zeros(2, np.float32)))
    np.testing.assert_allclose(tangent[0], np.cos(x) * y, rtol=1e-6)
    np.testing.assert_allclose(tangent[1], 1.0)

    @jit
    def inside(x, y):
        _, fn = minixla.vjp(f, x, y)
        return fn((x, y))

    np.testing.assert_allclose(inside(x, y)[0], np.cos(x) * y * x + y, rtol=1e-6)


def test_jacobians_and_hessian():
    a = R.standard_normal((3, 3)).astype(np.float32)
    x = R.standard_normal(3).astype(np.float32)
    f = lambda v: mnp.tanh(a @ v)  # noqa: E731
    want = (1 - np.tanh(a @ x) ** 2)[:, None] * a
    np.testing.assert_allclose(jit(minixla.jacfwd(f))(x), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(jit(minixla.jacrev(f))(x), want, rtol=1e-5, atol=1e-6)
    quadratic = lambda v: v @ a @ v + mnp.sum(v**3)  # noqa: E731
    np.testing.assert_allclose(
        jit(minixla.hessian(quadratic))(x), a + a.T + np.diag(6 * x), rtol=1e-5, atol=1e-5
    )
    matrix = jit(minixla.jacrev(lambda m: m @ m))(a)
    assert matrix.shape == (3, 3, 3, 3)
    np.testing.assert_allclose(
        matrix[0, 1],
        np.outer(np.eye(3)[0], a[:, 1]) + np.outer(a[0], np.eye(3)[1]),
        rtol=1e-5,
        atol=1e-6,
    )


def test_linearize():
    out, f_jvp = minixla.linearize(lambda x: mnp.exp(x) * 2, np.float32([0.0, 1.0]))
    np.testing.assert_allclose(out, 2 * np.exp([0.0, 1.0]), rtol=1e-6)
    np.testing.assert_allclose(
        f_jvp(np.float32([1.0, 3.0])), 2 * np.exp([0.0, 1.0]) * [1, 3], rtol=1e-6
    )


def test_stop_gradient_blocks_both_modes():
    f = lambda x: x * lax.stop_gradient(x * x)  # noqa: E731
    x = np.float32(3.0)
    np.testing.assert_allclose(jit(minixla.grad(f))(x), 9.0)
    np.testing.assert_allclose(minixla.jvp(f, (x,), (np.float32(1.0),))[1], 9.0)
    np.testing.assert_allclose(minixla.stop_gradient(x), x)


@pytest.mark.parametrize(
    "policy",
    [
        None,
        minixla.checkpoint_policies.everything_saveable,
        minixla.checkpoint_policies.dots_saveable,
    ],
)
def test_checkpoint_gives_the_same_gradient_and_recomputes_behind_a_barrier(policy):
    def block(params, x, y):
        inner = minixla.checkpoint(lambda p: loss(p, x, y), policy=policy)
        return inner(params) * 2

    step = jit(minixla.grad(block))
    want = {k: 2 * v for k, v in loss_grads(PARAMS, XS, YS).items()}
    assert_trees_close(step(PARAMS, XS, YS), want)
    text = step.lower(PARAMS, XS, YS).as_text()
    assert ("opt-barrier" in text) == (
        policy is not minixla.checkpoint_policies.everything_saveable
    )
    assert minixla.remat is minixla.checkpoint


def test_custom_vjp_with_nondiff_argnums():
    @minixla.custom_vjp
    def clip_gradient(x):
        return x * 1.0

    clip_gradient.defvjp(lambda x: (x * 1.0, None), lambda res, g: (mnp.clip(g, -1, 1),))
    grads = jit(minixla.grad(lambda x: mnp.sum(clip_gradient(x) * 5)))(np.float32([1, 2]))
    np.testing.assert_allclose(grads, [1, 1])

    def scaled(k, x):
        return mnp.sin(x) * k

    scaled = minixla.custom_vjp(scaled, nondiff_argnums=(0,))
    scaled.defvjp(
        lambda k, x: (mnp.sin(x) * k, mnp.cos(x)), lambda k, cos_x, g: (g * cos_x * k * 10,)
    )
    x = np.float32(0.3)
    np.testing.assert_allclose(
        jit(minixla.grad(lambda v: scaled(2.0, v)))(x), np.cos(x) * 20, rtol=1e-6
    )
    np.testing.assert_allclose(scaled(2.0, x), np.sin(x) * 2, rtol=1e-6)


def test_custom_jvp_in_forward_and_reverse_mode():
    @minixla.custom_jvp
    def softplus(x):
        return mnp.log1p(mnp.exp(x))

    @softplus.defjvp
    def softplus_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), t * nn.sigmoid(x) * 3  # deliberately not the true derivative

    x = np.float32([-1.0, 0.5])
    sig = 1 / (1 + np.exp(-x))
    _, tangent = minixla.jvp(softplus, (x,), (np.ones(2, np.float32),))
    np.testing.assert_allclose(tangent, 3 * sig, rtol=1e-6)
    grads = jit(minixla.grad(lambda v: mnp.sum(softplus(v))))(x)
    np.testing.assert_allclose(grads, 3 * sig, rtol=1e-6)


def test_gradient_programs_agree_on_interpreter_and_cpu():
    def train_step(params, x, y):
        grads = minixla.grad(loss)(params, x, y)
        return {k: params[k] - 0.1 * grads[k] for k in params}

    ref = minixla.jit(train_step, backend="interpreter")(PARAMS, XS, YS)
    cpu = minixla.jit(train_step, backend="cpu")(PARAMS, XS, YS)
    assert_trees_close(cpu, ref, rtol=1e-5, atol=1e-6)


# -- errors name the user's line ------------------------------------------------------------
def test_integer_input_is_an_error():
    with pytest.raises(
        minixla.FrontendTypeError,
        match=r"test_transforms_ad_api.py:\d+: grad "
        r"requires real floating-point",
    ):
        minixla.grad(lambda n: n * 2.0)(np.int32(3))


def test_non_scalar_output_for_grad_is_an_error():
    with pytest.raises(
        minixla.FrontendTypeError,
        match=r"test_transforms_ad_api.py:\d+: "
        r"grad requires a real scalar output",
    ):
        minixla.grad(lambda x: x * 2)(np.ones(3, np.float32))


def test_custom_vjp_with_a_wrong_cotangent_structure_is_an_error():
    @minixla.custom_vjp
    def f(x, y):
        return x * y

    def bad_bwd(res, g):
        return g  # should be a pair

    f.defvjp(lambda x, y: (x * y, None), bad_bwd)
    with pytest.raises(
        minixla.DifferentiationError,
        match=r"custom_vjp bwd bad_bwd \(defined "
        r"at .*test_transforms_ad_api.py",
    ):
        minixla.grad(f)(np.float32(1), np.float32(2))


def test_an_opcode_without_a_rule_names_itself():
    def f(x):
        builder = x.op.builder
        call = minixla.ops.CustomCall(builder, "my_kernel", [x.op], x.op.shape)
        return mnp.sum(minixla.frontend.tracer.Tracer(call))

    with pytest.raises(minixla.DifferentiationError, match="custom-call 'my_kernel'"):
        minixla.jit(minixla.grad(f), backend=BACKEND).lower(np.ones(2, np.float32))


def test_reverse_mode_of_a_dynamic_while_loop_is_an_error():
    f = lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c * 2, x)  # noqa: E731
    with pytest.raises(minixla.DifferentiationError, match="static trip count"):
        minixla.grad(f)(np.float32(1))


def test_every_opcode_has_a_rule_or_a_reason():
    from minixla.ir.opcodes import OPCODES
    from minixla.transforms.autodiff import DECLINED, RULES

    structural = {"tuple", "get-tuple-element"}
    assert set(OPCODES) == set(RULES) | set(DECLINED) | structural
    assert not set(RULES) & set(DECLINED)
    assert set(RULES) <= set(OPCODES)


def _many_ops(x, w):
    """One program touching most differentiation rules (for the cpu-vs-interpreter test)."""
    h = lax.conv_general_dilated(x, w, (2, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = lax.reduce_window(nn.relu(h), -np.inf, lax.max, (1, 2, 2, 1), (1, 1, 1, 1), "SAME")
    flat = h.reshape(h.shape[0], -1)
    ordered = mnp.sort(flat, axis=1)[:, ::2]
    picked = mnp.take_along_axis(flat, mnp.argsort(flat, axis=1), 1)[:, :3]
    carry, ys = lax.scan(lambda c, r: (mnp.tanh(c + r[:3]), mnp.sum(c * r[:3])), picked[0], ordered)
    gathered = flat[np.array([1, 0, 1]), 2:5] * mnp.cumsum(carry)
    return (
        mnp.sum(gathered**2)
        + nn.logsumexp(ys)
        + mnp.prod(mnp.cos(carry))
        + lax.cond(mnp.sum(x) > 0, lambda a: mnp.max(a), lambda a: mnp.min(a), flat)
    )


def test_a_program_of_many_rules_agrees_on_interpreter_and_cpu():
    x = R.standard_normal((2, 5, 4, 2)).astype(np.float32)
    w = R.standard_normal((3, 2, 2, 3)).astype(np.float32)
    grads = minixla.grad(_many_ops, argnums=(0, 1))
    ref = minixla.jit(grads, backend="interpreter")(x, w)
    cpu = minixla.jit(grads, backend="cpu")(x, w)
    for r, c in zip(ref, cpu):
        np.testing.assert_allclose(c, r, rtol=1e-4, atol=1e-5)
    assert np.abs(ref[0]).sum() > 0 and np.abs(ref[1]).sum() > 0


def test_grad_of_jit_python_floats_and_keyword_arguments():
    f = minixla.jit(lambda x, scale=1.0: mnp.sin(x) * scale)
    np.testing.assert_allclose(minixla.grad(f)(1.0), np.cos(1.0), rtol=1e-6)
    g = minixla.grad(lambda x, scale: mnp.sum(x * scale))(np.float32([1, 2]), scale=3.0)
    np.testing.assert_allclose(g, [3, 3])
    out, vjp_fn, aux = minixla.vjp(lambda x: (x * 2, x + 1), np.float32(2), has_aux=True)
    np.testing.assert_allclose((out, vjp_fn(np.float32(1))[0], aux), (4, 2, 3))


def test_checkpointed_forward_survives_the_cpu_pipeline():
    def loss(w, x, remat):
        f = lambda v: mnp.sum(mnp.tanh(x @ v) ** 2)  # noqa: E731
        return (minixla.checkpoint(f) if remat else f)(w)

    w, x = np.eye(3, dtype=np.float32), np.ones((2, 3), np.float32)
    counts = []
    for remat in (False, True):
        step = minixla.jit(minixla.value_and_grad(loss), static_argnums=2, backend="cpu")
        optimized = step.lower(w, x, remat).compile().module.to_text()
        counts.append(optimized.count(" tanh("))
        np.testing.assert_allclose(
            step(w, x, remat)[1],
            minixla.jit(minixla.grad(loss), static_argnums=2, backend="interpreter")(w, x, False),
            rtol=1e-6,
        )
    assert counts == [1, 2]  # the backward pass recomputes tanh instead of reusing it


def test_custom_jvp_with_nondiff_argnums_and_jvp_structure_errors():
    def power(n, x):
        return x**n

    power = minixla.custom_jvp(power, nondiff_argnums=(0,))

    @power.defjvp
    def power_jvp(n, primals, tangents):
        (x,), (t,) = primals, tangents
        return power(n, x), n * x ** (n - 1) * t

    x = np.float32(1.5)
    np.testing.assert_allclose(jit(minixla.grad(lambda v: power(3, v)))(x), 3 * x**2, rtol=1e-6)
    np.testing.assert_allclose(
        minixla.jvp(lambda v: power(2, v), (x,), (np.float32(2),))[1], 4 * x, rtol=1e-6
    )
    with pytest.raises(
        minixla.FrontendTypeError, match="tangents must have the primals' structure"
    ):
        minixla.jvp(mnp.sin, (x,), (x, x))
    with pytest.raises(minixla.FrontendTypeError, match="tangent leaf 0 has shape"):
        minixla.jvp(mnp.sin, (np.ones(2, np.float32),), (np.ones(3, np.float32),))
    with pytest.raises(minixla.DifferentiationError, match="does not support forward mode"):
        f = minixla.custom_vjp(lambda v: v * 2)
        f.defvjp(lambda v: (v * 2, None), lambda _, g: (g * 2,))
        minixla.jvp(f, (x,), (x,))


def test_relu_has_derivative_zero_at_zero_like_jax():
    x = np.float32([-1, 0, 2, np.nan])
    np.testing.assert_array_equal(nn.relu(x), [0, 0, 2, np.nan])
    g = jit(minixla.grad(lambda v: mnp.sum(nn.relu(v[:3]))))(x)
    np.testing.assert_array_equal(g, [0, 0, 1, 0])
