"""A differential fuzzer: seeded random modules, run three ways, compared.

`random_module(seed)` builds a small module from the opcode table: a few parameters of random
element types and shapes, then a chain of ops drawn from `GENERATORS` (one entry per opcode,
each knowing how to make a valid instance from the values built so far). `random_inputs`
fills the parameters with special values (NaN of both signs, +-0, +-inf, subnormals, the
integer extremes, shift counts at and past the width) mixed with ordinary ones.
`check_module` runs it on the interpreter as written (the reference), on the interpreter after
the cpu pipeline, and on the cpu backend, and returns the differences.

What counts as the same: integers, preds and infinities exactly; NaN meets any NaN (payloads
and signs of NaN results differ between libm and minixla's math library: documented in
docs/semantics.md); other floats within a few ulp of the least precise float type computed on
the way to them, since the transcendental functions are 1-2 ulp accurate on cpu and correctly
rounded in NumPy; or, where a math function's ulp is amplified (nearly equal values
subtracted), within twice what the reference itself moves when every math result is moved
4 ulp either way (`_spreads`). The ops that amplify without bound (ILL_CONDITIONED) read only
exact values.

Opcodes the generator does not make are listed in NOT_GENERATED with the reason; a test checks
that every row of the opcode table is in exactly one of the two.
"""

from __future__ import annotations

import numpy as np

from ..errors import MinixlaError
from ..ir import Shape
from ..ir.opcodes import ELEMENTWISE, EXPENSIVE, OPCODES, opcodes_with

FLOATS = ("f32", "f16", "bf16", "f64")
INTS = ("s32", "s8", "u8", "u32", "s64")
DTYPES = FLOATS + INTS + ("pred",)
# relative tolerance per float type: a few ulp, for 1-2 ulp math functions in short chains
RTOL = {"f32": 2e-5, "f16": 4e-3, "bf16": 3e-2, "f64": 1e-12}

DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

# Ops that turn a 1-ulp difference in an operand into any difference at all: the remainder by a
# tiny divisor, a trigonometric function of a large argument. They take only exact operands
# (parameters, constants, iotas), which every path holds bit for bit, and no mutant swaps them
# in: cos(sinh(x)) differing in its 10th digit says nothing about either backend.
ILL_CONDITIONED = frozenset({"remainder", "sine", "cosine", "tan"})

NOT_GENERATED = {
    "parameter": "made for every module",
    "constant": "made as operands",
    "tuple": "the root",
    "get-tuple-element": "made with the ops that return tuples",
    "rng": "random by design",
    "rng-bit-generator": "its algorithms are checked by unit tests",
    "rng-get-and-update-state": "expanded by XLA before backends see it",
    "replica-id": "single device",
    "partition-id": "single device",
    "after-all": "tokens carry no values",
    "real": "complex types are not generated",
    "imag": "complex types are not generated",
    "complex": "complex types are not generated",
    "mulhi": "not in XLA's text for these types",
    "stochastic-convert": "not implemented",
    "dynamic-reshape": "dynamic shapes",
    "set-dimension-size": "dynamic shapes",
    "get-dimension-size": "static shapes only",
    "bitcast": "layout-dependent",
    "select-and-scatter": "window gradients are checked by unit tests",
    "topk": "sort covers the ordering",
    "convolution": "checked by its own differential tests",
    "ragged-dot": "not implemented",
    "scaled-dot": "checked against NumPy by its own tests",
    "fft": "complex types are not generated",
    "triangular-solve": "needs well-conditioned inputs",
    "cholesky": "needs SPD inputs",
    "batch-norm-training": "expanded before backends",
    "batch-norm-inference": "expanded",
    "batch-norm-grad": "expanded before backends",
    "fusion": "made by the pipeline",
    "custom-call": "needs registered targets",
    "opt-barrier": "an identity",
    "add-dependency": "tokens",
    "domain": "an identity",
    "async-start": "async wrappers",
    "async-update": "async wrappers",
    "async-done": "async wrappers",
    "copy-start": "async copies",
    "copy-done": "async copies",
}
NOT_GENERATED.update(
    {
        op: "collectives need several devices"
        for op in OPCODES
        if OPCODES[op].kind == "collective" and op not in NOT_GENERATED
    }
)
NOT_GENERATED.update(
    {op: "I/O" for op in ("send", "send-done", "recv", "recv-done", "infeed", "outfeed")}
)


class Skip(Exception):
    """This generator cannot make a valid op from the current values."""


