"""Constructs from XLA's own test modules (../shared/xla-suite): late-binding async ops, ...

Each case is inline HLO text: parsed, printed, parsed again to a fixed point, verified, and
where the op runs, evaluated against NumPy. The modules of the suite that minixla rejects on
purpose are listed at the end with the reason.
"""

import re
from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.errors import HloParseError, MinixlaError, UnsupportedError, VerificationError


def round_trip(text: str, *, verify: bool = True):
    module = minixla.parse_hlo_module(text, verify=verify)
    printed = module.to_text()
    assert minixla.parse_hlo_module(printed, verify=verify).to_text() == printed
    return module, printed


def run(module, *args):
    return minixla.compile(module, backend="interpreter")(*args)


# -- late-binding async ops ---------------------------------------------------------------


def test_async_update_binds_the_operands_the_start_left_out():
    module, printed = round_trip("""HloModule m
async_computation {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  ROOT tuple = (f32[4], f32[4]) tuple(add(p0, p1), negate(p0))
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  start = ((), (), s32[]) async-start(), calls=async_computation
  update0 = ((f32[4]), (), s32[]) async-update(start, x)
  update1 = ((f32[4], f32[4]), (f32[4], f32[4]), s32[]) async-update(update0, y)
  ROOT done = (f32[4], f32[4]) async-done(update1)
}
""")
    assert "async-update(%update0, %y), calls=%async_computation" in printed
    x, y = np.arange(4, dtype=np.float32), np.full(4, 10, np.float32)
    total, negated = run(module, x, y)
    np.testing.assert_array_equal(total, x + y)
    np.testing.assert_array_equal(negated, -x)


def test_async_sugar_late_binding_adds_parameters_to_the_wrapped_computation():
    module, printed = round_trip("""HloModule m
ENTRY e {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  start = ((), (), s32[]) call-start(), to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT sub = f32[] subtract(a, b)
  }
  update = ((f32[], f32[]), f32[], s32[]) call-update(start, p0, p1)
  ROOT done = f32[] call-done(update)
}
""")
    wrapped = module.entry.instruction("start").attrs["calls"]
    assert [p.shape.dims for p in wrapped.parameters] == [(), ()]
    assert wrapped.root.opcode == "call" and wrapped.root.shape.dims == ()
    assert "%call.wrapped = f32[] call(%call.param.0, %call.param.1)" in printed
    assert float(run(module, np.float32(5), np.float32(3))) == 2.0


def test_async_output_bound_element_by_element():
    module, _ = round_trip("""HloModule m
async_computation {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  ROOT tuple = (f32[3], f32[3]) tuple(p0, multiply(p0, p1))
}
ENTRY e {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  start = ((f32[3], f32[3]), (), s32[]) async-start(p0, p1), calls=async_computation
  update1 = ((f32[3], f32[3]), (f32[3]), s32[]) async-update(start)
  update2 = ((f32[3], f32[3]), (f32[3], f32[3]), s32[]) async-update(update1)
  ROOT done = (f32[3], f32[3]) async-done(update2)
}
""")
    a, b = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    first, product = run(module, a, b)
    np.testing.assert_array_equal(first, a)
    np.testing.assert_array_equal(product, a * b)


_ASYNC_NEGATE = """HloModule m
async_computation {
  p0 = f32[3] parameter(0)
  ROOT tuple = (f32[3], f32[3]) tuple(p0, negate(p0))
}
ENTRY e {
  p0 = f32[3] parameter(0)
  %s
}
"""


@pytest.mark.parametrize(
    "body, message",
    [
        # the done comes before the one operand is bound
        (
            "start = ((), (f32[3], f32[3]), s32[]) async-start(), calls=async_computation\n"
            "ROOT done = (f32[3], f32[3]) async-done(start)",
            "takes 1 operands, 0 were passed",
        ),
        # an output element that is not a prefix of the result
        (
            "start = ((f32[3]), (), s32[]) async-start(p0), calls=async_computation\n"
            "update = ((f32[3]), (f32[100]), s32[]) async-update(start)\n"
            "ROOT done = (f32[3], f32[3]) async-done(update)",
            "outputs bound so far",
        ),
        # binding more operands than the computation takes
        (
            "start = ((f32[3]), (), s32[]) async-start(p0), calls=async_computation\n"
            "update = ((f32[3], f32[3]), (), s32[]) async-update(start, p0)\n"
            "ROOT done = (f32[3], f32[3]) async-done(update)",
            "takes ['f32[3]{0}'], given",
        ),
        # the operands listed in the shape are not the ones bound
        (
            "start = ((), (), s32[]) async-start(), calls=async_computation\n"
            "update = ((f32[9]), (), s32[]) async-update(start, p0)\n"
            "ROOT done = (f32[3], f32[3]) async-done(update)",
            "the shape lists ['f32[9]{0}']",
        ),
    ],
)
def test_async_binding_errors(body, message):
    module = minixla.parse_hlo_module(_ASYNC_NEGATE % body, verify=False)
    with pytest.raises(VerificationError, match=re.escape(message)):
        minixla.verify(module)


