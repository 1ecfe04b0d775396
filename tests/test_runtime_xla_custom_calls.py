"""Modules XLA:CPU printed after optimization load and run: element-type-changing bitcasts in
sort comparators, XLA:CPU's TopK and LAPACK custom calls (tests/stablehlo/*.optimized.hlo, with
JAX's results), and each LAPACK routine against NumPy on its own."""

from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.errors import ExecutionError
from minixla.reference.custom_call import register_custom_call, unregister_custom_call
from minixla.reference.xla_custom_calls import TARGETS, ffi_attributes

CORPUS = Path(__file__).parent / "stablehlo"
DUMPS = sorted(p.name[: -len(".optimized.hlo")] for p in CORPUS.glob("*.optimized.hlo"))


def _case(name):
    data = np.load(CORPUS / f"{name}.npz")
    count = lambda prefix: sum(k.startswith(prefix) for k in data)  # noqa: E731
    return (
        [data[f"arg{i}"] for i in range(count("arg"))],
        [data[f"out{i}"] for i in range(count("out"))],
    )


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", DUMPS)
def test_xla_cpu_optimized_dumps_run_and_match_jax(name, backend):
    args, want = _case(name)
    module = minixla.parse_module((CORPUS / f"{name}.optimized.hlo").read_text())
    got = minixla.compile(module, backend=backend)(*args)
    got = list(got) if isinstance(got, tuple) else [got]
    assert len(got) == len(want)
    for i, (a, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, w, rtol=2e-3, atol=1e-4, err_msg=f"{name} out{i}")


def test_the_dumps_contain_what_they_are_here_for():
    text = "".join((CORPUS / f"{n}.optimized.hlo").read_text() for n in DUMPS)
    for needle in (
        'custom_call_target="TopK"',
        "lapack_spotrf_ffi",
        "lapack_sgetrf_ffi",
        "lapack_strsm_ffi",
        "lapack_sgeqrf_ffi",
        "lapack_sorgqr_ffi",
        "lapack_ssyevd_ffi",
        "lapack_sgesdd_ffi",
        "s32[] bitcast(",
        "is_scheduled",
    ):
        assert needle in text, needle


def test_bitcast_may_change_the_element_type_at_equal_width_only():
    same = """HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT b = s32[3,2]{1,0} bitcast(p)
}"""
    x = np.array([[1.0, -2.0, 0.5], [np.inf, 0.0, -0.0]], np.float32)
    np.testing.assert_array_equal(minixla.compile(same)(x), x.view(np.int32).reshape(3, 2))
    wider = same.replace("s32[3,2]", "s16[3,4]")
    with pytest.raises(ExecutionError, match="element width"):
        minixla.compile(wider)(x)


def _call(target, operands, outs, **attrs):
    config = "{" + ", ".join(f"{k} = {ord(v)} : ui8" for k, v in attrs.items()) + "}"
    return TARGETS[target](operands, outs, ffi_attributes(config))


RNG = np.random.default_rng(3)


def test_getrf_gives_pivots_and_factors_that_rebuild_the_matrix():
    a = RNG.standard_normal((2, 4, 4))
    lu, pivots, info = _call("lapack_dgetrf_ffi", (a,), [])
    assert info.tolist() == [0, 0] and pivots.min() >= 1
    for b in range(2):
        lower = np.tril(lu[b], -1) + np.eye(4)
        rebuilt = lower @ np.triu(lu[b])
        permuted = a[b].copy()
        for j, p in enumerate(pivots[b] - 1):
            permuted[[j, p]] = permuted[[p, j]]
        np.testing.assert_allclose(rebuilt, permuted, atol=1e-12)


@pytest.mark.parametrize(
    "side, uplo, trans, diag",
    [("L", "L", "N", "N"), ("L", "U", "T", "N"), ("R", "L", "N", "U"), ("R", "U", "C", "N")],
)
def test_trsm_solves_each_side_triangle_and_transpose(side, uplo, trans, diag):
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    b = RNG.standard_normal((3, 2) if side == "L" else (2, 3))
    x = _call("lapack_dtrsm_ffi", (a, b), [], side=side, uplo=uplo, trans_x=trans, diag=diag)
    tri = np.tril(a) if uplo == "L" else np.triu(a)
    if diag == "U":
        np.fill_diagonal(tri, 1)
    op = tri.T if trans in "TC" else tri
    np.testing.assert_allclose(op @ x if side == "L" else x @ op, b, atol=1e-12)


def test_potrf_upper_and_failure_info():
    m = RNG.standard_normal((3, 3))
    spd = m @ m.T + 3 * np.eye(3)
    factor, info = _call("lapack_dpotrf_ffi", (spd,), [], uplo="U")
    upper = np.triu(factor)
    np.testing.assert_allclose(upper.T @ upper, spd, atol=1e-12)
    np.testing.assert_array_equal(np.tril(factor, -1), np.tril(spd, -1))  # left as it was
    _, info = _call("lapack_dpotrf_ffi", (-spd,), [], uplo="L")
    assert info > 0


