"""cpu kernels split their loops at the boundaries of a concatenation or of a pad along one
dim (cpu/loops.py concat_split): each range reads one operand or the pad's fill, with no
select and no clamped index."""

from __future__ import annotations

import numpy as np
import pytest

import minixla
from minixla.backends.cpu.kernels import build_kernel
from minixla.testing.compare import compare_values, random_inputs


def fused_kernel_sources(text: str, **options) -> list[str]:
    from minixla.passes import run_pipeline
    from minixla.passes.pipelines import cpu_pipeline
    from minixla.text import parse_module

    module = parse_module(text)
    run_pipeline(cpu_pipeline(), module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return [build_kernel(f.attrs["calls"], **options).source for f in fusions]


def agrees_with_interpreter(text: str, *, rtol=1e-6, atol=1e-6, **options) -> None:
    module = minixla.parse_hlo_module(text)
    args = random_inputs(module, seed=3)
    got = minixla.compile(text, backend="cpu", **options)(*args)
    want = minixla.compile(text, backend="interpreter")(*args)
    assert compare_values(got, want, rtol=rtol, atol=atol) == []


GATES = """
HloModule gates
ENTRY main {
  a = f32[32,256] parameter(0)
  b = f32[32,256] parameter(1)
  c = f32[32,128] parameter(2)
  d = f32[32,256] parameter(3)
  s = f32[32,1024] parameter(4)
  na = f32[32,256] negate(a)
  bb = f32[32,256] multiply(b, b)
  cc = f32[32,128] add(c, c)
  e = f32[32,0] parameter(5)
  cat = f32[32,1024] concatenate(na, bb, e, cc, d, c), dimensions={1}
  ROOT out = f32[32,1024] multiply(cat, s)
}
"""


def test_an_elementwise_loop_over_a_concatenation_runs_one_loop_per_operand():
    (source,) = fused_kernel_sources(GATES)
    body = source.split("def kernel(")[1]
    for start, stop in ((0, 256), (256, 512), (512, 640), (640, 896), (896, 1024)):
        assert f"range({start}, {stop})" in body
    assert " if " not in body and "min(max(" not in body  # no select, no clamped index
    agrees_with_interpreter(GATES)


def test_a_reduction_over_another_dim_splits_at_the_concatenation_too():
    # the bias gradient of an LSTM step: a column sum of the four gates' gradients
    text = """
HloModule bias
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  a = f32[1,32,64] parameter(0)
  b = f32[1,32,64] parameter(1)
  t = f32[1,32,64] tanh(b)
  cat = f32[1,32,128] concatenate(a, t), dimensions={2}
  m = f32[1,32,128] multiply(cat, cat)
  zero = f32[] constant(0)
  ROOT r = f32[32,128] reduce(m, zero), dimensions={0}, to_apply=add
}
"""
    (source,) = fused_kernel_sources(text)
    body = source.split("def kernel(")[1]
    assert "range(0, 64)" in body and "range(64, 128)" in body
    agrees_with_interpreter(text, rtol=1e-6)


def test_concatenations_read_through_a_broadcast_and_several_at_once():
    text = """
HloModule two
ENTRY main {
  a = f32[48] parameter(0)
  b = f32[16] parameter(1)
  c = f32[32] parameter(2)
  d = f32[32] parameter(3)
  row = f32[64] concatenate(a, b), dimensions={0}
  rows = f32[8,64] broadcast(row), dimensions={1}
  other = f32[64] concatenate(c, d), dimensions={0}
  others = f32[8,64] broadcast(other), dimensions={1}
  ROOT out = f32[8,64] subtract(rows, others)
}
"""
    (source,) = fused_kernel_sources(text)
    body = source.split("def kernel(")[1]
    for start, stop in ((0, 32), (32, 48), (48, 64)):  # the union of both cuts
        assert f"range({start}, {stop})" in body
    agrees_with_interpreter(text)


@pytest.mark.parametrize("pieces", [3, 17])
def test_many_pieces_fall_back_to_the_select(pieces):
    params = "\n".join(f"  p{k} = f32[4,2] parameter({k})" for k in range(pieces))
    names = ", ".join(f"p{k}" for k in range(pieces))
    text = f"""
HloModule many
ENTRY main {{
{params}
  cat = f32[4,{2 * pieces}] concatenate({names}), dimensions={{1}}
  ROOT out = f32[4,{2 * pieces}] exponential(cat)
}}
"""
    sources = fused_kernel_sources(text)
    if sources:  # 3 pieces: one fused loop, split; 17: more ranges than a kernel is split into
        body = sources[0].split("def kernel(")[1]
        assert ("range(2, 4)" in body) == (pieces <= 16)
    agrees_with_interpreter(text)


def test_a_concatenation_also_read_at_other_coordinates_is_not_split():
    # reverse(cat) reads the first operand where the loop covers the second's range
    text = """
HloModule mirrored
ENTRY main {
  a = f32[8,16] parameter(0)
  b = f32[8,24] parameter(1)
  cat = f32[8,40] concatenate(a, b), dimensions={1}
  flipped = f32[8,40] reverse(cat), dimensions={1}
  ROOT out = f32[8,40] subtract(cat, flipped)
}
"""
    (source,) = fused_kernel_sources(text)
    assert "range(0, 16)" not in source.split("def kernel(")[1]
    agrees_with_interpreter(text)


STACKED = """
HloModule stacked
ENTRY main {
  a = f32[1,6,40] parameter(0)
  b = f32[1,6,40] parameter(1)
  c = f32[1,6,40] parameter(2)
  ab = f32[1,6,40] subtract(a, b)
  bc = f32[1,6,40] add(b, c)
  cc = f32[1,6,40] multiply(c, c)
  ROOT out = f32[3,6,40] concatenate(ab, bc, cc), dimensions={0}
}
"""


def test_threads_share_the_next_loop_when_the_ranges_cut_the_outermost():
    # Winograd's transforms stack 16 values along dim 0: split kernels still get one loop
    # nest per value, each range's second loop shared out among the parts
    (source,) = fused_kernel_sources(STACKED, parallel_threshold=1)
    body = source.split("def kernel(")[1]
    for start in range(3):
        assert f"for i0 in range({start}, {start + 1}):" in body
    assert body.count("n_i1 = 6") == 3 and "n_i0" not in body
    assert " if " not in body and "min(max(" not in body
    for threshold in (1, 2**40):  # split into parts, and one part
        agrees_with_interpreter(STACKED, rtol=0, atol=0, parallel_threshold=threshold)


def test_threads_share_the_first_loop_with_more_than_one_iteration():
    text = """
HloModule lead
ENTRY main {
  a = f32[1,6,40] parameter(0)
  b = f32[1,6,40] parameter(1)
  d = f32[1,6,40] subtract(a, b)
  ROOT out = f32[1,6,40] reverse(d), dimensions={2}
}
"""
    (source,) = fused_kernel_sources(text, parallel_threshold=1)
    # a leading dim of 1 would leave one part all the work
    assert "n_i1 = 6" in source and "n_i0" not in source
    agrees_with_interpreter(text, rtol=0, atol=0, parallel_threshold=1)


def test_a_column_reduction_shares_out_the_rows_it_keeps_even_a_single_one():
    # [1, 8192, 256] summed over dim 1: sharing the reduced dim among the parts (the
    # outermost loop with more than one iteration) let them add into one output row at once
    text = """
HloModule colred
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[1,8192,256] parameter(0)
  y = f32[1,8192,256] multiply(x, x)
  ROOT r = f32[1,256] reduce(y, f32[] constant(0)), dimensions={1}, to_apply=add
}
"""
    (source,) = fused_kernel_sources(text, parallel_threshold=1)
    assert source.count("n_i0 = 1") == 2 and "n_i1" not in source
    agrees_with_interpreter(text, rtol=1e-5, atol=1e-3, parallel_threshold=1)


# The weight gradient of an RNN whose gates share one concatenated matrix: each step's
# gradient is padded to the whole matrix and added to the running sum.
PADDED_SUM = """
HloModule padded_sum
ENTRY main {
  acc = f32[64,256] parameter(0)
  a = f32[64,128] parameter(1)
  b = f32[64,96] parameter(2)
  zero = f32[] constant(0)
  pa = f32[64,256] pad(a, zero), padding=0_0x0_128
  pb = f32[64,256] pad(b, zero), padding=0_0x160_0
  s = f32[64,256] add(acc, pa)
  ROOT out = f32[64,256] add(s, pb)
}
"""


def test_a_pad_along_one_dim_runs_one_loop_per_range():
    (source,) = fused_kernel_sources(PADDED_SUM)
    body = source.split("def kernel(")[1]
    for start, stop in ((0, 128), (128, 160), (160, 256)):
        assert f"range({start}, {stop})" in body
    assert " if " not in body and "min(max(" not in body  # no select, no clamped index
    agrees_with_interpreter(PADDED_SUM, rtol=0, atol=0)


@pytest.mark.parametrize(
    "padding, shape",
    [
        ("0_0x-3_5", "f32[6,12]"),  # cropped on one side, filled on the other
        ("2_1x0_0", "f32[9,10]"),  # along the outer dim
        ("0_0x-2_-4", "f32[6,4]"),  # cropped on both sides: one range, no fill
    ],
)
def test_cropping_and_outer_dim_pads_split_too(padding, shape):
    text = f"""
HloModule crop
ENTRY main {{
  a = f32[6,10] parameter(0)
  n = f32[6,10] negate(a)
  fill = f32[] constant(-0)
  p = {shape} pad(n, fill), padding={padding}
  ROOT out = {shape} multiply(p, p)
}}
"""
    (source,) = fused_kernel_sources(text)
    assert "min(max(" not in source.split("def kernel(")[1]
    agrees_with_interpreter(text, rtol=0, atol=0)


def test_pads_along_two_dims_or_with_interior_padding_keep_the_select():
    for padding in ("1_1x1_1", "0_0x0_0_1"):
        text = f"""
HloModule two
ENTRY main {{
  a = f32[6,10] parameter(0)
  n = f32[6,10] negate(a)
  p = f32[8,19] pad(n, f32[] constant(0)), padding={padding}
  ROOT out = f32[8,19] multiply(p, p)
}}
""".replace("f32[8,19]", "f32[8,12]" if padding == "1_1x1_1" else "f32[6,19]")
        (source,) = fused_kernel_sources(text)
        assert "min(max(" in source.split("def kernel(")[1]
        agrees_with_interpreter(text, rtol=0, atol=0)


def _random_padded_sum(rng) -> str:
    """acc plus up to three pads along one random dim of exponentials (negative padding,
    fills 0, -0.0 and 1.5), then squared or reduced over a random dim."""
    rank = int(rng.integers(1, 4))
    out = [int(rng.integers(1, 12)) for _ in range(rank)]
    dim = int(rng.integers(0, rank))
    shape = lambda dims: f"f32[{','.join(map(str, dims))}]"  # noqa: E731
    lines, last = [f"  acc = {shape(out)} parameter(0)"], "acc"
    for k in range(int(rng.integers(1, 4))):
        low, size = int(rng.integers(-3, out[dim])), int(rng.integers(1, out[dim] + 4))
        part = list(out)
        part[dim] = size
        padding = "x".join(
            f"{low}_{out[dim] - low - size}" if d == dim else "0_0" for d in range(rank)
        )
        fill = rng.choice(["0", "-0", "1.5"])
        lines += [
            f"  p{k} = {shape(part)} parameter({k + 1})",
            f"  e{k} = {shape(part)} exponential(p{k})",
            f"  q{k} = {shape(out)} pad(e{k}, f32[] constant({fill})), padding={padding}",
            f"  s{k} = {shape(out)} add({last}, q{k})",
        ]
        last = f"s{k}"
    if rank > 1 and rng.integers(0, 2):
        reduced = int(rng.integers(0, rank))
        kept = [n for d, n in enumerate(out) if d != reduced]
        lines.append(
            f"  ROOT r = {shape(kept)} reduce({last}, f32[] constant(0)), "
            f"dimensions={{{reduced}}}, to_apply=add"
        )
    else:
        lines.append(f"  ROOT r = {shape(out)} multiply({last}, {last})")
    computation = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
    computation += "  ROOT s = f32[] add(a, b)\n}\n"
    return "HloModule padded\n" + computation + "ENTRY main {\n" + "\n".join(lines) + "\n}\n"


def test_random_padded_sums_agree_with_the_interpreter():
    """A seeded sample (a sweep of 60 of the same kind found nothing more)."""
    rng = np.random.default_rng(16)
    for _ in range(6):
        agrees_with_interpreter(_random_padded_sum(rng), rtol=1e-5, atol=1e-5)
