"""The SPMD partitioner: partitioned programs on N devices give the values of the
unpartitioned program on one, for the conformance corpus (../shared/conformance/) with random
shardings of its parameters: a seeded sample by default, every case with --spmd-full. (The
per-op rules are checked as HLO text in tests/hlo/spmd-partitioner/.)"""

import zlib

import numpy as np
import pytest

import minixla
from conformance_paths import case_dirs, requires_corpus
from minixla.errors import UnsupportedError
from minixla.ir.sharding import HloSharding
from minixla.passes.spmd_partitioner import collective_bytes
from minixla.testing import compare_values
from test_passes_conformance import load_args

SAMPLE = 24  # conformance cases checked by default (seeded); --spmd-full runs every case


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "4")


def random_sharding(rng, rank: int, n: int) -> HloSharding | None:
    """Replicated, one dim split n ways (devices in order or reversed), two dims split 2x2
    (devices in order or transposed), or a split with replication."""
    choice = int(rng.integers(6)) if rank else 0
    dims = [1] * rank
    if choice == 0:
        return None
    if choice in (1, 4) or rank < 2 or n != 4:
        dims[int(rng.integers(rank))] = n
        if choice == 4:
            return HloSharding.tiled(np.arange(n)[::-1].reshape(dims))
        return HloSharding.tiled(tuple(dims))
    a, b = rng.choice(rank, 2, replace=False)
    if choice in (2, 5):
        dims[a] = dims[b] = 2
        if choice == 5:
            return HloSharding.tiled(np.arange(4).reshape(2, 2).T.reshape(dims))
        return HloSharding.tiled(tuple(dims))
    dims[a] = 2
    return HloSharding.tiled(tuple(dims) + (2,), ("replicated",))


def pytest_generate_tests(metafunc):
    if "case" not in metafunc.fixturenames:
        return
    cases = case_dirs()
    if not metafunc.config.getoption("--spmd-full") and len(cases) > SAMPLE:
        picks = np.random.default_rng(18).choice(len(cases), SAMPLE, replace=False)
        cases = [cases[i] for i in sorted(picks)]
    metafunc.parametrize("case", cases, ids=lambda p: p.name)


def sharded_copy(module, n: int, seed: int):
    rng = np.random.default_rng(seed)
    copy = module.clone()
    for param in copy.entry.parameters:
        if param.shape.is_array:
            sharding = random_sharding(rng, param.shape.rank, n)
            if sharding is not None:
                param.attrs["sharding"] = sharding
    return copy


@requires_corpus
@pytest.mark.parametrize("n", [2, 4])
def test_partitioned_program_equals_the_unpartitioned_one(case, n):
    meta, args = load_args(case)
    original = minixla.parse_hlo_module((case / "module.hlo").read_text())
    try:
        want = minixla.compile(original)(*args)
    except UnsupportedError as exc:
        pytest.skip(f"the interpreter cannot run the original: {exc}")
    module = sharded_copy(original, n, zlib.crc32(f"{case.name}/{n}".encode()))
    exe = minixla.compile(module, num_partitions=n)
    assert exe.num_devices == n
    problems = compare_values(
        exe(*args), want, rtol=max(meta["rtol"], 1e-5), atol=max(meta["atol"], 1e-5), what=case.name
    )
    assert not problems, "\n".join(problems) + "\n" + exe.partitioned_module.to_text()


MLP = """HloModule mlp

ENTRY e {
  x = f32[8,16] parameter(0), sharding={replicated}
  w1 = f32[16,32] parameter(1), sharding={devices=[1,@]<=[@]}
  w2 = f32[32,16] parameter(2), sharding={devices=[@,1]<=[@]}
  h = f32[8,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[8,32] tanh(h)
  ROOT y = f32[8,16] dot(t, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


@pytest.mark.parametrize("n", [2, 4])
def test_megatron_mlp_on_the_cpu_backend(n):
    rng = np.random.default_rng(n)
    x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in [(8, 16), (16, 32), (32, 16)])
    exe = minixla.compile(MLP.replace("@", str(n)), backend="cpu", num_partitions=n)
    np.testing.assert_allclose(exe(x, w1, w2), np.tanh(x @ w1) @ w2, rtol=1e-4, atol=1e-4)
    params = exe.partitioned_module.entry.parameters
    assert [p.shape.dims for p in params] == [(8, 16), (16, 32 // n), (32 // n, 16)]


def test_a_sharding_constraint_reshards_in_the_middle():
    text = """HloModule c
