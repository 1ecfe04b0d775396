"""Interpreter dot, convolution, fft, triangular-solve, cholesky and batch norm against NumPy
formulas and a naive convolution loop that follows XLA's definition term by term."""

import itertools

import ml_dtypes
import numpy as np
import pytest

import minixla
from minixla.reference.evaluator import Evaluator

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(text, *args):
    module = minixla.parse_hlo_module(text, verify=False)
    return Evaluator(module).evaluate(module.entry, list(args))


def module(params, root):
    lines = [f"  p{k} = {shape} parameter({k})" for k, shape in enumerate(params)]
    return "HloModule m\nENTRY e {\n" + "\n".join(lines) + f"\n  ROOT r = {root}\n}}"


# ---- dot --------------------------------------------------------------------------------------


def test_dot_batched():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 4, 5)).astype(np.float32)
    hlo = module(
        ["f32[2,3,4]", "f32[2,4,5]"],
        "f32[2,3,5] dot(p0, p1), lhs_batch_dims={0}, "
        "lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    )
    out = run(hlo, a, b)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.einsum("bik,bkj->bij", a, b), rtol=1e-5)


def test_dot_batch_dims_not_leading_and_transposed_contraction():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 3, 2)).astype(np.float32)  # [k, i, b]
    b = rng.standard_normal((5, 2, 4)).astype(np.float32)  # [j, b, k]
    hlo = module(
        ["f32[4,3,2]", "f32[5,2,4]"],
        "f32[2,3,5] dot(p0, p1), lhs_batch_dims={2}, "
        "lhs_contracting_dims={0}, rhs_batch_dims={1}, rhs_contracting_dims={2}",
    )
    np.testing.assert_allclose(run(hlo, a, b), np.einsum("kib,jbk->bij", a, b), rtol=1e-5)


