"""HLO syntax that XLA's own tests write: async shorthand, buffer shapes, tuple-element
shorthand, `HloModule name:`, `%name=`, reduce-window of scalars without a window, splat
constants; printer fixes (parameter_replication once, s4/u4 constants, fast large constants)."""

import ml_dtypes
import numpy as np
import pytest

import minixla
from minixla.ir.shapes import Shape
from minixla.ir.literal_text import format_float, format_literal


def round_trip(text: str):
    module = minixla.parse_hlo_module(text)
    printed = module.to_text()
    assert minixla.parse_hlo_module(printed).to_text() == printed
    return module, printed


def test_async_shorthand_wraps_the_op_in_a_computation():
    module, printed = round_trip("""HloModule m
ENTRY e {
  p0 = f32[10] parameter(0)
  start = ((f32[10]), f32[10], s32[]) negate-start(p0), metadata={op_name="n"}
  update = ((f32[10]), f32[10], s32[]) negate-update(start)
  ROOT done = f32[10] negate-done(update)
}
""")
    start, update, done = (module.entry.instruction(n) for n in ("start", "update", "done"))
    assert (start.opcode, update.opcode, done.opcode) == (
        "async-start",
        "async-update",
        "async-done",
    )
    wrapped = start.attrs["calls"]
    assert wrapped.root.opcode == "negate" and update.attrs["calls"] is wrapped
    assert "metadata" in start.attrs  # generic attributes stay on the async op
    assert "calls=%negate.wrapped" in printed


def test_async_shorthand_gives_op_attributes_to_the_wrapped_op():
    module, _ = round_trip("""HloModule m
ENTRY e {
  p0 = f32[10] parameter(0)
  start = ((f32[10]), f32[20], s32[]) custom-call-start(p0), custom_call_target="foo",
      async_execution_thread="parallel_thread"
  ROOT done = f32[20] custom-call-done(start)
}
""")
    start = module.entry.instruction("start")
    assert start.attrs["async_execution_thread"] == "parallel_thread"
    assert start.attrs["calls"].root.attrs["custom_call_target"] == "foo"


def test_buffer_shapes():
    module, printed = round_trip("""HloModule m
ENTRY e {
  p = f32[4,16] parameter(0)
  ROOT c = b(f32[4,16]) custom-call(p), custom_call_target="Pin",
    output_to_operand_aliasing={{}: (0, {})}
}
""")
    shape = module.entry.root.shape
    assert shape.is_buffer and shape.dims == (4, 16) and str(shape) == "b(f32[4,16]{1,0})"
    assert shape != shape.__class__.array("f32", (4, 16)).with_default_layout()
    assert "b(f32[4,16]{1,0}) custom-call" in printed


def test_tuple_element_shorthand_and_name_with_equals_and_module_name_colon():
    module, _ = round_trip("""HloModule test:
ENTRY test {
  p0 = (f32[2], (f32[3], f32[4])) parameter(0)
  %twice=f32[3] add(f32[3] %p0#1#0, f32[3] %p0#1#0)
  ROOT r = f32[3] negate(twice)
}
""")
    assert module.name == "test"
    x = (np.zeros(2, np.float32), (np.arange(3, dtype=np.float32), np.zeros(4, np.float32)))
    np.testing.assert_array_equal(minixla.compile(module)(x), [0, -2, -4])
    gtes = [i for i in module.entry.instructions if i.opcode == "get-tuple-element"]
    assert len(gtes) == 2  # %p0#1 and %p0#1#0, each made once


def test_tuple_element_shorthand_out_of_range():
    with pytest.raises(minixla.HloParseError, match="has no element 2"):
        minixla.parse_hlo_module(
            "HloModule m\nENTRY e {\n  p = (f32[], f32[]) parameter(0)\n"
            "  ROOT n = f32[] negate(p#2)\n}\n"
        )


def test_scalar_reduce_window_without_window_and_splat_constant():
    module, _ = round_trip("""HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  c = f32[] constant(2)
  ones = f32[2,2] constant(1)
  r = f32[] reduce-window(c, c), to_apply=add
  ROOT t = (f32[], f32[2,2]) tuple(r, ones)
}
""")
    r, ones = minixla.compile(module)()
    assert r == 4.0
    np.testing.assert_array_equal(ones, np.ones((2, 2)))


def test_parameter_replication_is_printed_once():
    _, printed = round_trip(
        "HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), parameter_replication={true}\n}\n"
    )
    assert printed.count("parameter_replication") == 1


@pytest.mark.parametrize("name, dtype", [("s4", ml_dtypes.int4), ("u4", ml_dtypes.uint4)])
def test_sub_byte_integer_constants_print(name, dtype):
    text = (
        f"HloModule m\nENTRY e {{\n  ROOT c = {name}[2,2] constant({{ {{1, 7}}, {{0, 2}} }})\n}}\n"
    )
    module, printed = round_trip(text)
    assert "constant({ { 1, 7 }, { 0, 2 } })" in printed
    assert module.entry.root.literal.dtype == np.dtype(dtype)


@pytest.mark.parametrize(
    "dtype, name",
    [(np.float32, "f32"), (np.float64, "f64"), (ml_dtypes.bfloat16, "bf16"), (np.float16, "f16")],
)
def test_large_constants_print_as_element_by_element_printing_would(dtype, name):
    rng = np.random.default_rng(1)
    values = (rng.standard_normal(300) * 10.0 ** rng.integers(-4, 4, 300)).astype(dtype)
    values[:6] = [np.nan, -np.inf, -0.0, 0.1, 1.5, 100]
    array = values.reshape(3, 100)
    expected = [format_float(v, np.dtype(dtype)) for v in values]
    want = (
        "{ "
        + ", ".join("{ " + ", ".join(expected[i * 100 : (i + 1) * 100]) + " }" for i in range(3))
        + " }"
    )
    assert format_literal(array, Shape.array(name, (3, 100))) == want
