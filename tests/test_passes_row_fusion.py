"""row-fusion: row reductions merged into the loops that read them back (softmax, layer norm),
what it refuses, and the cpu kernels of the row programs it builds, against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import minixla
from minixla.passes import make_pipeline
from minixla.passes.row_fusion import MIN_ROWS, RowFusion, row_rank
from minixla.testing import check_pass, run_pass

FUSE_ROWS = make_pipeline(["fusion", "row-fusion"], "fuse-rows")

ADD_MAX = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""


def softmax(rows: int = 64, cols: int = 128, dtype: str = "f32") -> str:
    return f"""
HloModule softmax
{ADD_MAX}
ENTRY main {{
  x = {dtype}[{rows},{cols}] parameter(0)
  xf = f32[{rows},{cols}] convert(x)
  m = f32[{rows}] reduce(xf, f32[] constant(-inf)), dimensions={{1}}, to_apply=max
  e = f32[{rows},{cols}] exponential(f32[{rows},{cols}] subtract(xf, f32[{rows},{cols}] broadcast(m), dimensions={{0}}))
  s = f32[{rows}] reduce(e, f32[] constant(0)), dimensions={{1}}, to_apply=add
  r = f32[{rows},{cols}] divide(e, f32[{rows},{cols}] broadcast(s), dimensions={{0}})
  ROOT out = {dtype}[{rows},{cols}] convert(r)
}}"""


LAYERNORM = f"""
HloModule layernorm
{ADD_MAX}
ENTRY main {{
  x = f32[48,256] parameter(0)
  g = f32[256] parameter(1)
  b = f32[256] parameter(2)
  n = f32[48] broadcast(f32[] constant(0.00390625)), dimensions={{}}
  sx = f32[48] reduce(x, f32[] constant(0)), dimensions={{1}}, to_apply=add
  mean = f32[48] multiply(sx, n)
  d = f32[48,256] subtract(x, f32[48,256] broadcast(mean), dimensions={{0}})
  sd = f32[48] reduce(f32[48,256] multiply(d, d), f32[] constant(0)), dimensions={{1}}, to_apply=add
  var = f32[48] multiply(sd, n)
  inv = f32[48] rsqrt(f32[48] add(var, f32[48] broadcast(f32[] constant(1e-5)), dimensions={{}}))
  y = f32[48,256] multiply(d, f32[48,256] broadcast(inv), dimensions={{0}})
  ROOT out = f32[48,256] add(f32[48,256] multiply(y, f32[48,256] broadcast(g), dimensions={{1}}), f32[48,256] broadcast(b), dimensions={{1}})
}}"""


def read_back(*, reduced: int, broadcast: int, row: str = "m") -> str:
    """x - broadcast(row value), the row value a max of x over dim `reduced`."""
    return f"""HloModule read_back
{ADD_MAX}
ENTRY main {{
  x = f32[64,64] parameter(0)
  m = f32[64] reduce(x, f32[] constant(-inf)), dimensions={{{reduced}}}, to_apply=max
  ROOT c = f32[64,64] subtract(x, f32[64,64] broadcast({row}), dimensions={{{broadcast}}})
}}"""


def entry_fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def fused_then_row_fused(text: str):
    module, _ = run_pass("fusion", text)
    changed = RowFusion().run(module)
    return module, changed


def test_softmax_becomes_one_row_program():
    module = check_pass(
        FUSE_ROWS,
        softmax(),
        """
    // CHECK: %fused_computation
    // CHECK: reduce({{.*}}), dimensions={1}, to_apply=%max
    // CHECK: exponential(
    // CHECK: reduce({{.*}}), dimensions={1}, to_apply=%add
    // CHECK: divide(
    // CHECK: ENTRY %main
    // CHECK-NOT: reduce(
    // CHECK: ROOT %fusion = f32[64,128]{1,0} fusion(%x), kind=kLoop
    """,
    )
    (fusion,) = entry_fusions(module)
    assert row_rank(fusion.attrs["calls"]) == 1
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "fusion"]


def test_layer_norm_becomes_one_row_program():
    module = check_pass(FUSE_ROWS, LAYERNORM, "// CHECK: rsqrt(\n// CHECK: ENTRY", atol=1e-5)
    (fusion,) = entry_fusions(module)
    fused = fusion.attrs["calls"]
    assert sum(i.opcode == "reduce" for i in fused.instructions) == 2
    assert row_rank(fused) == 1


def test_a_row_value_read_elsewhere_stays_an_output():
    text = f"""
