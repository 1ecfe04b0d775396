"""vmap against a Python loop: every batching rule, in_axes/out_axes, nesting, control flow."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax, ops, vmap
from minixla.frontend.pytree import tree_map
from minixla.frontend.tracer import Tracer

RNG = np.random.default_rng(0)


def jit(fn):
    return minixla.jit(fn, backend="interpreter")


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def loop(fn, args, in_axes=0, out_axis=0):
    """The oracle: `fn` on each example, stacked along `out_axis`."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    axes = [ax if isinstance(ax, int) else None for ax in axes]  # dict specs: all None here
    size = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    one = jit(fn)
    outs = [
        one(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)])
        for i in range(size)
    ]
    if isinstance(out_axis, dict):
        return {k: np.stack([o[k] for o in outs], out_axis[k]) for k in out_axis}
    return tree_map(lambda *xs: np.stack(xs, out_axis), *outs)


def check(fn, *args, in_axes=0, out_axes=0, rtol=1e-5):
    got = jit(vmap(fn, in_axes=in_axes, out_axes=out_axes))(*args)
    want = loop(fn, args, in_axes, out_axes)
    got_leaves = minixla.frontend.pytree.flatten(got)[0]
    want_leaves = minixla.frontend.pytree.flatten(want)[0]
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        assert np.asarray(g).shape == np.asarray(w).shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-5)


def t(op):
    return Tracer(op)


# -- elementwise and movement ---------------------------------------------------------------
@pytest.mark.parametrize("in_axes", [0, 1, (1, None), (None, 0), (0, 1)])
def test_elementwise_with_moved_and_unbatched_operands(in_axes):
    x, y = f32(3, 3), f32(3, 3)
    check(lambda a, b: mnp.sin(a) * b + mnp.maximum(a, 0.5), x, y, in_axes=in_axes)


def test_compare_select_clamp_convert():
    x, y = f32(4, 5), f32(5)
    check(
        lambda a, b: mnp.where(a > b, mnp.clip(a, -0.5, 0.5), (b * 3).astype(np.int32)),
        x,
        y,
        in_axes=(0, None),
    )


def test_movement_ops():
    x = f32(2, 3, 4)
    check(lambda a: mnp.transpose(a, (1, 0)).reshape(2, 6)[:, 1:5:2], x)
    check(lambda a: mnp.broadcast_to(a[:, None], (3, 5, 4)), x)
    check(lambda a: mnp.concatenate([a, mnp.flip(a, 0), mnp.ones((1, 4))], 0), x)
    check(lambda a: mnp.pad(a, ((1, 2), (0, 1))) + mnp.arange(4.0), x[:, :, :3], in_axes=2)


def test_pad_with_a_batched_padding_value():
    x, v = f32(3, 4), f32(3)

    def fn(a, value):
        return t(ops.Pad(a.op, value.op, [(1, 2, 1)]))

    check(fn, x, v)


def test_iota_and_constants_stay_unbatched():
    @jit
    def fn(x):
        return vmap(lambda a: (a + mnp.arange(3.0), mnp.arange(2)), out_axes=(0, None))(x)

    x = f32(4, 3)
    out, iota = fn(x)
    np.testing.assert_allclose(out, x + np.arange(3.0))
    np.testing.assert_array_equal(iota, np.arange(2))
    text = jit(vmap(lambda a: a + 1.0)).lower(x).as_text()
    assert "f32[4,3]" in text and "broadcast" in text


# -- reductions, sorting, windows -----------------------------------------------------------
def test_reductions_including_variadic():
    x = f32(3, 4, 5)
    check(lambda a: (mnp.sum(a, 0), mnp.max(a), mnp.argmax(a, 1)), x)
    check(lambda a: mnp.prod(a, axis=(0, 1)), x, in_axes=2)


def test_sort_and_argsort():
    x = f32(3, 6)
    check(lambda a: (mnp.sort(a), mnp.argsort(a)), x)


def test_cumsum_and_reduce_window():
    x = f32(2, 5, 4)
    check(lambda a: mnp.cumsum(a, 1), x)

    def pool(a):
        builder = a.op.builder
        zero = builder.constant(np.float32(-np.inf))
        return t(ops.ReduceWindow(builder, a.op, zero, ops.Max, [2, 2], [1, 2]))

    check(pool, x)


