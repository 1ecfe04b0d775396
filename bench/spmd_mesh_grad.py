"""The gradient of a two-layer MLP on a 2x2 mesh ("x", "y") under many annotations: the bytes
one device sends in minixla's partitioned module and in XLA's (ring cost model,
collective_bytes), and whether minixla's results equal the 1-device ones.

w1 and w2 each take one of five partition specs and x, y (the same spec) one of three: 75
annotations. XLA's column needs JAX; modules whose text minixla cannot parse are shown as "?".

Run: python bench/spmd_mesh_grad.py   (sets MINIXLA_NUM_CPU_DEVICES and XLA_FLAGS for 4 devices)
"""

import itertools
import os
import sys

os.environ["MINIXLA_NUM_CPU_DEVICES"] = "4"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
).strip()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402
from minixla.errors import MinixlaError  # noqa: E402
from minixla.passes.spmd_partitioner import collective_bytes  # noqa: E402
from minixla.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

BATCH, MODEL, HIDDEN = 8, 16, 32
SHAPES = [(MODEL, HIDDEN), (HIDDEN, MODEL), (BATCH, MODEL), (BATCH, MODEL)]
WEIGHT_SPECS = [(None, None), ("x", None), (None, "y"), ("y", None), ("x", "y")]
DATA_SPECS = [("x", None), (None, None), ("x", "y")]


def loss(w1, w2, x, y):
    return ((mnp.tanh(x @ w1) @ w2 - y) ** 2).mean()


def grads(w1, w2, x, y):
    return minixla.grad(loss, argnums=(0, 1))(w1, w2, x, y)


def xla_bytes(specs):
    try:
        import jax
        import jax.numpy as jnp
        from jax.sharding import Mesh as JMesh, NamedSharding as JNamed, PartitionSpec as JP
    except ImportError:
        return None

    def jax_grads(w1, w2, x, y):
        return jax.grad(
            lambda *a: ((jnp.tanh(a[2] @ a[0]) @ a[1] - a[3]) ** 2).mean(), argnums=(0, 1)
        )(w1, w2, x, y)

    mesh = JMesh(np.array(jax.devices()[:4]).reshape(2, 2), ("x", "y"))
    args = [
        jax.ShapeDtypeStruct(s, jnp.float32, sharding=JNamed(mesh, JP(*p)))
        for s, p in zip(SHAPES, specs)
    ]
    text = jax.jit(jax_grads).lower(*args).compile().as_text()
    try:
        return collective_bytes(minixla.parse_hlo_module(text, verify=False), 4)["total"]
    except MinixlaError:
        return "?"


def main():
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    want = minixla.jit(grads, backend="interpreter")(*args)
    mesh = Mesh(np.array(minixla.devices()[:4]).reshape(2, 2), ("x", "y"))
    totals, above, compared = [0, 0], 0, 0
    print(f"{'w1':12s} {'w2':12s} {'x, y':12s} {'minixla':>8s} {'XLA':>8s} {'max |diff|':>10s}")
    for w1, w2, data in itertools.product(WEIGHT_SPECS, WEIGHT_SPECS, DATA_SPECS):
        specs = [w1, w2, data, data]
        exe = (
            minixla.jit(
                grads,
                backend="interpreter",
                in_shardings=[NamedSharding(mesh, P(*s)) for s in specs],
            )
            .lower(*args)
            .compile()
        )
        ours = collective_bytes(exe.partitioned_module, 4)["total"]
        diff = max(
            float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(exe(*args), want)
        )
        theirs = xla_bytes(specs)
        if isinstance(theirs, int):
            totals[0] += ours
            totals[1] += theirs
            above += ours > theirs
            compared += 1
        print(
            f"{str(w1):12s} {str(w2):12s} {str(data):12s} {ours:8d} "
            f"{'-' if theirs is None else theirs!s:>8} {diff:10.2e}"
        )
    if compared:
        print(
            f"over the {compared} annotations XLA's text parses for: minixla {totals[0]} "
            f"bytes, XLA {totals[1]}; minixla sends more in {above}"
        )


if __name__ == "__main__":
    main()