def test_geqrf_then_orgqr_is_a_qr_factorization():
    a = RNG.standard_normal((5, 3))
    h, tau = _call("lapack_dgeqrf_ffi", (a,), [])
    q = _call("lapack_dorgqr_ffi", (h, tau), [])
    np.testing.assert_allclose(q @ np.triu(h[:3]), a, atol=1e-12)
    np.testing.assert_allclose(q.T @ q, np.eye(3), atol=1e-12)


def test_top_k_orders_largest_first_with_nan_on_top():
    x = np.array([[1.0, np.nan, 3.0, -1.0, 3.0]], np.float32)
    values, indices = TARGETS["TopK"]((x,), [((1, 3), np.float32), ((1, 3), np.int32)], {})
    assert np.isnan(values[0, 0]) and values[0, 1:].tolist() == [3.0, 3.0]
    assert indices.tolist() == [[1, 2, 4]]


def test_a_user_registration_wins_over_the_builtin():
    from minixla.reference.custom_call import register_custom_call, unregister_custom_call

    text = """HloModule m
ENTRY e {
  p = f32[2,4]{1,0} parameter(0)
  ROOT t = (f32[2,1]{1,0}, s32[2,1]{1,0}) custom-call(p), custom_call_target="TopK"
}"""
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    assert minixla.compile(text)(x)[0].tolist() == [[3.0], [7.0]]
    register_custom_call(
        "TopK",
        "interpreter",
        lambda p, result_shape, backend_config: (
            np.zeros((2, 1), np.float32),
            np.zeros((2, 1), np.int32),
        ),
    )
    try:
        assert minixla.compile(text)(x)[0].tolist() == [[0.0], [0.0]]
    finally:
        unregister_custom_call("TopK", "interpreter")


C128, F64, I32 = np.complex128, np.float64, np.int32


@pytest.mark.parametrize("complex_input", [False, True])
def test_geev_gives_unit_eigenvectors_on_both_sides(complex_input):
    a = RNG.standard_normal((2, 4, 4)) + (
        1j * RNG.standard_normal((2, 4, 4)) if complex_input else 0
    )
    vectors = [((2, 4, 4), C128)] * 2 + [((2,), I32)]
    if complex_input:
        w, vl, vr, info = _call(
            "lapack_zgeev_ffi",
            (a,),
            [((2, 4), C128)] + vectors,
            compute_left="V",
            compute_right="V",
        )
    else:
        wr, wi, vl, vr, info = _call(
            "lapack_dgeev_ffi",
            (a,),
            [((2, 4), F64)] * 2 + vectors,
            compute_left="V",
            compute_right="V",
        )
        w = wr + 1j * wi
    assert info.tolist() == [0, 0]
    for b in range(2):
        np.testing.assert_allclose(a[b] @ vr[b], vr[b] * w[b], atol=1e-10)
        np.testing.assert_allclose(
            vl[b].conj().T @ a[b], w[b][:, None] * vl[b].conj().T, atol=1e-10
        )
        np.testing.assert_allclose(np.linalg.norm(vl[b], axis=0), 1)
        largest = vl[b][np.argmax(np.abs(vl[b]), axis=0), range(4)]
        np.testing.assert_allclose(largest.imag, 0, atol=1e-12)  # LAPACK's normalization


@pytest.mark.parametrize("complex_input", [False, True])
def test_gees_is_a_schur_decomposition(complex_input):
    pytest.importorskip("scipy")
    a = RNG.standard_normal((4, 4)) + (1j * RNG.standard_normal((4, 4)) if complex_input else 0)
    results = _call(f"lapack_{'z' if complex_input else 'd'}gees_ffi", (a,), [], mode="V")
    t, z = results[:2]
    np.testing.assert_allclose(z @ t @ z.conj().T, a, atol=1e-12)
    np.testing.assert_allclose(z.conj().T @ z, np.eye(4), atol=1e-12)
    assert not np.tril(t, -1 if complex_input else -2).any()  # (quasi-)triangular
    values = results[2] if complex_input else results[2] + 1j * results[3]
    np.testing.assert_allclose(np.sort_complex(values), np.sort_complex(np.linalg.eigvals(a)))


def _q_of_reflectors(m, tau, lower=True):
    """Q = H(0) H(1) ... (lower) or H(n-2) ... H(0) (upper) of sytrd's/gehrd's reflectors."""
    n = len(m)
    q = np.eye(n, dtype=m.dtype)
    for i in range(len(tau)):
        v = np.zeros(n, m.dtype)
        if lower:
            v[i + 1], v[i + 2 :] = 1, m[i + 2 :, i]
        else:
            v[i], v[:i] = 1, m[:i, i + 1]
        reflector = np.eye(n) - tau[i] * np.outer(v, v.conj())
        q = q @ reflector if lower else reflector @ q
    return q