def test_select_and_scatter():
    x, s = f32(2, 4, 4), f32(2, 2, 2)

    def fn(a, src):
        builder = a.op.builder
        zero = builder.constant(np.float32(0))
        return t(
            ops.SelectAndScatter(
                a.op, ops.Ge, [2, 2], [2, 2], [(0, 0), (0, 0)], src.op, zero, ops.Add
            )
        )

    check(fn, x, s)
    check(fn, x, s[0], in_axes=(0, None))


# -- contractions -----------------------------------------------------------------------------
@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0), (1, 2)])
def test_dot(in_axes):
    a, b = f32(3, 4, 5), f32(5, 2, 3)
    a = np.moveaxis(a, 0, in_axes[0]) if in_axes[0] else a
    if in_axes[1] is None:
        b = b[:, :, 0]
    elif in_axes[1] == 0:
        b = np.moveaxis(b, 2, 0)
    check(lambda x, y: x @ y, a, b, in_axes=in_axes)


def test_batched_einsum_with_its_own_batch_dims():
    a, b = f32(2, 3, 4, 5), f32(2, 3, 5, 6)
    check(lambda x, y: mnp.einsum("bij,bjk->bik", x, y), a, b)


@pytest.mark.parametrize("in_axes", [(0, None), (None, 0), (0, 0)])
@pytest.mark.parametrize("groups", [1, 2])
def test_convolution(in_axes, groups):
    x, w = f32(3, 2, 6, 4), f32(3, 3, 4 // groups, 4)

    def conv(lhs, rhs):
        return t(
            ops.Convolution(
                lhs.op, rhs.op, [1], [(1, 1)], dim_labels="b0f_0io->b0f", feature_group_count=groups
            )
        )

    args = (x if in_axes[0] is not None else x[0], w if in_axes[1] is not None else w[0])
    check(conv, *args, in_axes=in_axes, rtol=1e-4)


def test_linalg_and_fft():
    a = f32(3, 4, 4)
    spd = np.einsum("bij,bkj->bik", a, a) + 4 * np.eye(4, dtype=np.float32)
    rhs = f32(3, 4, 2)
    check(lambda m: t(ops.Cholesky(m.op, lower=True)), spd)
    check(
        lambda m, r: t(ops.TriangularSolve(m.op, r.op, True, True, False)),
        np.tril(spd),
        rhs,
        rtol=1e-4,
    )
    check(
        lambda m, r: t(ops.TriangularSolve(m.op, r.op, True, True, False)),
        np.tril(spd[0]),
        rhs,
        in_axes=(None, 0),
        rtol=1e-4,
    )
    z = (f32(3, 8) + 1j * f32(3, 8)).astype(np.complex64)
    check(lambda v: t(ops.Fft(v.op, "FFT", [8])), z, rtol=1e-4)


# -- indexing -----------------------------------------------------------------------------------
def test_dynamic_slice_and_update_with_batched_indices():
    x, i = f32(4, 6, 3), np.array([0, 2, 5, -1], np.int32)
    check(lambda a, k: lax.dynamic_slice(a, (k, 1), (2, 2)), x, i)
    check(lambda a, k: lax.dynamic_slice(a, (k, 1), (2, 2)), x[0], i, in_axes=(None, 0))
    check(lambda a, k: lax.dynamic_slice(a, (k, 0), (3, 3)), x, np.int32(1), in_axes=(0, None))
    u = f32(4, 2, 3)
    check(lambda a, k, v: lax.dynamic_update_slice(a, v, (k, 0)), x, i, u)
    check(lambda a, k, v: lax.dynamic_update_slice(a, v, (k, 0)), x[0], i, u, in_axes=(None, 0, 0))
    check(
        lambda a, k, v: lax.dynamic_update_slice(a, v, (k, 0)),
        x,
        np.int32(3),
        u[0],
        in_axes=(0, None, None),
    )
    scalars = f32(4)
    check(lambda a: lax.dynamic_slice(a, (), ()), scalars)
    check(lambda a, v: lax.dynamic_update_slice(a, v, ()), scalars, scalars[0], in_axes=(0, None))


def test_gather_and_scatter():
    x, idx = f32(3, 5, 2), np.array([[0, 4], [1, 1], [3, 2]], np.int32)
    check(lambda a, k: a[k], x, idx)
    check(lambda a, k: a[k], x[0], idx, in_axes=(None, 0))
    check(lambda a, k: a[k], x, idx[0], in_axes=(0, None))
    upd = f32(3, 2, 2)
    check(lambda a, k, u: a.at[k].add(u), x, idx, upd)
    check(lambda a, k, u: a.at[k].set(u), x[0], idx, upd, in_axes=(None, 0, 0))


# -- control flow and calls ------------------------------------------------------------------------
def test_while_with_a_batched_predicate_freezes_finished_lanes():
    n = np.array([1, 4, 0, 2], np.int32)

    def fn(count, x):
        return lax.while_loop(
            lambda s: s[0] < count, lambda s: (s[0] + 1, s[1] * 2.0 + 1.0), (0, x)
        )

    check(fn, n, f32(4, 3))


def test_while_with_an_unbatched_predicate_keeps_the_counter_unbatched():
    text = (
        jit(vmap(lambda x: lax.fori_loop(0, 3, lambda i, v: v * 2.0 + i, x)))
        .lower(f32(4, 2))
        .as_text()
    )
    assert "s32[4]" not in text
    check(lambda x: lax.fori_loop(0, 3, lambda i, v: v * 2.0 + i, x), f32(4, 2))


def test_scan_over_batched_inputs():
    def cumulative(c, xs):
        return lax.scan(lambda carry, x: (carry + x, carry * x), c, xs)

    check(cumulative, f32(3, 2), f32(3, 5, 2))
    check(cumulative, f32(2), f32(3, 5, 2), in_axes=(None, 0))


@pytest.mark.parametrize("batched_pred", [True, False])
def test_cond(batched_pred):
    p = np.array([True, False, True]) if batched_pred else np.bool_(True)

    def fn(pred, x):
        return lax.cond(pred, lambda v: mnp.sin(v), lambda v: v * 2.0, x)

    check(fn, p, f32(3, 4), in_axes=(0 if batched_pred else None, 0))


def test_switch_with_a_batched_index_out_of_range_picks_the_last_branch():
    idx = np.array([0, 1, 2, 7, -3], np.int32)
    branches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v]
    check(lambda i, x: lax.switch(i, branches, x), idx, f32(5, 2))