class _Context:
    def __init__(self, rng, builder):
        self.rng, self.b = rng, builder
        self.values: list = []

    def pick(self, kinds=None, rank_at_least: int = 0, exact: bool = False):
        # empty values (a pad with negative edges) would leave generators no sizes to draw
        choices = [
            v
            for v in self.values
            if (kinds is None or _kinds_of(v.dtype) & set(kinds))
            and v.rank >= rank_at_least
            and 0 not in v.dims
            and (not exact or _is_exact(v))
        ]
        if not choices:
            raise Skip()
        return choices[self.rng.integers(len(choices))]

    def like(self, value, exact: bool = False):
        """Another value of the same shape and type: an existing one or a new constant."""
        same = [
            v
            for v in self.values
            if v.shape.without_layout() == value.shape.without_layout()
            and v is not value
            and (not exact or _is_exact(v))
        ]
        if same and self.rng.random() < 0.6:
            return same[self.rng.integers(len(same))]
        return self.constant(value.dtype, value.dims)

    def constant(self, dtype: str, dims):
        data = special_values(self.rng, dtype, tuple(dims))
        return self.b.constant(data, Shape.array(dtype).numpy_dtype)

    def scalar(self, dtype: str, value):
        return self.b.constant(np.asarray(value).astype(Shape.array(dtype).numpy_dtype))

    def emit(self, opcode, operands, attrs=None, shape=None):
        return self.b.emit(opcode, operands, attrs or {}, shape=shape)


def _kind(dtype: str) -> str:
    return "float" if dtype in FLOATS else "pred" if dtype == "pred" else "int"


def _kinds_of(dtype: str) -> set[str]:
    """The fuzzer's kind of `dtype` and the opcode table's (signed and unsigned are ints)."""
    kind = _kind(dtype)
    if kind != "int":
        return {kind}
    return {kind, "unsigned" if dtype.startswith("u") else "signed"}


def special_values(rng, dtype: str, dims) -> np.ndarray:
    """Random values of `dtype` with the corner cases of the type mixed in."""
    np_dtype = Shape.array(dtype).numpy_dtype
    size = int(np.prod(dims, dtype=np.int64))
    if dtype == "pred":
        return rng.integers(0, 2, dims).astype(bool)
    if dtype in FLOATS:
        info = np.finfo(np_dtype)
        specials = [
            np.nan,
            -np.nan,
            0.0,
            -0.0,
            np.inf,
            -np.inf,
            float(info.tiny) / 4,
            -float(info.tiny) / 8,
            1.0,
            -1.0,
            0.5,
            float(info.max),
            -float(info.max),
            float(info.tiny),
            2.5,
            -3.75,
        ]
        ordinary = rng.standard_normal(size) * rng.choice([1.0, 10.0, 1e3], size)
        pick = rng.random(size) < 0.35
        values = np.where(pick, rng.choice(specials, size), ordinary)
        return values.astype(np_dtype).reshape(dims)
    info = np.iinfo(np_dtype)
    bits = np_dtype.itemsize * 8
    specials = [info.min, info.max, 0, 1, bits - 1, bits, bits + 1, 2, 3]
    if info.min < 0:
        specials += [-1, -2, info.min + 1]
    ordinary = rng.integers(max(info.min, -100), min(info.max, 100) + 1, size)
    pick = rng.random(size) < 0.35
    values = np.where(pick, rng.choice(np.array(specials, dtype=object), size), ordinary)
    return np.array([int(v) for v in values], dtype=np_dtype).reshape(dims)


# -- one generator per opcode ------------------------------------------------------------------


def _is_exact(value) -> bool:
    return value.instr.opcode in ("parameter", "constant", "iota")


def _unary(kinds):
    def make(ctx, opcode):
        return ctx.emit(opcode, [ctx.pick(kinds, exact=opcode in ILL_CONDITIONED)])

    return make


def _binary(kinds):
    def make(ctx, opcode):
        exact = opcode in ILL_CONDITIONED
        x = ctx.pick(kinds, exact=exact)
        return ctx.emit(opcode, [x, ctx.like(x, exact=exact)])

    return make


def _compare(ctx, opcode):
    x = ctx.pick()
    attrs = {"direction": DIRECTIONS[ctx.rng.integers(len(DIRECTIONS))]}
    if _kind(x.dtype) == "float" and ctx.rng.random() < 0.3:
        attrs["type"] = "TOTALORDER"
    return ctx.emit(opcode, [x, ctx.like(x)], attrs)


def _select(ctx, opcode):
    x = ctx.pick()
    pred = ctx.constant("pred", x.dims)
    return ctx.emit(opcode, [pred, x, ctx.like(x)])


def _clamp(ctx, opcode):
    x = ctx.pick(("float", "int"))
    low, high = sorted(
        special_values(ctx.rng, x.dtype, (2,)).tolist(),
        key=lambda v: (np.isnan(v), v) if isinstance(v, float) else (False, v),
    )
    return ctx.emit(opcode, [ctx.scalar(x.dtype, low), x, ctx.scalar(x.dtype, high)])


