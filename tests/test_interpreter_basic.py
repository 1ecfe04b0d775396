"""Interpreter: data movement, control flow, collectives and async ops, with hand-worked values."""

import numpy as np
import pytest

import minixla


def run(body: str, *args, comps: str = ""):
    text = f"HloModule t\n{comps}\nENTRY e {{\n{body}\n}}\n"
    return minixla.compile(text, backend="interpreter")(*args)


F = np.float32


def test_broadcast_with_unsorted_mapping_and_scalar():
    x = np.array([[1, 2, 3], [4, 5, 6]], F)  # [2,3] mapped to result dims {2,0}
    out = run("p = f32[2,3] parameter(0)\nROOT b = f32[3,4,2] broadcast(p), dimensions={2,0}", x)
    assert out.shape == (3, 4, 2)
    assert out[1, 3, 0] == x[0, 1] and out[2, 0, 1] == x[1, 2]
    scalar = run("c = f32[] constant(7)\nROOT b = f32[2] broadcast(c), dimensions={}")
    np.testing.assert_array_equal(scalar, [7, 7])


def test_reshape_transpose_reverse():
    x = np.arange(6, dtype=F)
    out = run(
        "p = f32[6] parameter(0)\nr = f32[2,3] reshape(p)\n"
        "t = f32[3,2] transpose(r), dimensions={1,0}\n"
        "ROOT v = f32[3,2] reverse(t), dimensions={0}",
        x,
    )
    np.testing.assert_array_equal(out, [[2, 5], [1, 4], [0, 3]])


def test_strided_slice():
    x = np.arange(10, dtype=F)
    out = run("p = f32[10] parameter(0)\nROOT s = f32[3] slice(p), slice={[1:8:3]}", x)
    np.testing.assert_array_equal(out, [1, 4, 7])


def test_dynamic_slice_clamps_starts():
    x = np.arange(5, dtype=F)
    body = (
        "p = f32[5] parameter(0)\ni = s32[] parameter(1)\n"
        "ROOT d = f32[2] dynamic-slice(p, i), dynamic_slice_sizes={2}"
    )
    np.testing.assert_array_equal(run(body, x, np.int32(1)), [1, 2])
    np.testing.assert_array_equal(run(body, x, np.int32(4)), [3, 4])  # clamped to 5 - 2
    np.testing.assert_array_equal(run(body, x, np.int32(-3)), [0, 1])  # clamped to 0


def test_dynamic_update_slice_clamps_and_does_not_mutate_input():
    x = np.zeros((3, 3), F)
    u = np.ones((2, 2), F)
    body = (
        "p = f32[3,3] parameter(0)\nu = f32[2,2] parameter(1)\ni = s32[] parameter(2)\n"
        "ROOT d = f32[3,3] dynamic-update-slice(p, u, i, i)"
    )
    out = run(body, x, u, np.int32(7))
    np.testing.assert_array_equal(out, [[0, 0, 0], [0, 1, 1], [0, 1, 1]])
    assert not x.any()


def test_pad_with_negative_edges_and_interior():
    x = np.array([1, 2, 3], F)
    # interior 1: [1,0,2,0,3]; low -1 drops the first element, high 2 appends two pads.
    out = run(
        "p = f32[3] parameter(0)\nz = f32[] constant(9)\nROOT q = f32[6] pad(p, z), padding=-1_2_1",
        x,
    )
    np.testing.assert_array_equal(out, [9, 2, 9, 3, 9, 9])


def test_concatenate_iota_and_empty_arrays():
    out = run(
        "a = f32[0,2] parameter(0)\nb = f32[1,2] parameter(1)\n"
        "ROOT c = f32[1,2] concatenate(a, b), dimensions={0}",
        np.zeros((0, 2), F),
        np.array([[1, 2]], F),
    )
    np.testing.assert_array_equal(out, [[1, 2]])
    iota = run("ROOT i = s32[2,3] iota(), iota_dimension=1")
    np.testing.assert_array_equal(iota, [[0, 1, 2], [0, 1, 2]])


def test_bitcast_follows_physical_layouts():
    # f32[2,3]{0,1} stores columns: physical order is x[0,0], x[1,0], x[0,1], ...
    x = np.arange(6, dtype=F).reshape(2, 3)
    out = run("p = f32[2,3]{0,1} parameter(0)\nROOT b = f32[6]{0} bitcast(p)", x)
    np.testing.assert_array_equal(out, [0, 3, 1, 4, 2, 5])