HloModule exported
{ADD_MAX}
ENTRY main {{
  x = f32[64,32] parameter(0)
  m = f32[64] reduce(x, f32[] constant(-inf)), dimensions={{1}}, to_apply=max
  c = f32[64,32] subtract(x, f32[64,32] broadcast(m), dimensions={{0}})
  ROOT t = (f32[64,32], f32[64]) tuple(c, f32[64] negate(m))
}}"""
    module = check_pass(FUSE_ROWS, text, "// CHECK: ENTRY")
    (fusion,) = [i for i in entry_fusions(module) if i.shape.is_tuple]
    assert [s.dims for s in fusion.shape.tuple_shapes] == [(64, 32), (64,)]


@pytest.mark.parametrize(
    "why, text",
    [
        ("too few rows", softmax(rows=MIN_ROWS - 1)),
        ("a column reduction", read_back(reduced=0, broadcast=1)),
        ("a row value broadcast along the other dim", read_back(reduced=1, broadcast=1)),
        (
            "a row value reversed before it is read back",
            read_back(reduced=1, broadcast=0, row="f32[64] reverse(m), dimensions={0}"),
        ),
        (
            "the rows of a transposed input",
            f"""HloModule transposed
{ADD_MAX}
ENTRY main {{
  x = f32[64,64] parameter(0)
  m = f32[64] reduce(x, f32[] constant(-inf)), dimensions={{1}}, to_apply=max
  c = f32[64,64] subtract(x, f32[64,64] broadcast(m), dimensions={{0}})
  ROOT t = f32[64,64] transpose(c), dimensions={{1,0}}
}}""",
        ),
    ],
)
def test_refusals(why, text):
    module, changed = fused_then_row_fused(text)
    assert not changed, why
    assert any(i.opcode == "reduce" for i in module.entry.instructions) or any(
        i.attrs["calls"].root.opcode == "reduce"
        or (i.attrs["calls"].root.opcode == "tuple" and row_rank(i.attrs["calls"]) is None)
        for i in entry_fusions(module)
    )


def test_the_cuda_pipeline_leaves_rows_alone():
    from minixla.backends.cuda import pipeline as cuda_pipeline
    from minixla.passes.pipelines import cpu_pipeline

    names = [p.name for p in cpu_pipeline().passes]
    assert "row-fusion" in names
    assert "row-fusion" not in [p.name for p in cuda_pipeline().passes]


# ---- the cpu kernels of row programs --------------------------------------------------------

RNG = np.random.default_rng(7)


def agree(text: str, *args, rtol=2e-6, atol=1e-6, scaled=False):
    """cpu's results equal the interpreter's within rtol/atol; with `scaled`, atol is relative
    to the largest result (sums in another order lose the same bits where they cancel)."""
    cpu = minixla.compile(text, backend="cpu")
    ref = minixla.compile(text, backend="interpreter")
    got, want = cpu(*args), ref(*args)
    for g, w in zip(*(v if isinstance(v, tuple) else (v,) for v in (got, want))):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        finite = np.abs(w[np.isfinite(w)])
        bound = atol * max(1.0, finite.max(initial=0.0)) if scaled else atol
        np.testing.assert_allclose(g, w, rtol=rtol, atol=bound)
    return cpu


def row_kernel_source(text: str) -> str:
    from minixla.backends.cpu.kernels import build_kernel
    from minixla.passes import run_pipeline
    from minixla.passes.pipelines import cpu_pipeline
    from minixla.text import parse_module

    module = parse_module(text)
    run_pipeline(cpu_pipeline(), module)
    (fusion,) = [f for f in entry_fusions(module) if row_rank(f.attrs["calls"]) is not None]
    return build_kernel(fusion.attrs["calls"]).source


def test_softmax_kernel_walks_each_row_four_times_and_memory_once():
    source = row_kernel_source(softmax())
    body = source.split("def kernel(")[1]
    # the rows; per row: max, exponentials kept in the output row, sum, divide in place
    assert body.count("for i0 in") == 1
    assert body.count("for ") == 5
    assert body.count("exponential_f32(") == 1


def test_softmax_on_cpu_matches_the_interpreter():
    x = RNG.standard_normal((64, 128)).astype(np.float32) * 4
    x[3, :5] = -np.inf  # masked entries
    agree(softmax(), x)


def test_bf16_softmax_on_cpu_matches_the_interpreter():
    import ml_dtypes

    x = (RNG.standard_normal((40, 96)) * 3).astype(ml_dtypes.bfloat16)
    agree(softmax(40, 96, "bf16"), x, rtol=1e-2, atol=1e-3)


def test_layer_norm_on_cpu_matches_the_interpreter():
    x = RNG.standard_normal((48, 256)).astype(np.float32) + 3
    g, b = RNG.standard_normal(256).astype(np.float32), RNG.standard_normal(256).astype(np.float32)
    agree(LAYERNORM, x, g, b, rtol=1e-5, atol=1e-5)


def test_rows_of_two_kept_dims_and_an_exported_row_value():
    text = f"""
