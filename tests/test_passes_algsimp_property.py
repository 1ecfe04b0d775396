"""Property test: on random expressions over special values (NaN, +-0.0, +-inf, INT_MIN...),
algsimp and constant folding keep every result bit-exact up to NaN payloads, signed zeros
included."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from minixla.testing import assert_same_results, run_pass

FLOAT_SPECIALS = ["nan", "-0.0", "0", "1", "-1", "2", "0.5", "inf", "-inf"]
INT_SPECIALS = ["0", "1", "-1", "2", "2147483647", "-2147483648"]
UINT_SPECIALS = ["0", "1", "2", "127", "128", "255"]
FLOAT_OPS = {
    "add": 2,
    "subtract": 2,
    "multiply": 2,
    "divide": 2,
    "maximum": 2,
    "minimum": 2,
    "power": 2,
    "negate": 1,
    "abs": 1,
    "floor": 1,
    "sign": 1,
    "select": 3,
}
INT_OPS = {
    "add": 2,
    "subtract": 2,
    "multiply": 2,
    "maximum": 2,
    "minimum": 2,
    "and": 2,
    "or": 2,
    "xor": 2,
    "negate": 1,
    "not": 1,
    "abs": 1,
    "shift-left": 2,
    "select": 3,
    "divide": 2,
}


def build(dtype, ops, specials, steps):
    """HLO text for a random DAG: two parameters, constants and `steps` operations."""
    lines = [f"  p0 = {dtype}[9] parameter(0)", f"  p1 = {dtype}[9] parameter(1)"]
    values = ["p0", "p1"]
    names = sorted(ops)
    for i, (op_pick, a, b, c, const_pick, use_const) in enumerate(steps):
        if use_const:
            value = specials[const_pick % len(specials)]
            lines.append(
                f"  k{i} = {dtype}[9] broadcast({dtype}[] constant({value})), dimensions={{}}"
            )
            values.append(f"k{i}")
        op = names[op_pick % len(names)]
        args = [values[j % len(values)] for j in (a, b, c)][: ops[op]]
        if op == "select":
            lines.append(f"  c{i} = pred[9] compare({args[0]}, {args[1]}), direction=LT")
            args[0] = f"c{i}"
        lines.append(f"  v{i} = {dtype}[9] {op}({', '.join(args)})")
        values.append(f"v{i}")
    lines.append(f"  ROOT out = ({dtype}[9], {dtype}[9]) tuple({values[-1]}, {values[-2]})")
    return "HloModule random\nENTRY main {\n" + "\n".join(lines) + "\n}\n"


STEP = st.tuples(*[st.integers(0, 50)] * 5, st.booleans())


def inputs(dtype):
    if dtype == "f32":
        base = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.0, -1.0, 2.5, -3.0], np.float32)
    elif dtype == "u8":
        base = np.array([0, 1, 2, 7, 8, 127, 128, 254, 255], np.uint8)
    else:
        base = np.array([0, 1, -1, 2, 7, -7, 2**31 - 1, -(2**31), 31], np.int32)
    return [base, np.roll(base, 3)]


def check(dtype, ops, specials, steps):
    text = build(dtype, ops, specials, steps)
    for passes in ("algsimp", "constant-folding"):
        module, _ = run_pass(passes, text)
        assert_same_results(text, module, args=inputs(dtype), rtol=0, atol=0, signed_zeros=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=8))
def test_float_expressions_keep_nan_and_signed_zeros(steps):
    check("f32", FLOAT_OPS, FLOAT_SPECIALS, steps)


@settings(max_examples=60, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=8))
def test_int_expressions_keep_wraparound(steps):
    check("s32", INT_OPS, INT_SPECIALS, steps)


@settings(max_examples=40, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=8))
def test_unsigned_expressions_keep_wraparound(steps):
    check("u8", INT_OPS, UINT_SPECIALS, steps)


def movement_chain(seed: int, steps: int = 6) -> str:
    """HLO text for a random chain of transposes, reverses, slices, reshapes and broadcasts."""
    rng = np.random.default_rng(seed)
    dims = [2, 3, 4]
    lines = ["  v0 = f32[2,3,4] parameter(0)"]

    def emit(i, new_dims, text):
        lines.append(f"  v{i} = f32[{','.join(map(str, new_dims))}] {text}")
        return new_dims

    for i in range(1, steps + 1):
        kind = rng.integers(0, 5)
        prev = f"v{i - 1}"
        if kind == 0:
            perm = [int(p) for p in rng.permutation(len(dims))]
            dims = emit(
                i,
                [dims[p] for p in perm],
                f"transpose({prev}), dimensions={{{','.join(map(str, perm))}}}",
            )
        elif kind == 1:
            chosen = [d for d in range(len(dims)) if rng.integers(0, 2)]
            dims = emit(i, dims, f"reverse({prev}), dimensions={{{','.join(map(str, chosen))}}}")
        elif kind == 2:
            spec, out = [], []
            for size in dims:
                start = int(rng.integers(0, size))
                stride = int(rng.integers(1, 3))
                limit = int(rng.integers(start + 1, size + 1))
                spec.append(f"[{start}:{limit}:{stride}]")
                out.append(-(-(limit - start) // stride))
            dims = emit(i, out, f"slice({prev}), slice={{{', '.join(spec)}}}")
        elif kind == 3:
            choice = rng.integers(0, 3)
            new = [int(np.prod(dims))] if choice == 0 else dims + [1] if choice == 1 else [1] + dims
            dims = emit(i, new, f"reshape({prev})")
        else:
            at = int(rng.integers(0, len(dims) + 1))
            new = dims[:at] + [2] + dims[at:]
            mapping = [d if d < at else d + 1 for d in range(len(dims))]
            dims = emit(i, new, f"broadcast({prev}), dimensions={{{','.join(map(str, mapping))}}}")
    lines[-1] = "  ROOT" + lines[-1][1:]
    return "HloModule movement\nENTRY main {\n" + "\n".join(lines) + "\n}\n"


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_movement_chains_keep_values(seed):
    text = movement_chain(seed)
    module, _ = run_pass("algsimp", text)
    args = [np.arange(24, dtype=np.float32).reshape(2, 3, 4)]
    assert_same_results(text, module, args=args, rtol=0, atol=0)