@pytest.mark.parametrize("param, ok", [("f32[32]", True), ("s32[32]", False)])
def test_async_start_aliasing_may_name_a_late_bound_operand(param, ok):
    text = f"""HloModule m
async_computation {{
  p0 = {param} parameter(0)
  ROOT cc = (f32[32]) custom-call(p0), custom_call_target="foo"
}}
ENTRY e {{
  p = {param} parameter(0)
  start = ((), (f32[32]), s32[]) async-start(), calls=async_computation,
      output_to_operand_aliasing={{{{1, 0}}: (0, {{}})}}
  update = (({param}), (f32[32]), s32[]) async-update(start, p)
  ROOT done = (f32[32]) async-done(update)
}}
"""
    if ok:
        round_trip(text)
    else:
        with pytest.raises(VerificationError, match=r"output \{1,0\} is f32\[32\]"):
            minixla.parse_hlo_module(text)


_ASYNC_PAIR = """HloModule m
async_computation {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  ROOT tuple = (f32[3], f32[3]) tuple(p0, negate(p1))
}
ENTRY e {
  p0 = f32[3] parameter(0)
  p1 = f32[3] parameter(1)
  start = ((f32[3], f32[3]), (), s32[]) async-start(p0, p1), calls=async_computation
  %s
}
"""


@pytest.mark.parametrize(
    "body",
    [
        # nothing bound before the done: it returns the whole result all the same
        "ROOT done = (f32[3], f32[3]) async-done(start)",
        # an update binds the first output, the done returns both
        "update = ((f32[3], f32[3]), (f32[3]), s32[]) async-update(start)\n"
        "ROOT done = (f32[3], f32[3]) async-done(update)",
    ],
)
def test_async_done_returns_the_result_whatever_the_updates_bound(body):
    module, _ = round_trip(_ASYNC_PAIR % body)
    a, b = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    first, second = run(module, a, b)
    np.testing.assert_array_equal(first, a)
    np.testing.assert_array_equal(second, -b)


@pytest.mark.parametrize(
    "body, message",
    [
        # an update cannot unbind what the one before bound
        (
            "update = ((f32[3], f32[3]), (f32[3]), s32[]) async-update(start)\n"
            "update2 = ((f32[3], f32[3]), (), s32[]) async-update(update)\n"
            "ROOT done = (f32[3], f32[3]) async-done(update2)",
            "outputs bound so far are ()",
        ),
        ("ROOT done = (f32[3]) async-done(start)", "every output must be bound"),
        ("ROOT done = f32[3] async-done(start)", "async-done returns %async_computation's result"),
    ],
)
def test_async_output_binding_errors(body, message):
    module = minixla.parse_hlo_module(_ASYNC_PAIR % body, verify=False)
    with pytest.raises(VerificationError, match=re.escape(message)):
        minixla.verify(module)


def test_async_aliasing_of_an_output_not_bound_yet_reads_the_wrapped_result():
    """{1, 0} names the first output of the computation although {1} of the start is ()."""
    round_trip("""HloModule m
wrapped {
  p0 = f32[16] parameter(0)
  p1 = f32[16] parameter(1)
  ROOT tuple = (f32[16]) tuple(add(p0, p1))
}
ENTRY e {
  a = f32[16] parameter(0)
  b = f32[16] parameter(1)
  start = ((f32[16]), (), s32[]) async-start(a), calls=wrapped,
      output_to_operand_aliasing={{1, 0}: (0, {})}
  update = ((f32[16], f32[16]), (f32[16])) async-update(start, b)
  ROOT done = (f32[16]) async-done(update)
}
""")


def test_async_start_aliasing_compares_layouts_with_the_wrapped_parameter():
    """The start's operand and the aliased output agree; the computation's parameter, which
    is the aliased buffer, has another layout."""
    text = """HloModule m
wrapped {
  p0 = f32[4,4]{0,1} parameter(0)
  ROOT cc = (f32[4,4]{0,1}) custom-call(p0), custom_call_target="foo"
}
ENTRY e {
  p = f32[4,4]{1,0} parameter(0)
  start = ((f32[4,4]{1,0}), (f32[4,4]{0,1}), s32[]) async-start(p), calls=wrapped,
      output_to_operand_aliasing={{0, 0}: (0, {})}
  ROOT done = (f32[4,4]{0,1}) async-done(start)
}
"""
    with pytest.raises(VerificationError, match=r"output \{0,0\} is f32\[4,4\]\{1,0\}"):
        minixla.parse_hlo_module(text)
    round_trip(text.replace("{{0, 0}: (0, {})}", "{{1, 0}: (0, {})}"))


def test_async_sugar_continues_a_chain_passed_through_a_tuple():
    """`op-done` of a get-tuple-element (a loop's state in XLA's test) wraps a fresh op read
    off the context shape."""
    module, printed = round_trip("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[2] parameter(1)
  i = s32[] parameter(2)
  start = ((f32[4], f32[2], s32[]), f32[4], s32[]) dynamic-update-slice-start(p0, p1, i)
  carried = (((f32[4], f32[2], s32[]), f32[4], s32[])) tuple(start)
  state = ((f32[4], f32[2], s32[]), f32[4], s32[]) get-tuple-element(carried), index=0
  ROOT done = f32[4] dynamic-update-slice-done(state)
}
""")
    assert printed.count("dynamic-update-slice(") == 2  # one wrapped op per end of the chain
    got = run(module, np.zeros(4, np.float32), np.ones(2, np.float32), np.int32(1))
    np.testing.assert_array_equal(got, [0, 1, 1, 0])


def test_async_sugar_done_of_a_plain_tuple_is_an_error():
    with pytest.raises(HloParseError, match="needs the async op it continues"):
        minixla.parse_hlo_module("""HloModule m
