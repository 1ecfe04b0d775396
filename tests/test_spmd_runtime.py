"""N devices in one process: collectives on small groups, the multi-device executable
(global arguments split by shardings, results assembled), timeouts and failing devices."""

import numpy as np
import pytest

import minixla
from minixla import ExecutionError, register_custom_call
from minixla.runtime import spmd
from minixla.runtime.devices import devices
from minixla.reference.rendezvous import CollectiveTimeoutError
from minixla.reference.custom_call import unregister_custom_call


@pytest.fixture(autouse=True)
def eight_devices(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "8")
    monkeypatch.delenv("XLA_FLAGS", raising=False)


ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def module(body: str, partitions: int = 4, header: str = "") -> str:
    return f"HloModule m, num_partitions={partitions}{header}\n{ADD}\nENTRY e {{\n{body}\n}}\n"


def shards(count: int, dims, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(dims).astype(np.float32) for _ in range(count)]


def run(text: str, per_device, backend: str = "interpreter", **options):
    exe = minixla.compile(text, backend=backend, **options)
    return exe.execute_sharded([[x] for x in per_device])


def test_devices_come_from_the_environment(monkeypatch):
    assert [d.id for d in devices()] == list(range(8))
    monkeypatch.delenv("MINIXLA_NUM_CPU_DEVICES")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_foo=1 --xla_force_host_platform_device_count=3")
    assert len(minixla.devices()) == 3
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "zero")
    with pytest.raises(minixla.MinixlaError, match="positive integer"):
        devices()


def test_all_reduce_sums_within_each_group():
    xs = shards(4, (3,))
    text = module(
        "p = f32[3] parameter(0)\n ROOT r = f32[3] all-reduce(p), channel_id=1, "
        "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add"
    )
    out = run(text, xs)
    np.testing.assert_allclose(out[0], xs[0] + xs[1], rtol=1e-6)
    np.testing.assert_allclose(out[1], xs[0] + xs[1], rtol=1e-6)
    np.testing.assert_allclose(out[3], xs[2] + xs[3], rtol=1e-6)


def test_variadic_all_reduce_reduces_each_operand():
    xs = shards(2, (2,))
    text = module(
        "p = f32[2] parameter(0)\n n = f32[2] negate(p)\n ROOT r = (f32[2], f32[2]) "
        "all-reduce(p, n), channel_id=1, replica_groups={{0,1}}, "
        "use_global_device_ids=true, to_apply=add",
        partitions=2,
    )
    out = run(text, xs)
    np.testing.assert_allclose(out[1][0], xs[0] + xs[1], rtol=1e-6)
    np.testing.assert_allclose(out[1][1], -(xs[0] + xs[1]), rtol=1e-6)


def test_all_gather_concatenates_in_group_order():
    xs = shards(4, (2, 3))
    text = module(
        "p = f32[2,3] parameter(0)\n ROOT g = f32[2,6] all-gather(p), channel_id=1, "
        "replica_groups=[2,2]<=[2,2]T(1,0), dimensions={1}, "
        "use_global_device_ids=true"
    )
    out = run(text, xs)
    np.testing.assert_array_equal(out[0], np.concatenate([xs[0], xs[2]], 1))
    np.testing.assert_array_equal(out[3], np.concatenate([xs[1], xs[3]], 1))


def test_reduce_scatter_gives_each_rank_its_piece_of_the_sum():
    xs = shards(4, (8,))
    text = module(
        "p = f32[8] parameter(0)\n ROOT r = f32[2] reduce-scatter(p), channel_id=1, "
        "replica_groups={{0,1,2,3}}, use_global_device_ids=true, dimensions={0}, "
        "to_apply=add"
    )
    out = run(text, xs)
    total = sum(xs)
    for rank in range(4):
        np.testing.assert_allclose(out[rank], total[2 * rank : 2 * rank + 2], rtol=1e-5)


def test_all_to_all_exchanges_chunks():
    xs = shards(2, (4, 2))
    text = module(
        "p = f32[4,2] parameter(0)\n ROOT a = f32[4,2] all-to-all(p), channel_id=1, "
        "replica_groups={{0,1}}, dimensions={0}",
        partitions=2,
    )
    out = run(text, xs)
    np.testing.assert_array_equal(out[0], np.concatenate([xs[0][:2], xs[1][:2]]))
    np.testing.assert_array_equal(out[1], np.concatenate([xs[0][2:], xs[1][2:]]))


def test_tuple_all_to_all_sends_operand_j_to_rank_j():
    xs = shards(2, (3,))
    text = module(
        "p = f32[3] parameter(0)\n n = f32[3] negate(p)\n ROOT a = (f32[3], f32[3]) "
        "all-to-all(p, n), channel_id=1, replica_groups={{0,1}}",
        partitions=2,
    )
    out = run(text, xs)
    np.testing.assert_array_equal(out[0][0], xs[0])
    np.testing.assert_array_equal(out[0][1], xs[1])
    np.testing.assert_array_equal(out[1][0], -xs[0])
    np.testing.assert_array_equal(out[1][1], -xs[1])


