"""Interpreter gather and scatter against hand-worked values and naive per-element loops that
follow XLA's operation-semantics definitions literally."""

import itertools

import numpy as np
import pytest

import minixla
from minixla.reference.evaluator import Evaluator


def run(text, *args):
    module = minixla.parse_hlo_module(text, verify=False)
    return Evaluator(module).evaluate(module.entry, list(args))


def ref_gather(
    operand,
    indices,
    offset_dims,
    collapsed,
    start_map,
    ivd,
    sizes,
    operand_batching=(),
    indices_batching=(),
):
    """XLA's gather, one output element at a time."""
    if ivd == indices.ndim:
        indices = indices[..., None]
    batch_shape = [s for d, s in enumerate(indices.shape) if d != ivd]
    window_operand_dims = [
        d for d in range(operand.ndim) if d not in collapsed and d not in operand_batching
    ]
    out_rank = len(batch_shape) + len(offset_dims)
    batch_out_dims = [d for d in range(out_rank) if d not in offset_dims]
    out_shape = [0] * out_rank
    for d, size in zip(batch_out_dims, batch_shape):
        out_shape[d] = size
    for d, od in zip(offset_dims, window_operand_dims):
        out_shape[d] = sizes[od]
    out = np.zeros(out_shape, operand.dtype)
    for out_index in itertools.product(*map(range, out_shape)):
        batch = [out_index[d] for d in batch_out_dims]
        vector = indices[tuple(batch[:ivd]) + (slice(None),) + tuple(batch[ivd:])]
        start = [0] * operand.ndim
        for k, d in enumerate(start_map):
            start[d] = min(max(int(vector[k]), 0), operand.shape[d] - sizes[d])
        for od, idim in zip(operand_batching, indices_batching):
            start[od] = batch[idim if idim < ivd else idim - 1]
        for d, od in zip(offset_dims, window_operand_dims):
            start[od] += out_index[d]
        out[out_index] = operand[tuple(start)]
    return out


def ref_scatter(
    operands,
    indices,
    updates,
    window_dims,
    inserted,
    to_operand,
    ivd,
    combine,
    input_batching=(),
    indices_batching=(),
):
    """XLA's scatter, one update element at a time in row-major order; a window that does not
    fit entirely is skipped."""
    outs = [o.copy() for o in operands]
    if ivd == indices.ndim:
        indices = indices[..., None]
    shape = operands[0].shape
    window_operand_dims = [
        d for d in range(len(shape)) if d not in inserted and d not in input_batching
    ]
    window_size = [1] * len(shape)
    for ud, od in zip(window_dims, window_operand_dims):
        window_size[od] = updates[0].shape[ud]
    for uindex in itertools.product(*map(range, updates[0].shape)):
        batch = [uindex[d] for d in range(len(uindex)) if d not in window_dims]
        vector = indices[tuple(batch[:ivd]) + (slice(None),) + tuple(batch[ivd:])]
        start = [0] * len(shape)
        for k, d in enumerate(to_operand):
            start[d] = int(vector[k])
        for od, idim in zip(input_batching, indices_batching):
            start[od] = batch[idim if idim < ivd else idim - 1]
        if any(s < 0 or s + w > n for s, w, n in zip(start, window_size, shape)):
            continue
        for ud, od in zip(window_dims, window_operand_dims):
            start[od] += uindex[ud]
        target = tuple(start)
        new = combine([o[target] for o in outs], [u[uindex] for u in updates])
        for o, v in zip(outs, new):
            o[target] = v
    return outs


# ---- gather -----------------------------------------------------------------------------------


def test_gather_take_rows_implicit_index_vector_dim():
    hlo = """HloModule m
ENTRY e {
  x = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  ROOT g = f32[4,3] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}
}"""
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    idx = np.array([4, 0, 2, 2], np.int32)
    np.testing.assert_array_equal(run(hlo, x, idx), x[idx])


def test_gather_2d_points():
    hlo = """HloModule m
ENTRY e {
  x = s32[4,5] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = s32[3] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
}"""
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    idx = np.array([[0, 0], [3, 4], [1, 2]], np.int32)
    np.testing.assert_array_equal(run(hlo, x, idx), [0, 19, 7])


def test_gather_clamps_out_of_range_and_negative_starts():
    hlo = """HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  i = s32[4,1] parameter(1)
  ROOT g = f32[4,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2}
}"""
    x = np.arange(6, dtype=np.float32) * 10
    idx = np.array([[-3], [5], [2], [100]], np.int32)
    # starts clamp into [0, 6 - 2]: 0, 4, 2, 4
    np.testing.assert_array_equal(run(hlo, x, idx), [[0, 10], [40, 50], [20, 30], [40, 50]])