ENTRY e {
  p0 = f32[2] parameter(0)
  t = ((f32[2]), f32[2], u32[]) tuple(tuple(p0), p0, u32[] constant(0))
  ROOT done = f32[2] negate-done(t)
}
""")


def test_async_sugar_chain_without_a_done_still_prints_and_parses():
    module, printed = round_trip(
        """HloModule m
ENTRY e {
  p0 = f32[] parameter(0)
  ROOT start = ((), (), s32[]) custom-call-start(), custom_call_target="foo"
}
""",
        verify=False,
    )
    assert '%custom-call.wrapped = () custom-call(), custom_call_target="foo"' in printed
    with pytest.raises(VerificationError, match="has no async-done"):
        minixla.verify(module)


# -- scaled-dot ---------------------------------------------------------------------------


def test_scaled_dot_multiplies_each_block_by_its_scale():
    module, printed = round_trip("""HloModule m
ENTRY e {
  a = f32[2,6] parameter(0)
  b = f32[6,3] parameter(1)
  a_scale = f32[1,3] parameter(2)
  b_scale = f32[3,3] parameter(3)
  ROOT dot = f32[2,3] scaled-dot(a, b, a_scale, b_scale), lhs_contracting_dims={1},
      rhs_contracting_dims={0}
}
""")
    assert "scaled-dot(%a, %b, %a_scale, %b_scale), lhs_contracting_dims={1}" in printed
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 6), np.float32), rng.standard_normal((6, 3), np.float32)
    a_scale = np.array([[1, 2, 4]], np.float32)  # blocks of 2 rows x 2 columns of a
    b_scale = rng.standard_normal((3, 3), np.float32)  # blocks of 2 rows of b
    want = (a * np.repeat(np.repeat(a_scale, 2, 0), 2, 1)) @ (b * np.repeat(b_scale, 2, 0))
    np.testing.assert_allclose(run(module, a, b, a_scale, b_scale), want, rtol=1e-5)


def test_scaled_dot_of_mx_types_rounds_once_to_the_result_type():
    import ml_dtypes

    module, _ = round_trip("""HloModule m
ENTRY e {
  a = f8e4m3fn[2,64] parameter(0)
  b = f8e4m3fn[3,64] parameter(1)
  a_scale = f8e8m0fnu[2,2] parameter(2)
  b_scale = f8e8m0fnu[3,2] parameter(3)
  ROOT dot = bf16[2,3] scaled-dot(a, b, a_scale, b_scale), lhs_contracting_dims={1},
      rhs_contracting_dims={1}
}
""")
    rng = np.random.default_rng(1)
    a = rng.uniform(-2, 2, (2, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.uniform(-2, 2, (3, 64)).astype(ml_dtypes.float8_e4m3fn)
    a_scale = np.array([[0.5, 2], [4, 1]], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    b_scale = np.array([[1, 1], [2, 0.25], [8, 1]], np.float32).astype(ml_dtypes.float8_e8m0fnu)
    f32 = np.float32
    want = (a.astype(f32) * np.repeat(a_scale.astype(f32), 32, 1)) @ (
        b.astype(f32) * np.repeat(b_scale.astype(f32), 32, 1)
    ).T
    got = run(module, a, b, a_scale, b_scale)
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize(
    "scales", ["bf16[] parameter(2)", "bf16[2,2,2] parameter(2)", "bf16[2,6] parameter(2)"]
)
def test_scaled_dot_scale_must_tile_its_operand(scales):
    with pytest.raises(VerificationError, match="lhs_scale .* must have"):
        minixla.parse_hlo_module(f"""HloModule m
ENTRY e {{
  a = bf16[2,10] parameter(0)
  b = bf16[10,2] parameter(1)
  a_scale = {scales}
  b_scale = bf16[5,2] parameter(3)
  ROOT dot = f32[2,2] scaled-dot(a, b, a_scale, b_scale), lhs_contracting_dims={{1}},
      rhs_contracting_dims={{0}}
}}
""")


# -- op variants XLA's verifier accepts ---------------------------------------------------


def test_after_all_orders_after_any_operand():
    module, printed = round_trip("""HloModule m
