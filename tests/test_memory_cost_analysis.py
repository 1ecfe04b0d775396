"""memory_analysis() against hand counts, and cost_analysis() flops against formulas."""

import numpy as np
import pytest

import minixla

BACKENDS = ["interpreter", "cpu"]

CHAIN = """
HloModule chain
ENTRY main {
  a = f32[16,8] parameter(0)
  b = f32[8,4] parameter(1)
  e = f32[16,8] exponential(a)
  n = f32[16,8] negate(e)
  d = f32[16,4] dot(n, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[16,4] tanh(d)
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_memory_analysis_of_a_chain_matches_a_hand_count(backend):
    stats = minixla.compile(CHAIN, backend=backend).memory_analysis()
    assert stats.argument_size_in_bytes == 16 * 8 * 4 + 8 * 4 * 4
    assert stats.output_size_in_bytes == 16 * 4 * 4
    assert stats.alias_size_in_bytes == 0
    # One f32[16,8] temporary at a time: negate (or the fusion of exp and negate) overwrites
    # the exponential in place, and the dot writes the output buffer that tanh updates.
    assert stats.temp_peak_in_bytes == 16 * 8 * 4
    assert stats.peak_memory_in_bytes == 640 + 512 + 256
    assert stats.temp_size_in_bytes >= stats.temp_peak_in_bytes
    assert (stats.generated_code_size_in_bytes > 0) == (backend == "cpu")


def test_two_live_temporaries_are_counted_together():
    text = """
    HloModule two
    ENTRY main {
      a = f32[32] parameter(0)
      x = f32[32] exponential(a)
      y = f32[32] sine(a)
      z = f32[32] multiply(x, y)
      ROOT r = f32[8] slice(z), slice={[0:8]}
    }"""
    stats = minixla.compile(text, backend="interpreter").memory_analysis()
    # x and y are live together (128 bytes each); z overwrites one of them in place.
    assert stats.temp_peak_in_bytes == 2 * 128
    assert stats.output_size_in_bytes == 32
    assert stats.as_dict()["argument_size_in_bytes"] == 128


def test_donated_parameter_counts_as_aliased():
    text = """
    HloModule donate, input_output_alias={ {}: (0, {}, may-alias) }
    ENTRY main {
      a = f32[256] parameter(0)
      ROOT n = f32[256] negate(a)
    }"""
    stats = minixla.compile(text, backend="cpu").memory_analysis()
    assert stats.alias_size_in_bytes == 1024
    assert stats.argument_size_in_bytes == 1024 and stats.output_size_in_bytes == 1024


def test_jit_executables_report_memory_and_cost():
    import minixla.numpy as mnp

    f = minixla.jit(lambda x, w: mnp.tanh(x @ w))
    exe = f.lower(np.ones((8, 16), np.float32), np.ones((16, 32), np.float32)).compile()
    cost = exe.cost_analysis()
    assert cost["flops"] == 2 * 8 * 32 * 16
    assert cost["transcendentals"] == 8 * 32
    assert exe.memory_analysis().output_size_in_bytes == 8 * 32 * 4


def cost_of(text: str, backend: str = "interpreter") -> dict:
    return minixla.compile(text, backend=backend).cost_analysis()


@pytest.mark.parametrize("m,k,n,batch", [(3, 5, 7, 1), (4, 16, 2, 3)])
def test_dot_flops_are_two_per_multiply_add(m, k, n, batch):
    text = f"""
    HloModule dot
    ENTRY main {{
      a = f32[{batch},{m},{k}] parameter(0)
      b = f32[{batch},{k},{n}] parameter(1)
      ROOT d = f32[{batch},{m},{n}] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}},
          lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
    }}"""
    cost = cost_of(text)
    assert cost["flops"] == 2 * batch * m * n * k
    assert cost["bytes accessed"] == 4 * batch * (m * k + k * n + m * n)
    assert cost["bytes accessed0{}"] == 4 * batch * m * k
    assert cost["bytes accessedout{}"] == 4 * batch * m * n


def test_convolution_flops_without_padding_follow_the_formula():
    n, c, h, w, o, kh, kw = 2, 3, 9, 7, 5, 3, 2
    oh, ow = h - kh + 1, w - kw + 1
    text = f"""
    HloModule conv
    ENTRY main {{
      x = f32[{n},{h},{w},{c}] parameter(0)
      k = f32[{kh},{kw},{c},{o}] parameter(1)
      ROOT y = f32[{n},{oh},{ow},{o}] convolution(x, k), window={{size={kh}x{kw}}},
          dim_labels=b01f_01io->b01f
    }}"""
    assert cost_of(text)["flops"] == 2 * n * oh * ow * o * c * kh * kw


def test_convolution_flops_skip_padding():
    # 1-D, size 3 window, padding 1 on each side over 4 inputs: 4 outputs; the first and last
    # output each have one kernel tap on padding, so 4*3 - 2 = 10 real taps per channel pair.
    text = """
    HloModule conv
    ENTRY main {
      x = f32[1,4,2] parameter(0)
      k = f32[3,2,6] parameter(1)
      ROOT y = f32[1,4,6] convolution(x, k), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f
    }"""
    assert cost_of(text)["flops"] == 2 * 1 * 6 * 2 * 10


def test_reduce_flops_are_one_reducer_per_folded_element():
    text = """
    HloModule red
    add {
      p = f32[] parameter(0)
      q = f32[] parameter(1)
      ROOT s = f32[] add(p, q)
    }
    ENTRY main {
      x = f32[6,10] parameter(0)
      zero = f32[] constant(0)
      ROOT r = f32[6] reduce(x, zero), dimensions={1}, to_apply=add
    }"""
    assert cost_of(text)["flops"] == 6 * 10 - 6


def test_elementwise_flops_and_transcendentals():
    text = """
    HloModule ew
    ENTRY main {
      x = f32[5,7] parameter(0)
      e = f32[5,7] exponential(x)
      l = f32[5,7] log(e)
      m = f32[5,7] multiply(l, x)
      ROOT a = f32[5,7] add(m, x)
    }"""
    for backend in BACKENDS:  # the cpu pipeline fuses all four: the counts do not change
        cost = cost_of(text, backend)
        assert (cost["flops"], cost["transcendentals"]) == (2 * 35, 2 * 35)
    # Fused, only the fusion's operand and result touch memory.
    assert cost_of(text, "cpu")["bytes accessed"] == 2 * 35 * 4


def test_depthwise_convolution_counts_one_input_feature_per_group():
    n, c, h, w, kh, kw = 1, 4, 6, 6, 3, 3
    text = f"""
    HloModule depthwise
    ENTRY main {{
      x = f32[{n},{h},{w},{c}] parameter(0)
      k = f32[{kh},{kw},1,{c}] parameter(1)
      ROOT y = f32[{n},{h - 2},{w - 2},{c}] convolution(x, k), window={{size={kh}x{kw}}},
          dim_labels=b01f_01io->b01f, feature_group_count={c}
    }}"""
    assert cost_of(text)["flops"] == 2 * n * (h - 2) * (w - 2) * c * kh * kw


def test_cpu_cost_of_a_transposed_dot_keeps_the_formula():
    # transpose-folding turns the transpose into contracting dims; the flops stay the same.
    text = """
    HloModule tdot
    ENTRY main {
      a = f32[16,8] parameter(0)
      b = f32[16,4] parameter(1)
      at = f32[8,16] transpose(a), dimensions={1,0}
      ROOT d = f32[8,4] dot(at, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
    }"""
    assert cost_of(text, "cpu")["flops"] == cost_of(text)["flops"] == 2 * 8 * 4 * 16
