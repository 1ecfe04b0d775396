"""The pass pipelines backends declare, built from registered passes by name.

`cpu_pipeline()` follows XLA:CPU's order (xla-reference.md 3), reduced to minixla's passes:
turn scans into while loops (scan_expander.py), inline calls, give mixed-precision movement
ops and reductions converts (movers.py), compute 3x3 convolutions by Winograd's algorithm
(winograd.py) and small max/min pooling windows as maxima of strided slices (window_taps.py),
simplify to a fixed point, compute narrow floats in f32, canonicalize broadcasts and fold
transposes into dots, turn sums of dots into one dot over concatenated operands (dot_sums.py)
and batched dots of a vector into a multiply and a sum (dot_strength.py), assign layouts,
fuse (XLA fuses after layout assignment, so fusions see final layouts and transposes already
turned into bitcasts), merge row reductions into the loops that read them back, then add the
copies control flow needs and schedule, which is what `assign_buffers` expects.
"""

from __future__ import annotations

from .base import FixedPoint, Pipeline, get_pass

SIMPLIFICATION = (
    "algsimp",
    "dce",
    "cse",
    "constant-folding",
    "tuple-simplifier",
    "while-loop-simplifier",
    "conditional-simplifier",
    "reshape-mover",
    "dce",
)


def simplification() -> FixedPoint:
    return FixedPoint("simplification", [get_pass(name) for name in SIMPLIFICATION])


def cpu_pipeline(
    *, row_fusion: bool = True, winograd: bool = True, window_taps: bool = True
) -> Pipeline:
    """`row_fusion`: merge row reductions into the loops that read them back (row_fusion.py),
    for backends whose kernels run such fusions one row at a time. `winograd`: compute 3x3
    convolutions by Winograd's algorithm (winograd.py), for backends whose GEMMs and loops
    were measured to run it faster than their convolution. `window_taps`: max and min pooling
    windows as maxima of strided slices (window_taps.py), likewise measured."""
    return Pipeline(
        "cpu",
        [
            get_pass("scan-expander"),
            get_pass("call-inliner"),
            get_pass("movement-converts"),
            get_pass("reduction-converts"),
            *([get_pass("winograd-convolution")] if winograd else []),
            *([get_pass("reduce-window-taps")] if window_taps else []),
            simplification(),
            get_pass("float-normalization"),
            get_pass("broadcast-canonicalizer"),
            get_pass("transpose-folding"),
            get_pass("dot-sum-merger"),
            get_pass("dot-strength-reduction"),
            get_pass("layout-assignment"),
            get_pass("fusion"),
            *([get_pass("row-fusion")] if row_fusion else []),
            get_pass("copy-insertion"),
            get_pass("scheduling"),
        ],
    )
