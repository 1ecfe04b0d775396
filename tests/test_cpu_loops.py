"""While loops on cpu: a loop-carried dynamic-update-slice writes into the loop state in place
(no copy of the carried buffer per iteration), the argument is never written, and readers of
the old value that run before the update still see it. Each against the interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minixla


def loop(body_lines: str, n: int = 6, rows: int = 8) -> str:
    return f"""
HloModule w
cond {{
  p = (s32[], f32[{rows},3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant({n})), direction=LT
}}
body {{
  p = (s32[], f32[{rows},3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  buf = f32[{rows},3] get-tuple-element(p), index=1
  z = s32[] constant(0)
{body_lines}
  ROOT t = (s32[], f32[{rows},3]) tuple(s32[] add(i, s32[] constant(1)), upd)
}}
ENTRY main {{
  x = f32[{rows},3] parameter(0)
  w = (s32[], f32[{rows},3]) while((s32[], f32[{rows},3]) tuple(s32[] constant(0), x)), condition=cond, body=body
  ROOT r = f32[{rows},3] get-tuple-element(w), index=1
}}"""


WRITE_ROW = loop("""
  row = f32[1,3] broadcast(f32[] convert(i)), dimensions={}
  upd = f32[8,3] dynamic-update-slice(buf, row, i, z)
""")

# The update reads the row it replaces (a kernel that runs before the DUS).
READ_MODIFY_WRITE = loop("""
  old = f32[1,3] dynamic-slice(buf, i, z), dynamic_slice_sizes={1,3}
  row = f32[1,3] multiply(old, f32[1,3] broadcast(f32[] constant(3)), dimensions={})
  upd = f32[8,3] dynamic-update-slice(buf, row, i, z)
""")


# The old buffer is also returned elsewhere: no in-place update is allowed.
def _returns_old() -> str:
    text = loop("""
  row = f32[1,3] broadcast(f32[] convert(i)), dimensions={}
  upd = f32[8,3] dynamic-update-slice(buf, row, i, z)
  keep = f32[8,3] negate(buf)
""")
    return text.replace(
        "tuple(s32[] add(i, s32[] constant(1)), upd)",
        "tuple(s32[] add(i, s32[] constant(1)), add(upd, keep))",
    )


@pytest.mark.parametrize("passes", [[], None], ids=["unoptimized", "cpu-pipeline"])
@pytest.mark.parametrize(
    "text",
    [WRITE_ROW, READ_MODIFY_WRITE, _returns_old()],
    ids=["write-row", "read-modify-write", "old-value-escapes"],
)
def test_loop_carried_updates_match_the_interpreter(text, passes):
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    before = x.copy()
    exe = minixla.compile(text, backend="cpu", **({} if passes is None else {"passes": passes}))
    want = minixla.compile(text, backend="interpreter")(x)
    for _ in range(2):  # the second call must not see the first call's buffer
        np.testing.assert_allclose(exe(x), want, rtol=1e-6)
    np.testing.assert_array_equal(x, before)  # the argument is never written


@pytest.mark.parametrize("passes", [[], None], ids=["unoptimized", "cpu-pipeline"])
@pytest.mark.parametrize("text", [WRITE_ROW, READ_MODIFY_WRITE], ids=["write-row", "rmw"])
def test_the_body_updates_the_state_buffer_in_place(text, passes):
    # the Python loop's driver source (native loops are tests/test_cpu_native_loop.py)
    exe = minixla.compile(
        text, backend="cpu", native_loops=False, **({} if passes is None else {"passes": passes})
    )
    body = [
        chunk for chunk in exe.program.source.split("\n\n\n") if "dynamic-update-slice" in chunk
    ][0]
    # the DUS thunk writes into the buffer it read from the state: out is operand 0
    assert re.search(r"t\d+\((v\d+), \1, ", body), body
    assert "np.empty((8, 3)" not in body


def test_an_update_whose_old_value_escapes_is_not_in_place():
    exe = minixla.compile(_returns_old(), backend="cpu", passes=[], native_loops=False)
    body = [
        chunk for chunk in exe.program.source.split("\n\n\n") if "dynamic-update-slice" in chunk
    ][0]
    assert not re.search(r"t\d+\((v\d+), \1, ", body)


SCATTER_ROW = loop("""
  idx = s32[1,1] broadcast(i), dimensions={}
  row = f32[1,3] broadcast(f32[] convert(i)), dimensions={}
  upd = f32[8,3] scatter(buf, idx, row), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
""").replace(
    "HloModule w\n",
    """HloModule w
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
""",
)


@pytest.mark.parametrize("passes", [[], None], ids=["unoptimized", "cpu-pipeline"])
def test_loop_carried_scatter_updates_the_state_in_place(passes):
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    before = x.copy()
    exe = minixla.compile(
        SCATTER_ROW,
        backend="cpu",
        native_loops=False,
        **({} if passes is None else {"passes": passes}),
    )
    want = minixla.compile(SCATTER_ROW, backend="interpreter")(x)
    for _ in range(2):
        np.testing.assert_allclose(exe(x), want, rtol=1e-6)
    np.testing.assert_array_equal(x, before)
    body = [chunk for chunk in exe.program.source.split("\n\n\n") if "= scatter" in chunk][0]
    assert "np.empty((8, 3)" not in body, body
    in_place = [s for s in exe.program.kernels.values() if "Kernel for scatter" in s.source]
    assert in_place and all("z0" not in s.source for s in in_place)  # no copy loop


# Threefry's shape: both words of the state feed both words of the next round, and the
# rotate amounts come from the state too. The body becomes one multi-output loop fusion.
CIPHER_ROUNDS = """
HloModule cipher
cond {
  p = (s32[], u32[64,32], u32[64,32], u32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  p = (s32[], u32[64,32], u32[64,32], u32[2]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x0 = u32[64,32] get-tuple-element(p), index=1
  x1 = u32[64,32] get-tuple-element(p), index=2
  rot = u32[2] get-tuple-element(p), index=3
  r0 = u32[] reshape(u32[1] slice(rot), slice={[0:1]})
  r1 = u32[] reshape(u32[1] slice(rot), slice={[1:2]})
  c32 = u32[] constant(32)
  a1 = u32[64,32] add(x0, x1)
  l1 = u32[64,32] shift-left(x1, u32[64,32] broadcast(r0), dimensions={})
  h1 = u32[64,32] shift-right-logical(x1, u32[64,32] broadcast(u32[] subtract(c32, r0)), dimensions={})
  b1 = u32[64,32] xor(a1, u32[64,32] or(l1, h1))
  a2 = u32[64,32] add(a1, b1)
  l2 = u32[64,32] shift-left(b1, u32[64,32] broadcast(r1), dimensions={})
  h2 = u32[64,32] shift-right-logical(b1, u32[64,32] broadcast(u32[] subtract(c32, r1)), dimensions={})
  b2 = u32[64,32] xor(a2, u32[64,32] or(l2, h2))
  k = u32[64,32] broadcast(u32[] convert(i)), dimensions={}
  ROOT t = (s32[], u32[64,32], u32[64,32], u32[2]) tuple(s32[] add(i, s32[] constant(1)), u32[64,32] add(a2, k), b2, rot)
}
ENTRY main {
  x0 = u32[64,32] parameter(0)
  x1 = u32[64,32] parameter(1)
  rot = u32[2] parameter(2)
  w = (s32[], u32[64,32], u32[64,32], u32[2]) while((s32[], u32[64,32], u32[64,32], u32[2]) tuple(s32[] constant(0), x0, x1, rot)), condition=cond, body=body
  y0 = u32[64,32] get-tuple-element(w), index=1
  y1 = u32[64,32] get-tuple-element(w), index=2
  ROOT r = (u32[64,32], u32[64,32]) tuple(y0, y1)
}"""


@pytest.mark.parametrize("rot", [[13, 15], [0, 32], [40, 7]], ids=["threefry", "edges", "past"])
def test_cipher_rounds_update_both_words_in_place_in_one_loop(rot):
    rng = np.random.default_rng(0)
    x0, x1 = (rng.integers(0, 2**32, (64, 32), dtype=np.uint32) for _ in range(2))
    args = (x0, x1, np.array(rot, np.uint32))
    exe = minixla.compile(CIPHER_ROUNDS, backend="cpu", native_loops=False)
    want = minixla.compile(CIPHER_ROUNDS, backend="interpreter")(*args)
    for _ in range(2):
        for got_word, want_word in zip(exe(*args), want):
            np.testing.assert_array_equal(got_word, want_word)
    functions = exe.program.source.split("\n\n\n")
    [body] = [f for f in functions if "fusion (u32[64,32]" in f and "while" not in f]
    # one kernel computes both words; no iteration copies a word to keep its old value
    assert body.count("fusion (u32[64,32]{1,0}, u32[64,32]{1,0})") == 1, body
    assert "copy u32[64,32]" not in body, body
