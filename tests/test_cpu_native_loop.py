"""While loops made only of kernels run as one native function on cpu (native_loop.py): no
Python per iteration, results equal to the interpreter's, arguments never written, and loops
with other pieces (nested loops, exchanged state leaves, GEMMs large enough for BLAS threads)
keep the Python loop. BLAS-sized dots run natively, bit for bit as in the Python loop."""

from __future__ import annotations

import re

import numpy as np
import pytest

import minixla
from minixla.backends.cpu.opkernels import SMALL_DOT_MACS
from minixla.errors import ExecutionError

from test_cpu_loops import READ_MODIFY_WRITE, loop


def _native(exe) -> bool:
    return any("Native while loop" in spec.source for spec in exe.program.kernels.values())


def _python_loop(exe) -> bool:
    return any(line.strip().startswith("while ") for line in exe.program.source.splitlines())


def _check(text, *args, **options):
    exe = minixla.compile(text, backend="cpu", **options)
    want = minixla.compile(text, backend="interpreter")(*args)
    before = [a.copy() for a in args]
    for _ in range(2):  # the second call must not see the first call's buffers
        got = exe(*args)
        for g, w in zip(
            got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]
        ):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for a, b in zip(args, before):
        np.testing.assert_array_equal(a, b)  # arguments are never written
    return exe


# Rows written past the end: the start index is clamped so the row fits (rows 8..10 -> 7).
CLAMPED_ROWS = loop(
    """
  row = f32[1,3] broadcast(f32[] convert(i)), dimensions={}
  upd = f32[8,3] dynamic-update-slice(buf, row, i, z)
""",
    n=11,
)


@pytest.mark.parametrize("text", [CLAMPED_ROWS, READ_MODIFY_WRITE], ids=["clamped", "rmw"])
def test_a_loop_of_kernels_runs_natively_and_matches_the_interpreter(text):
    exe = _check(text, np.arange(24, dtype=np.float32).reshape(8, 3))
    assert _native(exe) and not _python_loop(exe), exe.program.source
    # the loop state is the caller-visible result: no copy of it at the exit
    assert "return np.array" not in exe.program.source, exe.program.source


def test_the_python_loop_is_kept_when_native_loops_are_off():
    exe = _check(CLAMPED_ROWS, np.zeros((8, 3), np.float32), native_loops=False)
    assert not _native(exe) and _python_loop(exe)


ELEMENTWISE = """
HloModule e
cond {
  s = (s32[], f64[5], pred[5]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(9)), direction=LT
}
body {
  s = (s32[], f64[5], pred[5]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f64[5] get-tuple-element(s), index=1
  m = pred[5] get-tuple-element(s), index=2
  h = f64[5] multiply(x, f64[5] broadcast(f64[] constant(1.5)), dimensions={})
  y = f64[5] select(m, h, x)
  n = pred[5] compare(y, f64[5] broadcast(f64[] constant(20)), dimensions={}), direction=LT
  ROOT t = (s32[], f64[5], pred[5]) tuple(s32[] add(i, s32[] constant(1)), y, n)
}
ENTRY main {
  x = f64[5] parameter(0)
  m = pred[5] parameter(1)
  w = (s32[], f64[5], pred[5]) while((s32[], f64[5], pred[5]) tuple(s32[] constant(0), x, m)), condition=cond, body=body
  ROOT r = (f64[5], pred[5]) tuple(f64[5] get-tuple-element(w), index=1, pred[5] get-tuple-element(w), index=2)
}"""


@pytest.mark.parametrize("passes", [[], None], ids=["unoptimized", "cpu-pipeline"])
def test_elementwise_state_of_several_types(passes):
    x = np.array([1.0, -2.0, 3.0, 0.5, 7.0])
    m = np.array([True, False, True, True, True])
    exe = _check(ELEMENTWISE, x, m, **({} if passes is None else {"passes": passes}))
    assert _native(exe)