ENTRY e {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  add = f32[] add(p0, f32[] constant(42))
  token0 = token[] after-all(add)
  later = f32[] add-dependency(p1, token0)
  ROOT product = f32[] multiply(add, negate(later))
}
""")
    assert "after-all(%add)" in printed
    assert float(run(module, np.float32(1), np.float32(2))) == (1 + 42) * -2


def test_collective_and_scatter_reducers_may_work_in_another_float_width():
    """XLA's VerifyReducerShape (scatter, select-and-scatter) compares a reducer's parameters
    ignoring float precision, and its verifier checks no all-reduce reducer; reduce and
    reduce-window need the operands' own types unless mixed precision is allowed (the
    default)."""
    import ml_dtypes

    bf16 = ml_dtypes.bfloat16
    module, _ = round_trip("""HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT sum = f32[] add(x, y)
}
ENTRY e {
  p = bf16[4,3] parameter(0)
  i = s32[1,1] parameter(1)
  u = bf16[1,3] parameter(2)
  ar = bf16[4,3] all-reduce(p), to_apply=add
  sc = bf16[4,3] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT t = (bf16[4,3], bf16[4,3]) tuple(ar, sc)
}
""")
    x = (np.arange(12).reshape(4, 3) / 4).astype(bf16)
    update = np.full((1, 3), 0.5, bf16)
    reduced, scattered = run(module, x, np.array([[2]], np.int32), update)
    np.testing.assert_array_equal(reduced, x)  # one device: all-reduce is the identity
    want = x.astype(np.float32)
    want[2] += 0.5
    np.testing.assert_array_equal(scattered, want.astype(bf16))
    reduced = module.to_text().replace(
        "all-reduce(%p), ", "reduce(%p, bf16[] constant(0)), dimensions={}, "
    )
    minixla.parse_hlo_module(reduced)  # mixed precision is allowed by default
    with pytest.raises(VerificationError, match="parameter 0 is f32"):
        minixla.verify(minixla.parse_hlo_module(reduced, verify=False), allow_mixed_precision=False)


def test_rng_with_a_third_operand_parses_but_does_not_verify():
    """XLA's parser takes any operands (its rng_expander tests pass a shape constant as a
    third), its verifier exactly the two bounds; minixla does the same."""
    module, printed = round_trip(
        """HloModule m
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  shape = u64[3] constant({2, 4, 8})
  ROOT r = f32[] rng(lo, hi, shape), distribution=rng_uniform
}
""",
        verify=False,
    )
    assert "rng(%lo, %hi, %shape)" in printed
    with pytest.raises(VerificationError, match="rng takes its two bounds, got 3"):
        minixla.verify(module)


def test_fft_length_may_differ_from_the_operand():
    """As XLA's shape inference and evaluator: FFT/IFFT return the operand's shape; the input
    is cut or zero-padded to fft_length and the result cut or padded back."""
    module, _ = round_trip("""HloModule m
ENTRY e {
  p = c64[8] parameter(0)
  longer = c64[8] fft(p), fft_type=FFT, fft_length={32}
  shorter = c64[8] fft(p), fft_type=IFFT, fft_length={4}
  none = c64[8] fft(p), fft_type=FFT, fft_length={0}
  ROOT t = (c64[8], c64[8], c64[8]) tuple(longer, shorter, none)
}
""")
    x = (np.arange(8) + 1j * np.arange(8)[::-1]).astype(np.complex64)
    longer, shorter, none = run(module, x)
    np.testing.assert_allclose(longer, np.fft.fft(x, 32)[:8], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        shorter, np.concatenate([np.fft.ifft(x[:4]), np.zeros(4)]), rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(none, np.zeros(8))


def test_nested_inline_computations_get_distinct_names():
    module, printed = round_trip("""HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT c = f32[4] call(a), to_apply={
    b = f32[4] parameter(0)
    ROOT d = f32[4] call(b), to_apply={
      x = f32[4] parameter(0)
      ROOT n = f32[4] negate(x)
    }
  }
}
""")
    assert sorted(c.name for c in module.computations) == [
        "anon_computation",
        "anon_computation.1",
        "e",
    ]
    np.testing.assert_array_equal(run(module, np.ones(4, np.float32)), -np.ones(4))


# -- mixed precision -----------------------------------------------------------------------

_MIXED = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[4] parameter(0)
  b = bf16[4] parameter(1)
  p = pred[4] parameter(2)
  %s
}
"""


@pytest.mark.parametrize(
    "body",
    [
        "ROOT m = bf16[4] multiply(a, b)",  # operands of two widths
        "ROOT m = multiply(a, b)",  # inferred: the wider, f32
        "ROOT s = f32[4] select(p, a, b)",
        "ROOT c = f32[4] copy(b)",  # a result of another width
        "ROOT t = f64[4] transpose(a), dimensions={0}",
        "ROOT q = bf16[6] pad(b, f32[] constant(0)), padding=1_1",
        "ROOT r = bf16[] reduce(b, bf16[] constant(0)), dimensions={0}, to_apply=add",
        "ROOT r = reduce-window(b, bf16[] constant(0)), window={size=2}, to_apply=add",
    ],
)
def test_mixed_precision_verifies_by_default_and_not_when_strict(body):
    module, printed = round_trip(_MIXED % body)
    if "multiply(a, b)" in body and "bf16" not in body:
        assert "f32[4]{0} multiply(" in printed
    with pytest.raises(VerificationError):
        minixla.verify(module, allow_mixed_precision=False)


def test_the_interpreter_computes_mixed_precision_in_the_widest_float():
    import ml_dtypes

    module = minixla.parse_hlo_module(_MIXED % "ROOT m = bf16[4] multiply(a, b)")
    a = np.array([1.5, 2, 3, 1e-3], np.float32)
    b = np.array([3, 0.5, 1, 7], ml_dtypes.bfloat16)
    got = run(module, a, b, np.ones(4, bool))
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got, (a * b.astype(np.float32)).astype(ml_dtypes.bfloat16))


