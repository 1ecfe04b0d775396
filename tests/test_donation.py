"""Donated arguments (input_output_alias, buffer_donor, jit's donate_argnums): on cpu an aliased
output comes back in the donated argument's memory, which is then read-only; must-alias
arguments that cannot be donated are errors; without donation results never share memory with
arguments; values equal the interpreter's."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp

ADD = """
HloModule add, input_output_alias={ {}: (0, {}, KIND) }
ENTRY main {
  x = f32[8] parameter(0)
  y = f32[8] parameter(1)
  ROOT r = f32[8] add(x, y)
}"""


def compiled(text, backend="cpu", **options):
    return minixla.compile(text, backend=backend, **options)


def args8():
    return np.arange(8, dtype=np.float32), np.full(8, 0.5, np.float32)


def test_cpu_writes_the_output_into_the_donated_argument():
    exe = compiled(ADD.replace("KIND", "may-alias"))
    x, y = args8()
    want = compiled(ADD.replace("KIND", "may-alias"), "interpreter")(*args8())
    out = exe(x, y)
    np.testing.assert_array_equal(out, want)
    assert np.shares_memory(out, x) and out is not x
    assert not x.flags.writeable and out.flags.writeable  # x is consumed; out is the caller's
    with pytest.raises(ValueError, match="read-only"):
        x[0] = 1
    assert re.search(r"(v\d+) = p0\n.*k\d+\(p0, p1, \1\)", exe.program.source)  # no np.empty


def test_interpreter_gives_the_same_values_and_leaves_the_argument_alone():
    x, y = args8()
    out = compiled(ADD.replace("KIND", "must-alias"), "interpreter")(x, y)
    np.testing.assert_array_equal(out, np.arange(8) + 0.5)
    assert not np.shares_memory(out, x) and x.flags.writeable
    np.testing.assert_array_equal(x, np.arange(8))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_must_alias_argument_that_cannot_be_donated_is_an_error(backend):
    exe = compiled(ADD.replace("KIND", "must-alias"), backend)
    x, y = args8()
    x.flags.writeable = False
    with pytest.raises(minixla.ExecutionError, match=r"argument 0 \(x\) must alias .* read-only"):
        exe(x, y)
    with pytest.raises(minixla.ExecutionError, match="not C-contiguous"):
        exe(np.arange(16, dtype=np.float32)[::2], y)
    same = np.ones(8, np.float32)
    with pytest.raises(minixla.ExecutionError, match="shares memory with another argument"):
        exe(same, same)


def test_may_alias_argument_that_cannot_be_donated_is_copied_not_consumed():
    exe = compiled(ADD.replace("KIND", "may-alias"))
    base = np.arange(16, dtype=np.float32)
    x, y = base[::2], np.ones(8, np.float32)
    out = exe(x, y)
    np.testing.assert_array_equal(out, base[::2] + 1)
    assert not np.shares_memory(out, base) and x.flags.writeable
    np.testing.assert_array_equal(base, np.arange(16))
    same = np.ones(8, np.float32)
    np.testing.assert_array_equal(exe(same, same), np.full(8, 2))
    np.testing.assert_array_equal(same, np.ones(8))


def test_must_alias_of_another_type_and_the_same_byte_size_holds_the_output():
    # XLA's verifier compares alias byte sizes only when layout-sensitive: an f32[8] output may
    # live in an s32[8] argument; it comes back as f32 values in that argument's memory.
    text = ADD.replace("KIND", "must-alias").replace("(0, {}, must-alias)", "(2, {}, must-alias)")
    text = text.replace(
        "  y = f32[8] parameter(1)", "  y = f32[8] parameter(1)\n  z = s32[8] parameter(2)"
    )
    x, y = args8()
    z = np.zeros(8, np.int32)
    out = compiled(text)(x, y, z)
    np.testing.assert_array_equal(out, x + y)
    assert out.dtype == np.float32 and np.shares_memory(out, z) and not z.flags.writeable
    np.testing.assert_array_equal(
        compiled(text, "interpreter")(*args8(), np.zeros(8, np.int32)), x + y
    )


DUS = """
HloModule cache, input_output_alias={ {}: (0, {}, must-alias) }
ENTRY main {
  cache = f32[6,4] parameter(0)
  row = f32[1,4] parameter(1)
  i = s32[] parameter(2)
  zero = s32[] constant(0)
  ROOT r = f32[6,4] dynamic-update-slice(cache, row, i, zero)
}"""


def test_dynamic_update_slice_updates_the_donated_argument_in_place():
    exe = compiled(DUS)
    cache = np.zeros((6, 4), np.float32)
    row = np.ones((1, 4), np.float32)
    for step in range(3):
        out = exe(cache, row * step, np.int32(step))
        assert np.shares_memory(out, cache)
        cache = out
    want = np.zeros((6, 4), np.float32)
    want[:3] = np.arange(3)[:, None]
    np.testing.assert_array_equal(cache, want)
    assert re.search(r"t\d+\(p0, p0, p1, p2, ", exe.program.source)  # writes operand 0


def test_alias_buffer_assignment_skips_is_still_returned_in_the_argument():
    # x is returned as output 1 too, so reverse(x) cannot be written into x until the end;
    # output 1 must keep x's old values.
    text = """
    HloModule skip, input_output_alias={ {0}: (0, {}, may-alias) }
    ENTRY main {
      x = f32[8] parameter(0)
      r = f32[8] reverse(x), dimensions={0}
      ROOT t = (f32[8], f32[8]) tuple(r, x)
    }"""
    x = np.arange(8, dtype=np.float32)
    reversed_, same = compiled(text)(x)
    np.testing.assert_array_equal(reversed_, np.arange(8)[::-1])
    np.testing.assert_array_equal(same, np.arange(8))
    assert np.shares_memory(reversed_, x) and not np.shares_memory(same, x)


def test_must_alias_that_buffer_assignment_cannot_hold_is_a_cpu_compile_error():
    text = """
    HloModule must, input_output_alias={ {0}: (0, {}, must-alias) }
    ENTRY main {
      x = f32[8] parameter(0)
      r = f32[8] reverse(x), dimensions={0}
      ROOT t = (f32[8], f32[8]) tuple(r, x)
    }"""
    with pytest.raises(minixla.MinixlaError, match=r"output \{0\} must alias parameter 0"):
        compiled(text)


def test_buffer_donor_feeds_a_matching_output():
    text = """
    HloModule donor, buffer_donor={ (0, {}) }
    ENTRY main {
      x = f32[8] parameter(0)
      ROOT n = f32[8] negate(x)
    }"""
    x = np.arange(8, dtype=np.float32)
    out = compiled(text)(x)
    np.testing.assert_array_equal(out, -np.arange(8))
    assert np.shares_memory(out, x)


WHILE = """
HloModule loop, input_output_alias={ {1}: (0, {}, may-alias) }
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[4] add(v, v)
  ROOT t = (s32[], f32[4]) tuple(j, w)
}
ENTRY main {
  v = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, v)
  ROOT loop = (s32[], f32[4]) while(init), condition=cond, body=body
}"""


def test_loop_state_comes_back_in_the_donated_argument():
    v = np.array([1, 2, 3, 4], np.float32)
    want = compiled(WHILE, "interpreter")(v.copy())
    count, out = compiled(WHILE)(v)
    assert count == want[0] == 5
    np.testing.assert_array_equal(out, want[1])
    assert np.shares_memory(out, v)


def test_results_never_share_memory_with_arguments_without_donation():
    text = """
    HloModule views
    ENTRY main {
      x = f32[4] parameter(0)
      r = f32[2,2] reshape(x)
      ROOT t = (f32[2,2], f32[4]) tuple(r, x)
    }"""
    x = np.arange(4, dtype=np.float32)
    for backend in ("interpreter", "cpu"):
        for out in compiled(text, backend)(x):
            assert not np.shares_memory(out, x)


def train_step(params, x):
    def loss(p):
        return mnp.sum((x @ p["w"] + p["b"]) ** 2)

    grads = minixla.grad(loss)(params)
    return {k: params[k] - 0.1 * grads[k] for k in params}, loss(params)


def test_jit_train_step_with_donated_params_runs_in_place():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    start = {
        "w": rng.standard_normal((3, 2)).astype(np.float32) * 0.1,
        "b": np.zeros(2, np.float32),
    }
    reference = minixla.jit(train_step, backend="interpreter")
    step = minixla.jit(train_step, backend="cpu", donate_argnums=0)
    want = {k: v.copy() for k, v in start.items()}
    params = {k: v.copy() for k, v in start.items()}
    buffers = dict(params)
    for _ in range(4):
        want, want_loss = reference(want, x)
        params, loss = step(params, x)
        for k in params:  # every step writes the same two buffers
            assert np.shares_memory(params[k], buffers[k])
            np.testing.assert_allclose(params[k], want[k], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
    assert step.compile_count == 1


def test_run_command_gives_every_iteration_its_own_donated_inputs(tmp_path, capsys):
    from minixla.cli import main

    path = tmp_path / "dus.hlo"
    path.write_text(DUS)
    assert (
        main(
            ["run", str(path), "--backend", "cpu", "--iterations", "3", "--compare", "interpreter"]
        )
        == 0
    )
    assert "matches interpreter" in capsys.readouterr().out


def test_interpreter_copies_a_donated_pass_through_so_cpu_can_still_take_the_argument():
    text = """
    HloModule pass, input_output_alias={ {0}: (0, {0}, must-alias), {1}: (0, {1}) }
    ENTRY main {
      p = (f32[2], f32[2]) parameter(0)
      a = f32[2] get-tuple-element(p), index=0
      b = f32[2] get-tuple-element(p), index=1
      ROOT out = (f32[2], f32[2]) tuple(a, b)
    }"""
    args = (np.ones(2, np.float32), np.zeros(2, np.float32))
    first = compiled(text, "interpreter")(args)
    assert not any(np.shares_memory(r, a) for r in first for a in args)
    second = compiled(text)(args)
    assert all(np.shares_memory(r, a) for r, a in zip(second, args))
    np.testing.assert_array_equal(second[0], first[0])


def test_overlap_is_found_among_many_arguments_too():
    # More than 16 leaves: the sorted sweep instead of pairwise checks.
    params = "\n".join(f"  y{k} = f32[8] parameter({k + 1})" for k in range(20))
    text = ADD.replace("KIND", "must-alias").replace("  y = f32[8] parameter(1)\n", params + "\n")
    text = text.replace("add(x, y)", "add(x, y0)")
    exe = compiled(text, "interpreter")
    others = [np.ones(8, np.float32) for _ in range(20)]
    base = np.zeros(12, np.float32)
    np.testing.assert_array_equal(exe(base[:8], *others), np.ones(8))
    others[7] = base[4:]
    with pytest.raises(minixla.ExecutionError, match="shares memory with another argument"):
        exe(base[:8], *others)
