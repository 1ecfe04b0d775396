"""Differential checks: run two modules on the interpreter with the same inputs and compare.

Inputs are seeded random values of each entry parameter's shape. Integer parameters that feed
gather/scatter indices or dynamic-slice starts get values inside the operand's bounds, so both
programs index the same elements; other integers are small, floats are standard normal and
preds are fair coins.
"""

from __future__ import annotations

import numpy as np

from ..runtime.inputs import random_arguments


def random_inputs(module, *, seed: int = 0) -> list:
    """One random argument per entry parameter (tuples nest), reproducible from `seed`."""
    return random_arguments(module, seed)


def flatten(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def compare_values(
    got,
    want,
    *,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    what: str = "result",
    signed_zeros: bool = False,
) -> list[str]:
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
        exact = g == w  # infinities only compare equal to themselves
        bad = ~(both_nan | exact | (close & np.isfinite(g) & np.isfinite(w)))
        if signed_zeros:
            bad |= (g == 0) & (w == 0) & (np.signbit(g) != np.signbit(w))
        bad = bad.any(-1) if got.dtype.kind == "c" else bad
    if not bad.any():
        return []
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    return [
        f"{label}: {int(bad.sum())} of {bad.size} elements differ; first at {list(index)}: "
        f"{got[index]!r} vs {want[index]!r}"
    ]


def _as_float(array: np.ndarray) -> np.ndarray:
    if array.dtype.kind == "c":  # compare real and imaginary parts side by side
        return np.stack([array.real, array.imag], -1).astype(np.float64)
    return array.astype(np.float64)


def run_interpreter(module, args):
    from ..backends.compile import compile

    return compile(module, backend="interpreter")(*args)


def assert_same_results(
    before,
    after,
    *,
    seed: int = 0,
    args=None,
    rtol: float = 1e-6,
    atol: float = 1e-6,
    signed_zeros: bool = False,
) -> None:
    """Asserts that two modules (or HLO texts) compute the same outputs on the interpreter
    (on `args`, or seeded random inputs); `signed_zeros` also tells -0.0 from +0.0."""
    from ..text import parse_hlo_module

    before = parse_hlo_module(before) if isinstance(before, str) else before
    after = parse_hlo_module(after) if isinstance(after, str) else after
    args = random_inputs(before, seed=seed) if args is None else args
    want = run_interpreter(before, args)
    got = run_interpreter(after, args)
    problems = compare_values(
        got, want, rtol=rtol, atol=atol, what="after vs before", signed_zeros=signed_zeros
    )
    if problems:
        raise AssertionError(
            "results differ:\n  " + "\n  ".join(problems) + f"\n--- after ---\n{after.to_text()}"
        )