def _convert(ctx, opcode):
    x = ctx.pick()
    target = DTYPES[ctx.rng.integers(len(DTYPES))]
    return ctx.emit(opcode, [x], shape=Shape.array(target, x.dims))


_SAME_WIDTH = {
    "f32": ("s32", "u32"),
    "s32": ("f32", "u32"),
    "u32": ("f32", "s32"),
    "f16": ("bf16",),
    "bf16": ("f16",),
    "s64": ("f64",),
    "f64": ("s64",),
    "s8": ("u8",),
    "u8": ("s8",),
}


def _bitcast_convert(ctx, opcode):
    # only of exact values: the bits of a 1-ulp math result would count as a mismatch
    exact = [v for v in ctx.values if _is_exact(v) and _kind(v.dtype) != "pred"]
    if not exact:
        raise Skip()
    x = exact[ctx.rng.integers(len(exact))]
    targets = _SAME_WIDTH.get(x.dtype)
    if not targets:
        raise Skip()
    target = targets[ctx.rng.integers(len(targets))]
    return ctx.emit(opcode, [x], shape=Shape.array(target, x.dims))


def _reduce_precision(ctx, opcode):
    x = ctx.pick(("float",))
    attrs = {
        "exponent_bits": int(ctx.rng.integers(2, 9)),
        "mantissa_bits": int(ctx.rng.integers(1, 11)),
    }
    return ctx.emit(opcode, [x], attrs)


def _broadcast(ctx, opcode):
    x = ctx.pick()
    if x.rank >= 3:
        raise Skip()
    at = int(ctx.rng.integers(x.rank + 1))
    dims = list(x.dims)
    dims.insert(at, int(ctx.rng.integers(1, 4)))
    mapping = [d for d in range(len(dims)) if d != at]
    return ctx.emit(opcode, [x], {"dimensions": mapping}, shape=Shape.array(x.dtype, dims))


