"""Differential testing: random HLO graphs give the same results on cpu as on the interpreter.

Graphs mix elementwise ops, broadcasts, reductions, transposes, slices and dots over small f32
arrays, so the fusion pass (when the cpu pipeline has one) and the kernel generator see shapes
and producer/consumer patterns nobody wrote by hand. Examples are few and small: every new
kernel costs a Numba compile.
"""

from __future__ import annotations

import numpy as np
import pytest

import minixla

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

UNARY = ["negate", "abs", "tanh", "floor", "sign", "exponential", "logistic", "sine"]
BINARY = ["add", "subtract", "multiply", "maximum", "minimum"]


class Graph:
    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.values: list[tuple[str, tuple[int, ...]]] = []
        self.params: list[tuple[int, ...]] = []

    def shape(self, dims) -> str:
        return f"f32[{','.join(map(str, dims))}]"

    def add(self, expr: str, dims) -> str:
        name = f"v{len(self.lines)}"
        self.lines.append(f"  {name} = {self.shape(dims)} {expr}")
        self.values.append((name, tuple(dims)))
        return name

    def param(self, dims) -> str:
        number = len(self.params)
        self.params.append(tuple(dims))
        return self.add(f"parameter({number})", dims)

    def pick(self):
        return self.draw(st.sampled_from(self.values))

    def same_dims(self, dims) -> str:
        matches = [name for name, d in self.values if d == tuple(dims)]
        if matches and self.draw(st.booleans()):
            return self.draw(st.sampled_from(matches))
        return self.param(dims)

    def step(self) -> None:
        name, dims = self.pick()
        kind = self.draw(
            st.sampled_from(
                ["unary", "binary", "binary", "broadcast", "reduce", "transpose", "slice", "dot"]
            )
        )
        if kind == "unary":
            self.add(f"{self.draw(st.sampled_from(UNARY))}({name})", dims)
        elif kind == "binary":
            other = self.same_dims(dims)
            self.add(f"{self.draw(st.sampled_from(BINARY))}({name}, {other})", dims)
        elif kind == "broadcast" and len(dims) < 3:
            size = self.draw(st.integers(1, 4))
            at = self.draw(st.integers(0, len(dims)))
            out = dims[:at] + (size,) + dims[at:]
            mapping = [d if d < at else d + 1 for d in range(len(dims))]
            self.add(f"broadcast({name}), dimensions={{{','.join(map(str, mapping))}}}", out)
        elif kind == "reduce" and dims:
            axes = sorted(self.draw(st.sets(st.integers(0, len(dims) - 1), min_size=1)))
            out = tuple(d for k, d in enumerate(dims) if k not in axes)
            combiner = self.draw(st.sampled_from(["sum", "max"]))
            init = "0" if combiner == "sum" else "-inf"
            self.add(
                f"reduce({name}, f32[] constant({init})), "
                f"dimensions={{{','.join(map(str, axes))}}}, to_apply={combiner}",
                out,
            )
        elif kind == "transpose" and len(dims) > 1:
            perm = self.draw(st.permutations(range(len(dims))))
            self.add(
                f"transpose({name}), dimensions={{{','.join(map(str, perm))}}}",
                tuple(dims[p] for p in perm),
            )
        elif kind == "slice" and dims:
            bounds = []
            for d in dims:
                start = self.draw(st.integers(0, d - 1))
                bounds.append((start, self.draw(st.integers(start + 1, d))))
            spec = ", ".join(f"[{a}:{b}]" for a, b in bounds)
            self.add(f"slice({name}), slice={{{spec}}}", tuple(b - a for a, b in bounds))
        elif kind == "dot" and len(dims) == 2:
            n = self.draw(st.integers(1, 5))
            rhs = self.same_dims((dims[1], n))
            self.add(
                f"dot({name}, {rhs}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}",
                (dims[0], n),
            )

    def text(self, outputs) -> str:
        root = ", ".join(name for name, _ in outputs)
        shapes = ", ".join(self.shape(d) for _, d in outputs)
        return "\n".join(
            [
                "HloModule random",
                "sum {",
                "  a = f32[] parameter(0)",
                "  b = f32[] parameter(1)",
                "  ROOT r = f32[] add(a, b)",
                "}",
                "max {",
                "  a = f32[] parameter(0)",
                "  b = f32[] parameter(1)",
                "  ROOT r = f32[] maximum(a, b)",
                "}",
                "ENTRY main {",
                *self.lines,
                f"  ROOT out = ({shapes}) tuple({root})",
                "}",
            ]
        )


@st.composite
def graphs(draw):
    graph = Graph(draw)
    rank = draw(st.integers(1, 3))
    graph.param(tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank))))
    for _ in range(draw(st.integers(2, 8))):
        graph.step()
    count = draw(st.integers(1, 2))
    return graph.text(graph.values[-count:]), graph.params


@hypothesis.settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck),
)
@hypothesis.given(graphs(), st.integers(0, 2**16))
def test_random_graphs_match_interpreter(graph, seed):
    text, params = graph
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(dims).astype(np.float32) for dims in params]
    want = minixla.compile(text, backend="interpreter")(*args)
    got = minixla.compile(text, backend="cpu")(*args)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_kernels_writing_over_their_operands_match_the_interpreter():
    from tests.test_cpu_codegen import IN_PLACE

    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((16, 32), (32, 32), (32,))]
    exe = minixla.compile(IN_PLACE, backend="cpu")
    assert any("def kernel(p1, o0)" in spec.source for spec in exe.program.kernels.values())
    want = minixla.compile(IN_PLACE, backend="interpreter")(*args)
    np.testing.assert_allclose(exe(*args), want, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(exe(*args), want, rtol=2e-5, atol=2e-5)  # arena reused
