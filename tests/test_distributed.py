"""minixla.distributed: process placement, the single-process job, and `mpiexec` runs of small
scripts (skipped when mpi4py or mpiexec is missing) for every collective and for failures."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import minixla.distributed as dist
from minixla.distributed import process as dist_process
from distributed_devices import run_devices
from minixla.errors import MinixlaError

ROOT = Path(__file__).resolve().parents[1]


# -- placement ---------------------------------------------------------------------------------


def test_devices_are_grouped_per_process_in_order():
    got = [(p.device, p.process, p.local_device) for p in dist.placements(8, 4)]
    assert got == [(d, d // 2, d % 2) for d in range(8)]
    assert dist.local_devices(1, 8, 2) == [4, 5, 6, 7]
    assert dist.place(5, 6, 3) == dist.DevicePlacement(device=5, process=2, local_device=1)
    assert dist.processes_of([1, 6, 7], 8, 4) == [0, 3]
    assert dist.processes_of([0, 1], 8, 4) == [0]


def test_every_device_has_exactly_one_place():
    for devices, processes in [(1, 1), (4, 1), (4, 4), (12, 3)]:
        owned = [d for p in range(processes) for d in dist.local_devices(p, devices, processes)]
        assert owned == list(range(devices))
        for d in owned:
            where = dist.place(d, devices, processes)
            assert dist.local_devices(where.process, devices, processes)[where.local_device] == d


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: dist.placements(6, 4), "multiple of the process count"),
        (lambda: dist.place(8, 8, 2), "device 8 is not one of the 8"),
        (lambda: dist.local_devices(2, 4, 2), "process 2 is not one of the 2"),
        (lambda: dist.devices_per_process(0, 1), "must be positive"),
    ],
)
def test_placement_errors(call, message):
    with pytest.raises(dist.DistributedError, match=message):
        call()


# -- one process, no launcher ------------------------------------------------------------------


@pytest.fixture
def single_process(monkeypatch):
    for name in dist_process._LAUNCHER_ENV:
        monkeypatch.delenv(name, raising=False)
    dist.shutdown()
    yield
    dist.shutdown()


def test_single_process_job(single_process):
    transport = dist.initialize()
    assert dist.initialize() is transport and dist.is_initialized()
    assert (dist.process_index(), dist.process_count()) == (0, 1)
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(transport.allreduce(x, "max"), x)
    np.testing.assert_array_equal(transport.allgather(x, axis=1), x)
    np.testing.assert_array_equal(transport.reduce_scatter(x), x)
    np.testing.assert_array_equal(transport.alltoall(x, 0, 1), x)
    np.testing.assert_array_equal(transport.permute(x, [(0, 0)]), x)
    np.testing.assert_array_equal(transport.permute(x, []), np.zeros_like(x))
    np.testing.assert_array_equal(transport.broadcast(x), x)
    assert transport.allgather_objects({"a": 1}) == [{"a": 1}]
    dist.shutdown()
    assert not dist.is_initialized()


def test_single_process_errors(single_process):
    transport = dist.initialize()
    with pytest.raises(dist.DistributedError, match="unknown reduction 'mean'"):
        transport.allreduce(np.ones(2), "mean", name="ar.1")
    with pytest.raises(
        dist.DistributedError, match="all-reduce %ar.1: reduction 'and' does not apply to float64"
    ):
        transport.allreduce(np.ones(2), "and", name="ar.1")
    with pytest.raises(dist.DistributedError, match="ranks outside 0..0"):
        transport.permute(np.ones(2), [(0, 1)])
    with pytest.raises(dist.DistributedError, match="rank 0 is not in group"):
        transport.barrier(group=[])


def test_device_threads_meet_in_one_process(single_process):
    assert run_devices(dist.initialize(), num_devices=4) == {}


def test_a_failing_device_fails_the_others_in_one_process(single_process):
    errors = run_devices(dist.initialize(), num_devices=4, fail_device=2)
    assert isinstance(errors.pop(2), ValueError)
    assert set(errors) == {0, 1, 3}
    assert all(
        isinstance(e, dist.DeviceFailedError) and "device 2 failed" in str(e)
        for e in errors.values()
    )


class _SilentPeerTransport(dist.PointToPointTransport):
    """Rank 0 of two whose peer never answers: every route times out."""

    def __init__(self):
        self.rank, self.size = 0, 2
        self.keys = []

    def route(self, what, sends, sources, key=None):
        self.keys.append(key)
        raise dist.CollectiveTimeoutError(f"{what} timed out: ranks [1] did not arrive", [1])


def test_a_group_across_processes_names_the_devices_that_did_not_arrive():
    transport = _SilentPeerTransport()
    rendezvous = dist.ProcessRendezvous(4, transport)
    with pytest.raises(
        dist.CollectiveTimeoutError,
        match=r"all-reduce %s timed out: ranks \[1\] did not arrive; those ranks "
        r"run devices \{1: \[2, 3\]\}",
    ):
        rendezvous.exchange(("s", 1), (0, 2), 0, np.ones(2), lambda v: v, "all-reduce %s")
    assert transport.keys == [("rendezvous", "s", 1)]
    # a group inside this process never touches the transport
    assert rendezvous.exchange(("t",), (0,), 0, 5, lambda v: [v[0] + 1], "x") == 6
    with pytest.raises(dist.DistributedError, match="device 2 runs on process 1, not on 0"):
        rendezvous.exchange(("u",), (0, 2), 2, 1, lambda v: v, "all-gather %u")
    with pytest.raises(dist.DistributedError, match="6 devices do not spread evenly"):
        dist.ProcessRendezvous(6, _FourRanks())


class _FourRanks(_SilentPeerTransport):
    def __init__(self):
        super().__init__()
        self.size = 4


def test_an_executable_in_a_job_runs_only_this_process_devices(monkeypatch):
    import minixla
    from minixla.runtime import spmd

    transport = _SilentPeerTransport()  # rank 0 of 2
    monkeypatch.setattr(spmd, "process_job", lambda: transport)
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "2")  # this process's share is enough
    head = (
        "HloModule m, num_partitions=4\nadd {\n a = f32[] parameter(0)\n b = f32[] "
        "parameter(1)\n ROOT s = f32[] add(a, b)\n}\nENTRY e {\n p = f32[2] parameter(0)\n"
    )
    inside = minixla.compile(
        head + " ROOT r = f32[2] all-reduce(p), channel_id=1, replica_groups="
        "{{0,1},{2,3}}, use_global_device_ids=true, to_apply=add\n}\n"
    )
    assert inside.local_devices() == [0, 1]
    x0, x1 = np.array([1, 2], np.float32), np.array([10, 20], np.float32)
    got = inside.execute_sharded([[x0], [x1]])  # groups inside this process need no peer
    assert [r.tolist() for r in got] == [[11, 22], [11, 22]] and transport.keys == []
    with pytest.raises(
        minixla.ExecutionError,
        match=r"runs on 4 devices \(2 of them, devices "
        r"\[0, 1\], on process 0\), got arguments "
        r"for 4",
    ):
        inside.execute_sharded([[x0]] * 4)
    across = minixla.compile(
        head + " ROOT r = f32[2] all-reduce(p), channel_id=1, replica_groups="
        "{{0,2},{1,3}}, use_global_device_ids=true, to_apply=add\n}\n"
    )
    with pytest.raises(
        dist.CollectiveTimeoutError,
        match=r"ranks \[1\] did not arrive; those "
        r"ranks run devices \{1: \[2, 3\]\}",
    ):
        across.execute_sharded([[x0], [x1]])
    with pytest.raises(
        minixla.ExecutionError,
        match="a program on 3 devices cannot run in a job of 2 processes: 3 devices do not spread",
    ):
        minixla.compile(
            "HloModule three, num_partitions=3\nENTRY e {\n ROOT p = f32[2] "
            "parameter(0), sharding={replicated}\n}\n"
        )


def test_timeout_option_and_env(single_process, monkeypatch):
    monkeypatch.setenv(dist_process.TIMEOUT_ENV, "soon")
    with pytest.raises(MinixlaError, match="MINIXLA_COLLECTIVE_TIMEOUT='soon'"):
        dist.initialize()
    with pytest.raises(MinixlaError, match="collective_timeout=-1"):
        dist.initialize(collective_timeout=-1)


# -- mpiexec runs ------------------------------------------------------------------------------


def _mpi_available() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return shutil.which("mpiexec") is not None


needs_mpi = pytest.mark.skipif(
    not _mpi_available(), reason="needs mpi4py and mpiexec: pip install '.[distributed]'"
)

PRELUDE = f"""\
import sys, time
sys.path.insert(0, {str(ROOT / "tests")!r})
import numpy as np
import minixla.distributed as dist
from distributed_devices import run_devices
"""


def mpiexec(tmp_path, processes: int, body: str, timeout: float = 300, env=None):
    script = tmp_path / "job.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    # A collective that hangs fails well before the subprocess times out; ranks of a loaded
    # 2-core machine can start tens of seconds apart (each imports minixla and NumPy).
    environment = dict(os.environ, PYTHONPATH=str(ROOT), MINIXLA_COLLECTIVE_TIMEOUT="120")
    environment.update(env or {})
    # Open MPI refuses root and more ranks than cores unless told; MPICH ignores these.
    environment.update(
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    start = time.monotonic()
    done = subprocess.run(
        ["mpiexec", "-n", str(processes), sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
        cwd=tmp_path,
    )
    return done, time.monotonic() - start


COLLECTIVES = """
transport = dist.initialize()
rank, size = dist.process_index(), dist.process_count()
assert dist.initialize() is transport and transport.size == size
assert dist.launched_by_mpi()