def test_gather_unsigned_indices_clamp_high():
    hlo = """HloModule m
ENTRY e {
  x = f32[6] parameter(0)
  i = u32[3] parameter(1)
  ROOT g = f32[3] gather(x, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1}
}"""
    x = np.arange(6, dtype=np.float32)
    idx = np.array([4, 4294967295, 1], np.uint32)
    np.testing.assert_array_equal(run(hlo, x, idx), [4, 5, 1])


def test_gather_batching_dims():
    # per batch b: take x[b, idx[b, j], :] -- the batch index comes from the indices' position
    hlo = """HloModule m
ENTRY e {
  x = f32[3,5,2] parameter(0)
  i = s32[3,4,1] parameter(1)
  ROOT g = f32[3,4,2] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,2}
}"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 2)).astype(np.float32)
    idx = rng.integers(0, 5, (3, 4, 1)).astype(np.int32)
    want = np.stack([x[b, idx[b, :, 0]] for b in range(3)])
    np.testing.assert_array_equal(run(hlo, x, idx), want)
    np.testing.assert_array_equal(
        want, ref_gather(x, idx, (2,), (1,), (1,), 2, (1, 1, 2), (0,), (0,))
    )


def test_gather_index_vector_dim_first_and_offset_dims_in_middle():
    hlo = """HloModule m
ENTRY e {
  x = f32[4,6,5] parameter(0)
  i = s64[2,3,2] parameter(1)
  ROOT g = f32[3,2,2,3] gather(x, i), offset_dims={1,3}, collapsed_slice_dims={1}, start_index_map={2,1}, index_vector_dim=0, slice_sizes={2,1,3}
}"""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    idx = rng.integers(-2, 8, (2, 3, 2)).astype(np.int64)
    want = ref_gather(x, idx, (1, 3), (1,), (2, 1), 0, (2, 1, 3))
    np.testing.assert_array_equal(run(hlo, x, idx), want)


# ---- scatter ----------------------------------------------------------------------------------


def _combiner(name, body, dtype="f32"):
    return f"""{name} {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
{body}
}}"""


def test_scatter_add_duplicates():
    hlo = (
        _combiner("add_f32", "  ROOT r = f32[] add(a, b)")
        + """
ENTRY e {
  x = f32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[5] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
}"""
    )
    x = np.ones(5, np.float32)
    out = run(
        hlo, x, np.array([[1], [3], [1], [1]], np.int32), np.array([10, 20, 30, 40], np.float32)
    )
    np.testing.assert_array_equal(out, [1, 81, 1, 21, 1])
    np.testing.assert_array_equal(x, np.ones(5))  # the input is not mutated


def test_scatter_skips_window_that_does_not_fit_whole():
    hlo = (
        _combiner("add_f32", "  ROOT r = f32[] add(a, b)")
        + """
ENTRY e {
  x = f32[5] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,2] parameter(2)
  ROOT s = f32[5] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f32
}"""
    )
    upd = np.array([[1, 2], [10, 20], [100, 200], [1000, 2000]], np.float32)
    # start 4 would write [4, 5]: element 4 fits, but the whole window is skipped
    out = run(hlo, np.zeros(5, np.float32), np.array([[0], [4], [-1], [3]], np.int32), upd)
    np.testing.assert_array_equal(out, [1, 2, 0, 1000, 2000])


@pytest.mark.parametrize("op,fn", [("maximum", max), ("minimum", min)])
@pytest.mark.parametrize("dtype", ["f32", "s32"])
def test_scatter_max_min(op, fn, dtype):
    hlo = (
        _combiner("comb", f"  ROOT r = {dtype}[] {op}(a, b)", dtype)
        + f"""
ENTRY e {{
  x = {dtype}[6] parameter(0)
  i = s32[5] parameter(1)
  u = {dtype}[5] parameter(2)
  ROOT s = {dtype}[6] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=comb
}}"""
    )
    npt = np.float32 if dtype == "f32" else np.int32
    x = np.array([5, 5, 5, 5, 5, 5], npt)
    idx = np.array([2, 2, 0, 9, 2], np.int32)
    upd = np.array([7, 1, 3, 100, 9], npt)
    want = x.copy()
    for k, t in zip(idx, upd):
        if 0 <= k < 6:
            want[k] = fn(want[k], t)
    np.testing.assert_array_equal(run(hlo, x, idx, upd), want)


def test_scatter_multiply_then_add_is_sequential():
    hlo = """HloModule m
comb {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  m = f32[] multiply(a, two)
  ROOT r = f32[] add(m, b)
}
ENTRY e {
  x = f32[3] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4] parameter(2)
  ROOT s = f32[3] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    out = run(
        hlo,
        np.array([1, 1, 1], np.float32),
        np.array([[0], [2], [0], [0]], np.int32),
        np.array([3, 5, 7, 11], np.float32),
    )
    # position 0: ((1*2+3)*2+7)*2+11 = 45; position 2: 1*2+5 = 7
    np.testing.assert_array_equal(out, [45, 1, 7])