def test_while_loop_and_tuples():
    comps = """cond {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[] get-tuple-element(s), index=1
  one = s32[] constant(1)
  two = f32[] constant(2)
  ROOT t = (s32[], f32[]) tuple(add(i, one), multiply(x, two))
}"""
    out = run(
        "z = s32[] constant(0)\nx = f32[] parameter(0)\nt = (s32[], f32[]) tuple(z, x)\n"
        "ROOT w = (s32[], f32[]) while(t), condition=cond, body=body",
        F(3),
        comps=comps,
    )
    assert int(out[0]) == 5 and float(out[1]) == 96.0


@pytest.mark.parametrize(
    "index, expected", [(0, 10.0), (1, 20.0), (2, 30.0), (7, 30.0), (-1, 30.0)]
)
def test_conditional_with_index_runs_last_branch_when_out_of_range(index, expected):
    comps = "\n".join(
        f"b{k} {{\n  x = f32[] parameter(0)\n  c = f32[] constant({k + 1}0)\n"
        f"  ROOT m = f32[] multiply(x, c)\n}}"
        for k in range(3)
    )
    out = run(
        "i = s32[] parameter(0)\nx = f32[] parameter(1)\n"
        "ROOT c = f32[] conditional(i, x, x, x), branch_computations={b0, b1, b2}",
        np.int32(index),
        F(1),
        comps=comps,
    )
    assert float(out) == expected


def test_conditional_with_predicate():
    comps = (
        "t {\n x = f32[] parameter(0)\n ROOT n = f32[] negate(x)\n}\n"
        "f {\n x = f32[] parameter(0)\n ROOT n = f32[] abs(x)\n}"
    )
    body = (
        "p = pred[] parameter(0)\nx = f32[] parameter(1)\n"
        "ROOT c = f32[] conditional(p, x, x), true_computation=t, false_computation=f"
    )
    assert float(run(body, np.bool_(True), F(-2), comps=comps)) == 2.0
    assert float(run(body, np.bool_(False), F(-2), comps=comps)) == 2.0
    assert float(run(body, np.bool_(True), F(3), comps=comps)) == -3.0


def test_call_and_fusion_evaluate_their_computations():
    comps = (
        "f {\n a = f32[2] parameter(0)\n b = f32[2] parameter(1)\n"
        " ROOT s = f32[2] subtract(a, b)\n}"
    )
    x, y = np.array([5, 7], F), np.array([1, 2], F)
    np.testing.assert_array_equal(
        run(
            "a = f32[2] parameter(0)\nb = f32[2] parameter(1)\n"
            "ROOT c = f32[2] call(a, b), to_apply=f",
            x,
            y,
            comps=comps,
        ),
        [4, 5],
    )
    np.testing.assert_array_equal(
        run(
            "a = f32[2] parameter(0)\nb = f32[2] parameter(1)\n"
            "ROOT c = f32[2] fusion(b, a), kind=kLoop, calls=f",
            x,
            y,
            comps=comps,
        ),
        [-4, -5],
    )


def test_single_device_collectives_and_async_pairs():
    comps = "sum {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}"
    x = np.array([1, 2], F)
    body = (
        "p = f32[2] parameter(0)\n"
        "ar = f32[2] all-reduce(p), replica_groups={}, to_apply=sum\n"
        "ag = f32[2] all-gather(ar), dimensions={0}, replica_groups={}\n"
        "cp = f32[2] collective-permute(ag), source_target_pairs={{0,0}}\n"
        "id = u32[] replica-id()\n"
        "ROOT t = (f32[2], u32[]) tuple(cp, id)"
    )
    out, replica = run(body, x, comps=comps)
    np.testing.assert_array_equal(out, x)
    assert replica == 0 and replica.dtype == np.uint32
    moved = run(
        "p = f32[2] parameter(0)\n"
        "ROOT cp = f32[2] collective-permute(p), source_target_pairs={{0,1}}",
        x,
    )
    np.testing.assert_array_equal(moved, [0, 0])