def data(r, dtype):
    values = np.random.default_rng(100 + r).normal(size=(size * 2, 3)) * 100
    return values.astype(dtype)

for dtype in [np.float32, np.float64, np.int32]:
    mine, every = data(rank, dtype), [data(r, dtype) for r in range(size)]
    for op, fn in [("sum", np.add), ("prod", np.multiply), ("max", np.maximum),
                   ("min", np.minimum)]:
        want = every[0]
        for x in every[1:]:
            want = fn(want, x)
        got = transport.allreduce(mine, op, name=f"ar.{op}")
        assert got.dtype == want.dtype and np.array_equal(got, want), (op, dtype)
        # every rank holds the same bits
        bits = transport.allgather_objects(got.tobytes())
        assert all(b == bits[0] for b in bits), (op, dtype)
        piece = transport.reduce_scatter(mine, op, axis=0)
        assert np.array_equal(piece, np.split(want, size, axis=0)[rank]), (op, dtype)
    assert np.array_equal(transport.allgather(mine, axis=1), np.concatenate(every, axis=1))
    got = transport.alltoall(mine, split_axis=0, concat_axis=1)
    want = np.concatenate([np.split(x, size, axis=0)[rank] for x in every], axis=1)
    assert np.array_equal(got, want)
    ring = [(r, (r + 1) % size) for r in range(size)]
    assert np.array_equal(transport.permute(mine, ring), every[(rank - 1) % size])
    half = [(0, size - 1)]  # only the last rank receives
    want = every[0] if rank == size - 1 else np.zeros_like(mine)
    assert np.array_equal(transport.permute(mine, half), want)
    got = transport.sendrecv(mine, dest=(rank + 1) % size, source=(rank - 1) % size)
    assert np.array_equal(got, every[(rank - 1) % size])
    assert np.array_equal(transport.broadcast(mine, root=size - 1), every[size - 1])

