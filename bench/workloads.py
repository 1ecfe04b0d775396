"""Benchmark workloads: each is HLO text for minixla plus the same math for array libraries.

`WORKLOADS` maps a name to (hlo_text, inputs(rng) -> list of float32 arrays, reference(ops,
*inputs)), where `ops` adapts NumPy, jax.numpy or torch (see run_benchmarks.py).
"""

from __future__ import annotations

import numpy as np

ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
MAX = (
    "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n"
)


def _module(name: str, body: str, computations: str = "") -> str:
    return f"HloModule {name}\n{computations}ENTRY main {{\n{body}\n}}\n"


def _f32(*dims):
    return lambda rng: rng.standard_normal(dims, dtype=np.float32)


# ---- elementwise chain: tanh(x*a+b)*0.5 + c*c on 4M --------------------------------------------

N = 4 * 1024 * 1024
CHAIN = _module(
    "chain",
    f"""
  x = f32[{N}] parameter(0)
  a = f32[{N}] parameter(1)
  b = f32[{N}] parameter(2)
  c = f32[{N}] parameter(3)
  t = f32[{N}] tanh(add(multiply(x, a), b))
  half = f32[{N}] broadcast(f32[] constant(0.5)), dimensions={{}}
  ROOT r = f32[{N}] add(multiply(t, half), multiply(c, c))""",
)


def chain_ref(ops, x, a, b, c):
    return ops.tanh(x * a + b) * 0.5 + c * c


# ---- softmax and layernorm rows of 4096x1024 ---------------------------------------------------

SOFTMAX = _module(
    "softmax",
    """
  x = f32[4096,1024] parameter(0)
  m = f32[4096] reduce(x, f32[] constant(-inf)), dimensions={1}, to_apply=max
  mb = f32[4096,1024] broadcast(m), dimensions={0}
  e = f32[4096,1024] exponential(subtract(x, mb))
  s = f32[4096] reduce(e, f32[] constant(0)), dimensions={1}, to_apply=add
  sb = f32[4096,1024] broadcast(s), dimensions={0}
  ROOT r = f32[4096,1024] divide(e, sb)""",
    ADD + MAX,
)


def softmax_ref(ops, x):
    e = ops.exp(x - ops.max(x, -1, keepdims=True))
    return e / ops.sum(e, -1, keepdims=True)


LAYERNORM = _module(
    "layernorm",
    """
  x = f32[4096,1024] parameter(0)
  g = f32[1024] parameter(1)
  b = f32[1024] parameter(2)
  n = f32[4096] broadcast(f32[] constant(0.0009765625)), dimensions={}
  sx = f32[4096] reduce(x, f32[] constant(0)), dimensions={1}, to_apply=add
  mean = f32[4096] multiply(sx, n)
  mb = f32[4096,1024] broadcast(mean), dimensions={0}
  xc = f32[4096,1024] subtract(x, mb)
  sq = f32[4096] reduce(multiply(xc, xc), f32[] constant(0)), dimensions={1}, to_apply=add
  var = f32[4096] multiply(sq, n)
  eps = f32[4096] broadcast(f32[] constant(1e-5)), dimensions={}
  inv = f32[4096] rsqrt(add(var, eps))
  ib = f32[4096,1024] broadcast(inv), dimensions={0}
  gb = f32[4096,1024] broadcast(g), dimensions={1}
  bb = f32[4096,1024] broadcast(b), dimensions={1}
  ROOT r = f32[4096,1024] add(multiply(multiply(xc, ib), gb), bb)""",
    ADD,
)


def layernorm_ref(ops, x, g, b):
    mean = ops.sum(x, -1, keepdims=True) * (1 / 1024)
    xc = x - mean
    var = ops.sum(xc * xc, -1, keepdims=True) * (1 / 1024)
    return xc * ops.rsqrt(var + 1e-5) * g + b


# ---- matmul and MLP --------------------------------------------------------------------------

MATMUL = _module(
    "matmul",
    """
  a = f32[1024,1024] parameter(0)
  b = f32[1024,1024] parameter(1)
  ROOT d = f32[1024,1024] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}""",
)


def matmul_ref(ops, a, b):
    return a @ b


MLP = _module(
    "mlp",
    """
  x = f32[256,1024] parameter(0)
  w1 = f32[1024,4096] parameter(1)
  b1 = f32[4096] parameter(2)
  w2 = f32[4096,1024] parameter(3)
  b2 = f32[1024] parameter(4)
  h = f32[256,4096] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[256,4096] broadcast(f32[] constant(0)), dimensions={}
  b1b = f32[256,4096] broadcast(b1), dimensions={1}
  r = f32[256,4096] maximum(add(h, b1b), zero)
  o = f32[256,1024] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  b2b = f32[256,1024] broadcast(b2), dimensions={1}
  ROOT y = f32[256,1024] add(o, b2b)""",
)


def mlp_ref(ops, x, w1, b1, w2, b2):
    return ops.maximum(x @ w1 + b1, 0) @ w2 + b2


def _mlp_inputs(rng):
    scale = np.float32(1 / 32)
    return [
        rng.standard_normal((256, 1024), dtype=np.float32),
        rng.standard_normal((1024, 4096), dtype=np.float32) * scale,
        rng.standard_normal(4096, dtype=np.float32),
        rng.standard_normal((4096, 1024), dtype=np.float32) * scale,
        rng.standard_normal(1024, dtype=np.float32),
    ]


# ---- reductions along each axis of 4096x4096 -----------------------------------------------


def _sum_axis(axis: int) -> str:
    return _module(
        f"sum_axis{axis}",
        f"""
  x = f32[4096,4096] parameter(0)
  ROOT r = f32[4096] reduce(x, f32[] constant(0)), dimensions={{{axis}}}, to_apply=add""",
        ADD,
    )


