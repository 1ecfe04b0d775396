"""Parsing and printing XLA's HLO text: every conformance module round-trips."""

import pytest

import minixla
from conformance_paths import hlo_files, requires_corpus

DEMO = """HloModule demo, input_output_alias={ {0}: (1, {}, may-alias) }, entry_computation_layout={(f32[8,16]{1,0}, f32[8]{0})->(f32[8]{0}, f32[])}

%fused_scale (p0: f32[8,16]) -> f32[8,16] {
  %p0 = f32[8,16]{1,0} parameter(0)
  %c = f32[] constant(0.5)
  %bc = f32[8,16]{1,0} broadcast(%c), dimensions={}
  ROOT %m = f32[8,16]{1,0} multiply(%p0, %bc)
}

%sum (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(%a, %b)
}

ENTRY %main (x: f32[8,16], acc: f32[8]) -> (f32[8], f32[]) {
  %acc = f32[8]{0} parameter(1)
  %x = f32[8,16]{1,0} parameter(0), sharding={replicated}
  %f = f32[8,16]{1,0} fusion(%x), kind=kLoop, calls=%fused_scale
  %zero = f32[] constant(0)
  %r = f32[8]{0} reduce(%f, %zero), dimensions={1}, to_apply=%sum
  %new = f32[8]{0} add(%acc, %r), metadata={op_type="add" op_name="update"}
  %tot = f32[] reduce(%new, %zero), dimensions={0}, to_apply=%sum
  ROOT %out = (f32[8]{0}, f32[]) tuple(%new, %tot)
}
"""


def test_xla_printer_output_is_a_fixed_point_byte_for_byte():
    # This text is XLA's own default printer output; minixla must print it identically.
    module = minixla.parse_hlo_module(DEMO, verify=False)
    assert module.to_text() == DEMO


@requires_corpus
@pytest.mark.parametrize("path", hlo_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_conformance_module_round_trips(path):
    module = minixla.parse_hlo_module(path.read_text(), verify=False)
    printed = module.to_text()
    again = minixla.parse_hlo_module(printed, verify=False)
    assert again.structurally_equal(module)
    assert again.to_text() == printed  # a fixed point after one round


def test_short_form_without_percent_and_signatures():
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply=add
}
"""
    module = minixla.parse_hlo_module(text, verify=False)
    assert [c.name for c in module.computations] == ["add", "main"]
    assert module.entry.name == "main"
    assert module.entry.root.attrs["to_apply"] is module.computation("add")
    assert "%r = f32[]" in module.to_text()
    assert "entry_computation_layout={(f32[4]{0})->f32[]}" in module.to_text()


def test_headerless_text_names_the_module_after_its_entry():
    module = minixla.parse_hlo_module("ENTRY e {\n  ROOT c = s32[] constant(3)\n}", verify=False)
    assert module.name == "module_e"


def test_inferred_result_shapes_and_operand_shapes_in_operands():
    text = """HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT n = negate(f32[2,3] p)
}
"""
    module = minixla.parse_hlo_module(text, verify=False)
    assert str(module.entry.root.shape) == "f32[2,3]{1,0}"


def test_nested_anonymous_operands_are_expanded():
    text = (
        "HloModule m\nENTRY e {\n  ROOT a = f32[2] add(f32[2] parameter(0), f32[2] "
        "negate(f32[2] parameter(1)))\n}\n"
    )
    module = minixla.parse_hlo_module(text, verify=False)
    opcodes = [i.opcode for i in module.entry.post_order()]
    assert opcodes == ["parameter", "parameter", "negate", "add"]


def test_unknown_attributes_are_kept_verbatim_when_lenient():
    text = (
        "HloModule m\nENTRY e {\n  ROOT p = f32[2]{0} parameter(0), "
        'my_flag={a=1, b=[2,3]}, backend_config={"k":"v, w"}\n}\n'
    )
    module = minixla.parse_hlo_module(text, verify=False, strict=False)
    assert module.unknown_attributes == ["3:36: parameter p: my_flag"]
    printed = module.to_text()
    assert "my_flag={a=1, b=[2,3]}" in printed
    assert 'backend_config={"k":"v, w"}' in printed


def test_control_predecessors_round_trip():
    text = """HloModule m
ENTRY e {
  a = f32[] parameter(0)
  b = f32[] negate(a)
  ROOT c = f32[] exponential(a), control-predecessors={b}
}
"""
    module = minixla.parse_hlo_module(text, verify=False)
    root = module.entry.root
    assert [p.name for p in root.control_predecessors] == ["b"]
    assert "control-predecessors={%b}" in module.to_text()
    assert minixla.parse_hlo_module(module.to_text(), verify=False).structurally_equal(module)


def test_duplicate_names_across_computations_are_made_unique():
    text = """HloModule m
