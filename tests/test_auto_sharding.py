"""Auto-sharding: the integer program picks the optimum on cases small enough to check by
hand, honours the memory limit, falls back to replicated with a reason, and the programs it
shards give the unsharded program's results on N in-process devices."""

import itertools
import sys

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from conformance_paths import case_dirs, requires_corpus
from minixla.passes.auto_sharding import (
    AutoShardingError,
    AutoShardingOptions,
    auto_shard,
    evaluate,
    solve,
)
from minixla.passes.spmd_partitioner import collective_bytes
from minixla.sharding import Mesh, NamedSharding, PartitionSpec
from minixla.testing import compare_values
from test_passes_conformance import load_args

pytest.importorskip("scipy.optimize")

SPLIT_COLUMNS = "{devices=[1,4]<=[4]}"
SPLIT_ROWS = "{devices=[4,1]<=[4]}"


@pytest.fixture(autouse=True)
def eight_devices(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "8")
    monkeypatch.delenv("XLA_FLAGS", raising=False)


def args_for(module, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(p.shape.dims).astype(np.float32) / 4 for p in module.entry.parameters
    ]


def check_against_one_device(module, n: int, **options):
    args = args_for(module)
    want = minixla.compile(module)(*args)
    exe = minixla.compile(
        module, num_partitions=n, auto_sharding=options.pop("auto_sharding", True), **options
    )
    np.testing.assert_allclose(exe(*args), want, rtol=1e-5, atol=1e-5)
    return exe


ONE_DOT = """HloModule one_dot
ENTRY e {
  x = f32[8,16] parameter(0), sharding={replicated}
  w = f32[16,32] parameter(1)
  ROOT y = f32[8,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


def test_a_weight_split_on_its_output_dim_needs_no_communication():
    # w split by columns: each device computes its columns of y from the whole x; splitting
    # the contracting dim instead would need an all-reduce of y
    result = auto_shard(minixla.parse_hlo_module(ONE_DOT), 4)
    assert str(result.sharding_of("w")) == SPLIT_COLUMNS
    assert str(result.sharding_of("y")) == SPLIT_COLUMNS
    assert result.communication_bytes == 0
    assert result.parameter_bytes == 8 * 16 * 4 + 16 * 32 * 4 // 4
    assert "sharding={devices=[1,4]<=[4]}" in result.module.entry.instruction("w").to_text()


MLP_CHAIN = """HloModule chain
ENTRY e {
  x = f32[8,16] parameter(0), sharding={replicated}
  w1 = f32[16,32] parameter(1)
  w2 = f32[32,16] parameter(2)
  h = f32[8,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,32] tanh(h)
  ROOT y = f32[8,16] dot(t, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0},
    sharding={replicated}
}"""


def test_a_replicated_result_of_two_dots_is_column_then_row_parallel():
    # the cheapest way to a replicated y with both weights split: w1 by columns, w2 by rows
    # and one all-reduce of y: 2 * 3/4 * (8 * 16 * 4) = 768 bytes (gathering t and y costs
    # 3/4 * (8 * 32 + 8 * 16) * 4 = 1152)
    module = minixla.parse_hlo_module(MLP_CHAIN)
    result = auto_shard(module, 4)
    assert [str(result.sharding_of(n)) for n in ("w1", "h", "t", "w2")] == [
        SPLIT_COLUMNS,
        SPLIT_COLUMNS,
        SPLIT_COLUMNS,
        SPLIT_ROWS,
    ]
    assert result.communication_bytes == 768
    exe = check_against_one_device(module, 4)
    assert collective_bytes(exe.partitioned_module, 4) == {"all-reduce": 768, "total": 768}


@pytest.mark.parametrize(
    "options",
    [
        AutoShardingOptions(),
        AutoShardingOptions(memory_limit_bytes=5000, memory_weight=0.0),
        AutoShardingOptions(memory_limit_bytes=4000, memory_weight=0.0, compute_weight=0.0),
    ],
    ids=["default", "limit-5000", "limit-4000"],
)
def test_the_integer_program_finds_the_best_of_every_assignment(options):
    # every combination of strategies of the chain on 2 devices (216 of them), costed by
    # the same measure the integer program minimizes; the replicated peak is 6656 bytes
    comp = minixla.parse_hlo_module(MLP_CHAIN).entry
    choices, objective, optimal = solve(comp, 2, options)
    assert optimal
    assert objective == pytest.approx(brute_force_best(comp, choices, 2, options))


def brute_force_best(comp, choices, n, options):
    best = np.inf
    for picks in itertools.product(*(range(len(c.strategies)) for c in choices)):
        for choice, pick in zip(choices, picks):
            choice.chosen = pick
        sent, flops, peak = evaluate(comp, choices, n)
        if options.memory_limit_bytes is None or peak <= options.memory_limit_bytes:
            best = min(best, sent + options.compute_weight * flops + options.memory_weight * peak)
    return best


@pytest.mark.parametrize("memory_weight", [0.5, 0.0])
def test_on_a_2x2_mesh_the_integer_program_finds_the_best_of_every_assignment(memory_weight):
    text = ONE_DOT.replace(", sharding={replicated}", "")
    comp = minixla.parse_hlo_module(text).entry
    options = AutoShardingOptions(
        mesh_shape=(2, 2), memory_weight=memory_weight, memory_limit_bytes=2000
    )
    choices, objective, optimal = solve(comp, 4, options)
    # each rank-2 array has 9 shardings: whole, a dim cut by either axis or both, or one
    # dim by each axis
    assert [len(c.strategies) for c in choices[:2]] == [9, 9]
    assert optimal
    assert objective == pytest.approx(brute_force_best(comp, choices, 4, options))


def test_without_a_memory_term_nothing_is_split_and_a_limit_forces_it():
    module = minixla.parse_hlo_module(MLP_CHAIN)
    free = auto_shard(module, 4, AutoShardingOptions(memory_weight=0.0, compute_weight=0.0))
    assert free.communication_bytes == 0
    limit = free.replicated_peak_memory_bytes // 2
    bounded = auto_shard(
        module,
        4,
        AutoShardingOptions(memory_limit_bytes=limit, memory_weight=0.0, compute_weight=0.0),
    )
    assert bounded.peak_memory_bytes <= limit < free.peak_memory_bytes
    assert bounded.communication_bytes > 0


def test_an_infeasible_memory_limit_is_a_clear_error():
    module = minixla.parse_hlo_module(MLP_CHAIN)
    with pytest.raises(
        AutoShardingError,
        match="no sharding on 4 devices keeps the memory per device under 1000 bytes",
    ):
        auto_shard(module, 4, AutoShardingOptions(memory_limit_bytes=1000))


def test_an_op_without_strategies_runs_replicated_and_says_why():
    text = """HloModule rev