ENTRY e {
  a = f32[6,4] parameter(0), sharding={devices=[2,1]<=[2]}
  n = f32[6,4] negate(a)
  c = f32[6,4] custom-call(n), custom_call_target="Sharding", sharding={devices=[1,2]<=[2]}
  ROOT t = f32[4,6] transpose(c), dimensions={1,0}
}"""
    exe = minixla.compile(text, num_partitions=2)
    opcodes = [i.opcode for i in exe.partitioned_module.entry.instructions]
    assert "all-to-all" in opcodes and "all-gather" not in opcodes
    a = np.arange(24, dtype=np.float32).reshape(6, 4)
    np.testing.assert_array_equal(exe(a), -a.T)


def test_a_tuple_result_and_a_loop_run_with_their_shardings():
    text = """HloModule t
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
cond {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  k = s32[] constant(3)
  ROOT lt = pred[] compare(i, k), direction=LT
}
body {
  s = (s32[], s32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = s32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = s32[4] add(v, v)
  ROOT r = (s32[], s32[4]) tuple(j, w)
}
ENTRY e {
  x = s32[4] parameter(0), sharding={devices=[4]<=[4]}
  zero = s32[] constant(0)
  init = (s32[], s32[4]) tuple(zero, x)
  loop = (s32[], s32[4]) while(init), condition=cond, body=body
  v = s32[4] get-tuple-element(loop), index=1
  total = s32[] reduce(x, zero), dimensions={0}, to_apply=add
  ROOT out = (s32[4], s32[]) tuple(v, total)
}"""
    exe = minixla.compile(text, num_partitions=4)
    body = exe.partitioned_module.entry.root.operand(0).operand(0).attrs["body"]
    assert body.root.shape.tuple_shapes[1].dims == (1,)  # the loop runs on the pieces
    x = np.arange(4, dtype=np.int32)
    v, total = exe(x)
    np.testing.assert_array_equal(v, 8 * x)
    assert int(total) == 6


def test_a_sharded_program_from_jax_runs_as_lowered():
    # What jax.jit(f).lower(...).as_text(dialect="hlo") prints for f(a, b) = tanh(a @ b).sum(0)
    # with a split over a 2x2 mesh and b's rows over its second axis.
    text = """HloModule jit_f, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->f32[4]{0}}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=2]>}}

region_0.1 {
  reduce_sum.3 = f32[] parameter(0)
  reduce_sum.4 = f32[] parameter(1)
  ROOT reduce_sum.5 = f32[] add(reduce_sum.3, reduce_sum.4)
}

ENTRY main.2 {
  a.1 = f32[8,16]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"x\\"}, {\\"y\\"}]>"}
  b.1 = f32[16,4]{1,0} parameter(1), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\\"y\\"}, {}]>"}
  dot_general.1 = f32[8,4]{1,0} dot(a.1, b.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  tanh.1 = f32[8,4]{1,0} tanh(dot_general.1)
  constant.1 = f32[] constant(0)
  ROOT reduce_sum.7 = f32[4]{0} reduce(tanh.1, constant.1), dimensions={0}, to_apply=region_0.1
}
"""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    exe = minixla.compile(text, num_partitions=4)
    assert exe.partitioned_module.entry.parameters[1].shape.dims == (8, 4)
    np.testing.assert_allclose(exe(a, b), np.tanh(a @ b).sum(0), rtol=1e-5, atol=1e-5)


def test_manual_shardings_are_refused_by_the_partitioner():
    text = """HloModule m
ENTRY e {
  a = f32[4] parameter(0), sharding={devices=[2]<=[2]}
  ROOT n = f32[4] negate(a), sharding={manual}
}"""
    with pytest.raises(UnsupportedError, match="%n: manual shardings"):
        minixla.compile(text, num_partitions=2)


@pytest.mark.parametrize("n", [2, 4])
def test_megatron_mlp_moves_one_all_reduce_of_the_output(n):
    exe = minixla.compile(MLP.replace("@", str(n)), num_partitions=n)
    volume = collective_bytes(exe.partitioned_module)
    output_bytes = 8 * 16 * 4
    assert volume == {
        "all-reduce": 2 * (n - 1) * output_bytes // n,
        "total": 2 * (n - 1) * output_bytes // n,
    }


# What jax.jit(g, out_shardings=...).lower(...).as_text(dialect="hlo") prints for
# g(a, b) = tanh(shard_map(lambda a, b: psum(a @ b, "y"))(a, b)) * 2 on a 2x2 mesh (Shardy).
SHARD_MAP_FROM_JAX = r"""HloModule jit_g, entry_computation_layout={(f32[8,16]{1,0}, f32[16,4]{1,0})->f32[8,4]{1,0}}, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=2]>}}

region_0.1 {
  psum_invariant.2 = f32[] parameter(0)
  psum_invariant.3 = f32[] parameter(1)
  ROOT add.1 = f32[] add(psum_invariant.2, psum_invariant.3)
}