@pytest.mark.parametrize(
    "body",
    [
        "ROOT t = (bf16[4]) tuple(a)",  # ops that pass data on
        "ROOT d = bf16[4] dynamic-update-slice(a, b, s32[] constant(0))",
    ],
)  # (a bitcast to bf16 verifies, as in XLA, and is refused at compile: see below)
def test_mixed_precision_leaves_ops_that_pass_data_on_exact(body):
    with pytest.raises(MinixlaError):
        minixla.parse_hlo_module(_MIXED % body)


def test_a_copy_between_memory_spaces_keeps_its_element_type():
    text = """HloModule m
ENTRY e {
  p = f32[8]{0:S(5)} parameter(0)
  ROOT c = bf16[8]{0} copy(p)
}
"""
    with pytest.raises(VerificationError, match="shape mismatch"):
        minixla.parse_hlo_module(text)
    round_trip(text.replace("{0:S(5)}", "{0}"))


def test_a_fusion_may_pass_operands_its_computation_leaves_unused():
    module, _ = round_trip("""HloModule m
fused {
  x = f32[3] parameter(0)
  ROOT n = f32[3] negate(x)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT f = f32[3] fusion(a, b), kind=kLoop, calls=fused
}
""")
    a = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(run(module, a, a), -a)
    with pytest.raises(VerificationError, match="takes"):
        minixla.parse_hlo_module(module.to_text().replace("fusion(%a, %b)", "fusion()"))


# -- smaller syntax -----------------------------------------------------------------------


def test_select_and_scatter_of_scalars_needs_no_window():
    module, _ = round_trip("""HloModule m
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
ENTRY e {
  operand = f32[] parameter(0)
  source = f32[] parameter(1)
  ROOT s = f32[] select-and-scatter(operand, source, f32[] constant(2)), select=ge, scatter=add
}
""")
    assert float(run(module, np.float32(42), np.float32(1))) == 3.0


def test_u64_constant_minus_one_is_the_largest_u64():
    module, printed = round_trip("""HloModule m
ENTRY e {
  ROOT c = u64[] constant(-1)
}
""")
    assert "constant(18446744073709551615)" in printed
    assert int(run(module)) == 2**64 - 1
    with pytest.raises(HloParseError, match="out of range for u32"):
        minixla.parse_hlo_module("HloModule m\nENTRY e {\n  ROOT c = u32[] constant(-1)\n}\n")


def test_declared_operand_shapes_may_differ_in_dynamic_dims():
    module, _ = round_trip("""HloModule m
ENTRY e {
  p = s32[3] parameter(0)
  q = s32[<=3] parameter(1)
  a = s32[3] add(s32[<=3] p, s32[3] q)
  ROOT b = s32[3] negate(s32[3] a)
}
""")
    with pytest.raises(HloParseError, match=r"declared s32\[4\]"):
        minixla.parse_hlo_module(module.to_text().replace("add(%p", "add(s32[4] %p"))


def test_module_attribute_strings_may_span_lines():
    module, printed = round_trip("""HloModule m, origin_recovery_table={
  {"c"} : {"c__ovp0"},
  "
    HloModule recovery
    ENTRY e { ROOT p = s32[] parameter(0) }
  "
}
ENTRY e {
  ROOT c = s32[] constant(1), origin={{"c__ovp0"}}
}
""")
    assert '"\n    HloModule recovery\n' in printed


def test_large_splat_constant_prints_as_its_one_value():
    module, printed = round_trip("""HloModule m
ENTRY e {
  c = f32[256,512] constant(0.65)
  small = f32[3] constant(0.65)
  ROOT t = (f32[256,512], f32[3]) tuple(c, small)
}
""")
    assert "f32[256,512]{1,0} constant(0.65)" in printed
    assert "f32[3]{0} constant({0.65, 0.65, 0.65})" in printed  # XLA's form below the limit
    np.testing.assert_array_equal(run(module)[0], np.full((256, 512), 0.65, np.float32))


SPARSE_CONV = """HloModule m
ENTRY e {
  p0 = f32[1,4] parameter(0)
  p1 = f32[1,1] parameter(1)
  p2 = s32[1,1] parameter(2)
  ROOT c = f32[1,1] convolution(p0, p1, p2), dim_labels=bf_io->bf,
      sparsity_config={rhs={sparsity=1x4 dimension=0 stride=1 idx=2}}
}
"""


def test_sparse_convolution_verifies_on_its_dense_operands_and_is_refused_at_compile():
    module, printed = round_trip(SPARSE_CONV)  # rhs f32[1,1] keeps 1 of 4: dense f32[4,1]
    assert "convolution(%p0, %p1, %p2)" in printed
    assert "sparsity_config={rhs={sparsity=1x4 dimension=0 stride=1 idx=2}}" in printed
    with pytest.raises(
        UnsupportedError,
        match=r"convolution %c: structured-sparse convolution "
        r"\(sparsity_config\) is not supported",
    ):
        minixla.compile(module, backend="interpreter")