ENTRY e {
  x = f32[8,16] parameter(0)
  n = f32[8,16] negate(x)
  r = f32[8,16] reverse(n), dimensions={0}
  ROOT e = f32[8,16] exponential(r)
}"""
    module = minixla.parse_hlo_module(text)
    result = auto_shard(module, 4)
    assert result.fallbacks == {"r": "no auto-sharding strategies for reverse: runs replicated"}
    assert str(result.sharding_of("r")) == "{replicated}"
    assert "reverse: runs replicated" in str(result)
    check_against_one_device(module, 4)


def reduce_broadcast_program(x, w):
    y = mnp.tanh(x @ w)
    centred = y - y.mean(axis=0, keepdims=True)
    return (centred.T @ centred).sum(axis=1)


def test_reductions_broadcasts_and_transposes_give_the_unsharded_results():
    rng = np.random.default_rng(1)
    x, w = (
        rng.standard_normal((16, 32)).astype(np.float32),
        rng.standard_normal((32, 64)).astype(np.float32) / 8,
    )
    module = minixla.jit(reduce_broadcast_program).lower(x, w).module
    exe = check_against_one_device(module, 4)
    assert exe.auto_sharding.fallbacks == {}


def mlp4(x, w1, w2, w3, w4):
    for w in (w1, w2, w3):
        x = mnp.tanh(x @ w)
    return x @ w4


def test_a_four_layer_mlp_on_eight_devices_holds_at_most_half_the_weights():
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((8, 128)).astype(np.float32)] + [
        rng.standard_normal((128, 128)).astype(np.float32) / 12 for _ in range(4)
    ]
    mesh = Mesh(np.array(minixla.devices()), ("d",))
    fn = minixla.jit(mlp4, backend="interpreter", auto_sharding=mesh)
    np.testing.assert_allclose(
        fn(*args), minixla.jit(mlp4, backend="interpreter")(*args), rtol=1e-5, atol=1e-5
    )
    exe = fn.lower(*args).compile()
    params = exe.partitioned_module.entry.parameters
    per_device = sum(p.shape.byte_size() for p in params[1:])
    assert per_device * 2 <= sum(a.nbytes for a in args[1:])
    assert exe.auto_sharding.parameter_bytes == sum(p.shape.byte_size() for p in params)
    # the cheapest way with every weight split: split columns, all-gathered before the next
    # layer, 3 * 7/8 * (8 * 128 * 4) bytes (column-then-row pairs would all-reduce twice:
    # 2 * 2 * 7/8 * 4096)
    assert exe.auto_sharding.communication_bytes == 10752
    assert collective_bytes(exe.partitioned_module, 8)["total"] == 10752


def test_the_optimum_is_found_on_a_wide_mlp():
    # 1024-wide weights on 8 devices: large memory terms next to small byte counts (with
    # presolve, HiGHS called a choice with an extra all-to-all optimal here)
    args = [np.zeros((16, 1024), np.float32)] + [np.zeros((1024, 1024), np.float32)] * 4
    result = auto_shard(minixla.jit(mlp4).lower(*args).module, 8)
    assert result.communication_bytes == 3 * 7 * 16 * 1024 * 4 // 8
    assert result.parameter_bytes == 16 * 1024 * 4 + 4 * 1024 * 1024 * 4 // 8


def test_the_chosen_shardings_are_dumped(tmp_path):
    minixla.compile(ONE_DOT, num_partitions=4, auto_sharding=True, dump_to=str(tmp_path))
    dumped = next(tmp_path.glob("*.auto_sharding.txt")).read_text()
    assert "parameter(1), sharding={devices=[1,4]<=[4]}" in dumped
    report = next(tmp_path.glob("*.auto_sharding_report.txt")).read_text()
    assert "%w: {devices=[1,4]<=[4]}" in report


def test_auto_sharding_needs_devices_and_a_global_program():
    with pytest.raises(minixla.MinixlaError, match="pass num_partitions=N"):
        minixla.compile(ONE_DOT, auto_sharding=True)
    partitioned = """HloModule p, num_partitions=2