@pytest.mark.parametrize("complex_input", [False, True])
def test_gehrd_gives_a_hessenberg_form_and_its_reflectors(complex_input):
    a = RNG.standard_normal((5, 5)) + (1j * RNG.standard_normal((5, 5)) if complex_input else 0)
    h, tau, info = _call(f"lapack_{'z' if complex_input else 'd'}gehrd_ffi", (a,), [])
    assert info == 0 and tau.shape == (4,)
    q = _q_of_reflectors(h, tau)
    np.testing.assert_allclose(q @ np.triu(h, -1) @ q.conj().T, a, atol=1e-12)


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("complex_input", [False, True])
def test_sytrd_gives_a_tridiagonal_form_and_its_reflectors(uplo, complex_input):
    m = RNG.standard_normal((5, 5)) + (1j * RNG.standard_normal((5, 5)) if complex_input else 0)
    a = m + m.conj().T
    outs = [((5, 5), a.dtype), ((5,), F64), ((4,), F64), ((4,), a.dtype), ((), I32)]
    routine = "zhetrd" if complex_input else "dsytrd"
    packed, d, e, tau, info = _call(f"lapack_{routine}_ffi", (a,), outs, uplo=uplo)
    tridiagonal = np.diag(d) + np.diag(e, -1) + np.diag(e, 1)
    q = _q_of_reflectors(packed, tau, lower=uplo == "L")
    np.testing.assert_allclose(q @ tridiagonal @ q.conj().T, a, atol=1e-12)


def test_gtsv_geqp3_gesvd_and_ormqr():
    d, dl, du = RNG.uniform(3, 4, 5), RNG.standard_normal(5), RNG.standard_normal(5)
    dl[0] = du[-1] = 0  # JAX passes all three diagonals at full length
    b = RNG.standard_normal((5, 2))
    *_, x, info = _call("lapack_dgtsv_ffi", (dl, d, du, b), [])
    matrix = np.diag(d) + np.diag(dl[1:], -1) + np.diag(du[:-1], 1)
    np.testing.assert_allclose(matrix @ x, b, atol=1e-12)

    a = RNG.standard_normal((5, 4))
    factors, permutation, tau = _call("lapack_dgeqp3_ffi", (a, np.zeros(4, np.int32)), [])
    q = _call("lapack_dorgqr_ffi", (factors, tau), [])
    r = np.triu(factors[:4])
    np.testing.assert_allclose(q @ r, a[:, permutation - 1], atol=1e-12)
    assert (np.diff(np.abs(np.diag(r))) <= 1e-12).all()  # pivoting orders |R_ii| downwards

    outs = [((5, 4), F64), ((4,), F64), ((5, 5), F64), ((4, 4), F64), ((), I32)]
    _, s, u, vt, _ = _call("lapack_dgesvd_ffi", (a,), outs, mode="A")
    np.testing.assert_allclose(u[:, :4] * s @ vt, a, atol=1e-12)

    h, tau = _call("lapack_dgeqrf_ffi", (a,), [])
    c = RNG.standard_normal((5, 3))
    q_full = _call("lapack_dorgqr_ffi", (np.pad(h, ((0, 0), (0, 1))), tau), [])
    np.testing.assert_allclose(
        _call("lapack_dormqr_ffi", (h, tau, c), [], side="L", trans="T"), q_full.T @ c, atol=1e-12
    )


# ---- the cpu backend calls LAPACK itself for getrf, trsm, potrf and orgqr ---------------------

_FFI_MODULE = """HloModule m
ENTRY e {{
  {params}
  ROOT r = {result} custom-call({args}), custom_call_target="{target}", api_version=API_VERSION_TYPED_FFI, backend_config={{{config}}}
}}"""


def _ffi_module(target, operands, result, layout="", **attrs):
    params = "\n  ".join(f"p{i} = {s}{layout} parameter({i})" for i, s in enumerate(operands))
    config = ", ".join(f"{k} = {ord(v)} : ui8" for k, v in attrs.items())
    args = ", ".join(f"p{i}" for i in range(len(operands)))
    return _FFI_MODULE.format(params=params, result=result, args=args, target=target, config=config)


