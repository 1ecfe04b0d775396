"""The mutable IR: users, rewiring, removal, post-order, cloning, equality, shapes and layouts."""

import numpy as np
import pytest

import minixla
from minixla.ir import HloComputation, HloInstruction, HloModule, Layout, Shape

TEXT = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  a = f32[4] add(n, p)
  ROOT m = f32[4] multiply(a, a)
}
"""


def module():
    return minixla.parse_hlo_module(TEXT, verify=False)


def test_users_track_operands():
    comp = module().entry
    p, n, a, m = (comp.instruction(x) for x in "pnam")
    assert p.users == [n, a]
    assert a.users == [m, m]  # one entry per use
    assert m.operands == (a, a)


def test_replace_all_uses_and_remove():
    comp = module().entry
    p, n, a, m = (comp.instruction(x) for x in "pnam")
    a.replace_all_uses_with(p)
    assert m.operands == (p, p)
    assert a.users == []
    comp.remove_instruction(a)
    assert a not in comp.instructions
    assert n.users == []  # removing `a` dropped its use of `n`
    assert p.users == [n, m, m]
    with pytest.raises(ValueError, match="root"):
        comp.remove_instruction(m)


def test_replacing_the_root_moves_the_root():
    comp = module().entry
    m = comp.root
    new = comp.add_instruction(HloInstruction("exponential", m.shape, [m.operand(0)], name="e"))
    comp.replace_instruction(m, new)
    assert comp.root is new
    assert m.parent is None


def test_post_order_puts_operands_first_and_keeps_dead_code():
    comp = module().entry
    comp.add_instruction(
        HloInstruction("abs", comp.root.shape, [comp.instruction("p")], name="dead")
    )
    order = [i.name for i in comp.post_order()]
    assert order.index("p") < order.index("n") < order.index("a") < order.index("m")
    assert "dead" in order
    assert comp.remove_dead()
    assert "dead" not in [i.name for i in comp.instructions]


def test_clone_is_deep_and_structurally_equal():
    original = module()
    copy = original.clone()
    assert copy.structurally_equal(original)
    copy.entry.instruction("n").opcode = "abs"
    assert not copy.structurally_equal(original)
    assert original.entry.instruction("n").opcode == "negate"


def test_build_a_module_by_hand():
    comp = HloComputation("main")
    x = comp.add_instruction(HloInstruction.parameter(0, Shape.array("f32", (2,))))
    c = comp.add_instruction(HloInstruction.constant(np.array([1.5, -0.0], np.float32)))
    comp.add_instruction(HloInstruction("add", x.shape, [x, c], name="sum"))
    built = HloModule("hand")
    built.add_computation(comp, entry=True)
    text = built.to_text()
    assert "%constant = f32[2] constant({1.5, -0})" in text
    reparsed = minixla.parse_hlo_module(text)
    np.testing.assert_array_equal(
        minixla.compile(reparsed, backend="interpreter")(np.array([1, 2], np.float32)), [2.5, 2.0]
    )


@pytest.mark.parametrize(
    "text",
    [
        "f32[2,<=8,?]",
        "(s32[], (f32[4]{0}, pred[]))",
        "bf16[16,256]{1,0:T(8,128)(2,1)}",
        "s4[1024]{0:E(4)}",
        "f32[2,3]{1,0:S(1)}",
        "u32[]{:S(2)}",
        "f32[8,8]{0,1:T(2,*)L(4)}",
        "token[]",
        "c64[3]{0}",
        "f8e4m3fn[2]{0}",
    ],
)
def test_shapes_print_back_as_parsed(text):
    assert str(minixla.parse_shape(text)) == text


def test_shape_queries():
    shape = minixla.parse_shape("(f32[2,3]{0,1}, (s8[4]{0}))")
    assert shape.is_tuple
    assert [(idx, str(s)) for idx, s in shape.leaves()] == [
        ((0,), "f32[2,3]{0,1}"),
        ((1, 0), "s8[4]{0}"),
    ]
    assert shape.byte_size() == 2 * 3 * 4 + 4
    assert shape.subshape((0,)).minor_to_major() == (0, 1)
    assert shape.tuple_shapes[0].compatible(Shape.array("f32", (2, 3)))
    assert Layout((1, 0)) == minixla.parse_shape("f32[2,2]{1,0}").layout


def test_tile_layout_fields():
    layout = minixla.parse_shape("bf16[16,256]{1,0:T(8,128)(2,1)E(16)S(3)}").layout
    assert layout.tiles == ((8, 128), (2, 1))
    assert layout.element_size_bits == 16
    assert layout.memory_space == 3


def test_element_types_map_to_numpy():
    import ml_dtypes
    from minixla.ir import ELEMENT_TYPES, from_numpy, numpy_dtype

    assert numpy_dtype("bf16") == np.dtype(ml_dtypes.bfloat16)
    assert numpy_dtype("pred") == np.dtype(bool)
    assert numpy_dtype("s4") == np.dtype(ml_dtypes.int4)
    assert from_numpy(np.float16).name == "f16"
    assert ELEMENT_TYPES["c128"].bits == 128
    for name in (
        "pred",
        "s8",
        "s16",
        "s32",
        "s64",
        "u8",
        "u16",
        "u32",
        "u64",
        "f16",
        "bf16",
        "f32",
        "f64",
        "f8e4m3fn",
        "f8e5m2",
        "c64",
        "c128",
        "s4",
        "u4",
    ):
        assert numpy_dtype(name) is not None, name


def test_name_uniquer_counts_on_and_hands_back_released_names():
    from minixla.ir.module import NameUniquer

    names = NameUniquer()
    assert [names("p") for _ in range(4)] == ["p", "p.1", "p.2", "p.3"]
    names.release("p.1")
    assert names("p") == "p.1"
    assert names("p.2") == "p.4"