HloModule logsoftmax
{ADD_MAX}
addd {{
  a = f64[] parameter(0)
  b = f64[] parameter(1)
  ROOT s = f64[] add(a, b)
}}
maxd {{
  a = f64[] parameter(0)
  b = f64[] parameter(1)
  ROOT m = f64[] maximum(a, b)
}}
ENTRY main {{
  x = f64[4,16,33] parameter(0)
  m = f64[4,16] reduce(x, f64[] constant(-inf)), dimensions={{2}}, to_apply=maxd
  c = f64[4,16,33] subtract(x, f64[4,16,33] broadcast(m), dimensions={{0,1}})
  s = f64[4,16] reduce(f64[4,16,33] exponential(c), f64[] constant(0)), dimensions={{2}}, to_apply=addd
  l = f64[4,16,33] subtract(c, f64[4,16,33] broadcast(f64[4,16] log(s)), dimensions={{0,1}})
  ROOT t = (f64[4,16,33], f64[4,16]) tuple(l, s)
}}"""
    assert row_kernel_source(text).count("for i1 in") == 1  # the rows: (i0, i1)
    agree(text, RNG.standard_normal((4, 16, 33)) * 10, rtol=1e-12, atol=1e-12)


def test_row_values_alone():
    # A norm's statistics: the variance reads the mean back over the row, and only the two
    # row values leave the fusion (the kernel has no loop over the row for outputs).
    text = f"""
HloModule moments
{ADD_MAX}
ENTRY main {{
  x = f32[40,24] parameter(0)
  n = f32[40] broadcast(f32[] constant(0.041666668)), dimensions={{}}
  sx = f32[40] reduce(x, f32[] constant(0)), dimensions={{1}}, to_apply=add
  mean = f32[40] multiply(sx, n)
  d = f32[40,24] subtract(x, f32[40,24] broadcast(mean), dimensions={{0}})
  sd = f32[40] reduce(f32[40,24] multiply(d, d), f32[] constant(0)), dimensions={{1}}, to_apply=add
  ROOT t = (f32[40], f32[40]) tuple(mean, f32[40] multiply(sd, n))
}}"""
    body = row_kernel_source(text).split("def kernel(")[1]
    assert body.count("for ") == 3  # the rows, then one loop per reduction
    agree(text, RNG.standard_normal((40, 24)).astype(np.float32) + 5, rtol=1e-5, atol=1e-6)


def test_an_operand_read_elementwise_never_shares_the_output_buffer():
    # y dies at the row program and is read there only elementwise; the kernel keeps the
    # exponentials in the output's row before it reads y, so the two must not share bytes.
    text = f"""