@pytest.mark.parametrize(
    "edit, message",
    [
        (("1x4", "1x2"), r"input features \(4\) must be kernel input features \(2\)"),
        (("1x4", "4x4"), r"sparsity=4x4 must keep n of m elements with 1 <= n < m"),
        (("1x4", "2x3"), r"dim 0 stores 1 elements, not a whole number of 2-of-3 groups"),
        (("dimension=0", "dimension=2"), r"dimension=2 is not a dim of f32\[1,1\]"),
        (
            ("s32[1,1] parameter(2)", "f32[1,1] parameter(2)"),
            r"metadata \(operand 2\) must be an integer array of rank 2",
        ),
        (("idx=2}", "idx=2} rhs={sparsity=1x4 dimension=0 idx=3}"), r"rhs is given twice"),
        (
            ("convolution(p0, p1, p2)", "convolution(p0, p1)"),
            r"names 1 metadata operand\(s\), so the convolution takes 3 operands",
        ),
        ((" idx=2", ""), r"names 0 metadata operand\(s\), so the convolution takes 2 operands"),
        ((", dim_labels", ", dimension=0, dim_labels"), None),
        (("stride=1 ", "stride=1 block=2 "), r"needs sparsity=NxM and dimension="),
        (("dimension=0 ", ""), r"needs sparsity=NxM and dimension="),
    ],
)
def test_sparse_convolution_rules(edit, message):
    text = SPARSE_CONV.replace(*edit)
    if message is None:  # a misplaced field is an unknown attribute of convolution
        with pytest.raises(MinixlaError):
            minixla.parse_hlo_module(text)
        return
    with pytest.raises(VerificationError, match=message):
        minixla.parse_hlo_module(text)


def test_a_sparsity_config_without_metadata_describes_dense_operands():
    # XLA's parser tests: rhs f32[2,2] is used as it is (no idx: not compressed)
    module, _ = round_trip("""HloModule m
ENTRY e {
  input = f32[1,2] parameter(0)
  filter = f32[2,2] parameter(1)
  ROOT c = f32[1,2] convolution(input, filter), dim_labels=bf_io->bf,
    sparsity_config={lhs={sparsity=1x4 dimension=1 stride=1} rhs={sparsity=3x4 dimension=0}}
}
""")
    with pytest.raises(UnsupportedError, match="convolution %c: structured-sparse"):
        minixla.compile(module, backend="cpu")


def test_a_dense_convolution_takes_no_metadata_operands():
    with pytest.raises(VerificationError, match="metadata operands only with a sparsity_config"):
        minixla.parse_hlo_module(
            SPARSE_CONV.replace(
                ",\n      sparsity_config={rhs={sparsity=1x4 dimension=0 stride=1 idx=2}}", ""
            )
        )


def test_a_bitcast_that_changes_the_byte_size_verifies_and_is_refused_at_compile():
    # XLA's default verifier compares bitcast sizes only when layout-sensitive.
    module, _ = round_trip("""HloModule m
ENTRY e {
  p = f32[4,4] parameter(0)
  ROOT b = bf16[4,4] bitcast(p)
}
""")
    with pytest.raises(
        UnsupportedError,
        match=r"bitcast %b: reinterprets the 64-byte buffer of "
        r"f32\[4,4\]\{1,0\} as bf16\[4,4\]\{1,0\}, "
        r"32 bytes",
    ):
        minixla.compile(module, backend="interpreter")
    with pytest.raises(UnsupportedError, match="bitcast %b"):
        minixla.compile(module, backend="cpu")


def test_a_bitcast_into_a_tiled_layout_of_the_same_physical_size_runs():
    # f32[3,4]{1,0:T(2,4)} pads its 3 rows to 4: 16 slots, as many as f32[16] has.
    module, _ = round_trip("""HloModule m
ENTRY e {
  p = f32[16] parameter(0)
  ROOT b = f32[3,4]{1,0:T(2,4)} bitcast(p)
}
""")
    x = np.arange(16, dtype=np.float32)
    np.testing.assert_array_equal(run(module, x), x[:12].reshape(3, 4))


def test_constant_folding_leaves_a_bitcast_that_changes_the_byte_size():
    from minixla.testing import check_pass

    check_pass(
        "constant-folding",
        """HloModule m
ENTRY e {
  c = f32[4] constant({1, 2, 3, 4})
  ROOT b = f32[2] bitcast(c)
}
""",
        expected=None,
    )


def test_reduce_with_a_tuple_returning_reducer_returns_a_tuple():
    module, _ = round_trip("""HloModule m
fn {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT t = (f32[]) tuple(add(p0, p1))
}
ENTRY e {
  p = f32[4,3] parameter(0)
  c = f32[] constant(0)
  r = (f32[3]) reduce(p, c), dimensions={0}, to_apply=fn
  w = (f32[3,3]) reduce-window(p, c), window={size=2x1}, to_apply=fn
  ROOT t = ((f32[3]), (f32[3,3])) tuple(r, w)
}
""")
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (total,), (window,) = run(module, x)
    np.testing.assert_array_equal(total, x.sum(0))
    np.testing.assert_array_equal(window, x[:-1] + x[1:])
    with pytest.raises(VerificationError, match="shape mismatch"):  # the array form no longer
        minixla.parse_hlo_module(module.to_text().replace("(f32[3]{0}) reduce", "f32[3]{0} reduce"))