flags = np.array([rank % 2 == 0, True, False])
assert transport.allreduce(flags, "and").tolist() == [size == 1, True, False]
assert transport.allreduce(flags, "or").tolist() == [True, True, False]
# a generic reducer is folded in rank order: the same bits on every rank, not commutative
got = transport.allreduce(np.array([float(rank)]), lambda a, b: a * 10 + b)
want = 0.0
for r in range(1, size):
    want = want * 10 + r
assert got.tolist() == [want]
evens = [r for r in range(size) if r % 2 == 0]
if rank in evens:
    assert transport.allreduce(np.array([rank]), group=evens).tolist() == [sum(evens)]
# raw bytes of any dtype, scalars and empty arrays travel unchanged
import ml_dtypes
halves = [(np.arange(4) + r).astype(ml_dtypes.bfloat16) for r in range(size)]
got = transport.allgather(halves[rank])
assert got.dtype == ml_dtypes.bfloat16 and np.array_equal(got, np.concatenate(halves))
got = transport.allreduce(np.array(float(rank)))
assert got.shape == () and float(got) == sum(range(size))
assert transport.allgather(np.zeros((0, 3), np.int8)).shape == (0, 3)
assert transport.broadcast(np.arange(6).reshape(2, 3)[:, 1]).tolist() == [1, 4]
try:
    transport.allreduce(np.ones(rank + 1), name="uneven")
    raise AssertionError("shapes that differ across ranks were accepted")
