"""minixla.numpy.linalg, minixla.lax.linalg and minixla.numpy.fft against NumPy, inside jit on
the interpreter and cpu, and eagerly; float32 and float64 (x64), batched, complex."""

import contextlib

import numpy as np
import pytest

import minixla
import minixla.backends
import minixla.numpy as mnp
from minixla import lax

BACKENDS = ["interpreter"] + (["cpu"] if minixla.backends.available().get("cpu") is True else [])
DTYPES = [np.float32, np.float64]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture(params=DTYPES, ids=["f32", "f64"])
def dtype(request):
    return request.param


def _mode(dtype):
    return (
        minixla.config.x64()
        if np.dtype(dtype).itemsize == 8 or np.dtype(dtype) == np.complex128
        else contextlib.nullcontext()
    )


def _tol(dtype):
    return 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10


rng = np.random.default_rng(0)


def _square(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _spd(shape, dtype):
    a = rng.standard_normal(shape)
    return (a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dtype)


def _run(fn, backend, dtype, *args):
    with _mode(dtype):
        return minixla.jit(fn, backend=backend)(*args)


# -- linalg: results NumPy defines uniquely ---------------------------------------------------
UNIQUE = [
    ("cholesky", lambda ns: ns.linalg.cholesky, lambda d: [_spd((2, 3, 4, 4), d)]),
    ("solve", lambda ns: ns.linalg.solve, lambda d: [_square((3, 4, 4), d), _square((3, 4, 2), d)]),
    ("solve_vector", lambda ns: ns.linalg.solve, lambda d: [_square((4, 4), d), _square((4,), d)]),
    (
        "solve_broadcast",
        lambda ns: ns.linalg.solve,
        lambda d: [_square((2, 1, 3, 3), d), _square((5, 3, 2), d)],
    ),
    ("inv", lambda ns: ns.linalg.inv, lambda d: [_square((2, 5, 5), d)]),
    ("det", lambda ns: ns.linalg.det, lambda d: [_square((3, 4, 4), d)]),
    (
        "slogdet",
        lambda ns: lambda a: tuple(ns.linalg.slogdet(a)),
        lambda d: [_square((3, 4, 4), d)],
    ),
    ("eigvalsh", lambda ns: ns.linalg.eigvalsh, lambda d: [_spd((2, 5, 5), d)]),
    (
        "svdvals",
        lambda ns: lambda a: ns.linalg.svd(a, compute_uv=False),
        lambda d: [_square((2, 5, 3), d)],
    ),
    (
        "norm_vector",
        lambda ns: lambda a: ns.linalg.norm(a, axis=-1),
        lambda d: [_square((3, 4), d)],
    ),
    ("norm_fro", lambda ns: ns.linalg.norm, lambda d: [_square((3, 4), d)]),
    (
        "norm_ord3_keepdims",
        lambda ns: lambda a: ns.linalg.norm(a, 3, axis=0, keepdims=True),
        lambda d: [_square((3, 4), d)],
    ),
    (
        "norm_inf",
        lambda ns: lambda a: ns.linalg.norm(a, np.inf, axis=1),
        lambda d: [_square((3, 4), d)],
    ),
    (
        "norm_matrix_1",
        lambda ns: lambda a: ns.linalg.norm(a, 1, axis=(1, 2)),
        lambda d: [_square((2, 3, 4), d)],
    ),
    (
        "norm_matrix_2",
        lambda ns: lambda a: ns.linalg.norm(a, 2, axis=(-2, -1)),
        lambda d: [_square((2, 3, 4), d)],
    ),
    ("norm_nuc", lambda ns: lambda a: ns.linalg.norm(a, "nuc"), lambda d: [_square((3, 4), d)]),
]


@pytest.mark.parametrize("name,make,inputs", UNIQUE, ids=[c[0] for c in UNIQUE])
def test_linalg_matches_numpy(name, make, inputs, backend, dtype):
    args = inputs(dtype)
    got = _run(make(mnp), backend, dtype, *args)
    want = make(np)(*args)
    for g, w in zip(
        got if isinstance(want, tuple) else [got], want if isinstance(want, tuple) else [want]
    ):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=_tol(dtype), atol=_tol(dtype))