# -- the suite's modules minixla rejects on purpose ---------------------------------------
# ../shared/xla-suite/modules/ holds what XLA's tests expect to *parse*; many of those tests
# never verify (ParseAndReturnUnverifiedModule, a pass run on the text, a verifier option).
# minixla's verifier follows the HloVerifier XLA's test bases run (not layout-sensitive, mixed
# precision allowed), so these stay rejected: {reason: {file prefix: "numbers"}}.
PARSER_TEST = "hlo__parser__hlo_parser_test"
# reason -> (fragments, one of which the module's error must contain; {test: numbers})
REJECTED_ON_PURPOSE = {
    # -- async parser tests whose modules break XLA's async rules (the parser test checks the
    # text form only; HloVerifier rejects each of them too)
    "an async start without a done (XLA: every async-start must reach an async-done; for 371 "
    "384 386 the first error found is that the wrapped dot/call/fusion gets no operands)": (
        ("has no async-done", "dot does not take 0 operands", "given ()"),
        {PARSER_TEST: "307 371 384 386"},
    ),
    "an async-update whose bound operands (f32[9,9]) are not the start's (f32[2,3])": (
        ("the operands bound are",),
        {PARSER_TEST: "336"},
    ),
    "`-done`/`-update` given a plain tuple instead of the async op it continues": (
        ("needs the async op it continues",),
        {PARSER_TEST: "337 338"},
    ),
    "a wrapped dot without contracting dims is an outer product (f32[128,128,128,128]), not the "
    "declared f32[128,128] or u32[]": (
        ("inferred f32[128,128,128,128]", "inferred u32[4,4,4,4]"),
        {PARSER_TEST: "368 369 370"},
    ),
    "a wrapped computation that returns tuple(s32[]) declared (s32[1024])": (
        ("declared (s32[1024]), inferred (s32[])",),
        {PARSER_TEST: "381"},
    ),
    "a wrapped call or fusion given fewer or more operands than its computation takes": (
        ("called computation signature",),
        {PARSER_TEST: "385 387 389 390"},
    ),
    "an async op whose result shape is not what its wrapped computation returns (f32[3,2] for "
    "f32[2,3]; f32[100] for (f32[3], f32[3]))": (
        ("async result",),
        {PARSER_TEST: "391 392 393 394 397"},
    ),
    # -- XLA's rng verifier
    "rng with a third operand (an old form's shape operand): XLA's parser takes it, "
    "ShapeVerifier::HandleRng checks for exactly two": (
        ("rng takes its two bounds, got 3 operands",),
        {"hlo__transforms__tests__rng_expander": "000 001 002 003 004 005 006"},
    ),
    "a `TYPE` placeholder: a format string of the C++ test, not HLO": (
        ("unknown element type 'TYPE'",),
        {"service__while_loop_simplifier_test": "019 034"},
    ),
    # -- modules that contradict XLA's shape inference or signatures, in tests that parse only
    # or rewrite the module before verifying
    "entry_computation_layout gives the parameter another element type (f32 for f8e5m2fnuz, "
    "f32 for f16)": (
        ("entry_computation_layout mismatch",),
        {
            "hlo__builder__tests__math_next_after": "001",
            "hlo__translate__hlo_to_mhlo__tests__layouts_and_names": "001",
        },
    ),
    "a call or fusion passes arrays where its computation takes scalars (f32[4] for f32[], "
    "s32[1024] for s32[])": (
        ("called computation signature",),
        {
            "hlo__tools__tests__generate_hlo_test_checks_test_input": "004",
            "tools__print_indexing_test": "000",
        },
    ),
    "a copy declared f32[16384,126] of an f32[126,16384] (copy keeps dims)": (
        ("declared f32[16384,126], inferred f32[126,16384]",),
        {"hlo__transforms__simplifiers__algebraic_simplifier_test": "361"},
    ),
    "an all-reduce whose reducer takes f32[2,1] or s32[] parameters, not scalars of the "
    "operand's type": (
        ("parameter 0 is f32[2,1], expected f32[]", "parameter 0 is s32[], expected bf16[]"),
        {
            "hlo__transforms__simplifiers__ar_crs_combiner_test": "016",
            "service__collective_pipeliner_test": "069",
        },
    ),
    "a dot declared s32[8] whose dims give s32[8,8] (no contracting dims)": (
        ("declared s32[8], inferred s32[8,8]",),
        {"hlo__transforms__tests__operand_upcaster": "000"},
    ),
    "a convolution declared with other output dims than its window gives (bf16[8,0,5,5,32] for "
    "bf16[4,4,5,5,32]; 27x27 for 28x28)": (
        ("inferred bf16[8,0,5,5,32]", "inferred f16[128,128,27,27]"),
        {
            "hlo__transforms__tests__rewrite_bf16_conv_to_onednn": "001",
            "service__hlo_verifier_test": "023",
        },
    ),
    "a broadcast that maps a size-1 dim to a size-3 one, or maps no dims of a rank-2 operand": (
        ("maps to result dim 0 of size 3", "must map each of the operand's 2 dims"),
        {
            "hlo__translate__hlo_to_mhlo__tests__while": "000",
            "service__cpu__ir_emitter_test": "001",
        },
    ),
    "a gather whose batching dims pair dims of different sizes": (
        ("must pair dims of equal size",),
        {"service__batched_gather_scatter_normalizer_test": "002"},
    ),
    "a dynamic-update-slice whose start index is an f32[1] constant": (
        ("start indices must be integers",),
        {"service__buffer_assignment_test": "018"},
    ),
    "a dynamic-slice declared s32[] whose slice sizes give s32[1] (018 also gathers 1 row over "
    "groups of 4 into 8)": (
        ("declared s32[], inferred s32[1]", "all-gather over groups of 4"),
        {"service__collective_opt_utils_test": "016 017 018 022"},
    ),
    "a tuple or while declared with other element shapes than its operands have (token[] for "
    "bf16[8], f32[16,64] for f32[64,64], (u32[2], u32[], token[]) for (u32[2], token[]))": (
        ("shape mismatch: declared (",),
        {
            "service__latency_hiding_scheduler_test": "066",
            "service__legalize_scheduling_annotations_test": "038",
            "service__p2p_schedule_preparation_test": "003",
        },
    ),
    "an rng-bit-generator declared as a bare array, not (state, bits)": (
        ("result must be (u64[2], bits)",),
        {"service__sharding_propagation_test": "293"},
    ),
    "a while whose body returns a 3-tuple for a 2-tuple loop state": (
        ("returns (f32[2], f32[2], f32[2]), expected (f32[2], f32[2])",),
        {"service__while_loop_constant_sinking_test": "008"},
    ),
    "a concatenate of f32[3,1] and f32[2,1] along dim 1 (the test's input is meant to fail)": (
        ("cannot be joined",),
        {"tools__tests__data__invalid_concat": "000"},
    ),
    # -- collectives XLA's ShapeVerifier rejects, in tests of a translator or of pattern
    # helpers that load the module without verifying it
    "an all-reduce-start of one operand declared as a tuple, an all-gather-start and a "
    "collective-permute-start declared as arrays (XLA infers the operand itself for the "
    "first, (operands, results) and (input, output, context...) tuples for the others; "
    "hlo-translate imports without verifying)": (
        (
            "all-gather-start returns",
            "collective-permute-start returns",
            "all-reduce-start returns",
        ),
        {"hlo__translate__hlo_to_mhlo__tests__import_async": "001 003 010"},
    ),
    "an all-gather or reduce-scatter whose gathered dim is not the operand's times the group "
    "size (f32[16,10] gathered over groups of 2 into f32[16,10]), or whose groups differ in "
    "size (XLA's GetSubgroupSize and CheckReplicaGroups)": (
        ("shard count", "replica groups of one size"),
        {
            "service__collective_opt_utils_test": "000 001 002 027 028",
            "service__reduce_scatter_reassociate_test": "007",
        },
    ),
}
SUITE = Path(__file__).resolve().parents[1] / ".." / "shared" / "xla-suite" / "modules"