def _reshape(ctx, opcode):
    x = ctx.pick()
    size = int(np.prod(x.dims, dtype=np.int64))
    if size == 0:  # an empty value (a pad with negative edges) has no factors to pick
        raise Skip()
    factors = [d for d in range(1, size + 1) if size % d == 0]
    first = factors[ctx.rng.integers(len(factors))]
    dims = [first, size // first] if ctx.rng.random() < 0.7 else [size]
    return ctx.emit(opcode, [x], shape=Shape.array(x.dtype, dims))


def _transpose(ctx, opcode):
    x = ctx.pick(rank_at_least=2)
    return ctx.emit(opcode, [x], {"dimensions": [int(d) for d in ctx.rng.permutation(x.rank)]})


def _slice(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    spec = []
    for d in x.dims:
        start = int(ctx.rng.integers(d))
        limit = int(ctx.rng.integers(start + 1, d + 1))
        spec.append((start, limit, int(ctx.rng.integers(1, 3))))
    return ctx.emit(opcode, [x], {"slice": spec})


def _concatenate(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    return ctx.emit(opcode, [x, ctx.like(x)], {"dimensions": [int(ctx.rng.integers(x.rank))]})


def _pad(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    config = [
        (int(ctx.rng.integers(-1, 3)), int(ctx.rng.integers(-1, 3)), int(ctx.rng.integers(0, 2)))
        for _ in x.dims
    ]
    value = ctx.scalar(x.dtype, special_values(ctx.rng, x.dtype, (1,))[0])
    return ctx.emit(opcode, [x, value], {"padding": config})


def _reverse(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    dims = sorted(
        int(d) for d in ctx.rng.choice(x.rank, int(ctx.rng.integers(1, x.rank + 1)), replace=False)
    )
    return ctx.emit(opcode, [x], {"dimensions": dims})


def _reduce(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    ops = ("and", "or") if x.dtype == "pred" else ("add", "multiply", "maximum", "minimum")
    op = ops[ctx.rng.integers(len(ops))]
    dims = sorted(
        int(d) for d in ctx.rng.choice(x.rank, int(ctx.rng.integers(1, x.rank + 1)), replace=False)
    )
    init = ctx.scalar(
        x.dtype,
        special_values(ctx.rng, x.dtype, (1,))[0]
        if ctx.rng.random() < 0.3
        else _identity(op, x.dtype),
    )
    return ctx.emit(opcode, [x, init], {"dimensions": dims, "to_apply": ctx.b.reducer(op, x.dtype)})


def _identity(op: str, dtype: str):
    np_dtype = Shape.array(dtype).numpy_dtype
    if op in ("add", "or"):
        return 0
    if op in ("multiply", "and"):
        return 1
    if dtype in FLOATS:
        return -np.inf if op == "maximum" else np.inf
    info = np.iinfo(np_dtype)
    return info.min if op == "maximum" else info.max


def _reduce_window(ctx, opcode):
    x = ctx.pick(("float", "int"), rank_at_least=1)
    op = ("add", "maximum", "minimum")[ctx.rng.integers(3)]
    window = {
        "size": [int(ctx.rng.integers(1, min(d, 3) + 1)) for d in x.dims],
        "stride": [int(ctx.rng.integers(1, 3)) for _ in x.dims],
        "pad": [(int(ctx.rng.integers(0, 2)), int(ctx.rng.integers(0, 2))) for _ in x.dims],
    }
    return ctx.emit(
        opcode,
        [x, ctx.scalar(x.dtype, _identity(op, x.dtype))],
        {"window": window, "to_apply": ctx.b.reducer(op, x.dtype)},
    )


def _dot(ctx, opcode):
    x = ctx.pick(("float", "int"), rank_at_least=1)
    if x.rank > 2:
        raise Skip()
    k = x.dims[-1]
    n = int(ctx.rng.integers(1, 5))
    y = ctx.constant(x.dtype, (k, n))
    return ctx.emit(
        opcode, [x, y], {"lhs_contracting_dims": [x.rank - 1], "rhs_contracting_dims": [0]}
    )


def _iota(ctx, opcode):
    dtype = (FLOATS + INTS)[ctx.rng.integers(len(FLOATS + INTS))]
    dims = [int(ctx.rng.integers(1, 6)) for _ in range(int(ctx.rng.integers(1, 3)))]
    return ctx.emit(
        opcode,
        [],
        {"iota_dimension": int(ctx.rng.integers(len(dims)))},
        shape=Shape.array(dtype, dims),
    )


def _starts(ctx, x):
    return [ctx.scalar("s32", int(ctx.rng.integers(-2, d + 3))) for d in x.dims]


def _dynamic_slice(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    sizes = [int(ctx.rng.integers(1, d + 1)) for d in x.dims]
    return ctx.emit(opcode, [x] + _starts(ctx, x), {"dynamic_slice_sizes": sizes})


def _dynamic_update_slice(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    update = ctx.constant(x.dtype, [int(ctx.rng.integers(1, d + 1)) for d in x.dims])
    return ctx.emit(opcode, [x, update] + _starts(ctx, x))


def _gather(ctx, opcode):
    x = ctx.pick(rank_at_least=1)
    count = int(ctx.rng.integers(1, 5))
    indices = ctx.b.constant(ctx.rng.integers(-2, x.dims[0] + 2, (count, 1)).astype(np.int32))
    sizes = [1] + list(x.dims[1:])
    return ctx.emit(
        opcode,
        [x, indices],
        {
            "offset_dims": list(range(1, x.rank)),
            "collapsed_slice_dims": [0],
            "start_index_map": [0],
            "index_vector_dim": 1,
            "slice_sizes": sizes,
        },
    )


def _scatter(ctx, opcode):
    x = ctx.pick(("float", "int"), rank_at_least=1)
    count = int(ctx.rng.integers(1, 5))
    indices = ctx.b.constant(ctx.rng.integers(-1, x.dims[0] + 1, (count, 1)).astype(np.int32))
    updates = ctx.constant(x.dtype, (count,) + tuple(x.dims[1:]))
    op = ("add", "maximum", "minimum")[ctx.rng.integers(3)]
    return ctx.emit(
        opcode,
        [x, indices, updates],
        {
            "update_window_dims": list(range(1, x.rank)),
            "inserted_window_dims": [0],
            "scatter_dims_to_operand_dims": [0],
            "index_vector_dim": 1,
            "to_apply": ctx.b.reducer(op, x.dtype),
        },
    )


def _sort(ctx, opcode):
    x = ctx.pick(("float", "int"), rank_at_least=1)
    direction = ("LT", "GT")[ctx.rng.integers(2)]
    total = _kind(x.dtype) == "float"

    def comparator(a, b):
        attrs = {"direction": direction}
        if total:
            attrs["type"] = "TOTALORDER"
        return a.builder.emit("compare", [a, b], attrs)

    scalar = Shape.array(x.dtype, ())
    comp = ctx.b.computation(comparator, [scalar, scalar], "compare")
    return ctx.emit(
        opcode,
        [x],
        {"dimensions": [int(ctx.rng.integers(x.rank))], "is_stable": True, "to_apply": comp},
    )


def _scan(ctx, opcode):
    """A scan along one dim: each step combines its slice with the carry by an op of the row
    table, outputs an elementwise chain of the result and carries the result on."""
    x = ctx.pick(("float", "int"), rank_at_least=1)
    axis = int(ctx.rng.integers(x.rank))
    step_dims = list(x.dims[:axis]) + list(x.dims[axis + 1 :])
    step = Shape.array(x.dtype, step_dims)
    ops = _row_ops(x.dtype, 2)
    op = ops[ctx.rng.integers(len(ops))]

    def body(item, carry):
        combined = item.builder.emit(op, [item, carry])
        return (_elementwise_chain(ctx.rng, combined), combined)

    comp = ctx.b.computation(body, [step, step], "scan_step")
    attrs = {"dimensions": [axis], "num_carries": 1, "to_apply": comp}
    if ctx.rng.random() < 0.5:
        attrs["is_reverse"] = True
    scan = ctx.emit(opcode, [x, ctx.constant(x.dtype, step_dims)], attrs)
    return ctx.b.emit("get-tuple-element", [scan], {"index": int(ctx.rng.integers(2))})


def _row_generated() -> dict:
    """Plain elementwise ops need no generator of their own: their rows say how many operands
    and which element kinds they take (complex values are not generated)."""
    made = {}
    for opcode, row in OPCODES.items():
        plain = row.kind == ELEMENTWISE and row.arity in (1, 2) and row.shape_optional
        if plain and not row.required_attrs and opcode not in NOT_GENERATED.keys() | _OWN_GENERATOR:
            kinds = tuple(sorted(row.kinds - {"complex"}))
            made[opcode] = _unary(kinds) if row.arity == 1 else _binary(kinds)
    return made


_OWN_GENERATOR = {"compare", "select", "clamp"}


def _row_ops(dtype: str, arity: int) -> list[str]:
    """The plain elementwise opcodes of `arity` operands that take `dtype`, for chains on
    values of any origin (so not the ill-conditioned ones)."""
    return sorted(
        op
        for op in _row_generated().keys() - ILL_CONDITIONED
        if OPCODES[op].arity == arity and _kinds_of(dtype) & OPCODES[op].kinds
    )


def _elementwise_chain(rng, value):
    """One or two elementwise ops on `value`, keeping its type, in its own computation (a
    callee, branch, loop body or map's to_apply)."""
    b = value.builder
    unary = _row_ops(value.dtype, 1)
    out = b.emit(unary[rng.integers(len(unary))], [value])
    if out.dtype != value.dtype:  # is-finite: dropped when the computation is built
        out = b.emit("not" if value.dtype == "pred" else "negate", [value])
    binary = [op for op in _row_ops(value.dtype, 2) if value.dtype != "pred"]
    if binary and rng.random() < 0.5:
        out = b.emit(binary[rng.integers(len(binary))], [out, value])
    return out


def _map(ctx, opcode):
    x = ctx.pick(("float", "int"))
    ops = _row_ops(x.dtype, 2)
    op = ops[ctx.rng.integers(len(ops))]
    return ctx.emit(
        opcode,
        [x, ctx.like(x)],
        {"dimensions": list(range(x.rank)), "to_apply": ctx.b.reducer(op, x.dtype)},
    )


def _call(ctx, opcode):
    x = ctx.pick()
    callee = ctx.b.computation(lambda p: _elementwise_chain(ctx.rng, p), [x.shape], "callee")
    return ctx.emit(opcode, [x], {"to_apply": callee})


def _conditional(ctx, opcode):
    x = ctx.pick()
    count = int(ctx.rng.integers(1, 4))
    branches = [
        ctx.b.computation(lambda p: _elementwise_chain(ctx.rng, p), [x.shape], "branch")
        for _ in range(count)
    ]
    if count == 2 and ctx.rng.random() < 0.5:
        selector = ctx.scalar("pred", bool(ctx.rng.integers(2)))
        attrs = {"true_computation": branches[0], "false_computation": branches[1]}
    else:  # an index out of range runs the last branch
        selector = ctx.scalar("s32", int(ctx.rng.integers(-1, count + 1)))
        attrs = {"branch_computations": branches}
    return ctx.emit(opcode, [selector] + [x] * count, attrs)


def _while(ctx, opcode):
    """A counted loop: (i, x) -> (i + 1, f(x)) while i < a bound of 0 to 3."""
    x = ctx.pick()
    state = Shape.tuple_of([Shape.array("s32", ()), x.shape])
    bound = int(ctx.rng.integers(0, 4))

    def condition(s):
        b = s.builder
        i = b.emit("get-tuple-element", [s], {"index": 0})
        limit = b.constant(np.int32(bound))
        return b.emit("compare", [i, limit], {"direction": "LT"})

    def body(s):
        b = s.builder
        i = b.emit("get-tuple-element", [s], {"index": 0})
        v = b.emit("get-tuple-element", [s], {"index": 1})
        return (b.emit("add", [i, b.constant(np.int32(1))]), _elementwise_chain(ctx.rng, v))

    loop = ctx.emit(
        opcode,
        [ctx.emit("tuple", [ctx.scalar("s32", 0), x])],
        {
            "condition": ctx.b.computation(condition, [state], "cond"),
            "body": ctx.b.computation(body, [state], "body"),
        },
    )
    return ctx.emit("get-tuple-element", [loop], {"index": 1})


GENERATORS = {
    **_row_generated(),
    "compare": _compare,
    "select": _select,
    "clamp": _clamp,
    "convert": _convert,
    "bitcast-convert": _bitcast_convert,
    "reduce-precision": _reduce_precision,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "transpose": _transpose,
    "slice": _slice,
    "concatenate": _concatenate,
    "pad": _pad,
    "reverse": _reverse,
    "reduce": _reduce,
    "reduce-window": _reduce_window,
    "dot": _dot,
    "iota": _iota,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
    "gather": _gather,
    "scatter": _scatter,
    "sort": _sort,
    "map": _map,
    "call": _call,
    "conditional": _conditional,
    "while": _while,
    "scan": _scan,
}


def random_module(seed: int, *, ops: int | None = None):
    """A small valid module built from `seed` (the same seed gives the same module)."""
    from ..frontend.builder import Builder
    from ..frontend.errors import FrontendError

    rng = np.random.default_rng(seed)
    builder = Builder("main")
    ctx = _Context(rng, builder)
    for i in range(int(rng.integers(1, 4))):
        dtype = DTYPES[rng.integers(len(DTYPES))]
        dims = [int(rng.integers(1, 6)) for _ in range(int(rng.integers(0, 4)))]
        ctx.values.append(builder.parameter(Shape.array(dtype, dims), f"p{i}"))
    names = sorted(GENERATORS)
    wanted = int(rng.integers(2, 7)) if ops is None else ops
    made, attempts = [], 0
    while len(made) < wanted and attempts < 20 * wanted:
        attempts += 1
        opcode = names[rng.integers(len(names))]
        try:
            value = GENERATORS[opcode](ctx, opcode)
        except (Skip, FrontendError, MinixlaError):
            continue
        ctx.values.append(value)
        made.append(value)
    roots = made[-2:] if made else ctx.values[-1:]
    return builder.module(list(roots), name=f"fuzz_{seed}")


def random_inputs(module, seed: int) -> list:
    rng = np.random.default_rng(seed + 1_000_003)
    return [special_values(rng, p.shape.dtype, p.shape.dims) for p in module.entry.parameters]


# Every path runs loops under this bound: a mutant whose loop never ends (a compare flipped)
# is refused by the reference, as any module it cannot finish, instead of stalling a sweep.
MAX_WHILE_ITERATIONS = 10_000


def check_module(module, args, *, backends=("cpu",)) -> list[str]:
    """Differences between the interpreter on `module` and the interpreter after the cpu
    pipeline and each backend in `backends`; [] when all agree."""
    import warnings

    from ..backends.compile import compile
    from ..passes.base import run_pipeline
    from ..passes.pipelines import cpu_pipeline
    from .compare import compare_values

    problems = []
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bound = {"max_while_iterations": MAX_WHILE_ITERATIONS}
        want = compile(module, backend="interpreter", **bound)(*args)
        runs = {}
        # once the reference has run the module, every other path must run it too: an error
        # there (a ShapeError from a pass, an op a backend lacks) is a difference, not a refusal
        try:
            optimized = module.clone()
            run_pipeline(cpu_pipeline(), optimized, verify=True)
            runs["interpreter after the cpu pipeline"] = compile(
                optimized, backend="interpreter", **bound
            )(*args)
        except MinixlaError as exc:
            problems.append(f"the cpu pipeline or its result refused: {_brief(exc)}")
        for backend in backends:
            try:
                runs[backend] = compile(module, backend=backend, **bound)(*args)
            except MinixlaError as exc:
                problems.append(f"{backend} refused: {_brief(exc)}")
    root = module.entry.root
    leaves = list(root.shape.tuple_shapes) if root.shape.is_tuple else [root.shape]
    sources = list(root.operands) if root.opcode == "tuple" else [root] * len(leaves)
    want_leaves = want if isinstance(want, tuple) else (want,)
    spreads = None
    for name, got in runs.items():
        got_leaves = got if isinstance(got, tuple) else (got,)
        for i, (g, w, shape) in enumerate(zip(got_leaves, want_leaves, leaves)):
            rtol, atol = _tolerance(shape, sources[i] if i < len(sources) else root)
            found = compare_values(g, w, rtol=rtol, atol=atol, what=f"{name} output {i}")
            if found and shape.dtype in FLOATS:
                if spreads is None:
                    spreads = _spreads(module, args, want_leaves)
                if _within_spread(g, w, spreads[i], rtol, atol):
                    continue
            problems += found
    return problems


# Opcodes whose results are rounded differently by libm, NumPy and minixla's math library
_MATH_OPS = frozenset(opcodes_with(EXPENSIVE))
_EPSILON = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52}
_NUDGE_ULPS = 4


def _spreads(module, args, want_leaves) -> list:
    """Per output, how far the reference moves when every math function's result moves a few
    ulps either way: what a backend whose functions are 1-2 ulp accurate may differ by at
    that element (a difference of nearly equal values, a remainder by a small one). NaN
    where the reference flips between NaN and a number."""
    import warnings

    from ..backends.compile import compile
    from ..reference.evaluator import handlers

    table = handlers()
    saved = {op: table[op] for op in _MATH_OPS if op in table}
    spreads = [np.zeros(np.shape(w)) for w in want_leaves]  # tuples of tuples are not generated
    try:
        for steps in (_NUDGE_ULPS, -_NUDGE_ULPS):
            table.update({op: _nudged(handler, steps) for op, handler in saved.items()})
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    moved = compile(
                        module, backend="interpreter", max_while_iterations=MAX_WHILE_ITERATIONS
                    )(*args)
                except MinixlaError:  # nudged, a loop ran past the bound: no spread from it
                    continue
            moved = moved if isinstance(moved, tuple) else (moved,)
            for k, (m, w) in enumerate(zip(moved, want_leaves)):
                m64, w64 = _as_f64(m), _as_f64(w)
                with np.errstate(invalid="ignore"):
                    gap = np.abs(m64 - w64)  # NaN where one side is NaN, or infinities meet
                gap = np.where((np.isnan(m64) & np.isnan(w64)) | (m64 == w64), 0.0, gap)
                spreads[k] = np.where(
                    np.isnan(gap) | np.isnan(spreads[k]), np.nan, np.maximum(spreads[k], gap)
                )
    finally:
        table.update(saved)
    return spreads


def _nudged(handler, steps: int):
    def run(ev, instr, ops):
        value = handler(ev, instr, ops)
        shape = instr.shape
        if not shape.is_array or shape.dtype not in _EPSILON:
            return value
        wide = _as_f64(value) * (1.0 + steps * _EPSILON[shape.dtype])
        return wide.astype(shape.numpy_dtype)

    return run


def _as_f64(value) -> np.ndarray:
    return np.asarray(value).astype(np.float64)


def _within_spread(got, want, spread, rtol: float, atol: float) -> bool:
    g, w = _as_f64(got), _as_f64(want)
    if g.shape != w.shape:
        return False
    uncertain = np.isnan(spread)
    both_nan = np.isnan(g) & np.isnan(w)
    with np.errstate(invalid="ignore"):
        close = np.abs(g - w) <= np.maximum(rtol * np.abs(w) + atol, 2 * np.nan_to_num(spread))
    return bool(np.all(uncertain | both_nan | (g == w) | close))


def _tolerance(shape, source) -> tuple[float, float]:
    """A float output is as accurate as the least precise float computed on its way: an f32
    atan converted to f64 is 1 f32 ulp off, not 1 f64 ulp."""
    if shape.dtype not in FLOATS:
        return 0.0, 0.0
    floats = {shape.dtype} | {t for t in _types_upstream(source) if t in FLOATS}
    rtol = max(RTOL[t] for t in floats)
    atol = max(float(np.finfo(Shape.array(t, ()).numpy_dtype).tiny) for t in floats)
    return rtol, atol


def _types_upstream(instr) -> set[str]:
    """Element types of `instr`, of everything it reads and of the computations they call."""
    types, stack, seen = set(), [instr], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        types.update(s.dtype for _, s in current.shape.leaves() if s.is_array)
        stack.extend(current.operands)
        for comp in current.called_computations:
            stack.extend(comp.instructions)
    return types


def _brief(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc)[:200]}"


# -- mutants -------------------------------------------------------------------------------------


# opcodes that can stand in for each other: same operand count and operand kinds
def _swappable_families() -> tuple[tuple[str, ...], ...]:
    families: dict[tuple, list[str]] = {}
    for opcode in sorted(_row_generated().keys() - ILL_CONDITIONED):
        row = OPCODES[opcode]
        families.setdefault((row.arity, row.kinds, row.infer), []).append(opcode)
    return tuple(tuple(ops) for ops in families.values() if len(ops) > 1) + (DIRECTIONS,)


SWAPPABLE = _swappable_families()


def mutate(text: str, seed: int, *, edits: int | None = None) -> str:
    """`text` with a few random edits: an opcode (or compare direction) swapped for one of its
    family, a number in an attribute or literal replaced by a corner case (0, -1, 1, a large
    value, inf, nan), or a type's width changed. The result may be invalid: a mutant must then
    be refused with a MinixlaError, never crash."""
    import re

    rng = np.random.default_rng(seed)
    lines = text.splitlines()
    numbers = (
        "0",
        "1",
        "-1",
        "2",
        "7",
        "65535",
        "2147483648",
        "-0",
        "inf",
        "-inf",
        "nan",
        "1e-45",
        "3.4e38",
    )
    for _ in range(int(rng.integers(1, 4)) if edits is None else edits):
        body = [i for i, line in enumerate(lines) if " = " in line]
        if not body:
            break
        i = body[rng.integers(len(body))]
        line = lines[i]
        choice = rng.choice(3, p=[0.55, 0.3, 0.15])
        if choice == 0:
            family = SWAPPABLE[rng.integers(len(SWAPPABLE))]
            found = [w for w in family if re.search(rf"[ =]{w}[(,]|direction={w}\b", line)]
            if found:
                old = found[0]
                new = family[rng.integers(len(family))]
                line = re.sub(rf"(?<=[ =]){old}(?=[(,\s]|$)", new, line, count=1)
        elif choice == 1:
            spots = [m.span() for m in re.finditer(r"(?<![\w.%])-?\d+(\.\d+)?(?![\w.])", line)]
            if spots:
                start, end = spots[rng.integers(len(spots))]
                line = line[:start] + numbers[rng.integers(len(numbers))] + line[end:]
        else:
            types = [
                m.span()
                for m in re.finditer(
                    r"\b(?:f16|bf16|f32|f64|s8|s32|s64|u8|u32)"
                    r"(?=\[)",
                    line,
                )
            ]
            if types:
                start, end = types[rng.integers(len(types))]
                line = line[:start] + DTYPES[rng.integers(len(DTYPES))] + line[end:]
        lines[i] = line
    return "\n".join(lines)


def run_case(text: str, seed: int, backends=("cpu",)) -> tuple[str, str]:
    """(outcome, detail) of one module text: 'rejected' (a MinixlaError while parsing,
    verifying, or compiling or running it on the interpreter), 'agree', 'mismatch' (different
    values, or another path refusing what the interpreter ran) or 'crash' (any other
    exception)."""
    from ..text import parse_hlo_module

    try:
        module = parse_hlo_module(text)
        args = random_inputs(module, seed)
        problems = check_module(module, args, backends=backends)
    except MinixlaError as exc:
        return "rejected", _brief(exc)
    except Exception as exc:  # noqa: BLE001 - the fuzzer reports what escaped
        return "crash", _brief(exc)
    return ("mismatch", "\n".join(problems)) if problems else ("agree", "")


def main(argv=None) -> int:
    """python -m minixla.testing.fuzz [--start S] [--count N] [--backends cpu] [--mutants]:
    one line per module that does not agree or is refused by a non-MinixlaError, then the
    counts. Random modules use seeds S..S+N-1; --mutants mutates each of them first."""
    import argparse
    import collections
    import sys
    import time

    parser = argparse.ArgumentParser(prog="python -m minixla.testing.fuzz")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--backends", default="", help="comma-separated, e.g. cpu")
    parser.add_argument("--mutants", action="store_true")
    args = parser.parse_args(argv)
    backends = tuple(b for b in args.backends.split(",") if b)
    counts: collections.Counter = collections.Counter()
    began = time.time()
    for seed in range(args.start, args.start + args.count):
        text = random_module(seed).to_text()
        if args.mutants:
            text = mutate(text, seed)
        outcome, detail = run_case(text, seed, backends)
        counts[outcome] += 1
        if outcome in ("crash", "mismatch"):
            print(f"seed {seed} {outcome}: {detail}\n{text}\n", flush=True)
        if (seed - args.start + 1) % 500 == 0:
            print(
                f"... {seed - args.start + 1} modules, {dict(counts)}", file=sys.stderr, flush=True
            )
    kind = "mutants" if args.mutants else "random modules"
    print(
        f"fuzz: {args.count} {kind} from seed {args.start}, backends: interpreter, "
        f"interpreter after the cpu pipeline{''.join(', ' + b for b in backends)}; "
        f"{dict(sorted(counts.items()))} in {time.time() - began:.0f} s"
    )
    return 1 if counts["crash"] or counts["mismatch"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
