"""Differential checks: run two modules on the interpreter with the same inputs and compare.

Inputs are seeded random values of each entry parameter's shape. Integer parameters that feed
gather/scatter indices or dynamic-slice starts get values inside the operand's bounds, so both
programs index the same elements; other integers are small, floats are standard normal and
preds are fair coins.
"""
from __future__ import annotations

import numpy as np

# Ops an index may pass through on its way to the op that uses it as an index.
_INDEX_PASSTHROUGH = ("convert", "reshape", "broadcast", "bitcast", "copy", "transpose",
                      "slice", "concatenate", "get-tuple-element")


def random_inputs(module, *, seed: int = 0) -> list:
    """One random argument per entry parameter (tuples nest), reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    return [_random_value(rng, p.shape, _index_bound(p)) for p in module.entry.parameters]


def _random_value(rng, shape, bound: int | None):
    if shape.is_tuple:
        return tuple(_random_value(rng, s, None) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    etype, dims = shape.element_type, shape.dims
    dtype = shape.numpy_dtype
    if etype.kind == "pred":
        return rng.integers(0, 2, dims).astype(bool)
    if etype.is_integer:
        info = np.iinfo(dtype)
        low, high = (0, bound) if bound is not None else (max(info.min, -8), min(info.max, 8))
        return rng.integers(low, high + 1, dims).astype(dtype)
    if etype.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    return rng.standard_normal(dims).astype(np.float32).astype(dtype)


def _index_bound(param) -> int | None:
    """The largest start index valid wherever `param` is used as an index, or None."""
    if param.shape.is_tuple or not param.shape.element_type.is_integer:
        return None
    bounds = []
    stack, seen = [param], set()
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        for user in instr.users:
            if user.opcode in _INDEX_PASSTHROUGH:
                stack.append(user)
            positions = [i for i, o in enumerate(user.operands) if o is instr]
            bounds.extend(b for i in positions for b in [_bound_as_index(user, i)]
                          if b is not None)
    return min(bounds) if bounds else None


def _bound_as_index(user, position: int) -> int | None:
    opcode, attrs = user.opcode, user.attrs
    vector = user.operand(position).shape.rank == 1  # legacy form: one vector of all starts
    if opcode == "dynamic-slice" and position >= 1:
        return _start_bound(user.operand(0).shape.dims, attrs["dynamic_slice_sizes"],
                            None if vector else position - 1)
    if opcode == "dynamic-update-slice" and position >= 2:
        return _start_bound(user.operand(0).shape.dims, user.operand(1).shape.dims,
                            None if vector else position - 2)
    if opcode == "gather" and position == 1:
        dims = user.operand(0).shape.dims
        sizes = attrs["slice_sizes"]
        return min((dims[d] - sizes[d] for d in attrs["start_index_map"]), default=None)
    if opcode == "scatter" and position == (user.operand_count - 1) // 2:
        dims = user.operand(0).shape.dims
        return min((dims[d] - 1 for d in attrs["scatter_dims_to_operand_dims"]), default=None)
    return None


def _start_bound(dims, sizes, axis: int | None) -> int | None:
    if axis is None:
        return max(0, min((d - s for d, s in zip(dims, sizes)), default=0))
    return max(0, dims[axis] - sizes[axis]) if axis < len(dims) else None


def flatten(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def compare_values(got, want, *, rtol: float = 1e-6, atol: float = 1e-6, what: str = "result",
                   signed_zeros: bool = False) -> list[str]:
    """Differences between two results (flattened tuples) as readable lines; [] when equal.

    NaN must meet NaN, infinities must match exactly, ints and preds compare exactly, other
    floats within `atol + rtol * |want|`. -0.0 equals +0.0 unless `signed_zeros`."""
    got_leaves, want_leaves = flatten(got), flatten(want)
    if len(got_leaves) != len(want_leaves):
        return [f"{what}: {len(got_leaves)} outputs vs {len(want_leaves)}"]
    problems = []
    for i, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        label = what if len(want_leaves) == 1 else f"{what}[{i}]"
        problems.extend(_compare_leaf(g, w, rtol, atol, label, signed_zeros))
    return problems


def _compare_leaf(got, want, rtol, atol, label, signed_zeros=False) -> list[str]:
    if got is None or want is None:
        return [] if got is want else [f"{label}: {got!r} vs {want!r}"]
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return [f"{label}: {got.dtype}{list(got.shape)} vs {want.dtype}{list(want.shape)}"]
    if got.dtype.kind in "biu" or got.dtype == bool:
        bad = got != want
    else:
        g, w = _as_float(got), _as_float(want)
        both_nan = np.isnan(g) & np.isnan(w)
        with np.errstate(invalid="ignore"):
            close = np.abs(g - w) <= atol + rtol * np.abs(w)
        exact = (g == w)  # infinities only compare equal to themselves
        bad = ~(both_nan | exact | (close & np.isfinite(g) & np.isfinite(w)))
        if signed_zeros:
            bad |= (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
        bad = bad.any(-1) if got.dtype.kind == "c" else bad
    if not bad.any():
        return []
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return [f"{label}: {int(bad.sum())} of {bad.size} elements differ; first at {list(index)}: "
            f"{got[index]!r} vs {want[index]!r}"]


def _as_float(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":  # compare real and imaginary parts side by side
        return np.stack([array.real, array.imag], -1).astype(np.float64)
    return array.astype(np.float64)


def run_interpreter(module, args):
    import minixla
    return minixla.compile(module, backend="interpreter")(*args)


def assert_same_results(before, after, *, seed: int = 0, args=None, rtol: float = 1e-6,
                        atol: float = 1e-6, signed_zeros: bool = False) -> None:
    """Asserts that two modules (or HLO texts) compute the same outputs on the interpreter
    (on `args`, or seeded random inputs); `signed_zeros` also tells -0.0 from +0.0."""
    import minixla
    before = minixla.parse_hlo_module(before) if isinstance(before, str) else before
    after = minixla.parse_hlo_module(after) if isinstance(after, str) else after
    args = random_inputs(before, seed=seed) if args is None else args
    want = run_interpreter(before, args)
    got = run_interpreter(after, args)
    problems = compare_values(got, want, rtol=rtol, atol=atol, what="after vs before",
                              signed_zeros=signed_zeros)
    if problems:
        raise AssertionError("results differ:\n  " + "\n  ".join(problems)
                             + f"\n--- after ---\n{after.to_text()}")

