"""gather, scatter and sort partitioned on 2 and 4 devices give the 1-device results for
every sharding of their operands drawn from a fixed list (cut along each dim, 2x2 grids,
splits with replicated copies, uneven splits), with indices out of bounds on both sides. The
partitioned forms themselves are checked as HLO text in tests/hlo/spmd-partitioner/."""

import itertools

import numpy as np
import pytest

import minixla
from minixla.ir.sharding import HloSharding
from minixla.passes.spmd_partitioner import collective_bytes

ADD = """add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""

CASES = {
    # name: (entry body, argument shapes and kinds)
    "embedding-lookup": (
        """
  t = f32[10,6] parameter(0)
  i = s32[5,1] parameter(1)
  ROOT g = f32[5,6] gather(t, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}""",
        [("f32", (10, 6)), ("idx", (5, 1), 10)],
    ),
    "gather-two-indexed-dims": (
        """
  t = f32[8,4,6] parameter(0)
  i = s32[3,2] parameter(1)
  ROOT g = f32[3,6] gather(t, i), offset_dims={1}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1,6}""",
        [("f32", (8, 4, 6)), ("idx", (3, 2), 8)],
    ),
    "gather-scalar-indices": (
        """
  t = f32[8,6] parameter(0)
  i = s32[4,2] parameter(1)
  ROOT g = f32[4,2,6] gather(t, i), offset_dims={2}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1,6}""",
        [("f32", (8, 6)), ("idx", (4, 2), 8)],
    ),
    "gather-window": (
        """
  t = f32[8,6] parameter(0)
  i = s32[3,1] parameter(1)
  ROOT g = f32[3,2,6] gather(t, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,6}""",
        [("f32", (8, 6)), ("idx", (3, 1), 8)],
    ),
    "gather-batching": (
        """
  t = f32[4,8,6] parameter(0)
  i = s32[4,3,1] parameter(1)
  ROOT g = f32[4,3,6] gather(t, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,1,6}""",
        [("f32", (4, 8, 6)), ("idx", (4, 3, 1), 8)],
    ),
    "scatter-add-rows": (
        ADD
        + """
  t = f32[10,6] parameter(0)
  i = s32[5,1] parameter(1)
  u = f32[5,6] parameter(2)
  ROOT s = f32[10,6] scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add""",
        [("f32", (10, 6)), ("idx", (5, 1), 10), ("f32", (5, 6))],
    ),
    "scatter-two-indexed-dims": (
        ADD
        + """
  t = f32[8,4,6] parameter(0)
  i = s32[3,2] parameter(1)
  u = f32[3,6] parameter(2)
  ROOT s = f32[8,4,6] scatter(t, i, u), update_window_dims={1}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add""",
        [("f32", (8, 4, 6)), ("idx", (3, 2), 8), ("f32", (3, 6))],
    ),
    "scatter-batching": (
        ADD
        + """
  t = f32[4,8,6] parameter(0)
  i = s32[4,3,1] parameter(1)
  u = f32[4,3,6] parameter(2)
  ROOT s = f32[4,8,6] scatter(t, i, u), update_window_dims={2}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=add""",
        [("f32", (4, 8, 6)), ("idx", (4, 3, 1), 8), ("f32", (4, 3, 6))],
    ),
    "sort-keys-values": (
        """
  k = f32[8,6] parameter(0)
  v = s32[8,6] parameter(1)
  ROOT s = (f32[8,6], s32[8,6]) sort(k, v), dimensions={0}, is_stable=true, to_apply=less""",
        [("f32", (8, 6)), ("s32", (8, 6))],
    ),
    "sort-last-dim": (
        """
  k = f32[6,10] parameter(0)
  ROOT s = f32[6,10] sort(k), dimensions={1}, to_apply=less1""",
        [("f32", (6, 10))],
    ),
}

LESS = """less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
less1 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
"""


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "4")


def module_text(name: str) -> str:
    body, _ = CASES[name]
    computations, _, entry = body.rpartition("\n  t = ") if "add {" in body else ("", "", body)
    if computations:
        entry = "\n  t = " + entry
    extra = LESS if "sort" in name else ""
    return f"HloModule {name}\n{computations}\n{extra}\nENTRY e {{{entry}\n}}\n"


def arguments(name: str, seed: int):
    rng = np.random.default_rng(seed)
    args = []
    for kind, shape, *bound in CASES[name][1]:
        if kind == "idx":  # some indices fall below 0 or past the end
            args.append(rng.integers(-2, bound[0] + 2, shape).astype(np.int32))
        elif kind == "s32":
            args.append(rng.integers(0, 100, shape).astype(np.int32))
        else:
            args.append(rng.standard_normal(shape).astype(np.float32))
    return args


def shardings(rank: int, n: int):
    """Replicated, each dim cut n ways; on 4 devices also 2x2 grids and 2-way cuts with two
    replicated copies."""
    yield None
    for d in range(rank):
        dims = [1] * rank
        dims[d] = n
        yield HloSharding.tiled(tuple(dims))
    if n != 4:
        return
    for a, b in itertools.combinations(range(rank), 2):
        dims = [1] * rank
        dims[a] = dims[b] = 2
        yield HloSharding.tiled(tuple(dims))
    for a in range(rank):
        dims = [1] * rank
        dims[a] = 2
        yield HloSharding.tiled(tuple(dims) + (2,), ("replicated",))


def combinations(name: str, n: int, limit: int = 40):
    ranks = [len(spec[1]) for spec in CASES[name][1]]
    every = list(itertools.product(*(list(shardings(r, n)) for r in ranks)))
    if len(every) <= limit:
        return every
    rng = np.random.default_rng(len(name) * 7 + n)
    return [every[i] for i in sorted(rng.choice(len(every), limit, replace=False))]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("name", sorted(CASES))
def test_partitioned_equals_one_device(name, n):
    text = module_text(name)
    args = arguments(name, n)
    want = minixla.compile(text)(*args)
    for picks in combinations(name, n):
        module = minixla.parse_hlo_module(text)
        for param, sharding in zip(module.entry.parameters, picks):
            if sharding is not None:
                param.attrs["sharding"] = sharding
        got = minixla.compile(module, num_partitions=n)(*args)
        what = f"{name} on {n} with {[str(s) for s in picks]}"
        for g, w in zip(
            got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)
        ):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=what)


def partitioned(name: str, *picks: str, n: int = 4):
    module = minixla.parse_hlo_module(module_text(name))
    for param, sharding in zip(module.entry.parameters, picks):
        param.attrs["sharding"] = minixla.ir.sharding.parse_sharding(sharding)
    return minixla.compile(module, num_partitions=n).partitioned_module


def test_an_embedding_table_cut_along_its_features_gathers_without_communication():
    module = partitioned("embedding-lookup", "{devices=[1,4]<=[4]}", "{replicated}")
    assert collective_bytes(module)["total"] == 0
    assert module.entry.root.shape.dims == (5, 2)  # (6 features / 4, rounded up)


def test_ids_cut_along_their_batch_dim_gather_without_communication():
    module = partitioned("embedding-lookup", "{replicated}", "{devices=[4,1]<=[4]}")
    assert collective_bytes(module)["total"] == 0


def test_a_table_cut_along_its_rows_sends_one_all_reduce_of_the_rows():
    module = partitioned("embedding-lookup", "{devices=[4,1]<=[4]}", "{replicated}")
    rows_bytes = 5 * 6 * 4
    assert collective_bytes(module, 4) == {
        "all-reduce": 2 * 3 * rows_bytes // 4,
        "total": 2 * 3 * rows_bytes // 4,
    }


def test_a_scatter_into_rows_cut_along_the_indexed_dim_needs_no_communication():
    module = partitioned("scatter-add-rows", "{devices=[4,1]<=[4]}", "{replicated}", "{replicated}")
    assert collective_bytes(module)["total"] == 0


def test_a_sort_cut_along_another_dim_sorts_locally():
    module = partitioned("sort-last-dim", "{devices=[2,1]<=[2]}", n=2)
    assert collective_bytes(module)["total"] == 0
    module = partitioned("sort-last-dim", "{devices=[2,2]<=[4]}")
    gathers = [i for i in module.entry.instructions if i.opcode == "all-gather"]
    assert [g.attrs["dimensions"] for g in gathers] == [(1,)]  # only the sort dim