def test_call_opt_barrier_and_rng_bit_generator():
    x = f32(3, 4)

    def called(a):
        return t(ops.Call(a.op.builder, lambda p: ops.Mul(p, p), [a.op]))

    check(called, x)

    def fenced(a):
        both = ops.OptBarrier(ops.Tuple(a.op.builder, [a.op, (a * 2).op]))
        return t(ops.GetTupleElement(both, 0)) + t(ops.GetTupleElement(both, 1))

    check(fenced, x)
    state = np.arange(12, dtype=np.uint32).reshape(3, 4)

    def bits(s):
        out = ops.RngBitGenerator("rng_three_fry", s.op, ("u32", (4,)))
        return t(ops.GetTupleElement(out, 1))

    check(bits, state)


# -- the API ------------------------------------------------------------------------------
def test_pytree_in_axes_prefix_and_out_axes():
    params = {"w": f32(4, 3), "b": f32(3)}
    xs = f32(5, 4)

    def layer(p, x):
        return {"y": x @ p["w"] + p["b"], "n": mnp.sum(x)}

    check(layer, params, xs, in_axes=({"w": None, "b": None}, 0))
    check(layer, params, xs, in_axes=(None, 0), out_axes={"y": 1, "n": 0})
    stacked = {"w": f32(5, 4, 3), "b": params["b"]}
    got = jit(vmap(layer, in_axes=({"w": 0, "b": None}, 0)))(stacked, xs)
    np.testing.assert_allclose(
        got["y"], np.einsum("bi,bij->bj", xs, stacked["w"]) + params["b"], rtol=1e-5, atol=1e-5
    )
    got = jit(vmap(lambda x: (x, mnp.ones(2)), out_axes=(0, 1)))(xs)
    assert got[1].shape == (2, 5)


def test_nested_vmap_and_kwargs():
    x, y = f32(2, 3, 4), f32(4, 3)
    inner = vmap(lambda a, b: mnp.dot(a, b), in_axes=(0, None))
    check(lambda a, b: inner(a, b), x, y, in_axes=(0, None))
    out = jit(vmap(vmap(lambda a, *, scale: a * scale)))(x, scale=x)
    np.testing.assert_allclose(out, x * x)


def test_vmap_outside_jit_and_axis_size():
    x = f32(3, 2)
    np.testing.assert_allclose(vmap(lambda a: a * 2.0)(x), x * 2)
    out = jit(vmap(lambda: mnp.ones(2), axis_size=4))()
    assert out.shape == (4, 2)