def _cpu_without_reference_lapack(monkeypatch, text):
    """Compiles `text` for cpu with the reference's getrf/trsm/potrf/orgqr made to fail, and
    the per-matrix loop over SciPy's routines for the real types lapack.py compiles."""
    from minixla.backends.cpu import gemm, libcalls
    from minixla.reference import xla_custom_calls

    def refuse(*_):
        raise AssertionError("the cpu backend ran the reference's LAPACK code")

    for name in list(xla_custom_calls.TARGETS):
        if any(r in name for r in ("getrf", "trsm", "potrf", "orgqr", "ungqr")):
            monkeypatch.setitem(xla_custom_calls.TARGETS, name, refuse)

    def complex_only(build):
        def checked(letter, attrs):
            assert letter in "cz", "the cpu backend looped over SciPy's LAPACK for a real type"
            return build(letter, attrs)

        return checked

    for routine in gemm.LAPACK_ROUTINES:
        build = libcalls._FFI_ROUTINES[routine]
        monkeypatch.setitem(libcalls._FFI_ROUTINES, routine, complex_only(build))
    return minixla.compile(text, backend="cpu", cache=False)


def _leaves(value):
    return list(value) if isinstance(value, tuple) else [value]


@pytest.mark.parametrize(
    "letter, dims, layout",
    [("s", (3, 5, 5), "{1,2,0}"), ("d", (2, 4, 6), ""), ("s", (6, 3), ""), ("c", (2, 4, 4), "")],
)
def test_cpu_getrf_calls_lapack_and_agrees_with_the_interpreter(monkeypatch, letter, dims, layout):
    dtype = {"s": "f32", "d": "f64", "c": "c64"}[letter]
    k = min(dims[-2:])
    batch = dims[:-2]
    text = _ffi_module(
        f"lapack_{letter}getrf_ffi",
        [f"{dtype}{list(dims)}".replace(" ", "")],
        f"({dtype}{list(dims)}, s32{list(batch + (k,))}, s32{list(batch)})".replace(" ", ""),
        layout,
    )
    a = RNG.standard_normal(dims) + (1j * RNG.standard_normal(dims) if letter == "c" else 0)
    a = a.astype(minixla.parse_hlo_module(text).entry.root.operand(0).shape.numpy_dtype)
    a[(...,) + (1, 0) if len(dims) == 2 else (..., 1, 0)] = 0  # a zero where pivoting happens
    want = minixla.compile(text, backend="interpreter")(a)
    got = _cpu_without_reference_lapack(monkeypatch, text)(a)
    np.testing.assert_array_equal(got[1], want[1])  # the same pivots
    np.testing.assert_array_equal(got[2], want[2])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)


def test_cpu_getrf_reports_a_singular_matrix_as_lapack_does(monkeypatch):
    text = _ffi_module("lapack_dgetrf_ffi", ["f64[3,3]"], "(f64[3,3], s32[3], s32[])")
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    want = minixla.compile(text, backend="interpreter")(a)
    got = _cpu_without_reference_lapack(monkeypatch, text)(a)
    assert int(got[2]) == int(want[2]) > 0
    np.testing.assert_allclose(got[0], want[0], atol=1e-12)


@pytest.mark.parametrize(
    "side, uplo, trans, diag, letter",
    [
        ("L", "L", "N", "N", "s"),
        ("L", "U", "T", "N", "s"),
        ("R", "L", "N", "U", "s"),
        ("R", "U", "T", "N", "s"),
        ("L", "L", "C", "U", "d"),
        ("R", "L", "T", "N", "d"),
    ],
)
def test_cpu_trsm_calls_blas_and_agrees_with_the_interpreter(
    monkeypatch, side, uplo, trans, diag, letter
):
    b_dims = "[2,4,3]" if side == "L" else "[2,3,4]"
    dtype = {"s": "f32", "d": "f64"}[letter]
    text = _ffi_module(
        f"lapack_{letter}trsm_ffi",
        [f"{dtype}[2,4,4]", f"{dtype}{b_dims}"],
        f"{dtype}{b_dims}",
        "{1,2,0}",
        side=side,
        uplo=uplo,
        trans_x=trans,
        diag=diag,
    )
    module = minixla.parse_hlo_module(text)
    a = (RNG.standard_normal((2, 4, 4)) + 4 * np.eye(4)).astype(module.entry.root.shape.numpy_dtype)
    b = RNG.standard_normal(module.entry.root.operand(1).shape.dims).astype(a.dtype)
    want = minixla.compile(text, backend="interpreter")(a, b)
    got = _cpu_without_reference_lapack(monkeypatch, text)(a, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "target, n, want", [("strsm", 32, 1), ("sgetrf", 32, 1), ("dgetrf", 640, 2)]
)
def test_lapack_calls_set_blas_threads_by_their_size(monkeypatch, target, n, want):
    # a small call on the threads the last large GEMM left (32x32 trsm: 27-77 us on two,
    # 7 on one); a large one gets them back
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "cores", lambda: 2)
    dtype = "f64" if target[0] == "d" else "f32"
    if target == "strsm":
        text = _ffi_module(f"lapack_{target}_ffi", [f"{dtype}[{n},{n}]"] * 2, f"{dtype}[{n},{n}]")
    else:
        text = _ffi_module(
            f"lapack_{target}_ffi", [f"{dtype}[{n},{n}]"], f"({dtype}[{n},{n}], s32[{n}], s32[])"
        )
    exe = minixla.compile(text, backend="cpu")
    operands = minixla.parse_hlo_module(text).entry.root.operands
    args = [RNG.standard_normal(o.shape.dims) + n * np.eye(n) for o in operands]
    args = [a.astype(o.shape.numpy_dtype) for a, o in zip(args, operands)]
    seen = []
    monkeypatch.setattr(blas_threads, "use_threads", seen.append)
    from minixla.backends.cpu import libcalls

    monkeypatch.setattr(libcalls, "use_threads", seen.append)
    exe(*args)
    assert seen == [want]