f {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
ENTRY e {
  x = f32[] parameter(0)
  ROOT y = f32[] call(x), to_apply=f
}
"""
    module = minixla.parse_hlo_module(text, verify=False)
    names = [i.name for i in module.all_instructions()]
    assert len(names) == len(set(names)) == 4
    assert {"x.1", "y.1"} <= set(names)


def test_module_header_attributes():
    text = (
        "HloModule m, is_scheduled=true, input_output_alias={ {0}: (0, {}, must-alias), "
        "{1}: (1, {1}) }, buffer_donor={ (2, {}) }, replica_count=2\n"
        "ENTRY e {\n  a = f32[2] parameter(0)\n  b = (f32[2], f32[2]) parameter(1)\n"
        "  c = f32[2] parameter(2)\n  ROOT t = (f32[2], f32[2]) tuple(a, c)\n}\n"
    )
    module = minixla.parse_hlo_module(text, verify=False)
    assert module.is_scheduled
    assert [
        (e.output_index, e.param_number, e.param_index, e.kind) for e in module.input_output_alias
    ] == [((0,), 0, (), "must-alias"), ((1,), 1, (1,), "may-alias")]
    assert module.buffer_donors == [(2, ())]
    assert module.header_attrs == {"replica_count": "2"}
    printed = module.to_text()
    assert printed.startswith(
        "HloModule m, is_scheduled=true, input_output_alias={ {0}: "
        "(0, {}, must-alias), {1}: (1, {1}, may-alias) }, "
        "buffer_donor={ (2, {}) }, entry_computation_layout="
    )
    assert minixla.parse_hlo_module(printed, verify=False).to_text() == printed


def test_stack_frame_tables_are_kept():
    text = """HloModule m

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}

ENTRY e {
  ROOT p = f32[] parameter(0), metadata={op_name="x" stack_frame_id=1}
}
"""
    module = minixla.parse_hlo_module(text, verify=False)
    assert module.stack_frame_text.startswith('FileNames\n1 "a.py"')
    assert module.stack_frame_text.endswith("1 {file_location_id=1 parent_frame_id=1}")
    assert minixla.parse_hlo_module(module.to_text(), verify=False).to_text() == module.to_text()


def test_fingerprint_ignores_names_and_metadata_but_not_values():
    base = (
        "HloModule {m}\nENTRY e {{\n  {p} = f32[2] parameter(0)\n  ROOT r = f32[2] "
        "{op}({p}){meta}\n}}\n"
    )
    a = minixla.parse_hlo_module(base.format(m="a", p="x", op="negate", meta=""), verify=False)
    b = minixla.parse_hlo_module(
        base.format(m="b", p="y", op="negate", meta=', metadata={op_name="n"}'), verify=False
    )
    c = minixla.parse_hlo_module(base.format(m="a", p="x", op="abs", meta=""), verify=False)
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != c.fingerprint()


def test_inline_to_apply_bodies_become_computations():
    text = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(x, z), dimensions={0}, to_apply={
    a = f32[] parameter(0)
    b = f32[] parameter(1)
    ROOT s = f32[] add(a, b)
  }
}
"""
    module = minixla.parse_hlo_module(text)
    assert len(module.computations) == 2
    printed = module.to_text()
    assert "to_apply=%anon_computation" in printed
    assert minixla.parse_hlo_module(printed).structurally_equal(module)
    import numpy as np

    assert minixla.compile(module, backend="interpreter")(np.arange(4, dtype=np.float32)) == 6


def test_inferred_tuple_shapes_keep_operand_layouts():
    text = """HloModule m
ENTRY e {
  x = f32[2,3]{0,1} parameter(0)
  t = tuple(x)
  ROOT g = get-tuple-element(t), index=0
}
"""
    module = minixla.parse_hlo_module(text)
    assert str(module.entry.root.shape) == "f32[2,3]{0,1}"


def test_constants_keep_negative_zero_and_complex_scalars_round_trip():
    import numpy as np

    text = (
        "HloModule m\nENTRY e {\n  a = f32[] constant(-0)\n  b = c64[] constant((1, -2.5))\n"
        "  c = f32[2] constant({-0, 0})\n  ROOT t = (f32[], c64[], f32[2]) tuple(a, b, c)\n}\n"
    )
    module = minixla.parse_hlo_module(text)
    a, b, c = minixla.compile(module, backend="interpreter")()
    assert np.signbit(a) and b == np.complex64(1 - 2.5j)
    assert list(np.signbit(c)) == [True, False]
    again = minixla.parse_hlo_module(module.to_text())
    assert again.to_text() == module.to_text()
    assert "constant((1, -2.5))" in module.to_text()


@pytest.mark.parametrize("dtype", ["s4", "u4"])
def test_four_bit_integer_constants_print_and_run_on_cpu(dtype):
    text = f"HloModule m\nENTRY e {{\n  ROOT c = {dtype}[2] constant({{5, 7}})\n}}\n"
    module = minixla.parse_hlo_module(text)
    assert "constant({5, 7})" in module.to_text()
    out = minixla.compile(text, backend="cpu")()
    assert out.astype("int8").tolist() == [5, 7]
