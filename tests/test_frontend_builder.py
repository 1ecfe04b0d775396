"""The XlaBuilder-style Builder and minixla.ops: shapes inferred at build time, sub-computations
from Python callables, modules that verify, print, parse back and run."""

import numpy as np
import pytest

import minixla
import minixla.backends
from minixla import Builder, ops
from minixla.reference.evaluator import handlers

BACKENDS = ["interpreter"] + (["cpu"] if minixla.backends.available().get("cpu") is True else [])


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5


def run(builder, root, *args, backend="interpreter"):
    module = builder.module(root)
    minixla.verify(module)
    text = module.to_text()
    assert minixla.parse_hlo_module(text).to_text() == text
    return minixla.compile(module, backend=backend)(*args)


def test_every_interpreter_opcode_has_an_ops_function():
    missing = sorted(set(handlers()) - set(ops.OPCODE_FUNCTIONS))
    assert not missing, missing


def test_elementwise_broadcast_and_reduce(backend):
    b = Builder("m")
    x = b.parameter("f32[3,4]", "x")
    row = b.parameter(minixla.Shape.array("f32", (4,)), "row")
    shifted = ops.Add(x, row, broadcast_dimensions=[1])
    scaled = ops.Mul(shifted, b.constant(2.0))
    total = ops.Reduce(b, scaled, b.constant(0.0), ops.Add, [1])
    out = run(
        b, ops.Tuple(b, [total, ops.Exp(ops.Neg(x))]), X, np.ones(4, np.float32), backend=backend
    )
    np.testing.assert_allclose(out[0], ((X + 1) * 2).sum(1))
    np.testing.assert_allclose(out[1], np.exp(-X), rtol=1e-6)


def test_reducer_from_callable_and_variadic_reduce():
    b = Builder("m")
    x = b.parameter(("float32", (3, 4)))
    iota = ops.Iota(b, "s32[3,4]", 1)

    def argmax(va, ia, vb, ib):
        take_a = ops.Ge(va, vb)
        return ops.Select(take_a, va, vb), ops.Select(take_a, ia, ib)

    out = ops.Reduce(b, [x, iota], [b.constant(-np.inf, np.float32), b.constant(0)], argmax, [1])
    values, indices = run(b, out, X)
    np.testing.assert_array_equal(values, X.max(1))
    np.testing.assert_array_equal(indices, X.argmax(1))


def test_movement_ops():
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    parts = [
        ops.Transpose(x, [1, 0]),
        ops.Reshape(x, [2, 6]),
        ops.Slice(x, [0, 1], [3, 4], [2, 2]),
        ops.Concatenate([x, x], 0),
        ops.Pad(x, b.constant(9.0), [(1, 0, 0), (0, 1, 1)]),
        ops.Reverse(x, [1]),
        ops.Broadcast(ops.Slice(x, [0, 0], [1, 4]), [0, 2], (1, 2, 4)),
        ops.DynamicSlice(x, [b.constant(1), b.constant(3)], [2, 2]),
        ops.DynamicUpdateSlice(
            x, ops.Broadcast(b.constant(0.0), [], (1, 2)), [b.constant(2), b.constant(1)]
        ),
        ops.Convert(x, "s32"),
        ops.Clamp(b.constant(-1.0), x, b.constant(1.0)),
    ]
    got = run(b, ops.Tuple(b, parts), X)
    padded = np.full((4, 8), 9.0, np.float32)  # 4 columns + 3 interior + 1 high
    padded[1:, 0:8:2] = X
    dus = X.copy()
    dus[2, 1:3] = 0
    want = [
        X.T,
        X.reshape(2, 6),
        X[0:3:2, 1:4:2],
        np.concatenate([X, X]),
        padded,
        X[:, ::-1],
        np.broadcast_to(X[:1, None, :], (1, 2, 4)),
        X[1:3, 2:4],
        dus,
        X.astype(np.int32),
        np.clip(X, -1, 1),
    ]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_gather_and_scatter():
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    idx = b.constant(np.array([[2], [0]], np.int32))
    rows = ops.Gather(
        x,
        idx,
        offset_dims=[1],
        collapsed_slice_dims=[0],
        start_index_map=[0],
        index_vector_dim=1,
        slice_sizes=[1, 4],
    )
    updates = ops.Broadcast(b.constant(1.0), [], (2, 4))
    added = ops.Scatter(
        x,
        idx,
        updates,
        ops.Add,
        update_window_dims=[1],
        inserted_window_dims=[0],
        scatter_dims_to_operand_dims=[0],
        index_vector_dim=1,
    )
    got_rows, got_added = run(b, ops.Tuple(b, [rows, added]), X)
    np.testing.assert_array_equal(got_rows, X[[2, 0]])
    want = X.copy()
    want[[2, 0]] += 1
    np.testing.assert_array_equal(got_added, want)


