"""Auto-sharding: what the integer program chooses for unannotated programs, and what that
costs.

Cases, on one mesh axis unless noted: a 4-layer MLP with large weights on 8 devices (the
target: per-device parameter memory at most half the replicated one, results equal to one
device), the same MLP with no memory term in the objective, and with none but a per-device
memory limit, the bench/spmd_mlp.py patterns without annotations on 4 devices (against the
bytes their hand annotations move), an SGD step of a two-layer MLP on 8 devices, and the
MLP and the step on a 2x4 mesh.

For each: max |diff| against the 1-device program, parameter bytes per device (and the share
of the replicated bytes), the solver's estimate of the bytes one device sends and the bytes
the partitioned module's collectives send (ring model, collective_bytes), the seconds the
auto-sharding pass takes (strategies + ILP), and the chosen sharding of every parameter.

Run: python bench/auto_sharding.py   (sets MINIXLA_NUM_CPU_DEVICES=8)
"""

import os
import sys
import time

os.environ["MINIXLA_NUM_CPU_DEVICES"] = "8"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np  # noqa: E402

import minixla  # noqa: E402
import minixla.numpy as mnp  # noqa: E402
from minixla.passes.auto_sharding import AutoShardingOptions, auto_shard  # noqa: E402
from minixla.passes.spmd_partitioner import collective_bytes  # noqa: E402
from minixla.sharding import Mesh, NamedSharding  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from spmd_mlp import PATTERNS  # noqa: E402

os.environ["MINIXLA_NUM_CPU_DEVICES"] = "8"  # spmd_mlp sets 4 when imported

BACKEND = os.environ.get("AUTO_SHARDING_BENCH_BACKEND", "cpu")
BATCH, WIDTH = 16, 1024


def mlp4(x, w1, w2, w3, w4):
    for w in (w1, w2, w3):
        x = mnp.tanh(x @ w)
    return x @ w4


def loss(w1, w2, x, y):
    return ((mnp.tanh(x @ w1) @ w2 - y) ** 2).mean()


def sgd_step(w1, w2, x, y):
    g1, g2 = minixla.grad(loss, argnums=(0, 1))(w1, w2, x, y)
    return w1 - 0.1 * g1, w2 - 0.1 * g2


def run_case(name, fn, args, n, weights, options=None, hand_specs=None):
    module = minixla.jit(fn).lower(*args).module
    want = minixla.compile(module, backend=BACKEND)(*args)
    start = time.perf_counter()
    result = auto_shard(module, n, options)
    solve = time.perf_counter() - start
    exe = minixla.compile(module, backend=BACKEND, num_partitions=n, auto_sharding=options or True)
    got = exe(*args)
    outs = got if isinstance(got, tuple) else (got,)
    wants = want if isinstance(want, tuple) else (want,)
    diff = max(float(np.max(np.abs(np.asarray(g) - np.asarray(w)))) for g, w in zip(outs, wants))
    params = exe.partitioned_module.entry.parameters
    per_device = sum(params[i].shape.byte_size() for i in weights)
    replicated = sum(args[i].nbytes for i in weights)
    moved = collective_bytes(exe.partitioned_module, n)["total"]
    hand = "-"
    if hand_specs is not None:
        mesh = Mesh(np.array(minixla.devices()[:n]), ("d",))
        annotated = (
            minixla.jit(
                fn, backend=BACKEND, in_shardings=[NamedSharding(mesh, p) for p in hand_specs]
            )
            .lower(*args)
            .compile()
        )
        hand = collective_bytes(annotated.partitioned_module, n)["total"]
    print(
        f"{name:22s} {n:2d} {diff:10.2e} {per_device:12d} {per_device / replicated:7.3f} "
        f"{result.communication_bytes:10.0f} {moved:10d} {hand!s:>10} {solve:7.2f}"
    )
    chosen = ", ".join(
        f"{p.name}={result.sharding_of(p.name)}" for p in result.module.entry.parameters
    )
    print(f"    {chosen}")
    return result


def main():
    import scipy.optimize  # noqa: F401  (imported once here, not inside the first timing)

    rng = np.random.default_rng(0)
    print(f"backend={BACKEND}; bytes are what one device sends (ring cost model)")
    print(
        f"{'case':22s} {'n':>2s} {'max |diff|':>10s} {'param B/dev':>12s} {'of rep':>7s} "
        f"{'est bytes':>10s} {'moved':>10s} {'hand':>10s} {'solve s':>7s}"
    )
    x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
    ws = [
        (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32) for _ in range(4)
    ]
    result = run_case("mlp4 1024 wide", mlp4, [x] + ws, 8, (1, 2, 3, 4))
    for line in str(result).splitlines()[1:]:
        if "dot" in line or "parameter" in line:
            print("   ", line.strip())
    run_case(
        "mlp4, no memory term",
        mlp4,
        [x] + ws,
        8,
        (1, 2, 3, 4),
        AutoShardingOptions(memory_weight=0.0),
    )
    limit = int(result.replicated_peak_memory_bytes // 2)
    run_case(
        f"mlp4, limit {limit // 1024} KiB",
        mlp4,
        [x] + ws,
        8,
        (1, 2, 3, 4),
        AutoShardingOptions(memory_limit_bytes=limit, memory_weight=0.0),
    )
    for name, (fn, shapes, specs, weights) in PATTERNS.items():
        args = [(rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32) for s in shapes]
        run_case(name, fn, args, 4, weights, hand_specs=specs)
    step_args = [
        (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32)
        for s in [(256, 512), (512, 256), (64, 256), (64, 256)]
    ]
    run_case("sgd step", sgd_step, step_args, 8, (0, 1))
    mesh = AutoShardingOptions(mesh_shape=(2, 4))
    run_case("mlp4 on a 2x4 mesh", mlp4, [x] + ws, 8, (1, 2, 3, 4), mesh)
    run_case("sgd step on a 2x4 mesh", sgd_step, step_args, 8, (0, 1), mesh)


if __name__ == "__main__":
    main()
