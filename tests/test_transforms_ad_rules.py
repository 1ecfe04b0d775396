"""Every differentiation rule against finite differences, forward and reverse mode."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax, nn
from minixla.frontend import ops
from minixla.ir.opcodes import OPCODES
from minixla.transforms.ad_emit import T

from ad_check import check_grads

R = np.random.default_rng(0)
X = R.uniform(0.5, 1.5, (2, 3))
Y = R.uniform(0.5, 1.5, (2, 3))
Z = R.standard_normal((2, 3))

UNARY = {
    "exp": mnp.exp,
    "expm1": mnp.expm1,
    "log": mnp.log,
    "log1p": mnp.log1p,
    "tanh": mnp.tanh,
    "logistic": nn.sigmoid,
    "sqrt": mnp.sqrt,
    "rsqrt": lambda x: 1 / mnp.sqrt(x),
    "cbrt": mnp.cbrt,
    "sin": mnp.sin,
    "cos": mnp.cos,
    "tan": mnp.tan,
    "sinh": mnp.sinh,
    "cosh": mnp.cosh,
    "arcsin": lambda x: mnp.arcsin(x / 2),
    "arccos": lambda x: mnp.arccos(x / 2),
    "arctan": mnp.arctan,
    "arcsinh": mnp.arcsinh,
    "arccosh": lambda x: mnp.arccosh(x + 1),
    "arctanh": lambda x: mnp.arctanh(x / 2),
    "abs": lambda x: mnp.abs(x - 1),
    "negative": mnp.negative,
    "erf": lax.erf,
    "square": mnp.square,
    "reciprocal": mnp.reciprocal,
    "floor_is_flat": lambda x: mnp.floor(x * 3) * x,
    "sign_is_flat": lambda x: mnp.sign(x - 1) * x,
    "gelu": nn.gelu,
    "softmax": nn.softmax,
    "log_softmax": nn.log_softmax,
    "logsumexp": nn.logsumexp,
    "relu": lambda x: nn.relu(x - 1),
    "silu": nn.silu,
    "layer_norm": lambda x: nn.layer_norm(x),
}

BINARY = {
    "add": mnp.add,
    "subtract": mnp.subtract,
    "multiply": mnp.multiply,
    "divide": mnp.divide,
    "power": mnp.power,
    "arctan2": mnp.arctan2,
    "maximum": mnp.maximum,
    "minimum": mnp.minimum,
    "remainder": lambda x, y: mnp.remainder(x * 3, y),
    "where": lambda x, y: mnp.where(x > y, x * y, x - y),
    "clip": lambda x, y: mnp.clip(x * 2, 1.0, 2.0) * y,
    "broadcasting": lambda x, y: x[:, :1] * y[0],
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    with minixla.config.x64():
        check_grads(UNARY[name], [X])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(name):
    with minixla.config.x64():
        check_grads(BINARY[name], [X, Y])


def test_maximum_splits_ties_in_half_like_jax():
    with minixla.config.x64():
        g = minixla.jit(
            minixla.grad(lambda x, y: mnp.sum(mnp.maximum(x, y)), (0, 1)), backend="interpreter"
        )(np.ones(3), np.array([1.0, 0.0, 2.0]))
        np.testing.assert_allclose(g[0], [0.5, 1, 0])
        np.testing.assert_allclose(g[1], [0.5, 0, 1])
        g = minixla.jit(minixla.grad(lambda x: mnp.max(x)), backend="interpreter")(
            np.array([3.0, 1.0, 3.0])
        )
        np.testing.assert_allclose(g, [0.5, 0, 0.5])


MOVEMENT = {
    "reshape": lambda x: mnp.reshape(x, (3, 2)) * mnp.arange(6.0).reshape(3, 2),
    "transpose": lambda x: x.T * mnp.arange(6.0).reshape(3, 2),
    "broadcast_to": lambda x: (
        mnp.broadcast_to(x[:, None, :], (2, 4, 3)) * mnp.arange(24.0).reshape(2, 4, 3)
    ),
    "slice": lambda x: x[:, 1:] * 2,
    "strided_slice": lambda x: x[::-1, ::2],
    "int_index": lambda x: x[1],
    "gather": lambda x: x[np.array([1, 0, 1])] * mnp.arange(3.0)[:, None],
    "take": lambda x: mnp.take(x, np.array([2, 0, 2, 1]), axis=1),
    "dynamic_slice": lambda x: lax.dynamic_slice(x, (mnp.int32(1), mnp.int32(1)), (1, 2)),
    "dynamic_update_slice": lambda x: lax.dynamic_update_slice(
        x, x[:1, :2] * 3, (mnp.int32(1), mnp.int32(0))
    ),
    "at_set": lambda x: x.at[0, 1].set(x[1, 2] * 5),
    "at_add": lambda x: x.at[np.array([0, 0])].add(x[1] * 2),
    "pad": lambda x: mnp.pad(x, ((1, 2), (0, 1))) * mnp.arange(20.0).reshape(5, 4),
    "concatenate": lambda x: mnp.concatenate([x, x * 2, x[:, :1]], axis=1),
    "stack": lambda x: mnp.stack([x, mnp.sin(x)]),
    "flip": lambda x: mnp.flip(x, 1) * mnp.arange(6.0).reshape(2, 3),
    "roll": lambda x: mnp.roll(x, 1, axis=1) * mnp.arange(6.0).reshape(2, 3),
    "tile": lambda x: mnp.tile(x, (2, 1)),
    "repeat": lambda x: mnp.repeat(x, 2, axis=0),
    "astype": lambda x: x * (x * 3).astype(mnp.int32),
}

REDUCTIONS = {
    "sum": lambda x: mnp.sum(x, axis=0),
    "mean": lambda x: mnp.mean(x),
    "max": lambda x: mnp.max(x, axis=1),
    "min": lambda x: mnp.min(x, axis=0),
    "var": lambda x: mnp.var(x, axis=1),
    "std": lambda x: mnp.std(x),
    "prod_via_log": lambda x: mnp.exp(mnp.sum(mnp.log(x))),
    "prod": lambda x: mnp.prod(x, axis=1),
    "prod_all": lambda x: mnp.prod(x),
    "prod_with_a_zero": lambda x: mnp.prod(x.at[0, 1].set(0.0), axis=1),
    "cumsum": lambda x: mnp.cumsum(x, axis=1),
    "cummax": lambda x: mnp.cummax(x * Z, axis=1),
    "sort": lambda x: mnp.sort(x * Z, axis=1) * mnp.arange(3.0),
    "sort_axis0": lambda x: mnp.sort(x * Z, axis=0) * mnp.arange(2.0)[:, None],
    "matmul": lambda x: x @ mnp.arange(12.0).reshape(3, 4) / 10,
    "matmul_self": lambda x: x @ x.T,
    "einsum_batch": lambda x: mnp.einsum("bi,bj->bij", x, mnp.cos(x)),
    "dot_general": lambda x: lax.dot_general(
        x.reshape(2, 3, 1), mnp.ones((2, 1, 3)) * 0.5, ((2,), (1,)), ((0,), (0,))
    ),
    "tensordot": lambda x: mnp.tensordot(x, x * 2, axes=([0, 1], [0, 1])),
}


@pytest.mark.parametrize("name", sorted(MOVEMENT))
def test_movement(name):
    with minixla.config.x64():
        check_grads(MOVEMENT[name], [X])


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_and_contractions(name):
    with minixla.config.x64():
        check_grads(REDUCTIONS[name], [X])


def _hlo(build):
    """A function of one traced array that applies HLO ops directly (minixla.ops)."""
    from minixla import ops
    from minixla.frontend.tracer import Tracer

    def fn(x):
        return Tracer(build(ops, x.op))

    return fn


DIRECT_HLO = {
    "rsqrt": lambda ops, x: ops.Rsqrt(x),
    "clamp": lambda ops, x: ops.Clamp(
        ops.Constant(x.builder, 0.8, np.float64), x, ops.Constant(x.builder, 1.2, np.float64)
    ),
    "clamp_array_bounds": lambda ops, x: ops.Clamp(ops.Mul(x, x), x, ops.Add(x, x)),
    "round_is_flat": lambda ops, x: ops.Mul(ops.RoundNearestEven(ops.Mul(x, x)), x),
    "copy_barrier": lambda ops, x: ops.GetTupleElement(
        ops.OptBarrier(ops.Tuple(x.builder, [ops.Copy(x), x])), 0
    ),
    "reduce_precision": lambda ops, x: ops.ReducePrecision(x, 11, 52),
    "pad_negative_interior": lambda ops, x: ops.Pad(
        x, ops.Constant(x.builder, 0.5, np.float64), [(-1, 2, 1), (1, -1, 2)]
    ),
    "slice_strided": lambda ops, x: ops.Slice(x, [0, 1], [2, 3], [1, 2]),
    "broadcast_transposing": lambda ops, x: ops.Mul(
        ops.Broadcast(x, [2, 0], [3, 4, 2]), ops.Iota(x.builder, "f64[3,4,2]", 1)
    ),
    "transpose_3d": lambda ops, x: ops.Transpose(ops.Reshape(x, [1, 2, 3]), [2, 0, 1]),
    "reverse": lambda ops, x: ops.Mul(ops.Reverse(x, [0, 1]), ops.Iota(x.builder, "f64[2,3]", 1)),
    "tan_atan": lambda ops, x: ops.Atan(ops.Tan(x)),
    "select": lambda ops, x: ops.Select(
        ops.Gt(x, ops.Constant(x.builder, 1.0, np.float64)), ops.Exp(x), ops.Neg(x)
    ),
}


@pytest.mark.parametrize("name", sorted(DIRECT_HLO))
def test_direct_hlo_ops(name):
    with minixla.config.x64():
        check_grads(_hlo(DIRECT_HLO[name]), [X])


def _row_differentiable():
    return sorted(
        op
        for op, row in OPCODES.items()
        if row.partials is not None and any(formula != "0" for formula in row.partials)
    )


@pytest.mark.parametrize("opcode", _row_differentiable())
def test_partials_stated_in_the_opcode_row_match_finite_differences(opcode):
    """A row's formulas are checked as they are written: the op itself, straight from the
    builder, on a domain where it is smooth (the first of two that gives finite values)."""
    build = ops.OPCODE_FUNCTIONS[opcode]
    arity = OPCODES[opcode].arity
    attrs = {"reduce-precision": {"exponent_bits": 11, "mantissa_bits": 52}}.get(opcode, {})

    def fn(*xs):
        return T(build(*(x.op for x in xs), **attrs))

    for low, high in ((0.2, 0.8), (1.2, 1.8)):
        args = [R.uniform(low, high, (2, 3)) for _ in range(arity)]
        with minixla.config.x64():
            if np.all(np.isfinite(minixla.jit(fn, backend="interpreter")(*args))):
                check_grads(fn, args)
                return
    pytest.fail(f"{opcode}: no domain with finite values")


def test_a_formula_naming_no_opcode_is_an_error():
    from minixla.transforms.ad_rules import FormulaError, _formula_value
    import ast

    with pytest.raises(FormulaError, match="cosinus is not an elementwise opcode"):
        _formula_value(ast.parse("cosinus(x)", mode="eval").body, {"x": None})
    with pytest.raises(FormulaError, match="unsupported formula syntax: x \\*\\* 2"):
        _formula_value(ast.parse("x ** 2", mode="eval").body, {"x": None})