# ---- lapack.py: the real types' routines as one compiled loop over the batch ---------------


def _batch_case(routine, letter, batch, rows, columns):
    """(module text, arguments) of `routine` on `batch` matrices of rows x columns."""
    dtype = {"s": "f32", "d": "f64"}[letter]
    k = min(rows, columns)
    b = list(batch)
    shape = f"{dtype}{b + [rows, columns]}".replace(" ", "")
    a = RNG.standard_normal(tuple(batch) + (rows, columns))
    if routine == "getrf":
        result = f"({shape}, s32{b + [k]}, s32{b})".replace(" ", "")
        return _ffi_module(f"lapack_{letter}getrf_ffi", [shape], result), [a]
    if routine == "potrf":
        spd = a @ np.swapaxes(a, -1, -2) + rows * np.eye(rows)
        result = f"({shape}, s32{b})".replace(" ", "")
        return _ffi_module(f"lapack_{letter}potrf_ffi", [shape], result, uplo="U"), [spd]
    if routine == "geqrf":
        result = f"({shape}, {dtype}{b + [k]})".replace(" ", "")
        return _ffi_module(f"lapack_{letter}geqrf_ffi", [shape], result), [a]
    if routine == "orgqr":
        outs = [(a.shape, a.dtype), (a.shape[:-2] + (k,), a.dtype)]
        h, tau = TARGETS[f"lapack_{letter}geqrf_ffi"]((a,), outs, {})
        tau_shape = f"{dtype}{b + [k]}".replace(" ", "")
        return _ffi_module(f"lapack_{letter}orgqr_ffi", [shape, tau_shape], shape), [h, tau]
    triangular = np.tril(RNG.standard_normal(tuple(batch) + (rows, rows))) + 4 * np.eye(rows)
    rhs_shape = f"{dtype}{b + [rows, columns]}".replace(" ", "")
    text = _ffi_module(
        f"lapack_{letter}trsm_ffi",
        [f"{dtype}{b + [rows, rows]}".replace(" ", ""), rhs_shape],
        rhs_shape,
        side="L",
        uplo="L",
        trans_x="T",
        diag="N",
    )
    return text, [triangular, a]


@pytest.mark.parametrize("routine", ["getrf", "potrf", "geqrf", "orgqr", "trsm"])
@pytest.mark.parametrize("letter, batch, rows, columns", [("s", (5, 3), 7, 4), ("d", (9,), 5, 5)])
def test_compiled_lapack_batches_agree_with_the_interpreter(
    monkeypatch, routine, letter, batch, rows, columns
):
    # every matrix of a batch of 15 or 9 lands where the interpreter puts it
    if routine == "potrf":
        columns = rows
    text, args = _batch_case(routine, letter, batch, rows, columns)
    module = minixla.parse_hlo_module(text)
    args = [
        np.asarray(x).astype(o.shape.numpy_dtype) for x, o in zip(args, module.entry.root.operands)
    ]
    want = _leaves(minixla.compile(text, backend="interpreter")(*args))
    exe = _cpu_without_reference_lapack(monkeypatch, text)
    assert "LAPACK" in "".join(spec.source for spec in exe.program.kernels.values())
    got = _leaves(exe(*args))
    tolerance = 1e-4 if letter == "s" else 1e-10
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        if g.dtype.kind == "i":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dims", [(0, 3, 3), (2, 0, 0)])
def test_compiled_lapack_batches_without_elements(monkeypatch, dims):
    text = _ffi_module(
        "lapack_sgetrf_ffi",
        [f"f32{list(dims)}".replace(" ", "")],
        f"(f32{list(dims)}, s32{list(dims[:2])}, s32[{dims[0]}])".replace(" ", ""),
    )
    got = _cpu_without_reference_lapack(monkeypatch, text)(np.zeros(dims, np.float32))
    assert got[0].shape == dims and got[1].shape == dims[:2] and got[2].tolist() == [0] * dims[0]