def test_sort_with_custom_comparator_and_dot():
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    descending = ops.Sort(x, lambda a, c: ops.Gt(a, c), dimension=1)
    product = ops.Dot(x, ops.Transpose(x, [1, 0]))
    batched = ops.Dot(
        ops.Reshape(x, [3, 4, 1]),
        ops.Reshape(x, [3, 1, 4]),
        lhs_batch=[0],
        rhs_batch=[0],
        lhs_contracting=[2],
        rhs_contracting=[1],
    )
    got = run(b, ops.Tuple(b, [descending, product, batched]), X)
    np.testing.assert_array_equal(got[0], -np.sort(-X, axis=1))
    np.testing.assert_allclose(got[1], X @ X.T)
    np.testing.assert_allclose(got[2], X[:, :, None] * X[:, None, :])


def test_while_and_conditional_from_callables():
    b = Builder("m")
    n = b.parameter("s32[]")
    init = ops.Tuple(b, [b.constant(0), b.constant(1)])

    def cond(state):
        return ops.Lt(ops.GetTupleElement(state, 0), ops.Constant(state.builder, 10))

    def body(state):
        i, acc = ops.GetTupleElement(state, 0), ops.GetTupleElement(state, 1)
        one = ops.Constant(state.builder, 1)
        return ops.Tuple(
            state.builder, [ops.Add(i, one), ops.Mul(acc, ops.Constant(state.builder, 2))]
        )

    loop = ops.While(cond, body, init)
    picked = ops.Conditional(
        n, [n, n, n], [lambda v: ops.Neg(v), lambda v: ops.Mul(v, v), lambda v: ops.Add(v, v)]
    )
    result, choice = run(b, ops.Tuple(b, [ops.GetTupleElement(loop, 1), picked]), np.int32(1))
    assert result == 1024 and choice == 1
    assert run_choice(2) == 4 and run_choice(7) == 14  # out of range: the last branch


def run_choice(value):
    b = Builder("m")
    n = b.parameter("s32[]")
    picked = ops.Conditional(
        n, [n, n, n], [lambda v: ops.Neg(v), lambda v: ops.Mul(v, v), lambda v: ops.Add(v, v)]
    )
    return minixla.compile(b.module(picked))(np.int32(value))


def test_map_and_reduce_window():
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    mapped = ops.Map(b, [x, x], lambda p, q: ops.Max(p, ops.Mul(q, ops.Constant(p.builder, 0.5))))
    pooled = ops.ReduceWindow(b, x, b.constant(-np.inf, np.float32), ops.Max, [2, 2], [1, 2])
    got = run(b, ops.Tuple(b, [mapped, pooled]), X)
    np.testing.assert_array_equal(got[0], np.maximum(X, X * 0.5))
    want = np.array([[X[i : i + 2, j : j + 2].max() for j in (0, 2)] for i in (0, 1)])
    np.testing.assert_array_equal(got[1], want)


def test_adopted_hlo_computation_is_renamed_uniquely():
    add = Builder("add")
    add.build(ops.Add(add.parameter("f32[]"), add.parameter("f32[]")))
    other = Builder("sum")
    p, q = other.parameter("f32[]"), other.parameter("f32[]")
    comp = other.build(ops.Add(p, q))
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    out = ops.Reduce(b, x, b.constant(0.0), comp, [0, 1])
    assert run(b, out, X) == X.sum()


def test_shape_mismatch_raises_at_the_call_naming_this_line():
    b = Builder("m")
    x = b.parameter("f32[3,4]")
    y = b.parameter("f32[4,3]")
    with pytest.raises(minixla.FrontendShapeError) as info:
        ops.Add(x, y)  # the line the error names
    assert f"test_frontend_builder.py:{info.tb.tb_lineno}" in str(info.value)
    assert "add" in str(info.value) and "f32[4,3]" in str(info.value)
    with pytest.raises(minixla.ShapeError, match="does not accept element type f32"):
        ops.And(x, x)


def test_reducer_cannot_capture_outer_values():
    b = Builder("m")
    x = b.parameter("f32[3]")
    with pytest.raises(minixla.FrontendError, match="cannot use"):
        ops.Reduce(b, x, b.constant(0.0), lambda a, c: ops.Add(a, x), [0])


def test_ops_reject_non_xlaop_operands():
    b = Builder("m")
    x = b.parameter("f32[3]")
    with pytest.raises(minixla.FrontendTypeError, match="expects XlaOp operands"):
        ops.Add(x, 1.0)


def test_scaled_dot_scales_each_block_of_its_operands():
    b = Builder("m")
    x, y = b.parameter("f32[4,8]", "x"), b.parameter("f32[8,3]", "y")
    sx, sy = b.parameter("f32[4,2]", "sx"), b.parameter("f32[2,3]", "sy")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in [(4, 8), (8, 3), (4, 2), (2, 3)]]
    got = run(b, ops.ScaledDot(x, y, sx, sy), *args)
    want = (args[0] * np.repeat(args[2], 4, axis=1)) @ (args[1] * np.repeat(args[3], 4, axis=0))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