def test_max_while_iterations_stops_a_native_loop():
    exe = minixla.compile(CLAMPED_ROWS, backend="cpu", max_while_iterations=5)
    assert _native(exe)
    with pytest.raises(ExecutionError, match="more than 5 iterations"):
        exe(np.zeros((8, 3), np.float32))
    ok = minixla.compile(CLAMPED_ROWS, backend="cpu", max_while_iterations=11)
    np.testing.assert_array_equal(ok(np.zeros((8, 3), np.float32))[7], [10, 10, 10])


EXCHANGE = """
HloModule x
cond {
  s = (s32[], f32[4], f32[4]) parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant(3)), direction=LT
}
body {
  s = (s32[], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[4] get-tuple-element(s), index=1
  b = f32[4] get-tuple-element(s), index=2
  ROOT t = (s32[], f32[4], f32[4]) tuple(s32[] add(i, s32[] constant(1)), b, f32[4] add(a, b))
}
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  w = (s32[], f32[4], f32[4]) while((s32[], f32[4], f32[4]) tuple(s32[] constant(0), a, b)), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=2
}"""


def test_exchanged_state_leaves_keep_the_python_loop():
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    exe = _check(EXCHANGE, a, b, passes=[])
    assert not _native(exe) and _python_loop(exe)


DOT_BODY = """
HloModule d
cond {
  s = (s32[], f32[1,8], f32[8,8]) parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant(4)), direction=LT
}
body {
  s = (s32[], f32[1,8], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[1,8] get-tuple-element(s), index=1
  w = f32[8,8] get-tuple-element(s), index=2
  d = f32[1,8] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (s32[], f32[1,8], f32[8,8]) tuple(s32[] add(i, s32[] constant(1)), f32[1,8] tanh(d), w)
}
ENTRY main {
  h = f32[1,8] parameter(0)
  w = f32[8,8] parameter(1)
  l = (s32[], f32[1,8], f32[8,8]) while((s32[], f32[1,8], f32[8,8]) tuple(s32[] constant(0), h, w)), condition=cond, body=body
  ROOT r = f32[1,8] get-tuple-element(l), index=1
}"""


@pytest.mark.parametrize("width", [8, 128])
def test_a_small_dot_kernel_and_a_blas_dot_both_run_natively(width):
    rng = np.random.default_rng(0)
    h = rng.standard_normal((1, width)).astype(np.float32)
    # rows of norm about 1: the recurrence does not amplify last-bit differences in tanh
    w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    exe = _check(DOT_BODY.replace("8]", f"{width}]").replace("[8,", f"[{width},"), h, w)
    assert _native(exe) and not _python_loop(exe)
    small = width * width <= SMALL_DOT_MACS
    assert _gemm(exe) != small


def _gemm(exe) -> bool:
    return any("of NumPy's BLAS" in spec.source for spec in exe.program.kernels.values())


# A scan whose step is a BLAS-sized dot: acc = acc * 0.5 + tanh(dot(a, b)), a = a * 0.75.
def _scan(dtype: str, lhs: str, rhs: str, dims: str, steps: int = 3) -> str:
    out = f"{dtype}{_dot_shape(lhs, rhs, dims)}"
    a, b = f"{dtype}{lhs}", f"{dtype}{rhs}"
    state = f"(s32[], {out}, {a}, {b})"
    return f"""
HloModule scan
cond {{
  s = {state} parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant({steps})), direction=LT
}}
body {{
  s = {state} parameter(0)
  i = s32[] get-tuple-element(s), index=0
  acc = {out} get-tuple-element(s), index=1
  a = {a} get-tuple-element(s), index=2
  b = {b} get-tuple-element(s), index=3
  d = {out} dot(a, b), {dims}
  half = {out} multiply(acc, {out} broadcast({dtype}[] constant(0.5)), dimensions={{}})
  next = {out} add(half, {out} tanh(d))
  a2 = {a} multiply(a, {a} broadcast({dtype}[] constant(0.75)), dimensions={{}})
  ROOT t = {state} tuple(s32[] add(i, s32[] constant(1)), next, a2, b)
}}
ENTRY main {{
  acc = {out} parameter(0)
  a = {a} parameter(1)
  b = {b} parameter(2)
  l = {state} while({state} tuple(s32[] constant(0), acc, a, b)), condition=cond, body=body
  ROOT r = {out} get-tuple-element(l), index=1
}}"""


