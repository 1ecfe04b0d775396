"""Fused parameters read only through slices of one contiguous block are passed as that block
(cpu/kernels.py parameter_windows): the kernel reads from offset 0, so the steps of an unrolled
loop, which slice step t of the same input, share one kernel; values equal the interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

from minixla.backends.cpu.kernels import parameter_windows
from minixla.text import parse_module

from test_cpu_native_loop import _check, _native, _python_loop


def unrolled(steps: int) -> str:
    """h_t = tanh(x[t] + h_{t-1} . w) for t < steps: a fusion per step, slicing x."""
    lines = ["  h0 = f32[4,32] parameter(1)", "  w = f32[32,32] parameter(2)"]
    for t in range(steps):
        lines += [
            f"  s{t} = f32[1,4,32] slice(x), slice={{[{t}:{t + 1}], [0:4], [0:32]}}",
            f"  r{t} = f32[4,32] reshape(s{t})",
            f"  m{t} = f32[4,32] dot(h{t}, w), lhs_contracting_dims={{1}}, "
            "rhs_contracting_dims={0}",
            f"  h{t + 1} = f32[4,32] tanh(f32[4,32] add(r{t}, m{t}))",
        ]
    return (
        "HloModule unrolled\nENTRY main {\n  x = f32[%d,4,32] parameter(0)\n" % steps
        + "\n".join(lines)
        + f"\n  ROOT out = f32[4,32] copy(h{steps})\n}}\n"
    )


def test_the_steps_of_an_unrolled_loop_share_one_kernel():
    steps = 6
    rng = np.random.default_rng(0)
    x, h0, w = (
        rng.standard_normal(s).astype(np.float32) for s in ((steps, 4, 32), (4, 32), (32, 32))
    )
    exe = _check(unrolled(steps), x, h0, w * np.float32(0.1))  # a contraction: rounding stays small
    step_kernels = [s for s in exe.program.kernels.values() if "tanh" in s.source]
    # one kernel, or two where buffer assignment lets a step write over the dot it reads
    assert len(step_kernels) <= 2, exe.program.source
    assert all(len(spec.windows) == 1 for spec in step_kernels)  # x, sliced at each step
    lines = exe.program.source.splitlines()
    blocks = {line.split(".reshape(-1)")[1] for line in lines if ".reshape(-1)[" in line}
    assert len(blocks) >= steps, exe.program.source  # each step passes its own block


def fused_parameter(param: str, slices: list[str], extra: str = "") -> dict:
    """The windows of parameter p of a computation reading it through `slices`."""
    body = "\n".join(f"  s{k} = {s}" for k, s in enumerate(slices))
    reads = ", ".join(f"s{k}" for k in range(len(slices)))
    text = (
        f"HloModule m\nENTRY fused {{\n  p = {param} parameter(0)\n{body}\n{extra}\n"
        f"  ROOT t = tuple({reads}{', e' if extra else ''})\n}}\n"
    )
    return parameter_windows(parse_module(text).entry)


@pytest.mark.parametrize(
    "param,slices,window",
    [
        (
            "f32[6,4,32]",
            ["f32[1,4,32] slice(p), slice={[2:3], [0:4], [0:32]}"],
            ((2, 3), (0, 4), (0, 32)),
        ),
        (
            "f32[8,16]",
            [
                "f32[2,16] slice(p), slice={[1:3], [0:16]}",
                "f32[1,16] slice(p), slice={[4:5], [0:16]}",
            ],
            ((1, 5), (0, 16)),
        ),
        (
            "f32[6,4,32]",
            ["f32[1,1,32] slice(p), slice={[3:4], [2:3], [0:32]}"],
            ((3, 4), (2, 3), (0, 32)),
        ),
        ("f32[12]", ["f32[3] slice(p), slice={[2:9:3]}"], ((2, 9),)),
        # a column block is strided: passed whole
        ("f32[4,32]", ["f32[4,8] slice(p), slice={[0:4], [8:16]}"], None),
        ("f32[6,4,32]", ["f32[2,1,32] slice(p), slice={[0:2], [1:2], [0:32]}"], None),
        # everything: nothing to cut
        ("f32[4,8]", ["f32[4,8] slice(p), slice={[0:4], [0:8]}"], None),
    ],
    ids=[
        "leading-index",
        "row-range",
        "row-of-row",
        "strided",
        "columns",
        "rows-of-columns",
        "whole",
    ],
)
def test_windows_are_contiguous_blocks(param, slices, window):
    found = fused_parameter(param, slices)
    assert found == ({} if window is None else {0: window})


def test_a_parameter_read_whole_too_has_no_window():
    found = fused_parameter(
        "f32[8,16]", ["f32[2,16] slice(p), slice={[1:3], [0:16]}"], "  e = f32[8,16] negate(p)"
    )
    assert found == {}


WINDOWED_LOOP = """
HloModule windowed_loop
cond {
  s = (s32[], f32[64], f32[8,64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  s = (s32[], f32[64], f32[8,64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[64] get-tuple-element(s), index=1
  table = f32[8,64] get-tuple-element(s), index=2
  row = f32[1,64] slice(table), slice={[5:6], [0:64]}
  u = f32[64] tanh(f32[64] add(v, f32[64] reshape(row)))
  ROOT t = (s32[], f32[64], f32[8,64]) tuple(add(i, s32[] constant(1)), u, table)
}
ENTRY main {
  v = f32[64] parameter(0)
  table = f32[8,64] parameter(1)
  l = (s32[], f32[64], f32[8,64]) while((s32[], f32[64], f32[8,64]) tuple(s32[] constant(0), v, table)), condition=cond, body=body
  ROOT r = f32[64] get-tuple-element(l), index=1
}
"""


def test_a_native_loop_passes_the_block_of_a_flat_buffer():
    rng = np.random.default_rng(1)
    v, table = rng.standard_normal(64).astype(np.float32), rng.standard_normal((8, 64))
    exe = _check(WINDOWED_LOOP, v, table.astype(np.float32))
    assert _native(exe) and not _python_loop(exe), exe.program.source
    assert any(spec.windows for spec in exe.program.kernels.values())