# -- linalg: factorizations, checked by what defines them ----------------------------------
def test_qr_reconstructs_and_is_orthonormal(backend, dtype):
    a = _square((2, 5, 3), dtype)
    q, r = _run(lambda x: mnp.linalg.qr(x), backend, dtype, a)
    assert q.shape == (2, 5, 3) and r.shape == (2, 3, 3) and q.dtype == dtype
    np.testing.assert_allclose(q @ r, a, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(
        np.swapaxes(q, -1, -2) @ q, np.broadcast_to(np.eye(3), (2, 3, 3)), atol=_tol(dtype) * 10
    )
    assert np.allclose(np.tril(r, -1), 0)
    qc, rc = _run(lambda x: mnp.linalg.qr(x, mode="complete"), backend, dtype, a)
    assert qc.shape == (2, 5, 5) and rc.shape == (2, 5, 3)
    np.testing.assert_allclose(qc @ rc, a, atol=_tol(dtype) * 10)
    r_only = _run(lambda x: mnp.linalg.qr(x, mode="r"), backend, dtype, a)
    np.testing.assert_allclose(np.abs(r_only), np.abs(r), atol=_tol(dtype) * 10)


def test_eigh_diagonalizes(backend, dtype):
    a = _spd((3, 4, 4), dtype)
    w, v = _run(lambda x: mnp.linalg.eigh(x), backend, dtype, a)
    assert w.shape == (3, 4) and v.shape == (3, 4, 4) and w.dtype == dtype
    assert np.all(np.diff(w, axis=-1) >= 0)
    np.testing.assert_allclose(
        a @ v, v * w[..., None, :], rtol=_tol(dtype) * 10, atol=_tol(dtype) * 100
    )
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), rtol=_tol(dtype))


@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_reconstructs(backend, dtype, full_matrices):
    a = _square((2, 4, 6), dtype)
    u, s, vh = _run(lambda x: mnp.linalg.svd(x, full_matrices=full_matrices), backend, dtype, a)
    k = 4
    assert u.shape == (2, 4, 4) and s.shape == (2, k)
    assert vh.shape == ((2, 6, 6) if full_matrices else (2, 4, 6))
    np.testing.assert_allclose((u * s[..., None, :]) @ vh[..., :k, :], a, atol=_tol(dtype) * 10)
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False), rtol=_tol(dtype))


def test_complex_solve_and_eigh(backend):
    a = (rng.standard_normal((2, 3, 3)) + 1j * rng.standard_normal((2, 3, 3))).astype(np.complex64)
    b = (rng.standard_normal((2, 3, 1)) + 1j * rng.standard_normal((2, 3, 1))).astype(np.complex64)
    got = _run(mnp.linalg.solve, backend, np.complex64, a, b)
    np.testing.assert_allclose(got, np.linalg.solve(a, b), rtol=1e-4, atol=1e-4)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + 3 * np.eye(3)
    w = _run(mnp.linalg.eigvalsh, backend, np.complex64, h.astype(np.complex64))
    assert w.dtype == np.float32
    np.testing.assert_allclose(w, np.linalg.eigvalsh(h), rtol=1e-4)
    upper = _run(
        lambda x: mnp.linalg.cholesky(x, upper=True), backend, np.complex64, h.astype(np.complex64)
    )
    np.testing.assert_allclose(np.conj(np.swapaxes(upper, -1, -2)) @ upper, h, rtol=1e-4, atol=1e-4)


def test_eager_calls_return_numpy_results():
    a = _square((3, 3), np.float32)
    inv = mnp.linalg.inv(a)
    assert isinstance(inv, np.ndarray) and inv.dtype == np.float32
    np.testing.assert_allclose(inv @ a, np.eye(3), atol=1e-4)
    sign, logabsdet = mnp.linalg.slogdet(a)
    np.testing.assert_allclose(sign * np.exp(logabsdet), np.linalg.det(a), rtol=1e-4)
    ints = mnp.linalg.det(np.array([[2, 1], [1, 3]], np.int32))
    assert ints.dtype == np.float32 and np.isclose(ints, 5.0)


def test_singular_and_indefinite_inputs_give_nan(backend):
    singular = np.zeros((2, 2), np.float32)
    assert np.isnan(_run(mnp.linalg.inv, backend, np.float32, singular)).all()
    indefinite = np.array([[1, 2], [2, 1]], np.float32)
    assert np.isnan(_run(mnp.linalg.cholesky, backend, np.float32, indefinite)).any()


@pytest.mark.parametrize(
    "left_side,lower,transpose_a",
    [(True, True, False), (True, False, True), (False, True, False), (False, False, True)],
)
def test_lax_triangular_solve(backend, dtype, left_side, lower, transpose_a):
    a = _spd((2, 4, 4), dtype)
    b = _square((2, 4, 3) if left_side else (2, 3, 4), dtype)
    x = _run(
        lambda a, b: lax.linalg.triangular_solve(
            a, b, left_side=left_side, lower=lower, transpose_a=transpose_a
        ),
        backend,
        dtype,
        a,
        b,
    )
    tri = np.tril(a) if lower else np.triu(a)
    op = np.swapaxes(tri, -1, -2) if transpose_a else tri
    np.testing.assert_allclose(op @ x if left_side else x @ op, b, atol=_tol(dtype) * 10)