BLAS_DOTS = [
    ("[16,64]", "[64,96]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[64,16]", "[64,96]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("[16,64]", "[96,64]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("[64,16]", "[96,64]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
    (
        "[3,16,64]",
        "[3,64,40]",
        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
        "rhs_contracting_dims={1}",
    ),
    (
        "[16,3,64]",
        "[64,40,3]",
        "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={2}, "
        "rhs_contracting_dims={0}",
    ),
    ("[8,4,32]", "[4,32,80]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"),
    ("[4,16,32]", "[32,80]", "lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    # one operand a vector: GEMV, with the matrix as stored or transposed
    ("[64]", "[64,96]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    ("[1,64]", "[96,64]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
    ("[96,64]", "[64]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[64,96]", "[64,1]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
    # (a batched vector, [3, 64] . [3, 64, 96], is a multiply and a sum since the
    # dot-strength-reduction pass: no BLAS call left to check here)
    # above the small-matrix path's size: blocks of columns where the library has that path
    ("[16,128]", "[128,1040]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("[128,16]", "[1040,128]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
    # few rows times B stored [n, k]: the transposed product into a scratch buffer
    ("[8,128]", "[256,128]", "lhs_contracting_dims={1}, rhs_contracting_dims={1}"),
]


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(
    "lhs, rhs, dims",
    BLAS_DOTS,
    ids=[
        "nn",
        "tn",
        "nt",
        "tt",
        "batch",
        "batch-copied",
        "two-contracted",
        "two-free",
        "vector-matrix",
        "row-transposed-matrix",
        "matrix-vector",
        "transposed-matrix-column",
        "nn-columns",
        "tt-columns",
        "nt-transposed-product",
    ],
)
def test_a_scan_of_blas_dots_runs_natively_bit_for_bit_as_the_python_loop(dtype, lhs, rhs, dims):
    rng = np.random.default_rng(3)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    a = (rng.standard_normal(eval(lhs)) * 0.2).astype(np_dtype)
    b = (rng.standard_normal(eval(rhs)) * 0.2).astype(np_dtype)
    acc = rng.standard_normal(eval(_dot_shape(lhs, rhs, dims))).astype(np_dtype)
    text = _scan(dtype, lhs, rhs, dims)
    exe = _check(text, acc, a, b)
    assert _native(exe) and _gemm(exe) and not _python_loop(exe), exe.program.source
    python = minixla.compile(text, backend="cpu", native_loops=False)
    assert _python_loop(python) and _gemm(python)
    np.testing.assert_array_equal(exe(acc, a, b), python(acc, a, b))


def test_a_loop_runs_its_gemms_on_one_blas_thread(monkeypatch):
    from minixla.backends.cpu import blas_threads

    lhs, rhs, dims = BLAS_DOTS[0]
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(eval(s)).astype(np.float32) for s in ("[16,96]", lhs, rhs)]
    exe = minixla.compile(_scan("f32", lhs, rhs, dims), backend="cpu")
    counts: list = []  # what the library is told, its own count being 2 and set to 2 now
    monkeypatch.setattr(blas_threads, "_setters", [(counts.append, 2)])
    monkeypatch.setattr(blas_threads, "_current", 2)
    exe(*args)
    assert counts == [1, 2]  # one thread for the loop, its own count back on return


def test_a_dot_large_enough_for_blas_threads_keeps_the_python_loop():
    from minixla.backends.cpu.blas_threads import always_serial

    dims = "lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert not always_serial(2.0 * 256 * 256 * 512)
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((256, 256)) * 0.05).astype(np.float32)
    b = (rng.standard_normal((256, 512)) * 0.05).astype(np.float32)
    acc = np.zeros((256, 512), np.float32)
    exe = _check(_scan("f32", "[256,256]", "[256,512]", dims, steps=2), acc, a, b)
    assert _python_loop(exe) and not _native(exe)


# A loop of XLA:CPU's LAPACK calls (lapack.py's kernels): each step solves a x = x / 2 through
# an LU factorization (getrf, two trsm) or a QR one (geqrf, orgqr, then q^T x with a dot).
_FFI = "api_version=API_VERSION_TYPED_FFI"
_LAPACK_STEPS = {
    "lu": f"""
  lu = ({{t}}[{{b}},{{n}},{{n}}], s32[{{b}},{{n}}], s32[{{b}}]) custom-call(a), custom_call_target="lapack_{{l}}getrf_ffi", {_FFI}
  f = {{t}}[{{b}},{{n}},{{n}}] get-tuple-element(lu), index=0
  y = {{t}}[{{b}},{{n}},2] custom-call(f, x), custom_call_target="lapack_{{l}}trsm_ffi", {_FFI}, backend_config={{{{side = 76 : ui8, uplo = 76 : ui8, trans_x = 78 : ui8, diag = 85 : ui8}}}}
  z = {{t}}[{{b}},{{n}},2] custom-call(f, y), custom_call_target="lapack_{{l}}trsm_ffi", {_FFI}, backend_config={{{{side = 76 : ui8, uplo = 85 : ui8, trans_x = 78 : ui8, diag = 78 : ui8}}}}
""",
    "qr": f"""
  qr = ({{t}}[{{b}},{{n}},{{n}}], {{t}}[{{b}},{{n}}]) custom-call(a), custom_call_target="lapack_{{l}}geqrf_ffi", {_FFI}
  h = {{t}}[{{b}},{{n}},{{n}}] get-tuple-element(qr), index=0
  tau = {{t}}[{{b}},{{n}}] get-tuple-element(qr), index=1
  q = {{t}}[{{b}},{{n}},{{n}}] custom-call(h, tau), custom_call_target="lapack_{{l}}orgqr_ffi", {_FFI}
  z = {{t}}[{{b}},{{n}},2] dot(q, x), lhs_batch_dims={{{{0}}}}, lhs_contracting_dims={{{{1}}}}, rhs_batch_dims={{{{0}}}}, rhs_contracting_dims={{{{1}}}}
""",
}


def _lapack_loop(step: str, letter: str, batch: int, n: int, steps: int = 5) -> str:
    t = {"s": "f32", "d": "f64"}[letter]
    state = f"(s32[], {t}[{batch},{n},{n}], {t}[{batch},{n},2])"
    body = _LAPACK_STEPS[step].format(t=t, b=batch, n=n, l=letter)
    return f"""HloModule m
cond {{
  s = {state} parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant({steps})), direction=LT
}}
body {{
  s = {state} parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = {t}[{batch},{n},{n}] get-tuple-element(s), index=1
  x = {t}[{batch},{n},2] get-tuple-element(s), index=2
{body}
  w = {t}[{batch},{n},2] multiply(z, {t}[{batch},{n},2] broadcast({t}[] constant(0.5)), dimensions={{}})
  ROOT t = {state} tuple(s32[] add(i, s32[] constant(1)), a, w)
}}
ENTRY e {{
  a = {t}[{batch},{n},{n}] parameter(0)
  b = {t}[{batch},{n},2] parameter(1)
  w = {state} while({state} tuple(s32[] constant(0), a, b)), condition=cond, body=body
  ROOT x = {t}[{batch},{n},2] get-tuple-element(w), index=2
}}"""


@pytest.mark.parametrize("step, letter", [("lu", "s"), ("lu", "d"), ("qr", "s")])
def test_a_loop_of_lapack_calls_runs_natively(step, letter):
    rng = np.random.default_rng(6)
    dtype = np.float32 if letter == "s" else np.float64
    a = (rng.standard_normal((3, 6, 6)) + 6 * np.eye(6)).astype(dtype)
    b = rng.standard_normal((3, 6, 2)).astype(dtype)
    exe = _check(_lapack_loop(step, letter, 3, 6), a, b)
    assert _native(exe) and not _python_loop(exe), exe.program.source


def test_a_lapack_call_large_enough_for_blas_threads_keeps_the_python_loop(monkeypatch):
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "cores", lambda: 2)
    n = 320  # an LU of n^3 multiply-adds gets two threads
    assert blas_threads.threads_for(float(n**3)) == 2
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((1, n, n)) + n * np.eye(n)).astype(np.float64)
    b = rng.standard_normal((1, n, 2))
    exe = _check(_lapack_loop("lu", "d", 1, n, steps=2), a, b)
    assert _python_loop(exe) and not _native(exe)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize(
    "lhs, rhs, dims",
    [
        ("[3,4]", "[4,5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
        ("[4,3]", "[5,4]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
        (
            "[2,3,4]",
            "[2,4,5]",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}",
        ),
        (
            "[3,2,4]",
            "[4,5,2]",
            "lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={2}, "
            "rhs_contracting_dims={0}",
        ),
        ("[2,3,4]", "[3,4,6]", "lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}"),
        ("[4]", "[4]", "lhs_contracting_dims={0}, rhs_contracting_dims={0}"),
        ("[3,0]", "[0,5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ],
    ids=["nn", "tt", "batch", "batch-middle", "two-contracted", "vector", "empty-k"],
)
def test_small_dots_match_the_interpreter(dtype, lhs, rhs, dims):
    text_lhs, text_rhs = f"{dtype}{lhs}", f"{dtype}{rhs}"
    result = _dot_shape(lhs, rhs, dims)
    text = f"""
HloModule d
ENTRY main {{
  a = {text_lhs} parameter(0)
  b = {text_rhs} parameter(1)
  ROOT d = {dtype}{result} dot(a, b), {dims}
}}"""
    rng = np.random.default_rng(1)
    np_dtype = np.float32 if dtype == "f32" else np.float64
    a = rng.standard_normal(eval(lhs)).astype(np_dtype)
    b = rng.standard_normal(eval(rhs)).astype(np_dtype)
    exe = minixla.compile(text, backend="cpu")
    assert any("Kernel for dot" in s.source for s in exe.program.kernels.values())
    np.testing.assert_allclose(
        exe(a, b), minixla.compile(text, backend="interpreter")(a, b), rtol=1e-5, atol=1e-5
    )


def _dot_shape(lhs: str, rhs: str, dims: str) -> str:
    import re

    sets = {k: [int(x) for x in v.split(",")] for k, v in re.findall(r"(\w+)=\{([\d,]*)\}", dims)}
    l, r = eval(lhs), eval(rhs)
    lb, rb = sets.get("lhs_batch_dims", []), sets.get("rhs_batch_dims", [])
    lc, rc = sets["lhs_contracting_dims"], sets["rhs_contracting_dims"]
    out = (
        [l[d] for d in lb]
        + [n for d, n in enumerate(l) if d not in lb + lc]
        + [n for d, n in enumerate(r) if d not in rb + rc]
    )
    return "[" + ",".join(map(str, out)) + "]"


def test_an_inner_loop_runs_natively_inside_a_python_outer_loop():
    inner = (
        ELEMENTWISE.replace("HloModule e\n", "")
        .replace("ENTRY main", "inner_main")
        .replace("cond {", "icond {")
        .replace("body {", "ibody {")
        .replace("condition=cond, body=body", "condition=icond, body=ibody")
    )
    text = f"""
HloModule n
{inner}
ocond {{
  s = (s32[], f64[5]) parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant(3)), direction=LT
}}
obody {{
  s = (s32[], f64[5]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f64[5] get-tuple-element(s), index=1
  m = pred[5] compare(x, f64[5] broadcast(f64[] constant(0)), dimensions={{}}), direction=GT
  r = (f64[5], pred[5]) call(x, m), to_apply=inner_main
  y = f64[5] get-tuple-element(r), index=0
  ROOT t = (s32[], f64[5]) tuple(s32[] add(i, s32[] constant(1)), f64[5] negate(y))
}}
ENTRY main {{
  x = f64[5] parameter(0)
  w = (s32[], f64[5]) while((s32[], f64[5]) tuple(s32[] constant(0), x)), condition=ocond, body=obody
  ROOT r = f64[5] get-tuple-element(w), index=1
}}"""
    exe = _check(text, np.array([1.0, -2.0, 3.0, 0.5, 7.0]), passes=[])
    assert _native(exe) and _python_loop(exe)


def test_a_read_only_argument_the_loop_only_reads():
    rng = np.random.default_rng(2)
    h = rng.standard_normal((1, 8)).astype(np.float32)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    w.flags.writeable = False
    exe = _check(DOT_BODY, h, w, passes=[])
    assert _native(exe)


def test_a_loop_carried_scatter_runs_natively_in_place():
    from test_cpu_loops import SCATTER_ROW

    exe = _check(SCATTER_ROW, np.arange(24, dtype=np.float32).reshape(8, 3))
    assert _native(exe) and not _python_loop(exe)
    (source,) = [s.source for s in exe.program.kernels.values() if "Native while loop" in s.source]
    # the state buffer is the scatter's operand and its output: one view, made before the
    # loop, passed once (the kernel reads the operand through its output argument)
    view = re.search(r"\n +(view\d+) = h\.as_shape\(s\d+, \(8, 3\)\)\n", source)
    call = view and re.search(rf"\n +k\d+\(([^)]*\b{view[1]}\))", source)
    assert call and call[1].count(view[1]) == 1 and call[1].endswith(f"{view[1]})"), source
    # no view is made per iteration (each costs a reference count up and down)
    assert "h.as_shape(" not in source.split("while True:")[1], source


# The updated buffer is also read in the same iteration (a KV cache the step attends over).
READ_AFTER_UPDATE = """
HloModule r
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  s = (s32[], f32[8,3], f32[]) parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant(6)), direction=LT
}
body {
  s = (s32[], f32[8,3], f32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  buf = f32[8,3] get-tuple-element(s), index=1
  total = f32[] get-tuple-element(s), index=2
  row = f32[1,3] broadcast(f32[] convert(i)), dimensions={}
  upd = f32[8,3] dynamic-update-slice(buf, row, i, s32[] constant(0))
  sum = f32[] reduce(upd, f32[] constant(0)), dimensions={0,1}, to_apply=add
  ROOT t = (s32[], f32[8,3], f32[]) tuple(s32[] add(i, s32[] constant(1)), upd, f32[] add(total, sum))
}
ENTRY main {
  x = f32[8,3] parameter(0)
  w = (s32[], f32[8,3], f32[]) while((s32[], f32[8,3], f32[]) tuple(s32[] constant(0), x, f32[] constant(0))), condition=cond, body=body
  ROOT r = (f32[8,3], f32[]) tuple(f32[8,3] get-tuple-element(w), index=1, f32[] get-tuple-element(w), index=2)
}"""


@pytest.mark.parametrize("native", [True, False], ids=["native", "python"])
def test_an_update_read_again_in_its_iteration_is_still_in_place(native):
    exe = _check(
        READ_AFTER_UPDATE, np.arange(24, dtype=np.float32).reshape(8, 3), native_loops=native
    )
    assert _native(exe) == native
    if native:
        (source,) = [s.source for s in exe.program.kernels.values() if "Native while" in s.source]
        # the update's rows are written into the state buffer itself
        view = re.search(r"\n +(view\d+) = h\.as_shape\(s1, \(8, 3\)\)\n", source)
        assert view, source
        assert re.search(rf"\n +(s1_t\d+) = {view[1]}\n(.*\n)*.*\1\[", source), source
    else:
        body = [c for c in exe.program.source.split("\n\n\n") if "dynamic-update-slice" in c][0]
        assert re.search(r"t\d+\((v\d+), \1, ", body), body


def _loop_source(exe) -> str:
    (source,) = [s.source for s in exe.program.kernels.values() if "Native while" in s.source]
    return source.split("while True:")[1]


def _body(state: str, lines: str, root: str) -> str:
    return f"""
HloModule direct
cond {{
  s = (s32[], {state}) parameter(0)
  ROOT lt = pred[] compare(s32[] get-tuple-element(s), index=0, s32[] constant(5)), direction=LT
}}
body {{
  s = (s32[], {state}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
{lines}
  ROOT t = (s32[], {state}) tuple(s32[] add(i, s32[] constant(1)), {root})
}}
ENTRY main {{
  x = f32[64] parameter(0)
  y = f32[64] parameter(1)
  w = (s32[], {state}) while((s32[], {state}) tuple(s32[] constant(0), x, y)), condition=cond, body=body
  ROOT r = ({state}) tuple(f32[64] get-tuple-element(w), index=1, f32[64] get-tuple-element(w), index=2)
}}"""


STATE = "f32[64], f32[64]"
GET = """  a = f32[64] get-tuple-element(s), index=1
  b = f32[64] get-tuple-element(s), index=2"""


@pytest.mark.parametrize(
    "lines,root,check_copies",
    [
        # a gradient accumulator: read elementwise by the fusion that makes its next value,
        # which writes it in place (b * b leaves the loop as a new state leaf)
        ("  n = f32[64] add(a, f32[64] multiply(b, b))", "n, b", True),
        # both leaves from one multi-output fusion reading them elementwise
        ("  n = f32[64] add(a, b)\n  m = f32[64] multiply(a, b)", "n, m", True),
        # the next value reads its leaf reversed: copy insertion copies the old value first
        ("  n = f32[64] add(f32[64] reverse(a), dimensions={0}, b)", "n, b", True),
        # the old value is read again after the new one is made (by a dot's reduction)
        (
            "  n = f32[64] add(a, b)\n"
            "  d = f32[] dot(a, n), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n"
            "  m = f32[64] add(b, f32[64] broadcast(d), dimensions={})",
            "n, m",
            False,
        ),
    ],
    ids=["accumulator", "multi-output", "reversed", "read-after"],
)
def test_body_results_are_written_into_their_state_leaves(lines, root, check_copies):
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal(64).astype(np.float32) * 0.5 for _ in range(2))
    exe = _check(_body(STATE, GET + "\n" + lines, root), x, y)
    assert _native(exe)
    source = _loop_source(exe)
    if check_copies:  # no copy of a body result into the state after the body
        assert not re.search(r"\n +s\d+\[i\] = n\d+\[i\]", source), source


def test_a_kernel_updating_its_state_leaf_in_place_reads_it_through_one_argument():
    # Newton's iteration x - (x * x - a) / (2 x): the fusion reads and writes state leaf s1;
    # passed twice, LLVM's overlap check would fail and run the loop scalar
    text = _body(
        STATE,
        GET
        + "\n  n = f32[64] subtract(a, f32[64] divide(f32[64] subtract(f32[64] multiply(a, a), b),"
        " f32[64] add(a, a)))",
        "n, b",
    )
    rng = np.random.default_rng(5)
    x = np.abs(rng.standard_normal(64)).astype(np.float32) + 1
    exe = _check(text, x, x * 2)
    source = _loop_source(exe)
    calls = re.findall(r"\n +k\d+\(([^)]*)\)", source)
    assert ["s1"] in [[a.strip() for a in c.split(",")][-1:] for c in calls], source
    for args in calls:
        names = [a.strip() for a in args.split(",")]
        assert len(names) == len(set(names)), source  # no buffer passed twice


def test_a_loop_calls_its_kernels_by_symbol_instead_of_linking_a_copy_of_their_code():
    # a copy would be optimized and turned into machine code again inside the loop's library
    from minixla.backends.cpu import jit

    exe = _check(CLAMPED_ROWS, np.arange(24, dtype=np.float32).reshape(8, 3), cache=False)
    dispatchers = [jit._COMPILED[jit.kernel_id(spec)] for spec in exe.program.kernels.values()]
    loops = [d for d in dispatchers if d.py_func.__name__ == "loop"]
    kernels = [d for d in dispatchers if d.py_func.__name__ != "loop"]
    assert loops and kernels
    kernel_libraries = {id(c.library) for d in kernels for c in d.overloads.values()}
    for loop_function in loops:
        (compiled,) = loop_function.overloads.values()
        linked = {id(library) for library in compiled.library._linking_libraries}
        assert not linked & kernel_libraries
