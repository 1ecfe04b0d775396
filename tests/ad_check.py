"""Finite-difference checks for the differentiation tests (float64 under x64)."""

import numpy as np

import minixla

BACKEND = "interpreter"


def numeric_jvp(fn, args, tangents, eps=1e-6):
    plus = [a + eps * t for a, t in zip(args, tangents)]
    minus = [a - eps * t for a, t in zip(args, tangents)]
    return (np.asarray(fn(*plus), np.float64) - np.asarray(fn(*minus), np.float64)) / (2 * eps)


def check_grads(fn, args, seed=0, rtol=1e-5, atol=1e-6, modes=("rev", "fwd")):
    """Reverse and forward mode of fn (a scalar or array function) against central
    differences along random directions."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, np.float64) for a in args]
    run = minixla.jit(fn, backend=BACKEND)
    out = np.asarray(run(*args))
    tangents = [rng.standard_normal(a.shape) for a in args]
    expected = numeric_jvp(run, args, tangents)
    if "fwd" in modes:
        jvp = minixla.jit(lambda a, t: minixla.jvp(fn, a, t), backend=BACKEND)
        primal, tangent = jvp(tuple(args), tuple(tangents))
        np.testing.assert_allclose(primal, out, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(tangent, expected, rtol=rtol, atol=atol)
    if "rev" in modes:
        ct = rng.standard_normal(out.shape)

        def pullback(a, c):
            _, vjp_fn = minixla.vjp(fn, *a)
            return vjp_fn(c)

        cts = minixla.jit(pullback, backend=BACKEND)(tuple(args), ct)
        # <ct, J t> == <J^T ct, t>
        got = sum(np.sum(c * t) for c, t in zip(cts, tangents))
        np.testing.assert_allclose(got, np.sum(ct * expected), rtol=rtol, atol=atol)