def test_copy_of_a_tuple_is_a_tuple_on_every_backend():
    text = (
        "HloModule t\nENTRY e {\na = f32[2] parameter(0)\nb = s32[3] parameter(1)\n"
        "t = (f32[2], s32[3]) tuple(a, b)\nROOT c = (f32[2], s32[3]) copy(t)\n}\n"
    )
    x, y = np.array([1, 2], F), np.array([3, 4, 5], np.int32)
    for backend in ("interpreter", "cpu"):
        a, b = minixla.compile(text, backend=backend)(x, y)
        np.testing.assert_array_equal(a, x)
        np.testing.assert_array_equal(b, y)
        assert b.dtype == np.int32


def test_variadic_collective_permute_returns_one_array_per_operand():
    x, y = np.array([1, 2], F), np.array([3, 4, 5], np.int32)
    head = "a = f32[2] parameter(0)\nb = s32[3] parameter(1)\n"
    kept = run(
        head + "ROOT c = (f32[2], s32[3]) collective-permute(a, b), source_target_pairs={{0,0}}",
        x,
        y,
    )
    np.testing.assert_array_equal(kept[0], x)
    np.testing.assert_array_equal(kept[1], y)
    moved = run(
        head + "ROOT c = (f32[2], s32[3]) collective-permute(a, b), source_target_pairs={{0,1}}",
        x,
        y,
    )
    np.testing.assert_array_equal(moved[1], [0, 0, 0])


_SUM = "sum {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}"


@pytest.mark.parametrize(
    "header, root",
    [
        ("", "f32[2] all-reduce(p), replica_groups={{0,1}}, to_apply=sum"),
        ("", "f32[2] all-reduce(p), replica_groups=[1,2]<=[2], to_apply=sum"),
        (", replica_count=4", "f32[2] all-reduce(p), replica_groups={}, to_apply=sum"),
        ("", "f32[4] all-gather(p), dimensions={0}"),
        ("", "f32[1] reduce-scatter(p), dimensions={0}, to_apply=sum"),
    ],
)
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_collectives_over_more_devices_than_one_are_a_compile_error(header, root, backend):
    text = (
        f"HloModule t{header}\n{_SUM}\nENTRY e {{\np = f32[2] parameter(0)\nROOT r = {root}\n}}\n"
    )
    # a header that asks for more devices is a multi-device program; it needs the devices
    expected = (
        (minixla.ExecutionError, r"needs 4 devices")
        if header
        else (minixla.UnsupportedError, r"%r combines data from \d devices")
    )
    with pytest.raises(expected[0], match=expected[1]):
        minixla.compile(text, backend=backend)


def test_collectives_over_one_device_still_run():
    x = np.array([1, 2], F)
    out = run(
        "p = f32[2] parameter(0)\n"
        "ROOT r = f32[2] all-reduce(p), replica_groups={{0}}, to_apply=sum",
        x,
        comps=_SUM,
    )
    np.testing.assert_array_equal(out, x)


def test_opt_barrier_and_zero_d_values():
    out = run(
        "p = f32[] parameter(0)\nt = (f32[]) tuple(p)\n"
        "b = (f32[]) opt-barrier(t)\nROOT g = f32[] get-tuple-element(b), index=0",
        F(-0.0),
    )
    assert out.shape == () and np.signbit(out)


def test_every_opcode_is_implemented_or_declined_with_a_reason():
    from minixla.reference.evaluator import DECLINED, handlers
    from minixla.ir import OPCODES

    table = handlers()
    for name in OPCODES:
        if name == "parameter":
            continue
        assert (name in table) != (name in DECLINED), name


def test_declined_opcode_is_named_at_compile_time():
    text = (
        "HloModule m\nENTRY e {\n  t = token[] after-all()\n"
        "  ROOT i = ((f32[2]), token[]) infeed(t)\n}\n"
    )
    with pytest.raises(minixla.UnsupportedError, match=r"infeed \(no host transfer queue\)"):
        minixla.compile(text, backend="interpreter")


def test_running_out_of_memory_in_a_handler_names_the_instruction(monkeypatch):
    from minixla.reference import evaluator

    def exhausted(ev, instr, ops):
        raise MemoryError("Unable to allocate 50.4 GiB")

    monkeypatch.setitem(evaluator.handlers(), "negate", exhausted)
    with pytest.raises(minixla.ResourceExhaustedError, match=r"negate %n: Unable to allocate"):
        run("p = f32[2] parameter(0)\nROOT n = f32[2] negate(p)", np.zeros(2, F))
