"""SPMD partitioning on 1, 2 and 4 CPU devices: a Megatron-style MLP, a data-parallel layer
and attention with sharded heads.

For each pattern and device count: the partitioned result against the 1-device result, the
per-device parameter bytes against the replicated ones, and the bytes one device sends in
collectives (ring cost model, minixla.passes.spmd_partitioner.collective_bytes) in minixla's
partitioned module and, when JAX is installed, in the module XLA partitions from the same
annotations.

Run: python bench/spmd_mlp.py   (sets MINIXLA_NUM_CPU_DEVICES and XLA_FLAGS for 4 devices)
"""

import os
import sys
import time

os.environ["MINIXLA_NUM_CPU_DEVICES"] = "4"
os.environ["XLA_FLAGS"] = (
    os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
).strip()
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402
from minixla.passes.spmd_partitioner import collective_bytes  # noqa: E402
from minixla.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402

BATCH, MODEL, HIDDEN, HEADS, SEQ, HEAD_DIM = 32, 256, 1024, 8, 64, 32
BACKEND = os.environ.get("SPMD_BENCH_BACKEND", "cpu")


def mlp(x, w1, w2):
    return mnp.tanh(x @ w1) @ w2


def data_parallel(x, w):
    return ((x @ w) ** 2).sum()


def attention(q, k, v, wo):
    scores = mnp.einsum("hsd,htd->hst", q, k) / np.float32(np.sqrt(HEAD_DIM))
    scores = scores - scores.max(-1, keepdims=True)
    weights = mnp.exp(scores)
    weights = weights / weights.sum(-1, keepdims=True)
    heads = mnp.einsum("hst,htd->hsd", weights, v)
    return mnp.einsum("hsd,hde->se", heads, wo)


PATTERNS = {
    # name: (function, argument shapes, partition spec per argument, names of parameters)
    "megatron-mlp": (
        mlp,
        [(BATCH, MODEL), (MODEL, HIDDEN), (HIDDEN, MODEL)],
        [P(), P(None, "d"), P("d", None)],
        (1, 2),
    ),
    "data-parallel": (
        data_parallel,
        [(BATCH * 4, MODEL), (MODEL, MODEL)],
        [P("d", None), P()],
        (1,),
    ),
    "attention-heads": (
        attention,
        [(HEADS, SEQ, HEAD_DIM)] * 3 + [(HEADS, HEAD_DIM, MODEL)],
        [P("d", None, None)] * 4,
        (3,),
    ),
}


def xla_bytes(fn_name, shapes, specs, n):
    """The same function and annotations through jax.jit, partitioned by XLA."""
    try:
        import jax
        import jax.numpy as jnp
        from jax.sharding import Mesh as JMesh, NamedSharding as JNamed, PartitionSpec as JP
    except ImportError:
        return None
    jax_fns = {
        "megatron-mlp": lambda x, w1, w2: jnp.tanh(x @ w1) @ w2,
        "data-parallel": lambda x, w: ((x @ w) ** 2).sum(),
        "attention-heads": lambda q, k, v, wo: jnp.einsum(
            "hsd,hde->se",
            jax.nn.softmax(jnp.einsum("hsd,htd->hst", q, k) / np.sqrt(HEAD_DIM), -1) @ v,
            wo,
        ),
    }
    mesh = JMesh(np.array(jax.devices()[:n]), ("d",))
    args = [
        jax.ShapeDtypeStruct(s, jnp.float32, sharding=JNamed(mesh, JP(*p)))
        for s, p in zip(shapes, specs)
    ]
    text = jax.jit(jax_fns[fn_name]).lower(*args).compile().as_text()
    module = minixla.parse_hlo_module(text, verify=False)
    return collective_bytes(module, n)["total"]


def main():
    rng = np.random.default_rng(0)
    print(f"backend={BACKEND}; bytes are what one device sends (ring cost model)")
    print(
        f"{'pattern':16s} {'n':>2s} {'max |diff|':>11s} {'param bytes/dev':>16s} "
        f"{'of replicated':>13s} {'minixla bytes':>14s} {'XLA bytes':>10s} {'run s':>7s}"
    )
    for name, (fn, shapes, specs, weights) in PATTERNS.items():
        args = [(rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32) for s in shapes]
        want = minixla.jit(fn, backend=BACKEND)(*args)
        replicated = sum(args[i].nbytes for i in weights)
        for n in (2, 4):
            mesh = Mesh(np.array(minixla.devices()[:n]), ("d",))
            jitted = minixla.jit(
                fn, backend=BACKEND, in_shardings=[NamedSharding(mesh, p) for p in specs]
            )
            exe = jitted.lower(*args).compile()
            start = time.perf_counter()
            got = exe(*args)
            seconds = time.perf_counter() - start
            params = exe.partitioned_module.entry.parameters
            per_device = sum(params[i].shape.byte_size() for i in weights)
            moved = collective_bytes(exe.partitioned_module, n)["total"]
            xla = xla_bytes(name, shapes, specs, n)
            diff = float(np.max(np.abs(np.asarray(got) - np.asarray(want))))
            print(
                f"{name:16s} {n:2d} {diff:11.2e} {per_device:16d} "
                f"{per_device / replicated:13.3f} {moved:14d} "
                f"{'-' if xla is None else xla:>10} {seconds:7.3f}"
            )


if __name__ == "__main__":
    main()