def test_bad_in_axes_name_the_user_line():
    x = f32(3, 2)
    with pytest.raises(minixla.FrontendError, match=r"test_transforms_vmap.py:\d+: .*prefix"):
        jit(vmap(lambda p: p["a"], in_axes=({"b": 0},)))({"a": x})
    with pytest.raises(minixla.FrontendError, match="inconsistent sizes"):
        jit(vmap(lambda a, b: a + b))(x, f32(4, 2))
    with pytest.raises(minixla.FrontendError, match="out_axes=None"):
        jit(vmap(lambda a: a, out_axes=None))(x)
    with pytest.raises(minixla.FrontendError, match="in_axes has 2 entries"):
        jit(vmap(lambda a: a, in_axes=(0, 0)))(x)
    with pytest.raises(minixla.FrontendError, match="out of range"):
        jit(vmap(lambda a: a, in_axes=2))(x)


def test_an_op_without_a_rule_is_named():
    x = f32(3, 2)

    def custom(a):
        return t(ops.CustomCall(a.op.builder, "my_target", [a.op], ("f32", (2,))))

    with pytest.raises(minixla.FrontendError, match="custom-call"):
        jit(vmap(custom))(x)


def test_on_the_cpu_backend():
    """The batched programs (gather with batching dims, lane-frozen while) on cpu."""
    x, w = f32(4, 3), f32(3, 2)
    fn = minixla.jit(vmap(lambda a: mnp.tanh(a @ w).sum()), backend="cpu")
    np.testing.assert_allclose(fn(x), np.tanh(x @ w).sum(1), rtol=1e-5)
    counts, idx = np.array([1, 4, 0, 2], np.int32), np.array([[0, 2], [1, 1], [2, 0], [0, 0]])

    def fn(n, a, k):
        doubled = lax.while_loop(lambda s: s[0] < n, lambda s: (s[0] + 1, s[1] * 2.0), (0, a))
        return doubled[1][k.astype(np.int32)]

    cpu = minixla.jit(vmap(fn), backend="cpu")(counts, x, idx)
    np.testing.assert_allclose(cpu, jit(vmap(fn))(counts, x, idx), rtol=1e-6)


def test_closed_over_values_of_the_enclosing_trace_stay_unbatched():
    @jit
    def fn(xs, w):
        return vmap(lambda x: mnp.tanh(x @ w))(xs)

    xs, w = f32(5, 3), f32(3, 2)
    np.testing.assert_allclose(fn(xs, w), np.tanh(xs @ w), rtol=1e-5)
    assert "f32[5,3,2]" not in jit(lambda a, b: vmap(lambda x: x @ b)(a)).lower(xs, w).as_text()


# -- every elementwise opcode of the table, straight from HLO ---------------------------------
from minixla.ir.opcodes import ELEMENTWISE, OPCODES  # noqa: E402
from minixla.transforms.batching_rules import BATCHING_RULES  # noqa: E402

_SPECIAL = {
    "map",
    "compare",
    "reduce-precision",
    "convert",
    "bitcast-convert",
    "stochastic-convert",
    "complex",
    "real",
    "imag",
    "is-finite",
}
_INTEGER = {
    "and",
    "or",
    "xor",
    "not",
    "popcnt",
    "count-leading-zeros",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "mulhi",
    "remainder",
}
_SWEEP = sorted(
    name for name, row in OPCODES.items() if row.kind == ELEMENTWISE and name not in _SPECIAL
)


def test_every_elementwise_opcode_has_a_rule():
    missing = [
        name
        for name, row in OPCODES.items()
        if row.kind == ELEMENTWISE and name not in BATCHING_RULES
    ]
    assert missing == []


@pytest.mark.parametrize("opcode", _SWEEP)
def test_elementwise_opcode_against_a_loop(opcode):
    arity = OPCODES[opcode].arity
    if opcode in _INTEGER:
        args = [RNG.integers(1, 30, (3, 4)).astype(np.int32) for _ in range(arity)]
    else:
        args = [RNG.uniform(0.2, 0.9, (3, 4)).astype(np.float32) for _ in range(arity)]
    if opcode == "clamp":
        args[0], args[2] = args[0] * 0 + 0.4, args[2] * 0 + 0.6
    if opcode == "select":
        args[0] = args[0] > 0.5

    def single(*xs):
        builder = xs[0].op.builder
        return t(builder.emit(opcode, [x.op for x in xs]))

    in_axes = (0,) + (None,) * (arity - 1) if arity > 1 else 0
    unbatched_rest = [a if i == 0 else a[0] for i, a in enumerate(args)]
    check(single, *unbatched_rest, in_axes=in_axes)
    check(single, *args)