def test_lax_cholesky_symmetrizes(backend):
    a = _spd((4, 4), np.float32)
    skewed = a + np.triu(np.ones((4, 4), np.float32), 1)  # (x + x^T)/2 differs from tril read
    got = _run(lax.linalg.cholesky, backend, np.float32, skewed)
    sym = (skewed + skewed.T) / 2
    np.testing.assert_allclose(got, np.linalg.cholesky(sym), rtol=1e-4, atol=1e-5)


def test_linalg_bad_input_errors():
    with pytest.raises(minixla.MinixlaError, match="square"):
        mnp.linalg.inv(np.ones((2, 3), np.float32))
    with pytest.raises(minixla.MinixlaError, match="at least 2"):
        mnp.linalg.det(np.ones(3, np.float32))
    with pytest.raises(minixla.MinixlaError, match="mode"):
        mnp.linalg.qr(np.ones((2, 2), np.float32), mode="economic")
    with pytest.raises(minixla.MinixlaError, match="does not fit"):
        mnp.linalg.solve(np.ones((3, 3), np.float32), np.ones((2, 1), np.float32))


# -- fft --------------------------------------------------------------------------------------
def _signal(shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


def _csignal(shape, dtype):
    cdtype = np.complex64 if dtype == np.float32 else np.complex128
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(cdtype)


FFT = [
    ("fft", lambda ns: ns.fft.fft, _csignal, (3, 8)),
    ("fft_real_input", lambda ns: ns.fft.fft, _signal, (3, 8)),
    ("fft_n_pad_axis0", lambda ns: lambda x: ns.fft.fft(x, n=6, axis=0), _csignal, (4, 3)),
    ("fft_n_crop_ortho", lambda ns: lambda x: ns.fft.fft(x, n=5, norm="ortho"), _csignal, (2, 8)),
    ("ifft", lambda ns: ns.fft.ifft, _csignal, (2, 3, 8)),
    ("ifft_forward", lambda ns: lambda x: ns.fft.ifft(x, norm="forward"), _csignal, (4, 6)),
    ("rfft", lambda ns: ns.fft.rfft, _signal, (3, 10)),
    ("rfft_n_axis0", lambda ns: lambda x: ns.fft.rfft(x, n=7, axis=0), _signal, (5, 2)),
    ("irfft", lambda ns: ns.fft.irfft, _csignal, (3, 6)),
    ("irfft_n_odd", lambda ns: lambda x: ns.fft.irfft(x, n=9), _csignal, (2, 5)),
    ("fft2", lambda ns: ns.fft.fft2, _csignal, (2, 4, 6)),
    ("ifft2_axes", lambda ns: lambda x: ns.fft.ifft2(x, axes=(0, 2)), _csignal, (4, 3, 6)),
    ("rfft2", lambda ns: ns.fft.rfft2, _signal, (2, 4, 6)),
    ("irfft2", lambda ns: ns.fft.irfft2, _csignal, (2, 4, 4)),
    ("fftn_4d", lambda ns: ns.fft.fftn, _csignal, (2, 3, 2, 4)),
    ("rfftn_4d", lambda ns: ns.fft.rfftn, _signal, (2, 3, 2, 4)),
    (
        "irfftn_4d_s",
        lambda ns: lambda x: ns.fft.irfftn(x, s=(2, 3, 2, 6), axes=(0, 1, 2, 3)),
        _csignal,
        (2, 3, 2, 4),
    ),
    ("fftshift", lambda ns: ns.fft.fftshift, _signal, (3, 5)),
    ("ifftshift", lambda ns: lambda x: ns.fft.ifftshift(x, axes=1), _signal, (3, 4)),
]


@pytest.mark.parametrize("name,make,signal,shape", FFT, ids=[c[0] for c in FFT])
def test_fft_matches_numpy(name, make, signal, shape, backend, dtype):
    x = signal(shape, dtype)
    got = _run(make(mnp), backend, dtype, x)
    want = make(np)(x)
    assert got.shape == want.shape, (got.shape, want.shape)
    narrow = {np.dtype(np.complex128): np.complex64, np.dtype(np.float64): np.float32}
    expected = want.dtype if dtype == np.float64 else narrow.get(want.dtype, want.dtype)
    assert got.dtype == expected, (got.dtype, expected)
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=_tol(dtype), atol=_tol(dtype) * scale)