# ---- attention (batch 8, heads 8, sequence 256, head dim 64) -------------------------------

ATTENTION = _module(
    "attention",
    """
  q = f32[8,8,256,64] parameter(0)
  k = f32[8,8,256,64] parameter(1)
  v = f32[8,8,256,64] parameter(2)
  s = f32[8,8,256,256] dot(q, k), lhs_batch_dims={0,1}, lhs_contracting_dims={3},
      rhs_batch_dims={0,1}, rhs_contracting_dims={3}
  scale = f32[8,8,256,256] broadcast(f32[] constant(0.125)), dimensions={}
  z = f32[8,8,256,256] multiply(s, scale)
  m = f32[8,8,256] reduce(z, f32[] constant(-inf)), dimensions={3}, to_apply=max
  mb = f32[8,8,256,256] broadcast(m), dimensions={0,1,2}
  e = f32[8,8,256,256] exponential(subtract(z, mb))
  d = f32[8,8,256] reduce(e, f32[] constant(0)), dimensions={3}, to_apply=add
  db = f32[8,8,256,256] broadcast(d), dimensions={0,1,2}
  p = f32[8,8,256,256] divide(e, db)
  ROOT o = f32[8,8,256,64] dot(p, v), lhs_batch_dims={0,1}, lhs_contracting_dims={3},
      rhs_batch_dims={0,1}, rhs_contracting_dims={2}""",
    ADD + MAX,
)


def attention_ref(ops, q, k, v):
    s = ops.matmul(q, ops.swap_last(k)) * 0.125
    e = ops.exp(s - ops.max(s, -1, keepdims=True))
    return ops.matmul(e / ops.sum(e, -1, keepdims=True), v)


# ---- a 100-op elementwise graph on 1M ------------------------------------------------------

M = 1024 * 1024
_GRAPH_OPS = ["add", "multiply", "subtract", "maximum", "minimum", "tanh", "negate", "abs"]


def _graph_program(seed: int = 7):
    """100 ops over three inputs; every value stays bounded (tanh every few steps)."""
    rng = np.random.default_rng(seed)
    values, program = ["x", "y", "z"], []
    for k in range(100):
        op = "tanh" if k % 4 == 3 else _GRAPH_OPS[int(rng.integers(len(_GRAPH_OPS)))]
        args = [values[-1]] + (
            [values[int(rng.integers(len(values)))]] if op not in ("tanh", "negate", "abs") else []
        )
        program.append((f"g{k}", op, args))
        values.append(f"g{k}")
    return program


def _graph_hlo() -> str:
    lines = [f"  {n} = f32[{M}] parameter({i})" for i, n in enumerate("xyz")]
    for name, op, args in _graph_program():
        lines.append(f"  {name} = f32[{M}] {op}({', '.join(args)})")
    lines[-1] = lines[-1].replace("  g99", "  ROOT g99")
    return _module("graph100", "\n".join(lines))


_NUMPY_OPS = {
    "add": lambda o, a, b: a + b,
    "multiply": lambda o, a, b: a * b,
    "subtract": lambda o, a, b: a - b,
    "maximum": lambda o, a, b: o.maximum(a, b),
    "minimum": lambda o, a, b: o.minimum(a, b),
    "tanh": lambda o, a: o.tanh(a),
    "negate": lambda o, a: -a,
    "abs": lambda o, a: abs(a),
}


def graph_ref(ops, x, y, z):
    env = {"x": x, "y": y, "z": z}
    for name, op, args in _graph_program():
        env[name] = _NUMPY_OPS[op](ops, *(env[a] for a in args))
    return env["g99"]


# ---- x + x.T ---------------------------------------------------------------------------------

TRANSPOSE_ADD = _module(
    "transpose_add",
    """
  x = f32[2048,2048] parameter(0)
  t = f32[2048,2048] transpose(x), dimensions={1,0}
  ROOT r = f32[2048,2048] add(x, t)""",
)


def transpose_add_ref(ops, x):
    return x + ops.swap_last(x)


WORKLOADS = {
    "chain 4M": (CHAIN, lambda rng: [_f32(N)(rng) for _ in range(4)], chain_ref),
    "softmax 4096x1024": (SOFTMAX, lambda rng: [_f32(4096, 1024)(rng)], softmax_ref),
    "layernorm 4096x1024": (
        LAYERNORM,
        lambda rng: [_f32(4096, 1024)(rng), _f32(1024)(rng), _f32(1024)(rng)],
        layernorm_ref,
    ),
    "matmul 1024^2": (
        MATMUL,
        lambda rng: [_f32(1024, 1024)(rng), _f32(1024, 1024)(rng)],
        matmul_ref,
    ),
    "mlp 256x1024x4096": (MLP, _mlp_inputs, mlp_ref),
    "sum axis0 4096^2": (
        _sum_axis(0),
        lambda rng: [_f32(4096, 4096)(rng)],
        lambda ops, x: ops.sum(x, 0),
    ),
    "sum axis1 4096^2": (
        _sum_axis(1),
        lambda rng: [_f32(4096, 4096)(rng)],
        lambda ops, x: ops.sum(x, 1),
    ),
    "attention 8x8x256x64": (
        ATTENTION,
        lambda rng: [_f32(8, 8, 256, 64)(rng) for _ in range(3)],
        attention_ref,
    ),
    "graph 100 ops 1M": (_graph_hlo(), lambda rng: [_f32(M)(rng) for _ in range(3)], graph_ref),
    "x + x.T 2048^2": (TRANSPOSE_ADD, lambda rng: [_f32(2048, 2048)(rng)], transpose_add_ref),
}
