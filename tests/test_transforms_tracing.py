"""The tracing layer every transformation is built on: trace a function into HLO, replay it."""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla.frontend.tracer import Tracer
from minixla.transforms.tracing import input_index, replay, staged, trace


def test_trace_records_arguments_and_captured_values():
    seen = {}

    @minixla.jit(backend="interpreter")
    def outer(x, y):
        traced = trace(lambda a: mnp.sin(a) * y, (x,))
        seen["traced"] = traced
        return Tracer(replay(traced.computation, traced.operands)[0])

    x, y = np.linspace(0, 1, 4, dtype=np.float32), np.float32(3)
    np.testing.assert_allclose(outer(x, y), np.sin(x) * y, rtol=1e-6)
    traced = seen["traced"]
    assert traced.num_args == 1 and len(traced.captured) == 1
    reads = sorted(i for i in map(input_index, traced.computation.instructions) if i is not None)
    assert reads == [0, 1]
    assert traced.outputs[0].opcode == "multiply"


def test_replay_keeps_called_computations_and_pytrees():
    @minixla.jit(backend="interpreter")
    def outer(tree):
        traced = trace(lambda t: {"s": mnp.sum(t["a"]), "m": t["a"] * t["b"]}, (tree,))
        outs = replay(traced.computation, traced.operands)
        return dict(zip(["m", "s"], map(Tracer, outs)))

    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.float32(2)
    out = outer({"a": a, "b": b})
    np.testing.assert_allclose(out["s"], a.sum())
    np.testing.assert_allclose(out["m"], a * b)


def test_staged_runs_outside_a_trace_and_reuses_its_compile():
    def double(x):
        traced = trace(lambda a: a + a, (x,))
        return Tracer(replay(traced.computation, traced.operands)[0])

    run = staged(double)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(run(x), 2 * x)
    np.testing.assert_allclose(run(x + 1), 2 * (x + 1))