@pytest.mark.parametrize("routine", ["getrf", "potrf", "geqrf", "orgqr", "trsm"])
@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_batch_of_no_matrices_gives_empty_results(routine, backend):
    # the interpreter raised a bare ValueError here
    text, args = _batch_case(routine, "s", (0,), 4, 4)
    module = minixla.parse_hlo_module(text)
    args = [np.asarray(x, o.shape.numpy_dtype) for x, o in zip(args, module.entry.root.operands)]
    got = _leaves(minixla.compile(text, backend=backend)(*args))
    shapes = module.entry.root.shape
    leaves = shapes.tuple_shapes if shapes.is_tuple else (shapes,)
    assert [g.shape for g in got] == [tuple(leaf.dims) for leaf in leaves]


def test_compiled_gesdd_of_empty_matrices(monkeypatch):
    text = _ffi_module(
        "lapack_sgesdd_ffi",
        ["f32[2,3,0]"],
        "(f32[2,3,0], f32[2,0], f32[2,3,3], f32[2,0,0], s32[2])",
        mode="A",
    )
    got = _cpu_without_reference_lapack(monkeypatch, text)(np.zeros((2, 3, 0), np.float32))
    assert [g.shape for g in got] == [(2, 3, 0), (2, 0), (2, 3, 3), (2, 0, 0), (2,)]
    assert not got[2].any() and got[4].tolist() == [0, 0]


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_cpu_potrf_reads_one_triangle_and_reports_failure(monkeypatch, uplo):
    text = _ffi_module("lapack_dpotrf_ffi", ["f64[3,4,4]"], "(f64[3,4,4], s32[3])", uplo=uplo)
    m = RNG.standard_normal((3, 4, 4))
    spd = m @ m.transpose(0, 2, 1) + 4 * np.eye(4)
    spd[1] = -spd[1]  # not positive definite: info 1 and the input left as it was
    # the triangle potrf does not read holds garbage: only `uplo`'s triangle is the matrix
    other = np.triu_indices(4, 1) if uplo == "L" else np.tril_indices(4, -1)
    spd[:, other[0], other[1]] = 1e3
    want = minixla.compile(text, backend="interpreter")(spd)
    got = _cpu_without_reference_lapack(monkeypatch, text)(spd)
    assert got[1].tolist() == want[1].tolist() == [0, 1, 0]
    np.testing.assert_allclose(got[0], want[0], atol=1e-12)
    np.testing.assert_array_equal(got[0][1], spd[1])
    factor = np.tril(got[0][0]) if uplo == "L" else np.triu(got[0][0]).T
    lower = np.tril(spd[0]) if uplo == "L" else np.triu(spd[0]).T
    np.testing.assert_allclose(factor @ factor.T, lower + np.tril(lower, -1).T, atol=1e-10)


@pytest.mark.parametrize("letter, dims", [("s", (2, 6, 4)), ("z", (5, 5))])
def test_cpu_orgqr_calls_lapack_and_agrees_with_the_interpreter(monkeypatch, letter, dims):
    dtype = {"s": "f32", "z": "c128"}[letter]
    shape = f"{dtype}{list(dims)}".replace(" ", "")
    tau = f"{dtype}{list(dims[:-2] + (dims[-1],))}".replace(" ", "")
    routine = "ungqr" if letter == "z" else "orgqr"
    text = _ffi_module(f"lapack_{letter}{routine}_ffi", [shape, tau], shape)
    module = minixla.parse_hlo_module(text)
    a = RNG.standard_normal(dims) + (1j * RNG.standard_normal(dims) if letter == "z" else 0)
    a = a.astype(module.entry.root.shape.numpy_dtype)
    factor = TARGETS[f"lapack_{letter}geqrf_ffi"]
    h, tau_values = factor((a,), [], {})
    want = minixla.compile(text, backend="interpreter")(h, tau_values)
    got = _cpu_without_reference_lapack(monkeypatch, text)(h, tau_values)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("letter, uplo", [("s", "L"), ("d", "U"), ("c", "L")])
def test_cpu_syevd_calls_lapack_and_agrees_with_the_interpreter(monkeypatch, letter, uplo):
    from minixla.reference import xla_custom_calls

    dtype, real = {"s": ("f32", "f32"), "d": ("f64", "f64"), "c": ("c64", "f32")}[letter]
    routine = "heevd" if letter == "c" else "syevd"
    text = _ffi_module(
        f"lapack_{letter}{routine}_ffi",
        [f"{dtype}[3,6,6]"],
        f"({dtype}[3,6,6], {real}[3,6], s32[3])",
        uplo=uplo,
    )
    module = minixla.parse_hlo_module(text)
    m = RNG.standard_normal((3, 6, 6)) + (
        1j * RNG.standard_normal((3, 6, 6)) if letter == "c" else 0
    )
    a = (m + m.conj().transpose(0, 2, 1)).astype(module.entry.root.operand(0).shape.numpy_dtype)
    want = minixla.compile(text, backend="interpreter")(a)
    monkeypatch.setitem(xla_custom_calls.TARGETS, f"lapack_{letter}{routine}_ffi", _refuse)
    got = _cpu_without_reference_lapack(monkeypatch, text)(a)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-4)  # eigenvalues
    assert got[2].tolist() == want[2].tolist() == [0, 0, 0]
    # eigenvectors up to a phase: |v^H w| = 1 column by column
    overlap = np.abs(np.einsum("bij,bij->bj", got[0].conj(), want[0]))
    np.testing.assert_allclose(overlap, 1, atol=1e-4)