def test_scatter_replace_last_update_wins():
    hlo = """HloModule m
comb {
  a = s32[] parameter(0)
  ROOT b = s32[] parameter(1)
}
ENTRY e {
  x = s32[4] parameter(0)
  i = s32[4,1] parameter(1)
  u = s32[4] parameter(2)
  ROOT s = s32[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    out = run(
        hlo,
        np.zeros(4, np.int32),
        np.array([[1], [3], [1], [1]], np.int32),
        np.array([7, 8, 9, 10], np.int32),
    )
    np.testing.assert_array_equal(out, [0, 10, 0, 8])


def test_scatter_s8_add_wraps():
    hlo = (
        _combiner("comb", "  ROOT r = s8[] add(a, b)", "s8")
        + """
ENTRY e {
  x = s8[2] parameter(0)
  i = s32[3,1] parameter(1)
  u = s8[3] parameter(2)
  ROOT s = s8[2] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    )
    out = run(
        hlo,
        np.array([100, 0], np.int8),
        np.array([[0], [0], [1]], np.int32),
        np.array([100, 100, -5], np.int8),
    )
    np.testing.assert_array_equal(out, np.array([300 - 256, -5], np.int8))


def test_variadic_scatter_argmax():
    # keeps, per position, the larger value and the id that came with it (ties: the first)
    hlo = """HloModule m
comb {
  v0 = f32[] parameter(0)
  k0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  k1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  v = f32[] select(gt, v1, v0)
  k = s32[] select(gt, k1, k0)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY e {
  x = f32[4] parameter(0)
  y = s32[4] parameter(1)
  i = s32[6,1] parameter(2)
  u = f32[6] parameter(3)
  w = s32[6] parameter(4)
  ROOT s = (f32[4], s32[4]) scatter(x, y, i, u, w), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}"""
    x, y = np.zeros(4, np.float32), np.full(4, -1, np.int32)
    idx = np.array([[1], [1], [3], [1], [7], [3]], np.int32)
    u = np.array([2, 5, 1, 5, 9, 0], np.float32)
    w = np.arange(6, dtype=np.int32)
    got = run(hlo, x, y, idx, u, w)

    def combine(cur, new):
        return (new[0], new[1]) if new[0] > cur[0] else (cur[0], cur[1])

    want = ref_scatter([x, y], idx, [u, w], (), (0,), (0,), 1, combine)
    assert isinstance(got, tuple) and len(got) == 2
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[1], [-1, 1, -1, 2])


def test_scatter_batching_dims_and_middle_window_dim():
    hlo = (
        _combiner("add_f32", "  ROOT r = f32[] add(a, b)")
        + """
ENTRY e {
  x = f32[3,6,4] parameter(0)
  i = s32[3,5,1] parameter(1)
  u = f32[3,2,5] parameter(2)
  ROOT s = f32[3,6,4] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={2}, scatter_dims_to_operand_dims={2}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add_f32
}"""
    )
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 6, 4)).astype(np.float32)
    idx = rng.integers(-1, 5, (3, 5, 1)).astype(np.int32)
    u = rng.standard_normal((3, 2, 5)).astype(np.float32)
    # operand dim 1 is the window dim (size 2, start 0); the batch dim picks x[b]
    want = ref_scatter(
        [x],
        idx,
        [u],
        (1,),
        (2,),
        (2,),
        2,
        lambda cur, new: [np.float32(cur[0] + new[0])],
        (0,),
        (0,),
    )[0]
    np.testing.assert_allclose(run(hlo, x, idx, u), want, rtol=1e-6)


def test_scatter_2d_windows_against_loop_reference():
    hlo = (
        _combiner("add_f32", "  ROOT r = f32[] add(a, b)")
        + """
ENTRY e {
  x = f32[5,6] parameter(0)
  i = s32[2,4] parameter(1)
  u = f32[2,4,3] parameter(2)
  ROOT s = f32[5,6] scatter(x, i, u), update_window_dims={0,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={1,0}, index_vector_dim=0, to_apply=add_f32
}"""
    )
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    idx = rng.integers(-1, 5, (2, 4)).astype(np.int32)
    u = rng.standard_normal((2, 4, 3)).astype(np.float32)
    want = ref_scatter(
        [x], idx, [u], (0, 2), (), (1, 0), 0, lambda cur, new: [np.float32(cur[0] + new[0])]
    )[0]
    np.testing.assert_allclose(run(hlo, x, idx, u), want, rtol=1e-6)