def _rejected_files():
    for reason, (fragments, groups) in REJECTED_ON_PURPOSE.items():
        for prefix, numbers in groups.items():
            for number in numbers.split():
                yield reason, fragments, SUITE / f"{prefix}.{number}.hlo"


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/xla-suite absent")
def test_the_modules_rejected_on_purpose_are_rejected():
    files = list(_rejected_files())
    assert len(files) == 62 and len({f for _, _, f in files}) == len(files)
    accepted, other_errors = [], []
    for reason, fragments, path in files:
        try:
            minixla.parse_hlo_module(path.read_text())
        except MinixlaError as exc:
            if not any(fragment in str(exc) for fragment in fragments):
                other_errors.append(f"{path.name}: {exc}")
            continue
        accepted.append(f"{path.name} ({reason[:40]}...)")
    assert accepted == [], "now accepted: move them out of REJECTED_ON_PURPOSE"
    assert other_errors == [], "rejected for another reason than the one listed"


@pytest.mark.skipif(not SUITE.is_dir(), reason="../shared/xla-suite absent")
@pytest.mark.parametrize(
    "name, error",
    [
        (f"{PARSER_TEST}.307", "has no async-done"),
        (f"{PARSER_TEST}.337", "needs the async op it continues as its first operand, got tuple"),
        (f"{PARSER_TEST}.368", "declared f32[128,128], inferred f32[128,128,128,128]"),
        ("hlo__transforms__tests__rng_expander.000", "rng takes its two bounds, got 3 operands"),
        ("service__while_loop_simplifier_test.019", "unknown element type 'TYPE'"),
        ("service__collective_opt_utils_test.016", "declared s32[], inferred s32[1]"),
        ("service__buffer_assignment_test.018", "start indices must be integers"),
        (
            "hlo__translate__hlo_to_mhlo__tests__import_async.010",
            "all-reduce-start returns f32[128,32]{1,0}, declared (f32[128,32]{1,0}, f32[128,32]",
        ),
        ("service__collective_opt_utils_test.001", "needs replica groups of one size"),
        ("service__collective_opt_utils_test.000", "all-gather over groups of 2 turns dim 0"),
    ],
)
def test_a_module_rejected_on_purpose_fails_for_the_reason_given(name, error):
    with pytest.raises(MinixlaError) as caught:
        minixla.parse_hlo_module((SUITE / f"{name}.hlo").read_text())
    assert error in str(caught.value)