HloModule scaled_softmax
{ADD_MAX}
ENTRY main {{
  a = f32[64,64] parameter(0)
  b = f32[64,64] parameter(1)
  x = f32[64,64] parameter(2)
  y = f32[64,64] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  m = f32[64] reduce(x, f32[] constant(-inf)), dimensions={{1}}, to_apply=max
  e = f32[64,64] exponential(f32[64,64] subtract(x, f32[64,64] broadcast(m), dimensions={{0}}))
  s = f32[64] reduce(e, f32[] constant(0)), dimensions={{1}}, to_apply=add
  r = f32[64,64] multiply(y, f32[64,64] divide(e, f32[64,64] broadcast(s), dimensions={{0}}))
  ROOT z = f32[64,64] dot(r, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""
    a, b, x = (RNG.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
    agree(text, a, b, x, rtol=1e-4, atol=1e-5)


# ---- random row programs, cpu against the interpreter ----------------------------------------

UNARY = ("exponential", "tanh", "abs", "negate", "logistic")
BINARY = ("subtract", "multiply", "divide", "add", "maximum")
REDUCERS = ("add", "maximum", "minimum")


def random_row_program(seed: int) -> tuple[str, list]:
    """A module of 1-3 reductions over the trailing dims of one array, each read back through a
    broadcast by an elementwise op, in f32, f64 or bf16, with a row value and an intermediate
    sometimes exported too; and its inputs."""
    rng = np.random.default_rng(seed)
    dtype = ("f32", "f64", "bf16")[rng.integers(3)]
    acc = "f32" if dtype == "bf16" else dtype
    rank = int(rng.integers(2, 4))
    kept = int(rng.integers(1, rank))
    dims = [int(rng.integers(MIN_ROWS, MIN_ROWS + 9))] + [
        int(rng.integers(1, 7)) for _ in range(kept - 1)
    ]
    dims += [int(rng.integers(2, 70)) for _ in range(rank - kept)]  # rows of one are reshapes
    full, row = f"{acc}[{','.join(map(str, dims))}]", f"{acc}[{','.join(map(str, dims[:kept]))}]"
    kept_map = ",".join(map(str, range(kept)))
    reduced = ",".join(map(str, range(kept, rank)))
    lines = [f"  x = {dtype}[{','.join(map(str, dims))}] parameter(0)", f"  v0 = {full} convert(x)"]
    values, rows = ["v0"], []
    for stage in range(int(rng.integers(1, 4))):
        source = values[rng.integers(len(values))]
        if rng.random() < 0.5:
            op = UNARY[rng.integers(len(UNARY))]
            lines.append(f"  u{stage} = {full} {op}({source})")
            source = f"u{stage}"
        reducer = REDUCERS[rng.integers(len(REDUCERS))]
        init = {"add": "0", "maximum": "-inf", "minimum": "inf"}[reducer]
        lines.append(
            f"  r{stage} = {row} reduce({source}, {acc}[] constant({init})), "
            f"dimensions={{{reduced}}}, to_apply={reducer}_{acc}"
        )
        value = f"r{stage}"
        if rng.random() < 0.5:
            lines.append(f"  q{stage} = {row} tanh(r{stage})")
            value = f"q{stage}"
        rows.append(value)
        lines.append(f"  b{stage} = {full} broadcast({value}), dimensions={{{kept_map}}}")
        op = BINARY[rng.integers(len(BINARY))]
        lines.append(f"  v{stage + 1} = {full} {op}({values[rng.integers(len(values))]}, b{stage})")
        values.append(f"v{stage + 1}")
    outputs = [f"{dtype}[{','.join(map(str, dims))}] convert({values[-1]})"]
    lines.append(f"  o0 = {outputs[0]}")
    names, shapes = ["o0"], [f"{dtype}[{','.join(map(str, dims))}]"]
    if rng.random() < 0.25:  # a row value alone (a norm's statistics)
        lines.append(
            f"  z = {row} reduce({values[-1]}, {acc}[] constant(0)), "
            f"dimensions={{{reduced}}}, to_apply=add_{acc}"
        )
        names, shapes = ["z"], [row]
    if rng.random() < 0.5:
        names.append(rows[-1])
        shapes.append(row)
    if rng.random() < 0.3 and len(values) > 2:
        names.append(values[1])
        shapes.append(full)
    lines.append(f"  ROOT t = ({', '.join(shapes)}) tuple({', '.join(names)})")
    reducers = "\n".join(
        f"{name}_{t} {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n"
        f"  ROOT c = {t}[] {name}(a, b)\n}}"
        for name in REDUCERS
        for t in (acc,)
    )
    text = f"HloModule rows_{seed}\n{reducers}\nENTRY main {{\n" + "\n".join(lines) + "\n}"
    data = rng.standard_normal(dims) * 2
    if dtype == "bf16":
        import ml_dtypes

        return text, [data.astype(ml_dtypes.bfloat16)]
    return text, [data.astype(dtype.replace("f", "float"))]


SEEDS = range(12)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_row_programs_on_cpu_match_the_interpreter(seed):
    from minixla.passes import run_pipeline
    from minixla.passes.pipelines import cpu_pipeline
    from minixla.text import parse_module

    text, args = random_row_program(seed)
    module = parse_module(text)
    run_pipeline(cpu_pipeline(), module)
    assert any(row_rank(f.attrs["calls"]) is not None for f in entry_fusions(module)), text
    # f32 sums in another order move a bf16 result by one ulp near a rounding tie
    rtol, atol = {"bfloat16": (1e-2, 1e-3), "float32": (2e-4, 1e-5)}.get(
        str(args[0].dtype), (1e-12, 1e-12)
    )
    agree(text, *args, rtol=rtol, atol=atol, scaled=True)