except dist.DistributedError as exc:
    assert "all-reduce %uneven: rank 1 has a float64[2] array, rank 0 a float64[1]" in str(exc)
transport.barrier()
# two device threads per process meeting in a ProcessRendezvous
assert run_devices(transport, num_devices=2 * size) == {}
print(f"rank {rank} of {size} ok", flush=True)
dist.shutdown()
"""


@needs_mpi
@pytest.mark.parametrize("processes", [2, 4])
def test_collectives_and_device_threads_match_numpy(tmp_path, processes):
    done, _ = mpiexec(tmp_path, processes, COLLECTIVES)
    assert done.returncode == 0, done.stdout + done.stderr
    # ranks share one stdout, so their lines may interleave; count the reports instead
    reports = sorted(re.findall(r"rank \d+ of \d+ ok", done.stdout))
    assert [f"rank {r} of {processes} ok" for r in range(processes)] == reports


@needs_mpi
def test_a_failing_device_fails_the_devices_of_other_processes(tmp_path):
    done, _ = mpiexec(
        tmp_path,
        2,
        """
        errors = run_devices(dist.initialize(collective_timeout=60), num_devices=4,
                             fail_device=3)
        for device, error in sorted(errors.items()):
            print(f"device {device}: {type(error).__name__}: {error}", flush=True)
    """,
    )
    output = done.stdout + done.stderr
    assert "device 3: ValueError: device 3 failed on purpose" in output
    assert "device 2: DeviceFailedError" in output
    assert (
        "rank 1 failed, so the collective cannot complete: ValueError: device 3 failed on "
        "purpose" in output
    )


@needs_mpi
def test_a_failing_rank_fails_every_rank(tmp_path):
    done, seconds = mpiexec(
        tmp_path,
        2,
        """
        transport = dist.initialize(collective_timeout=90)
        if dist.process_index() == 1:
            raise ValueError("bad batch on rank one")
        try:
            transport.allreduce(np.ones(3), name="grad_sum")
        except dist.RankFailedError as exc:
            print("caught:", exc, flush=True)
            raise
    """,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert seconds < 75, output  # ended by the notice, not by the 90 s timeout
    assert "caught: all-reduce %grad_sum on rank 0: rank 1 failed" in output
    assert "ValueError: bad batch on rank one" in output
    assert "[rank 1] Traceback" in output and "aborting the job" in output


@needs_mpi
def test_a_collective_that_times_out_names_the_missing_ranks(tmp_path):
    done, seconds = mpiexec(
        tmp_path,
        2,
        """
        transport = dist.initialize()
        if dist.process_index() == 1:
            time.sleep(40)  # never reaches the collective
        transport.allgather(np.ones(2), name="fusion.7")
    """,
        env={"MINIXLA_COLLECTIVE_TIMEOUT": "1.5"},
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert seconds < 30, output
    assert (
        "CollectiveTimeoutError: all-gather %fusion.7 timed out after 1.5 s on rank 0: "
        "ranks [1] did not arrive" in output
    )


@needs_mpi
def test_ranks_in_different_collectives_get_a_clear_error(tmp_path):
    done, _ = mpiexec(
        tmp_path,
        2,
        """
        transport = dist.initialize(collective_timeout=2)
        x = np.ones(4)
        if dist.process_index() == 0:
            transport.allreduce(x, name="a")
        else:
            transport.allgather(x, name="b")
    """,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert (
        "CollectiveMismatchError: all-reduce %a timed out after 2 s on rank 0: ranks [1] "
        "did not arrive; rank 1 is in all-gather %b"
        in output
        or "CollectiveMismatchError: all-gather %b timed out after 2 s on rank 1: ranks [0] "
        "did not arrive; rank 0 is in all-reduce %a"
        in output
    ), output


@needs_mpi
def test_a_killed_rank_ends_the_job(tmp_path):
    done, seconds = mpiexec(
        tmp_path,
        2,
        """
        import os, signal
        transport = dist.initialize(collective_timeout=90)
        if dist.process_index() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        transport.allreduce(np.ones(3))
    """,
    )
    assert done.returncode != 0
    assert seconds < 75, done.stdout + done.stderr


# -- multi-device executables over processes ----------------------------------------------------

SPMD_PRELUDE = """
import minixla
from minixla.runtime import spmd
MLP = '''HloModule mlp, num_partitions=4
ENTRY e {
  x = f32[8,16] parameter(0), sharding={replicated}
  w1 = f32[16,32] parameter(1), sharding={devices=[1,4]<=[4]}
  w2 = f32[32,16] parameter(2), sharding={devices=[4,1]<=[4]}
  h = f32[8,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,32] tanh(h)
  ROOT y = f32[8,16] dot(t, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, sharding={replicated}
}
'''
# already partitioned: groups that cross the two processes ({0,2}) and stay inside one ({0,1})
COLLECTIVES = '''HloModule coll, num_partitions=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[2,3] parameter(0), sharding={devices=[4,1]<=[4]}
  across = f32[2,3] all-reduce(p), channel_id=1, replica_groups={{0,2},{1,3}}, use_global_device_ids=true, to_apply=add
  inside = f32[2,3] all-reduce(across), channel_id=2, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=add
  every = f32[8,3] all-gather(p), channel_id=3, replica_groups={{0,1,2,3}}, dimensions={0}, use_global_device_ids=true
  ring = f32[2,3] collective-permute(p), channel_id=4, source_target_pairs={{0,1},{1,2},{2,3},{3,0}}
  ROOT t = (f32[2,3], f32[8,3], f32[2,3]) tuple(inside, every, ring)
}
'''
OUT = ["{devices=[4,1]<=[4]}", "{replicated}", "{devices=[4,1]<=[4]}"]
# a custom call that raises on partition 3 before the first collective
FAILING = COLLECTIVES.replace("  across =", '''  id = u32[] partition-id()
  z = f32[] custom-call(id), custom_call_target="fail_on_three"
  zb = f32[2,3] broadcast(z), dimensions={}
  q = f32[2,3] add(p, zb)
  across =''').replace("all-reduce(p)", "all-reduce(q)")