ENTRY e {
  x = f32[4] parameter(0)
  ROOT id = u32[] partition-id()
}"""
    with pytest.raises(minixla.MinixlaError, match="already partitioned"):
        minixla.compile(partitioned, auto_sharding=True)


def test_a_shard_map_region_is_refused():
    from test_spmd_partitioner import SHARD_MAP_FROM_JAX

    with pytest.raises(AutoShardingError, match="does not handle shard_map"):
        minixla.compile(SHARD_MAP_FROM_JAX, num_partitions=4, auto_sharding=True)


def test_a_missing_solver_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.optimize", None)
    with pytest.raises(
        AutoShardingError,
        match=r"install scipy \(pip install "
        r"'minixla\[autoshard\]'\)",
    ):
        auto_shard(minixla.parse_hlo_module(ONE_DOT), 4)


def test_jit_keeps_the_shardings_it_is_given():
    rng = np.random.default_rng(3)
    x, w1, w2 = (
        rng.standard_normal(s).astype(np.float32) / 4 for s in [(8, 16), (16, 32), (32, 16)]
    )
    mesh = Mesh(np.array(minixla.devices()[:4]), ("d",))
    by_rows = NamedSharding(mesh, PartitionSpec("d", None))
    fn = minixla.jit(
        lambda x, w1, w2: mnp.tanh(x @ w1) @ w2,
        backend="interpreter",
        in_shardings=(by_rows, None, None),
        auto_sharding=mesh,
    )
    np.testing.assert_allclose(fn(x, w1, w2), np.tanh(x @ w1) @ w2, rtol=1e-5, atol=1e-5)
    report = fn.lower(x, w1, w2).compile().auto_sharding
    assert str(report.parameter_shardings[0]) == "{devices=[4,1]<=[4]}"
    with pytest.raises(minixla.MinixlaError, match="auto_sharding takes a Mesh"):
        minixla.jit(mnp.tanh, auto_sharding=4)(x)


def test_an_mlp_on_a_2x4_mesh_equals_one_device():
    rng = np.random.default_rng(4)
    x, w1, w2 = (
        rng.standard_normal(s).astype(np.float32) / 8 for s in [(16, 32), (32, 64), (64, 32)]
    )
    mesh = Mesh(np.array(minixla.devices()).reshape(2, 4), ("data", "model"))
    fn = minixla.jit(
        lambda x, w1, w2: mnp.tanh(x @ w1) @ w2, backend="interpreter", auto_sharding=mesh
    )
    np.testing.assert_allclose(fn(x, w1, w2), np.tanh(x @ w1) @ w2, rtol=1e-5, atol=1e-5)
    exe = fn.lower(x, w1, w2).compile()
    report = exe.auto_sharding
    assert report.parameter_bytes * 2 <= report.replicated_parameter_bytes
    assert collective_bytes(exe.partitioned_module, 8)["total"] == report.communication_bytes
    with pytest.raises(minixla.MinixlaError, match="devices 0..7 in order"):
        minixla.jit(mnp.tanh, auto_sharding=Mesh(np.arange(8)[::-1], ("d",))).lower(x)


def sampled_cases(count: int = 12):
    cases = case_dirs()
    return cases[:: max(1, len(cases) // count)][:count]


@requires_corpus
@pytest.mark.parametrize("case", sampled_cases(), ids=lambda p: p.name)
def test_auto_sharded_corpus_programs_equal_the_unsharded_ones(case):
    meta, args = load_args(case)
    module = minixla.parse_hlo_module((case / "module.hlo").read_text())
    want = minixla.compile(module)(*args)
    exe = minixla.compile(module, num_partitions=2, auto_sharding=True)
    problems = compare_values(
        exe(*args), want, rtol=max(meta["rtol"], 1e-5), atol=max(meta["atol"], 1e-5), what=case.name
    )
    assert not problems, "\n".join(problems) + "\n" + str(exe.auto_sharding)