xla.sdy.manual_computation_body.2 {
  shard_map.5 = f32[4,8]{1,0} parameter(0)
  shard_map.6 = f32[8,4]{1,0} parameter(1)
  dot_general.1 = f32[4,4]{1,0} dot(shard_map.5, shard_map.6), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT psum_invariant.5 = f32[4,4]{1,0} all-reduce(dot_general.1), channel_id=1, replica_groups={{0,1},{2,3}}, use_global_device_ids=true, to_apply=region_0.1
}

ENTRY main.3 {
  a.1 = f32[8,16]{1,0} parameter(0), sharding={devices=[2,2]<=[4]}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"x\"}, {\"y\"}]>"}
  b.1 = f32[16,4]{1,0} parameter(1), sharding={devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"y\"}, {}]>"}
  shard_map.9 = (f32[4,8]{1,0}, f32[8,4]{1,0}) custom-call(a.1, b.1), custom_call_target="xla.sdy.GlobalToLocalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.in_shardings="#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {\"y\"}]>, <@mesh, [{\"y\"}, {}]>]>",xla.sdy.manual_axes="#sdy<manual_axes{\"x\", \"y\"}>"}
  shard_map.10 = f32[4,8]{1,0} get-tuple-element(shard_map.9), index=0
  shard_map.11 = f32[8,4]{1,0} get-tuple-element(shard_map.9), index=1
  shard_map.12 = f32[4,4]{1,0} call(shard_map.10, shard_map.11), to_apply=xla.sdy.manual_computation_body.2, frontend_attributes={inlineable="false"}
  shard_map.13 = f32[8,4]{1,0} custom-call(shard_map.12), custom_call_target="xla.sdy.LocalToGlobalShape", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.manual_axes="#sdy<manual_axes{\"x\", \"y\"}>",xla.sdy.out_shardings="#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>"}
  tanh.1 = f32[8,4]{1,0} tanh(shard_map.13)
  constant.1 = f32[] constant(2)
  mul.3 = f32[8,4]{1,0} broadcast(constant.1), dimensions={}
  mul.4 = f32[8,4]{1,0} multiply(tanh.1, mul.3)
  mul.5 = f32[8,4]{1,0} custom-call(mul.4), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\"x\"}, {}]>]>"}
  tuple.1 = (f32[8,4]{1,0}) tuple(mul.5)
  ROOT get-tuple-element.1 = f32[8,4]{1,0} get-tuple-element(tuple.1), index=0, sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_shard_map_lowered_by_jax_runs_its_body_per_device(backend):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    exe = minixla.compile(SHARD_MAP_FROM_JAX, backend=backend, num_partitions=4)
    np.testing.assert_allclose(exe(a, b), np.tanh(a @ b) * 2, rtol=1e-5, atol=1e-5)
    entry = exe.partitioned_module.entry
    body_sum = next(i for i in entry.instructions if i.opcode == "all-reduce")
    assert body_sum.shape.dims == (4, 4)  # the body's own psum, on its per-device piece
    assert body_sum.attrs["replica_groups"].groups == ((0, 1), (2, 3))
    channels = [i.attrs["channel_id"] for i in entry.instructions if "channel_id" in i.attrs]
    assert len(channels) == len(set(channels))


def test_shardy_result_sharding_is_the_identity_on_one_device():
    text = """HloModule r, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=2, "y"=2]>}}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(p), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{\\"x\\"}]>]>"}
}
"""
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(minixla.compile(text)(x), x)
    exe = minixla.compile(text, num_partitions=4)
    assert (
        str(exe.partitioned_module.entry.root.attrs["sharding"])
        == "{devices=[2,2]<=[4] last_tile_dim_replicate}"
    )
    np.testing.assert_array_equal(exe(x), x)


def test_conditional_branches_run_on_the_pieces():
    text = """HloModule c
double {
  x = f32[8] parameter(0)
  ROOT d = f32[8] add(x, x)
}
negate {
  y = f32[8] parameter(0)
  ROOT n = f32[8] negate(y)
}
ENTRY e {
  p = pred[] parameter(0)
  a = f32[8] parameter(1), sharding={devices=[4]<=[4]}
  ROOT c = f32[8] conditional(p, a, a), true_computation=double, false_computation=negate
}"""
    exe = minixla.compile(text, num_partitions=4)
    cond = exe.partitioned_module.entry.root.operand(0)
    assert cond.opcode == "conditional" and cond.shape.dims == (2,)
    a = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(exe(np.bool_(True), a), 2 * a)
    np.testing.assert_array_equal(exe(np.bool_(False), a), -a)