rng = np.random.default_rng(0)
x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32, 16)])
p = rng.standard_normal((8, 3)).astype(np.float32)
"""


@needs_mpi
@pytest.mark.parametrize("processes", [2, 4])
def test_a_partitioned_program_over_processes_equals_one_process(tmp_path, processes):
    done, _ = mpiexec(
        tmp_path,
        processes,
        SPMD_PRELUDE
        + textwrap.dedent("""
        # the same executables in this process alone, before the job starts
        mlp_alone = minixla.compile(MLP, backend="cpu")(x, w1, w2)
        coll_alone = minixla.compile(COLLECTIVES, out_shardings=OUT)
        coll_outputs_alone = coll_alone(p)
        shards_alone = coll_alone.execute_sharded([[piece] for piece in np.split(p, 4)])

        dist.initialize()
        rank, per = dist.process_index(), 4 // dist.process_count()
        import os
        os.environ["MINIXLA_NUM_CPU_DEVICES"] = str(per)  # each process needs only its share
        mlp = minixla.compile(MLP, backend="cpu")
        assert mlp.local_devices() == list(range(per * rank, per * (rank + 1)))
        got = mlp(x, w1, w2)
        assert np.array_equal(got, mlp_alone), np.abs(got - mlp_alone).max()
        np.testing.assert_allclose(got, np.tanh(x @ w1) @ w2, rtol=1e-4, atol=1e-4)

        coll = minixla.compile(COLLECTIVES, out_shardings=OUT)
        for got, want in zip(coll(p), coll_outputs_alone):
            assert np.array_equal(got, want)
        pieces = np.split(p, 4)
        total = (pieces[0] + pieces[2]) + (pieces[1] + pieces[3])
        outputs = coll(p)
        np.testing.assert_allclose(outputs[0], np.concatenate([total] * 4), rtol=1e-6)
        assert np.array_equal(outputs[1], p)
        assert np.array_equal(outputs[2], np.concatenate([pieces[3]] + pieces[:3]))
        # execute_sharded takes and returns only this process's devices
        mine = coll.execute_sharded([[pieces[d]] for d in coll.local_devices()])
        assert len(mine) == per
        for got, want in zip(mine, shards_alone[per * rank:per * (rank + 1)]):
            for g, w in zip(got, want):
                assert np.array_equal(g, w)
        try:
            coll.execute_sharded([[piece] for piece in pieces])
            raise AssertionError("every device's arguments were accepted on one process")
        except minixla.ExecutionError as exc:
            assert f"coll runs on 4 devices ({per} of them, devices" in str(exc), exc
        try:
            minixla.compile("HloModule three, num_partitions=3\\nENTRY e {\\n"
                            "  ROOT p = f32[2] parameter(0), sharding={replicated}\\n}\\n")
            raise AssertionError("3 devices were spread over 2 processes")
        except minixla.ExecutionError as exc:
            assert f"3 devices cannot run in a job of {dist.process_count()} processes" \
                in str(exc), exc
        print(f"rank {rank} ok", flush=True)
    """),
        env={"MINIXLA_NUM_CPU_DEVICES": "4"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # the ranks' lines may interleave in the launcher's output
    assert sorted(re.findall(r"rank (\d+) ok", done.stdout)) == [
        str(r) for r in range(processes)
    ], done.stdout


@needs_mpi
def test_a_device_that_raises_on_one_process_makes_every_rank_raise(tmp_path):
    done, seconds = mpiexec(
        tmp_path,
        2,
        SPMD_PRELUDE
        + textwrap.dedent("""
        class DeviceBroke(minixla.MinixlaError):
            pass

        def fail_on_partition_three(partition, **_):
            if int(partition) == 3:
                raise DeviceBroke("partition 3 broke")
            return np.float32(0)
        minixla.register_custom_call("fail_on_three", "interpreter", fail_on_partition_three)
        dist.initialize(collective_timeout=60)
        exe = minixla.compile(FAILING, out_shardings=OUT)
        try:
            exe(p)
            print(f"rank {dist.process_index()} returned", flush=True)
        except Exception as exc:
            notes = " ".join(getattr(exc, "__notes__", []))
            print(f"rank {dist.process_index()} raised {type(exc).__name__}: {exc} {notes}",
                  flush=True)
    """),
        env={"MINIXLA_NUM_CPU_DEVICES": "4"},
    )
    output = done.stdout + done.stderr
    assert "returned" not in output, output
    assert (
        "rank 1 raised DeviceBroke: partition 3 broke (raised on device 3 of 4, on process 1 "
        "of 2)" in output
    ), output
    assert (
        "rank 0 raised RankFailedError:" in output
        and "rank 1 failed, so the collective cannot complete: DeviceBroke: partition 3 broke"
        in output
    ), output
    assert seconds < 50, output  # ended by the failure notice, not by the 60 s timeout


@needs_mpi
def test_the_weak_scaling_benchmark_cases_match_one_device_on_two_processes(tmp_path):
    # a smoke run of bench/weak_scaling.py's worker: both cases, tiny batches, one step
    done, _ = mpiexec(
        tmp_path,
        2,
        f"""
        import argparse, runpy
        bench = runpy.run_path({str(ROOT / "bench" / "weak_scaling.py")!r})
        for case in ("data", "model"):
            bench["worker"](argparse.Namespace(case=case, rows=4, repeat=1,
                                               devices_per_process=1))
    """,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    diffs = [float(d) for d in re.findall(r"CHECK rank=\d+ max_diff=(\S+)", done.stdout)]
    assert len(diffs) == 4 and max(diffs) < 1e-5, done.stdout
    assert len(re.findall(r"RESULT median_s=\d", done.stdout)) == 2, done.stdout