def test_a_batched_vector_matrix_product_becomes_a_matrix_product():
    text = jit(vmap(lambda x, w: x @ w, in_axes=(0, None))).lower(f32(8, 3), f32(3, 2)).as_text()
    assert "f32[8,2]{1,0} dot(" in text and "lhs_batch_dims" not in text
    check(lambda w, x: w @ x, f32(2, 3), f32(5, 3), in_axes=(None, 0))
    check(lambda a, b: mnp.einsum("ij,jk->ik", a, b), f32(4, 2, 3), f32(3, 5), in_axes=(0, None))
    check(lambda a, b: mnp.einsum("ij,jk->ik", a, b), f32(2, 3), f32(3, 4, 5), in_axes=(None, 1))


def test_switch_with_an_unbatched_index_and_negative_axes():
    branches = [lambda v: v + 1.0, lambda v: v * 3.0, lambda v: -v]
    for index in (np.int32(1), np.int32(9)):
        check(lambda i, x: lax.switch(i, branches, x), index, f32(4, 2), in_axes=(None, 0))
    x = f32(2, 3, 4)
    got = jit(vmap(lambda a: a * 2.0, in_axes=-1, out_axes=-1))(x)
    np.testing.assert_allclose(got, x * 2)
    got = jit(vmap(lambda a: mnp.sum(a, 0), in_axes=-2, out_axes=-1))(x)
    np.testing.assert_allclose(got, x.sum(0).T)


def test_a_transformer_block_per_example():
    from minixla import nn

    d, seq = 8, 5
    params = {"wq": f32(d, d), "wk": f32(d, d), "wv": f32(d, d), "g": f32(d), "b": f32(d)}

    def block(p, tokens, length):
        x = nn.layer_norm(tokens, p["g"], p["b"])
        q, k, v = x @ p["wq"], x @ p["wk"], x @ p["wv"]
        scores = q @ k.T / np.sqrt(d).astype(np.float32)
        visible = mnp.arange(seq)[None, :] < length  # a per-example padding mask
        attention = nn.softmax(mnp.where(visible, scores, -1e9), axis=-1)
        out = tokens + nn.gelu(attention @ v)
        return out, mnp.argmax(out[length - 1]), mnp.cumsum(out, 0)[-1]

    check(
        block,
        params,
        f32(3, seq, d),
        np.array([5, 2, 3], np.int32),
        in_axes=(None, 0, 0),
        rtol=1e-4,
    )


def test_vmap_inside_a_loop_body_closing_over_the_loop_index():
    w = f32(2, 2)

    @jit
    def fn(xs, w):
        return lax.fori_loop(0, 3, lambda i, v: vmap(lambda r: mnp.tanh(r @ w) + i)(v), xs)

    xs = f32(3, 2)
    want = xs
    for i in range(3):
        want = np.tanh(want @ w) + i
    np.testing.assert_allclose(fn(xs, w), want, rtol=1e-5, atol=1e-6)


# -- property: random shapes and mapped axes ---------------------------------------------------
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dims=st.lists(st.integers(1, 4), min_size=2, max_size=3), data=st.data())
def test_random_shapes_and_axes(dims, data):
    in_axis = data.draw(st.integers(-len(dims), len(dims) - 1))
    example_rank = len(dims) - 1
    out_axis = data.draw(st.integers(0, example_rank - 1)) if example_rank else 0
    x = RNG.standard_normal(dims).astype(np.float32)
    bias = RNG.standard_normal(
        dims[-1:] if in_axis % len(dims) != len(dims) - 1 else dims[-2:-1]
    ).astype(np.float32)

    def fn(a, b):
        moved = mnp.transpose(a)[::-1] if a.ndim > 1 else a[::-1]
        return (mnp.sum(mnp.exp(-a * a) + b, axis=-1, keepdims=True) * 2.0, moved)

    got = jit(vmap(fn, in_axes=(in_axis, None), out_axes=(out_axis, 0)))(x, bias)
    rows = [jit(fn)(np.take(x, i, axis=in_axis), bias) for i in range(x.shape[in_axis])]
    np.testing.assert_allclose(got[0], np.stack([r[0] for r in rows], out_axis), rtol=1e-5)
    np.testing.assert_allclose(got[1], np.stack([r[1] for r in rows], 0), rtol=1e-6)