def _refuse(*_):
    raise AssertionError("the cpu backend ran the reference's LAPACK code")


def test_gesdd_without_vectors_computes_the_singular_values_only(monkeypatch):
    # jnp.linalg.svd(compute_uv=False) asks for mode 'N': u and vt are left unset
    a = RNG.standard_normal((2, 5, 3))
    calls = []
    real_svd = np.linalg.svd

    def svd(m, *args, **kwargs):
        calls.append(kwargs.get("compute_uv", True))
        return real_svd(m, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", svd)
    outs = [
        ((2, 5, 3), np.float64),
        ((2, 3), np.float64),
        ((2, 5, 5), np.float64),
        ((2, 3, 3), np.float64),
        ((2,), np.int32),
    ]
    _, s, u, vt, info = _call("lapack_dgesdd_ffi", (a,), outs, mode="N")
    assert calls == [False, False]
    np.testing.assert_allclose(s, real_svd(a, compute_uv=False), rtol=1e-12)
    assert not u.any() and not vt.any() and info.tolist() == [0, 0]


@pytest.mark.parametrize("mode, dims", [("N", (3, 7, 4)), ("A", (2, 4, 6)), ("S", (2, 6, 4))])
def test_cpu_gesdd_calls_lapack_and_agrees_with_the_interpreter(monkeypatch, mode, dims):
    rows, cols = dims[-2:]
    short = min(rows, cols)
    batch = list(dims[:-2])
    u, vt = ((rows, rows), (cols, cols)) if mode in "AN" else ((rows, short), (short, cols))
    spell = lambda d: str(list(d)).replace(" ", "")  # noqa: E731
    result = (
        f"(f32{spell(dims)}, f32{spell(batch + [short])}, f32{spell(batch + list(u))}, "
        f"f32{spell(batch + list(vt))}, s32{spell(batch)})"
    )
    text = _ffi_module("lapack_sgesdd_ffi", [f"f32{spell(dims)}"], result, mode=mode)
    a = RNG.standard_normal(dims).astype(np.float32)
    want = minixla.compile(text, backend="interpreter")(a)
    monkeypatch.setitem(TARGETS, "lapack_sgesdd_ffi", _refuse)
    got = _cpu_without_reference_lapack(monkeypatch, text)(a)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[0], a)
    assert got[4].tolist() == want[4].tolist()
    if mode == "N":
        assert not got[2].any() and not got[3].any()
        return
    # the vectors up to their signs: u s vt rebuilds the matrix
    k = short
    rebuilt = np.einsum("...ik,...k,...kj->...ij", got[2][..., :k], got[1], got[3][..., :k, :])
    np.testing.assert_allclose(rebuilt, a, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("letter", ["d", "z"])
def test_without_scipy_the_cpu_still_runs_getrf(monkeypatch, letter):
    # real types call NumPy's own LAPACK from a compiled kernel (lapack.py); complex ones,
    # which go through SciPy, run the reference's code
    import builtins
    import warnings

    real_import = builtins.__import__

    def no_scipy(name, *args, **kwargs):
        if name.startswith("scipy"):
            raise ImportError(f"no module named {name!r}")
        return real_import(name, *args, **kwargs)

    dtype = {"d": "f64", "z": "c128"}[letter]
    text = _ffi_module(
        f"lapack_{letter}getrf_ffi", [f"{dtype}[2,4,4]"], f"({dtype}[2,4,4], s32[2,4], s32[2])"
    )
    a = RNG.standard_normal((2, 4, 4)) + (
        1j * RNG.standard_normal((2, 4, 4)) if letter == "z" else 0
    )
    want = minixla.compile(text, backend="interpreter")(a)
    monkeypatch.setattr(builtins, "__import__", no_scipy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning either
        got = minixla.compile(text, backend="cpu", cache=False)(a)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("letter, dims", [("s", (3, 7, 4)), ("d", (5, 3)), ("c", (2, 4, 4))])
def test_cpu_geqrf_calls_lapack_and_agrees_with_the_interpreter(monkeypatch, letter, dims):
    dtype = {"s": "f32", "d": "f64", "c": "c64"}[letter]
    spell = lambda d: str(list(d)).replace(" ", "")  # noqa: E731
    taus = list(dims[:-2]) + [min(dims[-2:])]
    text = _ffi_module(
        f"lapack_{letter}geqrf_ffi",
        [f"{dtype}{spell(dims)}"],
        f"({dtype}{spell(dims)}, {dtype}{spell(taus)})",
    )
    module = minixla.parse_hlo_module(text)
    a = RNG.standard_normal(dims) + (1j * RNG.standard_normal(dims) if letter == "c" else 0)
    a = a.astype(module.entry.root.operand(0).shape.numpy_dtype)
    want = minixla.compile(text, backend="interpreter")(a)
    monkeypatch.setitem(TARGETS, f"lapack_{letter}geqrf_ffi", _refuse)
    got = minixla.compile(text, backend="cpu")(a)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_memory_space_annotations_are_the_identity(backend):
    # host offloading (a remat policy's MoveToHost / MoveToDevice, device_put to a host memory
    # kind inside jit): one memory space, so the values pass through; cpu drops the calls
    text = """
HloModule offload
ENTRY main {
  x = f32[16,8] parameter(0)
  c = f32[16,8] cosine(x)
  h = f32[16,8] custom-call(c), custom_call_target="MoveToHost"
  d = f32[16,8] custom-call(h), custom_call_target="MoveToDevice"
  p = f32[16,8] custom-call(d), custom_call_target="annotate_device_placement",
      frontend_attributes={_xla_buffer_placement="pinned_host"}
  ROOT s = f32[16,8] add(p, x)
}"""
    x = np.linspace(-2, 2, 128, dtype=np.float32).reshape(16, 8)
    exe = minixla.compile(text, backend=backend)
    np.testing.assert_allclose(exe(x), np.cos(x) + x, rtol=1e-6)
    if backend == "cpu":
        assert "custom-call" not in exe.module.to_text()


BUILDER_MATH_CASES = {
    "Acos": np.arccos,
    "Acosh": np.arccosh,
    "Asin": np.arcsin,
    "Asinh": np.arcsinh,
    "Atan": np.arctan,
    "Cosh": np.cosh,
}


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
@pytest.mark.parametrize("name", sorted(BUILDER_MATH_CASES))
def test_xla_builder_math_calls_are_their_elementwise_ops(name, backend):
    # XlaBuilder's math library emits these for XLA to expand; cpu computes the op natively
    text = f"""
HloModule builder_math
ENTRY main {{
  x = f32[7] parameter(0)
  ROOT r = f32[7] custom-call(x), custom_call_target="xla_builder.math.{name}"
}}"""
    x = np.array([-0.9, -0.5, 0.0, 0.3, 0.99, 1.5, 3.0], np.float32)
    exe = minixla.compile(text, backend=backend)
    with np.errstate(invalid="ignore"):
        want = BUILDER_MATH_CASES[name](x.astype(np.float64))
    np.testing.assert_allclose(exe(x), want.astype(np.float32), rtol=3e-6, equal_nan=True)
    if backend == "cpu":
        assert "custom-call" not in exe.module.to_text()


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_xla_builder_math_next_after_steps_one_ulp(backend):
    text = """
HloModule next_after
ENTRY main {
  x = f32[5] parameter(0)
  y = f32[5] parameter(1)
  ROOT r = f32[5] custom-call(x, y), custom_call_target="xla_builder.math.NextAfter"
}"""
    x = np.array([1.0, 1.0, 0.0, -0.0, np.nan], np.float32)
    y = np.array([2.0, 0.0, 1.0, -1.0, 1.0], np.float32)
    got = minixla.compile(text, backend=backend)(x, y)
    np.testing.assert_array_equal(got[:2], [1 + 2**-23, 1 - 2**-24])
    assert got[2] == np.float32(2**-149) and got[3] == -np.float32(2**-149)
    assert np.isnan(got[4])


def test_a_user_registration_of_a_builder_math_target_wins():
    text = """
HloModule mine
ENTRY main {
  x = f32[3] parameter(0)
  ROOT r = f32[3] custom-call(x), custom_call_target="xla_builder.math.Cosh"
}"""
    for backend in ("interpreter", "cpu"):
        register_custom_call(
            "xla_builder.math.Cosh",
            backend,
            (lambda x, **_: x * 2)
            if backend == "interpreter"
            else (lambda out, x, **_: np.multiply(x, 2, out=out)),
        )
    try:
        x = np.array([1.0, 2.0, 3.0], np.float32)
        for backend in ("interpreter", "cpu"):
            np.testing.assert_array_equal(minixla.compile(text, backend=backend)(x), x * 2)
    finally:
        for backend in ("interpreter", "cpu"):
            unregister_custom_call("xla_builder.math.Cosh", backend)