def test_dot_matvec_and_outer():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.array([1, -1, 2], np.float32)
    matvec = module(
        ["f32[2,3]", "f32[3]"],
        "f32[2] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    )
    np.testing.assert_array_equal(run(matvec, a, v), [3, 9])
    outer = module(
        ["f32[3]", "f32[2]"],
        "f32[3,2] dot(p0, p1), lhs_contracting_dims={}, rhs_contracting_dims={}",
    )
    np.testing.assert_array_equal(
        run(outer, v, np.array([2, 3], np.float32)), [[2, 3], [-2, -3], [4, 6]]
    )


def test_dot_s8_to_s32_is_exact():
    a = np.full((2, 40), -128, np.int8)
    b = np.full((40, 3), -128, np.int8)
    b[:, 1] = 127
    hlo = module(
        ["s8[2,40]", "s8[40,3]"],
        "s32[2,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    )
    out = run(hlo, a, b)
    assert out.dtype == np.int32
    np.testing.assert_array_equal(out, [[655360, -650240, 655360]] * 2)


def test_dot_s32_wraps():
    a = np.array([[65537, 1]], np.int32)
    b = np.array([[65537], [2147483647]], np.int32)
    hlo = module(
        ["s32[1,2]", "s32[2,1]"],
        "s32[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    )
    want = (65537 * 65537 + 2147483647) % 2**32
    want = want - 2**32 if want >= 2**31 else want
    np.testing.assert_array_equal(run(hlo, a, b), [[want]])


def test_dot_bf16_rounds_once_at_the_end():
    # exact sum 1 + 2^-8 * 2 = 1.0078125 is representable in f32 and rounds to 1.0078125 in bf16;
    # rounding after every addition would lose both small terms
    a = np.array([[1, 2**-8, 2**-8]], BF16)
    b = np.ones((3, 1), BF16)
    hlo = module(
        ["bf16[1,3]", "bf16[3,1]"],
        "bf16[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    )
    out = run(hlo, a, b)
    assert out.dtype == BF16
    assert float(out[0, 0]) == 1.0078125


def test_dot_mixed_inputs_f32_result():
    a = np.array([[1.5, 2]], BF16)
    b = np.array([[2], [0.25]], np.float32)
    hlo = module(
        ["bf16[1,2]", "f32[2,1]"],
        "f32[1,1] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    )
    np.testing.assert_array_equal(run(hlo, a, b), np.array([[3.5]], np.float32))


# ---- convolution ------------------------------------------------------------------------------


def ref_conv(x, w, strides, pads, lhs_dil, rhs_dil, groups=1, batch_groups=1, reversal=None):
    """x [N, C, spatial...], w [O, I, spatial...] -> [N', O, spatial...], one term at a time."""
    nsp = x.ndim - 2
    reversal = reversal or [False] * nsp
    n, o, i = x.shape[0], w.shape[0], w.shape[1]
    ksz = w.shape[2:]
    dilated = [(s - 1) * d + 1 for s, d in zip(x.shape[2:], lhs_dil)]
    span = [(k - 1) * d + 1 for k, d in zip(ksz, rhs_dil)]
    outs = [
        max((dl + lo + hi - sp) // st + 1, 0)
        for dl, (lo, hi), sp, st in zip(dilated, pads, span, strides)
    ]
    out = np.zeros([n // batch_groups, o] + outs)
    for b, f, *pos in itertools.product(range(n // batch_groups), range(o), *map(range, outs)):
        fg = f // (o // groups)
        bg = f // (o // batch_groups)
        total = 0.0
        for ci, *kpos in itertools.product(range(i), *map(range, ksz)):
            src = []
            for d in range(nsp):
                p = pos[d] * strides[d] + kpos[d] * rhs_dil[d] - pads[d][0]
                if p % lhs_dil[d] or not 0 <= p // lhs_dil[d] < x.shape[2 + d]:
                    break
                src.append(p // lhs_dil[d])
            else:
                kidx = [ksz[d] - 1 - kpos[d] if reversal[d] else kpos[d] for d in range(nsp)]
                total += float(x[(bg * (n // batch_groups) + b, fg * i + ci, *src)]) * float(
                    w[(f, ci, *kidx)]
                )
        out[(b, f, *pos)] = total
    return out


def window_text(sizes, strides, pads, lhs_dil, rhs_dil, reversal=None):
    def join(values):
        return "x".join(map(str, values))

    text = f"size={join(sizes)} stride={join(strides)} "
    text += "pad=" + "x".join(f"{lo}_{hi}" for lo, hi in pads)
    text += f" lhs_dilate={join(lhs_dil)} rhs_dilate={join(rhs_dil)}"
    if reversal:
        text += " rhs_reversal=" + join(int(r) for r in reversal)
    return "{" + text + "}"


CONV_CASES = {
    # name: (x NCHW shape, w OIHW shape, strides, pads, lhs_dil, rhs_dil, groups, batch_groups)
    "same_padding": ((2, 3, 5, 5), (4, 3, 3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 1, 1),
    "stride_asym_pad": ((1, 2, 7, 6), (3, 2, 3, 2), (2, 3), ((0, 1), (2, 0)), (1, 1), (1, 1), 1, 1),
    "negative_pad": ((1, 2, 6, 6), (2, 2, 2, 2), (1, 1), ((-1, 0), (1, -2)), (1, 1), (1, 1), 1, 1),
    "lhs_dilation": ((1, 2, 4, 3), (3, 2, 3, 3), (1, 1), ((1, 1), (2, 0)), (2, 3), (1, 1), 1, 1),
    "rhs_dilation": ((2, 2, 7, 7), (2, 2, 2, 3), (1, 2), ((0, 0), (1, 1)), (1, 1), (3, 2), 1, 1),
    "feature_groups": ((2, 4, 5, 4), (6, 2, 3, 2), (1, 1), ((1, 0), (0, 1)), (1, 1), (1, 1), 2, 1),
    "batch_groups": ((4, 3, 5, 5), (4, 3, 2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 2),
}


def _shape(dtype, dims):
    return f"{dtype}[{','.join(map(str, dims))}]"


@pytest.mark.parametrize("case", sorted(CONV_CASES))
@pytest.mark.parametrize("labels", ["nchw", "nhwc"])
def test_convolution_2d(case, labels):
    xs, ws, strides, pads, lhs_dil, rhs_dil, groups, batch_groups = CONV_CASES[case]
    rng = np.random.default_rng(sorted(CONV_CASES).index(case))
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = ref_conv(x, w, strides, pads, lhs_dil, rhs_dil, groups, batch_groups)
    if labels == "nchw":
        dim_labels, xa, wa, to_out = "bf01_oi01->bf01", x, w, (0, 1, 2, 3)
    else:
        dim_labels, xa, wa, to_out = (
            "b01f_01io->b01f",
            x.transpose(0, 2, 3, 1),
            w.transpose(2, 3, 1, 0),
            (0, 2, 3, 1),
        )
    want = want.transpose(to_out)
    window = window_text(ws[2:], strides, pads, lhs_dil, rhs_dil)
    hlo = module(
        [_shape("f32", xa.shape), _shape("f32", wa.shape)],
        f"{_shape('f32', want.shape)} convolution(p0, p1), window={window}, "
        f"dim_labels={dim_labels}, feature_group_count={groups}, "
        f"batch_group_count={batch_groups}",
    )
    out = run(hlo, xa, wa)
    assert out.dtype == np.float32 and out.shape == want.shape
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("nsp", [3, 4])
def test_convolution_with_three_and_four_spatial_dims(nsp):
    rng = np.random.default_rng(nsp)
    x = rng.standard_normal((1, 2) + (3,) * nsp).astype(np.float32)
    w = rng.standard_normal((2, 2) + (2,) * nsp).astype(np.float32)
    strides, pads, ones = [1] * nsp, [(1, 0)] * nsp, [1] * nsp
    want = ref_conv(x, w, strides, pads, ones, ones)
    spatial = "".join(map(str, range(nsp)))
    hlo = module(
        [_shape("f32", x.shape), _shape("f32", w.shape)],
        f"{_shape('f32', want.shape)} convolution(p0, p1), "
        f"window={window_text(w.shape[2:], strides, pads, ones, ones)}, "
        f"dim_labels=bf{spatial}_oi{spatial}->bf{spatial}",
    )
    np.testing.assert_allclose(run(hlo, x, w), want, rtol=1e-4, atol=1e-5)


def test_convolution_1d_with_reversal():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 9, 3)).astype(np.float32)  # b0f
    w = rng.standard_normal((4, 3, 5)).astype(np.float32)  # 0io
    want = ref_conv(
        x.transpose(0, 2, 1), w.transpose(2, 1, 0), [2], [(2, 1)], [1], [2], reversal=[True]
    ).transpose(0, 2, 1)
    hlo = module(
        ["f32[2,9,3]", "f32[4,3,5]"],
        f"{_shape('f32', want.shape)} convolution(p0, p1), "
        f"window={{size=4 stride=2 pad=2_1 rhs_dilate=2 rhs_reversal=1}}, "
        f"dim_labels=b0f_0io->b0f",
    )
    np.testing.assert_allclose(run(hlo, x, w), want, rtol=1e-4, atol=1e-5)


def test_convolution_unusual_dim_labels():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 2, 4, 5)).astype(np.float32)  # 01bf: [H, W, N, C]
    w = rng.standard_normal((6, 2, 2, 5)).astype(np.float32)  # o01i: [O, H, W, I]
    want = ref_conv(
        x.transpose(2, 3, 0, 1), w.transpose(0, 3, 1, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)
    )
    want = want.transpose(1, 2, 3, 0)  # f01b
    hlo = module(
        ["f32[3,2,4,5]", "f32[6,2,2,5]"],
        f"{_shape('f32', want.shape)} convolution(p0, p1), window={{size=2x2}}, "
        f"dim_labels=01bf_o01i->f01b",
    )
    np.testing.assert_allclose(run(hlo, x, w), want, rtol=1e-4, atol=1e-5)


def test_convolution_s32():
    x = np.arange(10, dtype=np.int32).reshape(1, 10, 1)
    w = np.array([1, -2, 3], np.int32).reshape(3, 1, 1)
    hlo = module(
        ["s32[1,10,1]", "s32[3,1,1]"],
        "s32[1,8,1] convolution(p0, p1), window={size=3}, dim_labels=b0f_0io->b0f",
    )
    want = [x[0, k, 0] - 2 * x[0, k + 1, 0] + 3 * x[0, k + 2, 0] for k in range(8)]
    np.testing.assert_array_equal(run(hlo, x, w)[0, :, 0], want)


# ---- fft --------------------------------------------------------------------------------------


def test_fft_ifft_round_trip():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 4, 8)) + 1j * rng.standard_normal((2, 4, 8))).astype(np.complex64)
    fwd = module(["c64[2,4,8]"], "c64[2,4,8] fft(p0), fft_type=FFT, fft_length={4,8}")
    inv = module(["c64[2,4,8]"], "c64[2,4,8] fft(p0), fft_type=IFFT, fft_length={4,8}")
    spectrum = run(fwd, x)
    assert spectrum.dtype == np.complex64
    np.testing.assert_allclose(spectrum, np.fft.fft2(x), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(run(inv, spectrum), x, rtol=1e-4, atol=1e-5)


def test_rfft_irfft():
    x = np.array([[1, 2, 0, -1, 3, 0.5]], np.float32)
    rfft = module(["f32[1,6]"], "c64[1,4] fft(p0), fft_type=RFFT, fft_length={6}")
    spectrum = run(rfft, x)
    np.testing.assert_allclose(spectrum, np.fft.rfft(x), rtol=1e-5, atol=1e-5)
    irfft = module(["c64[1,4]"], "f32[1,6] fft(p0), fft_type=IRFFT, fft_length={6}")
    out = run(irfft, spectrum)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x, rtol=1e-5, atol=1e-5)


# ---- triangular-solve and cholesky ------------------------------------------------------------


def _op_a(a, lower, unit, transpose):
    tri = np.tril(a) if lower else np.triu(a)
    if unit:
        tri = tri - np.diag(np.diag(tri)) + np.eye(len(tri))
    if transpose == "TRANSPOSE":
        return tri.T
    return tri.conj().T if transpose == "ADJOINT" else tri


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("transpose", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
def test_triangular_solve(left, lower, unit, transpose):
    rng = np.random.default_rng(4)
    a = rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
    rows, cols = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    a[:, rows, cols] = 1e3  # the other triangle is never read
    b = rng.standard_normal((2, 4, 3) if left else (2, 3, 4))
    want = np.stack(
        [
            np.linalg.solve(_op_a(a[k], lower, unit, transpose), b[k])
            if left
            else np.linalg.solve(_op_a(a[k], lower, unit, transpose).T, b[k].T).T
            for k in range(2)
        ]
    )
    shape_b = "f32[2,4,3]" if left else "f32[2,3,4]"
    hlo = module(
        ["f32[2,4,4]", shape_b],
        f"{shape_b} triangular-solve(p0, p1), left_side={str(left).lower()}, "
        f"lower={str(lower).lower()}, unit_diagonal={str(unit).lower()}, "
        f"transpose_a={transpose}",
    )
    out = run(hlo, a.astype(np.float32), b.astype(np.float32))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_triangular_solve_complex_adjoint():
    rng = np.random.default_rng(5)
    a = np.tril(rng.standard_normal((3, 3)) + 1j * rng.standard_normal((3, 3))) + 3 * np.eye(3)
    b = rng.standard_normal((3, 2)) + 1j * rng.standard_normal((3, 2))
    hlo = module(
        ["c64[3,3]", "c64[3,2]"],
        "c64[3,2] triangular-solve(p0, p1), left_side=true, lower=true, transpose_a=ADJOINT",
    )
    want = np.linalg.solve(a.conj().T, b)
    np.testing.assert_allclose(
        run(hlo, a.astype(np.complex64), b.astype(np.complex64)), want, rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize("lower", [True, False])
def test_cholesky(lower):
    rng = np.random.default_rng(6)
    m = rng.standard_normal((2, 4, 4))
    spd = m @ m.transpose(0, 2, 1) + 4 * np.eye(4)
    factor = np.linalg.cholesky(spd)
    want = factor if lower else factor.transpose(0, 2, 1)
    garbage = spd.copy()  # only the named triangle may be read
    rows, cols = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    garbage[:, rows, cols] = -7.0
    hlo = module(["f32[2,4,4]"], f"f32[2,4,4] cholesky(p0), lower={str(lower).lower()}")
    out = run(hlo, garbage.astype(np.float32))
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


# ---- batch norm -------------------------------------------------------------------------------


def _bn_forward(x, scale, offset, eps, feature):
    axes = tuple(d for d in range(x.ndim) if d != feature)
    shape = [1] * x.ndim
    shape[feature] = -1
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    xhat = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    return xhat * scale.reshape(shape) + offset.reshape(shape), mean, var


def test_batch_norm_training_and_inference():
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale, offset = np.array([1, 2, 0.5], np.float32), np.array([0, -1, 3], np.float32)
    train = module(
        ["f32[2,3,4]", "f32[3]", "f32[3]"],
        "(f32[2,3,4], f32[3], f32[3]) "
        "batch-norm-training(p0, p1, p2), epsilon=0.001, feature_index=1",
    )
    out, mean, var = run(train, x, scale, offset)
    want = _bn_forward(x.astype(np.float64), scale, offset, 0.001, 1)
    for got, expected in zip((out, mean, var), want):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    infer = module(
        ["f32[2,3,4]", "f32[3]", "f32[3]", "f32[3]", "f32[3]"],
        "f32[2,3,4] batch-norm-inference(p0, p1, p2, p3, p4), epsilon=0.001, feature_index=1",
    )
    np.testing.assert_allclose(
        run(infer, x, scale, offset, mean, var), want[0], rtol=1e-5, atol=1e-5
    )


def test_batch_norm_grad_matches_finite_differences():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((3, 2, 2))
    scale, offset = np.array([1.5, -0.5]), np.array([0.2, 0.1])
    grad_out = rng.standard_normal((3, 2, 2))
    eps, h = 0.01, 1e-6

    def loss(x_, scale_, offset_):
        return np.sum(grad_out * _bn_forward(x_, scale_, offset_, eps, 1)[0])

    def numeric(f, value):
        grad = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            up, down = value.copy(), value.copy()
            up[idx] += h
            down[idx] -= h
            grad[idx] = (f(up) - f(down)) / (2 * h)
        return grad

    _, mean, var = _bn_forward(x, scale, offset, eps, 1)
    hlo = module(
        ["f64[3,2,2]", "f64[2]", "f64[2]", "f64[2]", "f64[3,2,2]"],
        "(f64[3,2,2], f64[2], f64[2]) batch-norm-grad(p0, p1, p2, p3, p4), "
        "epsilon=0.01, feature_index=1",
    )
    gx, gscale, goffset = run(hlo, x, scale, mean, var, grad_out)
    np.testing.assert_allclose(gx, numeric(lambda v: loss(v, scale, offset), x), atol=1e-6)
    np.testing.assert_allclose(gscale, numeric(lambda v: loss(x, v, offset), scale), atol=1e-6)
    np.testing.assert_allclose(goffset, numeric(lambda v: loss(x, scale, v), offset), atol=1e-6)


def test_convolution_windows_past_the_copy_budget_are_contracted_tap_by_tap(monkeypatch):
    # XLA's depthwise filter gradients have windows of thousands of taps over every output
    # position: contracted at once, the windows' copy was 12.7 GiB and the process was killed
    import tracemalloc

    from minixla.reference import ops_linalg

    text = """HloModule m
ENTRY e {
  x = f32[8,34,34,16] parameter(0)
  w = f32[32,32,16,4] parameter(1)
  ROOT c = f32[8,3,3,4] convolution(x, w), window={size=32x32}, dim_labels=b01f_01io->b01f
}"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 34, 34, 16)).astype(np.float32)
    w = rng.standard_normal((32, 32, 16, 4)).astype(np.float32)
    exe = minixla.compile(text, backend="interpreter")

    def traced():
        tracemalloc.start()
        try:
            return exe(x, w), tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    whole_copy = 8 * 9 * 32 * 32 * 16 * 4
    want, peak_whole = traced()
    monkeypatch.setattr(ops_linalg, "_WINDOW_COPY_BYTES", whole_copy // 16)
    got, peak = traced()
    assert peak_whole > whole_copy
    assert peak < whole_copy / 2, peak
    # f32 sums of 16384 terms in another order
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


def test_an_f32_dot_gives_the_same_bits_with_its_operands_swapped():
    # a transpose folded into a dot swaps its operands; in f32 BLAS's kernels may round
    # A^T B and (B^T A)^T differently (OpenBLAS's Haswell ones do), which changed the
    # interpreter's results after the cpu pipeline on CPUs without AVX-512
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((16, 33)).astype(np.float32)

    def dot(lhs, rhs):
        text = f"""HloModule m
ENTRY e {{
  a = f32[16,{lhs}] parameter(0)
  b = f32[16,{rhs}] parameter(1)
  ROOT d = f32[{lhs},{rhs}] dot(a, b), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}
}}"""
        return minixla.compile(text, backend="interpreter")

    ab = dot(64, 33)(a, b)
    ba = dot(33, 64)(b, a)
    assert ab.T.tobytes() == np.ascontiguousarray(ba).tobytes()
    exact = a.astype(np.float64).T @ b.astype(np.float64)
    np.testing.assert_array_equal(ab, exact.astype(np.float32))  # the exact sum, rounded once


def test_an_f32_dot_that_overflows_in_f32_gives_xlas_inf_or_nan():
    # summed in f64 the products below would cancel to 0; in f32 they overflow first
    text = """HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[2,2] parameter(1)
  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    a = np.array([[1e30, -1e30], [1e30, 1.0]], np.float32)
    b = np.array([[1e30, 2.0], [1e30, 3.0]], np.float32)
    got = minixla.compile(text, backend="interpreter")(a, b)
    # inf - inf, or inf where the multiply and add are fused (docs/semantics.md): never the
    # cancelled 0 of an exact sum
    assert not np.isfinite(got[0, 0])
    assert got[1, 0] == np.inf
    np.testing.assert_allclose(got[:, 1], [2e30 - 3e30, 2e30 + 3.0], rtol=1e-6)