def test_collective_permute_moves_data_and_zeroes_non_targets():
    xs = shards(4, (2,))
    text = module(
        "p = f32[2] parameter(0)\n ROOT c = f32[2] collective-permute(p), "
        "channel_id=1, source_target_pairs={{0,1},{1,2},{2,0}}"
    )
    out = run(text, xs)
    np.testing.assert_array_equal(out[1], xs[0])
    np.testing.assert_array_equal(out[2], xs[1])
    np.testing.assert_array_equal(out[0], xs[2])
    np.testing.assert_array_equal(out[3], np.zeros(2, np.float32))


def test_collective_broadcast_sends_the_first_ranks_value():
    xs = shards(4, (2,))
    text = module(
        "p = f32[2] parameter(0)\n ROOT b = f32[2] collective-broadcast(p), "
        "channel_id=1, replica_groups={{1,0},{3,2}}"
    )
    out = run(text, xs)
    assert [o.tolist() for o in out] == [xs[1].tolist()] * 2 + [xs[3].tolist()] * 2


def test_async_pairs_and_ids():
    xs = shards(4, (2,))
    text = module("""p = f32[2] parameter(0)
  id = u32[] partition-id()
  f = f32[] convert(id)
  fb = f32[2] broadcast(f), dimensions={}
  q = f32[2] add(p, fb)
  s = (f32[2], f32[8]) all-gather-start(q), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  d = f32[8] all-gather-done(s)
  rs = f32[8] all-reduce-start(d), channel_id=2, replica_groups={{0,1,2,3}}, use_global_device_ids=true, to_apply=add
  rd = f32[8] all-reduce-done(rs)
  cs = (f32[8], f32[8], u32[], u32[]) collective-permute-start(rd), channel_id=3, source_target_pairs={{0,3},{3,0}}
  ROOT cd = f32[8] collective-permute-done(cs)""")
    out = run(text, xs)
    gathered = np.concatenate([x + i for i, x in enumerate(xs)])
    np.testing.assert_allclose(out[3], 4 * gathered, rtol=1e-5)
    np.testing.assert_array_equal(out[1], np.zeros(8, np.float32))


def test_replicas_and_partitions_have_their_own_ids():
    text = module(
        """r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)""",
        partitions=2,
        header=", replica_count=2",
    )
    exe = minixla.compile(text)
    assert exe.num_devices == 4
    out = exe.execute_sharded([[]] * 4)
    assert [(int(a), int(b)) for a, b in out] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_cross_replica_all_reduce_sums_the_replicas_of_each_partition():
    xs = shards(4, (2,))
    text = module(
        "p = f32[2] parameter(0)\n ROOT r = f32[2] all-reduce(p), replica_groups={}, to_apply=add",
        partitions=2,
        header=", replica_count=2",
    )
    out = run(text, xs)
    np.testing.assert_allclose(out[0], xs[0] + xs[2], rtol=1e-6)
    np.testing.assert_allclose(out[3], xs[1] + xs[3], rtol=1e-6)


MLP = """HloModule mlp, num_partitions=2
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,8] parameter(0), sharding={replicated}
  w1 = f32[8,3] parameter(1), sharding={devices=[1,2]<=[2]}
  w2 = f32[3,8] parameter(2), sharding={devices=[2,1]<=[2]}
  h = f32[4,3] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,3] tanh(h)
  y = f32[4,8] dot(t, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[4,8] all-reduce(y), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add, sharding={replicated}
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_partitioned_mlp_takes_global_arrays(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    w1 = rng.standard_normal((8, 6)).astype(np.float32)
    w2 = rng.standard_normal((6, 8)).astype(np.float32)
    exe = minixla.compile(MLP, backend=backend)
    assert [s.dims for s in exe.global_parameter_shapes] == [(4, 8), (8, 6), (6, 8)]
    assert exe.partitioned_module.entry.parameters[1].shape.dims == (8, 3)
    np.testing.assert_allclose(exe(x, w1, w2), np.tanh(x @ w1) @ w2, rtol=1e-4, atol=1e-5)


def test_results_are_assembled_by_out_shardings():
    text = module(
        "p = f32[2,3] parameter(0), sharding={devices=[4,1]<=[4]}\n ROOT n = f32[2,3] negate(p)"
    )
    x = np.arange(24, dtype=np.float32).reshape(8, 3)
    exe = minixla.compile(text, out_shardings="{devices=[4,1]<=[4]}", already_partitioned=True)
    np.testing.assert_array_equal(exe(x), -x)
    spmd_entry = text.replace("ENTRY e", "ENTRY e_spmd")  # XLA's name for a partitioned entry
    with pytest.raises(spmd.ShardingError, match="out_shardings=.*execute_sharded"):
        minixla.compile(spmd_entry)(x)


def test_too_few_devices_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "2")
    with pytest.raises(ExecutionError, match="needs 4 devices.*MINIXLA_NUM_CPU_DEVICES=4"):
        minixla.compile(module("ROOT p = f32[2] parameter(0)"))


def test_a_device_that_skips_a_collective_times_out_with_the_missing_devices():
    text = module(
        """p = f32[2] parameter(0)
  id = u32[] partition-id()
  zero = u32[] constant(0)
  first = pred[] compare(id, zero), direction=EQ
  ROOT c = f32[2] conditional(first, p, p), true_computation=reduce_it, false_computation=keep_it""",
        partitions=2,
    )
    text = text.replace(
        "\nENTRY",
        """
