"""reduce-window-taps: max/min pooling windows as maxima of strided slices (HLO in, CHECK lines
out, the interpreter's values before and after), the windows it leaves alone, and the cpu
backend's bits against the interpreter's reduce-window, NaN included."""

from __future__ import annotations

import numpy as np
import pytest

import minixla
from minixla.testing import check_pass

REDUCERS = """
mx {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
mn {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] minimum(b, a)
}
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def module(body: str) -> str:
    return "HloModule m\n" + REDUCERS + "ENTRY main {\n" + body.strip("\n") + "\n}\n"


def test_a_2x2_max_pool_becomes_four_strided_slices():
    text = module("""
  x = f32[2,8,8,3] parameter(0)
  ROOT r = f32[2,4,4,3] reduce-window(x, f32[] constant(-inf)), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=mx
""")
    check_pass(
        "reduce-window-taps",
        text,
        """
CHECK-DAG: slice(%x), slice={[0:2:1], [0:7:2], [0:7:2], [0:3:1]}
CHECK-DAG: slice(%x), slice={[0:2:1], [0:7:2], [1:8:2], [0:3:1]}
CHECK-DAG: slice(%x), slice={[0:2:1], [1:8:2], [0:7:2], [0:3:1]}
CHECK-DAG: slice(%x), slice={[0:2:1], [1:8:2], [1:8:2], [0:3:1]}
CHECK: ROOT {{.*}} maximum(
CHECK-NOT: reduce-window(
CHECK-NOT: broadcast
""",
    )


def test_an_initial_value_that_is_not_the_identity_joins_the_taps():
    # overlapping 3x3 windows of stride 1 with dilation 2, min, init 0.5: nine taps and the init
    text = module("""
  x = f32[1,9,9,2] parameter(0)
  ROOT r = f32[1,5,5,2] reduce-window(x, f32[] constant(0.5)), window={size=1x3x3x1 rhs_dilate=1x2x2x1}, to_apply=mn
""")
    out = check_pass(
        "reduce-window-taps",
        text,
        """
CHECK-DAG: slice(%x), slice={[0:1], [4:9], [4:9], [0:2]}
CHECK-DAG: broadcast(
CHECK: ROOT {{.*}} minimum(
""",
    )
    assert sum(i.opcode == "slice" for i in out.entry.instructions) == 9


def test_padding_reads_the_initial_value():
    # jax's "SAME" max pool: 3x3, stride 2, one row and column of padding at the high edges
    text = module("""
  x = f32[2,8,8,3] parameter(0)
  ROOT r = f32[2,4,4,3] reduce-window(x, f32[] constant(-inf)), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=mx
""")
    out = check_pass(
        "reduce-window-taps",
        text,
        """
CHECK: %[[P:.*]] = f32[2,9,9,3]{3,2,1,0} pad(%x, %{{.*}}), padding=0_0x0_1x0_1x0_0
CHECK-DAG: slice(%[[P]]), slice={[0:2:1], [2:9:2], [2:9:2], [0:3:1]}
CHECK: ROOT {{.*}} maximum(
""",
    )
    assert sum(i.opcode == "slice" for i in out.entry.instructions) == 9


@pytest.mark.parametrize(
    "body",
    [
        # negative padding
        "ROOT r = f32[2,3,3,3] reduce-window(x, f32[] constant(-inf)), "
        "window={size=1x2x2x1 stride=1x2x2x1 pad=0_0x0_-1x0_-1x0_0}, to_apply=mx",
        # a sum rounds in its order
        "ROOT r = f32[2,4,4,3] reduce-window(x, f32[] constant(0)), "
        "window={size=1x2x2x1 stride=1x2x2x1}, to_apply=sum",
        # 25 taps
        "ROOT r = f32[2,4,4,3] reduce-window(x, f32[] constant(-inf)), "
        "window={size=1x5x5x1 stride=1x1x1x1}, to_apply=mx",
        # base dilation
        "ROOT r = f32[2,14,14,3] reduce-window(x, f32[] constant(-inf)), "
        "window={size=1x2x2x1 lhs_dilate=1x2x2x1}, to_apply=mx",
    ],
    ids=["negative-padding", "sum", "25-taps", "base-dilation"],
)
def test_windows_left_alone(body):
    check_pass("reduce-window-taps", module("  x = f32[2,8,8,3] parameter(0)\n  " + body), None)


def test_cpu_gives_the_interpreters_bits_with_nan_and_signed_zeros():
    text = module("""
  x = f32[4,16,16,8] parameter(0)
  y = f32[4,16,16,8] maximum(x, f32[4,16,16,8] broadcast(f32[] constant(-0.5)), dimensions={})
  ROOT r = (f32[4,8,8,8], f32[4,8,8,8]) tuple(
    f32[4,8,8,8] reduce-window(y, f32[] constant(-inf)), window={size=1x2x2x1 stride=1x2x2x1}, to_apply=mx,
    f32[4,8,8,8] reduce-window(x, f32[] constant(0)), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_0x1_0x0_0}, to_apply=mn)
""")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 16, 16, 8)).astype(np.float32)
    x.flat[rng.choice(x.size, 40, replace=False)] = np.nan
    x.flat[rng.choice(x.size, 40, replace=False)] = -0.0
    exe = minixla.compile(text, backend="cpu")
    assert " reduce-window(" not in exe.module.to_text()
    got, want = exe(x), minixla.compile(text, backend="interpreter", passes=[])(x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
