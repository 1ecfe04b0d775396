"""lax.conv_general_dilated, lax.reduce_window, the lax elementwise primitives and the NumPy
additions (take_along_axis, tril/triu, isclose, logaddexp, nan reductions, nn.one_hot)."""

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax, nn

R = np.random.default_rng(0)


def conv_nhwc_reference(x, w, stride, pads):
    """Direct NumPy convolution: NHWC input, HWIO kernel."""
    x = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    kh, kw = w.shape[:2]
    out_h = (x.shape[1] - kh) // stride[0] + 1
    out_w = (x.shape[2] - kw) // stride[1] + 1
    out = np.zeros((x.shape[0], out_h, out_w, w.shape[3]))
    for i in range(out_h):
        for j in range(out_w):
            patch = x[:, i * stride[0] : i * stride[0] + kh, j * stride[1] : j * stride[1] + kw]
            out[:, i, j] = np.einsum("bhwi,hwio->bo", patch, w)
    return out


@pytest.mark.parametrize(
    "padding,pads",
    [("VALID", ((0, 0), (0, 0))), ("SAME", ((1, 1), (1, 1))), (((2, 0), (1, 1)), ((2, 0), (1, 1)))],
)
def test_conv_general_dilated_matches_a_direct_convolution(padding, pads):
    x = R.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = R.standard_normal((3, 3, 3, 4)).astype(np.float32)
    stride = (1, 1) if padding == "SAME" else (2, 1)
    got = lax.conv_general_dilated(
        x, w, stride, padding, dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    np.testing.assert_allclose(got, conv_nhwc_reference(x, w, stride, pads), rtol=1e-4, atol=1e-5)


def test_conv_default_dimension_numbers_are_nchw_oihw():
    x = R.standard_normal((1, 3, 5, 5)).astype(np.float32)
    w = R.standard_normal((4, 3, 3, 3)).astype(np.float32)
    got = lax.conv_general_dilated(x, w, (1, 1), "VALID")
    want = conv_nhwc_reference(
        x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), (1, 1), ((0, 0), (0, 0))
    ).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_conv_and_reduce_window_match_jax_with_dilations():
    jax = pytest.importorskip("jax")
    x = R.standard_normal((1, 7, 6, 4)).astype(np.float32)
    w = R.standard_normal((2, 3, 2, 6)).astype(np.float32)
    kwargs = dict(
        window_strides=(2, 1),
        padding=((1, 2), (0, 1)),
        lhs_dilation=(1, 2),
        rhs_dilation=(2, 1),
        dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=2,
    )
    np.testing.assert_allclose(
        lax.conv_general_dilated(x, w, **kwargs),
        jax.lax.conv_general_dilated(x, w, **kwargs),
        rtol=1e-4,
        atol=1e-4,
    )
    for fn, init in ((lax.add, 0.0), (lax.max, -np.inf)):
        args = (init, fn, (1, 3, 2, 1), (1, 2, 1, 1), "SAME")
        jax_fn = {lax.add: jax.lax.add, lax.max: jax.lax.max}[fn]
        np.testing.assert_allclose(
            lax.reduce_window(x, *args),
            jax.lax.reduce_window(x, init, jax_fn, *args[2:]),
            rtol=1e-5,
        )


def test_reduce_window_with_a_python_reducer_and_bad_input():
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = lax.reduce_window(x, 0.0, lambda a, b: a + b * 2, (1, 2), (1, 2))
    np.testing.assert_allclose(got, [[2, 10], [18, 26]])
    with pytest.raises(minixla.FrontendShapeError, match="window_dimensions"):
        lax.reduce_window(x, 0.0, lax.add, (2,))
    with pytest.raises(minixla.FrontendTypeError, match="unknown padding"):
        lax.reduce_window(x, 0.0, lax.add, (1, 2), (1, 2), "FULL")


def test_lax_elementwise_primitives_do_not_broadcast():
    a, b = np.float32([1, 4]), np.float32([2, 3])
    np.testing.assert_allclose(lax.max(a, b), [2, 4])
    np.testing.assert_allclose(lax.mul(a, b), a * b)
    np.testing.assert_allclose(lax.rsqrt(a), 1 / np.sqrt(a), rtol=1e-6)
    np.testing.assert_allclose(lax.integer_pow(a, 3), a**3)
    with pytest.raises(minixla.FrontendShapeError, match="lax.add needs operands of one shape"):
        lax.add(a, np.ones((2, 2), np.float32))


def test_numpy_additions_match_numpy():
    x = R.standard_normal((3, 4)).astype(np.float32)
    order = np.argsort(x, axis=1)
    np.testing.assert_allclose(mnp.take_along_axis(x, order, 1), np.take_along_axis(x, order, 1))
    np.testing.assert_allclose(
        mnp.take_along_axis(x, order[:1] % 3 - 3, 0), np.take_along_axis(x, order[:1] % 3 - 3, 0)
    )
    for k in (-1, 0, 2):
        np.testing.assert_allclose(mnp.tril(x, k), np.tril(x, k))
        np.testing.assert_allclose(mnp.triu(x, k), np.triu(x, k))
    a = np.float32([1, np.inf, np.nan, 1, -np.inf])
    b = np.float32([1 + 1e-7, np.inf, np.nan, 1.1, np.inf])
    np.testing.assert_array_equal(mnp.isclose(a, b), np.isclose(a, b))
    np.testing.assert_array_equal(
        mnp.isclose(a, b, equal_nan=True), np.isclose(a, b, equal_nan=True)
    )
    big = np.float32([1000, -np.inf, 3])
    np.testing.assert_allclose(
        mnp.logaddexp(big, np.float32([1000, -np.inf, -2])),
        np.logaddexp(big, np.float32([1000, -np.inf, -2])),
        rtol=1e-6,
    )
    y = x.copy()
    y[0, 1] = y[2, 3] = np.nan
    for name in ("nansum", "nanmean", "nanmax", "nanmin", "nanprod", "nanvar", "nanstd"):
        np.testing.assert_allclose(
            getattr(mnp, name)(y, axis=1), getattr(np, name)(y, axis=1), rtol=1e-5, err_msg=name
        )
    np.testing.assert_array_equal(
        nn.one_hot(np.array([2, 0, 5]), 3), [[0, 0, 1], [1, 0, 0], [0, 0, 0]]
    )
    np.testing.assert_array_equal(nn.one_hot(np.array([1, 0]), 2, axis=0), [[0, 1], [1, 0]])