reduce_it {
  x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add
}
keep_it {
  ROOT y = f32[2] parameter(0)
}
ENTRY""",
    )
    with pytest.raises(
        CollectiveTimeoutError,
        match=r"all-reduce %r timed out.*devices \[1\] "
        r"did not arrive \(arrived: \[0\]\)",
    ):
        run(text, shards(2, (2,)), collective_timeout=0.3)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_failing_device_fails_the_call_with_its_error(backend):
    class DeviceBroke(minixla.MinixlaError):
        pass

    def fail_on_partition_one(*operands, **_):
        if int(operands[-1]) == 1:  # the cpu convention passes the output buffer first
            raise DeviceBroke("partition 1 broke")
        return np.float32(0)

    register_custom_call("fail_on_one", backend, fail_on_partition_one)
    text = module(
        """p = f32[2] parameter(0)
  id = u32[] partition-id()
  z = f32[] custom-call(id), custom_call_target="fail_on_one"
  zb = f32[2] broadcast(z), dimensions={}
  q = f32[2] add(p, zb)
  ROOT r = f32[2] all-reduce(q), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, to_apply=add""",
        partitions=2,
    )
    try:
        with pytest.raises(DeviceBroke, match="partition 1 broke") as info:
            run(text, shards(2, (2,)), backend=backend, collective_timeout=30)
        assert "raised on device 1 of 2" in "".join(getattr(info.value, "__notes__", []))
    finally:
        unregister_custom_call("fail_on_one", backend)


def test_shapes_that_disagree_across_devices_name_the_collective():
    a = minixla.compile(
        "HloModule a\n" + ADD + "\nENTRY e {\n p = f32[2] parameter(0)\n ROOT r = "
        "f32[2] all-reduce(p), replica_groups={}, to_apply=add\n}\n"
    )
    b = minixla.compile(
        "HloModule b\n" + ADD + "\nENTRY e {\n p = f32[3] parameter(0)\n ROOT r = "
        "f32[3] all-reduce(p), replica_groups={}, to_apply=add\n}\n"
    )
    with pytest.raises(
        ExecutionError,
        match=r"all-reduce %r: participant 1 has operand shapes "
        r"\[\(3,\)\]",
    ):
        spmd.run_on_devices(
            [a._run, b._run],
            [[np.zeros(2, np.float32)], [np.zeros(3, np.float32)]],
            replicas=2,
            partitions=1,
            timeout=5,
        )


@pytest.mark.parametrize(
    "text",
    [
        "p = f32[2] parameter(0)\n ROOT r = f32[2] all-reduce(p), channel_id=1, "
        "replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=add",
        "p = f32[2] parameter(0)\n ROOT r = f32[8] all-gather(p), channel_id=1, "
        "replica_groups=[2,4]<=[8], dimensions={0}, use_global_device_ids=true",
    ],
)
def test_cpu_collectives_match_the_interpreter(text):
    xs = shards(8, (2,), seed=3)
    text = module(text, partitions=8)
    want = run(text, xs)
    got = run(text, xs, backend="cpu")
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_num_partitions_must_match_the_shardings():
    text = (
        "HloModule m\nENTRY e {\n  p = f32[4] parameter(0), sharding={devices=[4]<=[4]}\n"
        "  ROOT n = f32[4] negate(p)\n}\n"
    )
    with pytest.raises(minixla.VerificationError, match=r"%p = .*spans 4 devices.*runs on 2"):
        minixla.compile(text, num_partitions=2)


def test_bad_out_shardings_are_errors():
    text = module("ROOT p = f32[2] parameter(0)", partitions=2)
    with pytest.raises(spmd.ShardingError, match="out_shardings: unknown sharding"):
        minixla.compile(text, out_shardings="{sideways}")


def test_an_explicit_single_partition_overrides_the_header():
    text = module("p = f32[2] parameter(0), sharding={replicated}\n ROOT n = f32[2] negate(p)")
    exe = minixla.compile(text, num_partitions=1)
    assert isinstance(exe, minixla.Executable)
    np.testing.assert_array_equal(exe(np.ones(2, np.float32)), -np.ones(2, np.float32))