def test_fftfreq_matches_numpy():
    for n in (1, 4, 7):
        np.testing.assert_allclose(mnp.fft.fftfreq(n, 0.5), np.fft.fftfreq(n, 0.5), rtol=1e-6)
        np.testing.assert_allclose(mnp.fft.rfftfreq(n, 0.5), np.fft.rfftfreq(n, 0.5), rtol=1e-6)


def test_fft_eager_keeps_single_precision():
    x = _signal((8,), np.float32)
    out = mnp.fft.rfft(x)
    assert isinstance(out, np.ndarray) and out.dtype == np.complex64
    np.testing.assert_allclose(out, np.fft.rfft(x), rtol=1e-4, atol=1e-4)


def test_fft_bad_input_errors():
    with pytest.raises(minixla.MinixlaError, match="real input"):
        mnp.fft.rfft(np.ones(4, np.complex64))
    with pytest.raises(minixla.MinixlaError, match="norm"):
        mnp.fft.fft(np.ones(4, np.float32), norm="sideways")
    with pytest.raises(minixla.MinixlaError, match="out of bounds"):
        mnp.fft.fft(np.ones(4, np.float32), axis=3)


# -- transformations ----------------------------------------------------------------------------
def test_vmap_batches_linalg_custom_calls_and_fft(backend):
    a = _square((5, 3, 3), np.float32)
    b = _square((3,), np.float32)
    solved = minixla.jit(minixla.vmap(lambda m: mnp.linalg.solve(m, b)), backend=backend)(a)
    np.testing.assert_allclose(
        solved, np.stack([np.linalg.solve(m, b) for m in a]), rtol=1e-4, atol=1e-4
    )
    u, s, vh = minixla.jit(minixla.vmap(mnp.linalg.svd), backend=backend)(a)
    np.testing.assert_allclose(
        s, np.stack([np.linalg.svd(m, compute_uv=False) for m in a]), rtol=1e-4
    )
    spectra = minixla.jit(minixla.vmap(mnp.fft.rfft, in_axes=1), backend=backend)(a)
    np.testing.assert_allclose(
        spectra, np.stack([np.fft.rfft(a[:, i]) for i in range(3)]), rtol=1e-4, atol=1e-4
    )


def test_grad_of_linalg_custom_call_names_the_target():
    with pytest.raises(minixla.MinixlaError, match="minixla_linalg_det"):
        minixla.grad(mnp.linalg.det)(_square((3, 3), np.float32))


def test_vmap_refuses_an_unknown_custom_call():
    from minixla.frontend.linalg_api import _call

    with pytest.raises(minixla.MinixlaError, match="batching behaviour is unknown"):
        minixla.jit(
            minixla.vmap(
                lambda x: _call("not_a_routine", [mnp.asarray(x)], [(np.float32, (3,))])[0]
            )
        )(np.ones((2, 3), np.float32))


# -- differentiation: cholesky and triangular-solve -------------------------------------------
def _spd64(shape):
    a = rng.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize(
    "left_side,lower,transpose_a,unit_diagonal",
    [
        (True, True, False, False),
        (True, False, True, False),
        (False, True, True, False),
        (False, False, False, True),
    ],
)
def test_triangular_solve_gradients(left_side, lower, transpose_a, unit_diagonal):
    from ad_check import check_grads

    a = _spd64((2, 3, 3))
    b = rng.standard_normal((2, 3, 2) if left_side else (2, 2, 3))
    with minixla.config.x64():
        check_grads(
            lambda a, b: lax.linalg.triangular_solve(
                a,
                b,
                left_side=left_side,
                lower=lower,
                transpose_a=transpose_a,
                unit_diagonal=unit_diagonal,
            ),
            [a, b],
            rtol=1e-5,
            atol=1e-6,
        )


def test_cholesky_gradients():
    from ad_check import check_grads

    with minixla.config.x64():
        check_grads(lambda a: lax.linalg.cholesky(a), [_spd64((2, 3, 3))], rtol=1e-5, atol=1e-6)
        # logdet through the factor: d/dA = inv(A) for a symmetric A
        a = _spd64((3, 3))

        def logdet(a):
            diagonal = mnp.sum(lax.linalg.cholesky(a) * mnp.eye(3), axis=-1)
            return 2 * mnp.sum(mnp.log(diagonal))

        grad = minixla.grad(logdet)(a)
        np.testing.assert_allclose(grad, np.linalg.inv(a), rtol=1e-6, atol=1e-8)
