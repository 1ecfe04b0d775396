"""The JAX-style front end for sharding: meshes and named shardings, jit with in/out
shardings, with_sharding_constraint, shard_map with the lax collectives."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import FrontendTypeError, lax
from minixla.sharding import Mesh, NamedSharding, PartitionSpec as P


@pytest.fixture(autouse=True)
def four_devices(monkeypatch):
    monkeypatch.setenv("MINIXLA_NUM_CPU_DEVICES", "4")


@pytest.fixture
def mesh():
    return Mesh(np.array(minixla.devices()).reshape(2, 2), ("x", "y"))


@pytest.mark.parametrize(
    "spec, rank, text",
    [
        (P("x", "y"), 2, "{devices=[2,2]<=[4]}"),
        (P("y", None), 2, "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}"),
        (P(("x", "y")), 1, "{devices=[4]<=[4]}"),
        (P(None, "x"), 2, "{devices=[1,2,2]<=[4] last_tile_dim_replicate}"),
        (P(), 2, "{replicated}"),
    ],
)
def test_named_shardings_become_hlo_shardings(mesh, spec, rank, text):
    assert str(NamedSharding(mesh, spec).to_hlo(rank)) == text


def test_bad_meshes_and_specs_are_errors(mesh):
    with pytest.raises(FrontendTypeError, match="2 axis names"):
        Mesh(np.arange(4).reshape(2, 2), ("x",))
    with pytest.raises(FrontendTypeError, match="'z' is not an axis"):
        NamedSharding(mesh, P("z"))
    with pytest.raises(FrontendTypeError, match="only works inside shard_map"):
        minixla.jit(lambda x: lax.psum(x, "x"))(np.ones(2, np.float32))


def test_jit_with_shardings_partitions_and_matches_numpy(mesh):
    def layer(x, w):
        h = mnp.tanh(x @ w)
        h = lax.with_sharding_constraint(h, NamedSharding(mesh, P("x", None)))
        return h.sum(0)

    fn = minixla.jit(
        layer,
        backend="interpreter",
        in_shardings=(NamedSharding(mesh, P("x", "y")), NamedSharding(mesh, P("y", None))),
        out_shardings=NamedSharding(mesh, P()),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 4)).astype(np.float32)
    np.testing.assert_allclose(fn(x, w), np.tanh(x @ w).sum(0), rtol=1e-5, atol=1e-5)
    text = fn.lower(x, w).as_text()
    assert (
        'custom_call_target="Sharding", sharding={devices=[2,1,2]<=[4] '
        "last_tile_dim_replicate}" in text
    )
    assert "num_partitions=4" in text


def test_with_sharding_constraint_outside_a_trace_is_the_identity(mesh):
    x = np.ones(3)
    assert lax.with_sharding_constraint(x, NamedSharding(mesh, P())) is x


def test_shard_map_matmul_with_psum(mesh):
    fn = minixla.shard_map(
        lambda a, b: lax.psum(a @ b, "y"),
        mesh=mesh,
        in_specs=(P("x", "y"), P("y", None)),
        out_specs=P("x", None),
    )
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 16)).astype(np.float32)
    b = rng.standard_normal((16, 4)).astype(np.float32)
    np.testing.assert_allclose(fn(a, b), a @ b, rtol=1e-5, atol=1e-5)


def test_shard_map_collectives(mesh):
    def body(x):
        index = (lax.axis_index("y") + 0 * x[0, 0].astype(np.int32)).reshape(1)
        return (
            lax.all_gather(x, "x", tiled=True),
            index,
            lax.pmax(x, ("x", "y")),
            lax.ppermute(x, "x", [(0, 1), (1, 0)]),
            lax.psum_scatter(x, "y", scatter_dimension=1, tiled=True),
            lax.all_to_all(x, "y", 0, 1, tiled=True),
            lax.pmean(x, "x"),
        )

    fn = minixla.shard_map(
        body,
        mesh=mesh,
        in_specs=P("x", "y"),
        out_specs=(
            P(None, "y"),
            P(("x", "y")),
            P(),
            P("x", "y"),
            P("x", "y"),
            P("x", "y"),
            P(None, "y"),
        ),
    )
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    gathered, index, top, swapped, scattered, exchanged, mean = fn(x)
    blocks = {(i, j): x[2 * i : 2 * i + 2, 4 * j : 4 * j + 4] for i in range(2) for j in range(2)}
    np.testing.assert_array_equal(gathered, x)
    assert index.tolist() == [0, 1, 0, 1]
    np.testing.assert_array_equal(top, np.maximum.reduce(list(blocks.values())))
    np.testing.assert_array_equal(swapped, np.concatenate([x[2:], x[:2]]))
    row_sums = [blocks[i, 0] + blocks[i, 1] for i in range(2)]
    np.testing.assert_array_equal(scattered, np.block([[s[:, :2], s[:, 2:]] for s in row_sums]))
    # device (i, k) receives row k of the blocks (i, 0) and (i, 1), side by side
    want = np.block(
        [
            [
                np.concatenate([blocks[i, 0][k : k + 1], blocks[i, 1][k : k + 1]], 1)
                for k in range(2)
            ]
            for i in range(2)
        ]
    )
    np.testing.assert_array_equal(exchanged, want)
    np.testing.assert_array_equal(mean, np.concatenate([(x[:2] + x[2:]) / 2]))
