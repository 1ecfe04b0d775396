"""minixla.random against jax.random: golden values (tests/golden/make_random_golden.py wrote
them), live JAX when installed, statistics, and keys through jit, vmap and loops."""

import json
from pathlib import Path

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from minixla import lax, vmap
from minixla import random as mr

GOLDEN = json.loads((Path(__file__).parent / "golden" / "random_jax.json").read_text())["cases"]

CASES = {
    "key": lambda k: k,
    "split3": lambda k: mr.split(k, 3),
    "split2x2": lambda k: mr.split(k, (2, 2)),
    "fold_in7": lambda k: mr.fold_in(k, 7),
    "bits": lambda k: mr.bits(k, (3, 5)),
    "bits_u8": lambda k: mr.bits(k, (6,), dtype=np.uint8),
    "uniform": lambda k: mr.uniform(k, (4, 5)),
    "uniform_range": lambda k: mr.uniform(k, (7,), minval=-2.0, maxval=3.0),
    "normal": lambda k: mr.normal(k, (4, 5)),
    "bernoulli": lambda k: mr.bernoulli(k, 0.3, (16,)),
    "randint": lambda k: mr.randint(k, (12,), -5, 17),
    "randint_u8": lambda k: mr.randint(k, (8,), 0, 256, dtype=np.uint8),
    "permutation": lambda k: mr.permutation(k, 10),
    "permutation_rows": lambda k: mr.permutation(k, np.arange(12, dtype=np.int32).reshape(4, 3)),
    "categorical": lambda k: mr.categorical(k, np.log(np.float32([0.1, 0.2, 0.7])), shape=(10,)),
    "truncated_normal": lambda k: mr.truncated_normal(k, -1.0, 2.0, (8,)),
    "gumbel": lambda k: mr.gumbel(k, (8,)),
    "choice": lambda k: mr.choice(k, 7, (2, 3)),
    "choice_p": lambda k: mr.choice(k, 4, (12,), p=np.float32([0.1, 0.5, 0.15, 0.25])),
    "choice_p_unique": lambda k: mr.choice(
        k, 4, (3,), replace=False, p=np.float32([0.1, 0.5, 0.15, 0.25])
    ),
    "choice_unique": lambda k: mr.choice(k, np.arange(10, dtype=np.int32) * 2, (5,), replace=False),
}
FLOATS = {"uniform", "uniform_range", "normal", "truncated_normal", "gumbel"}


def jit(fn):
    return minixla.jit(fn, backend="interpreter")


def _golden(case: str):
    entry = GOLDEN[case]
    return np.array(entry["values"], entry["dtype"]).reshape(entry["shape"])


@pytest.mark.parametrize("seed", [0, 42, 2**31 - 1])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax_golden_values(name, seed):
    want = _golden(f"{seed}/{name}")
    got = np.asarray(jit(CASES[name])(mr.PRNGKey(seed)))
    assert got.shape == want.shape and got.dtype == want.dtype
    if name in FLOATS:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(got, want)


CASES_X64 = {
    "key": lambda k: k,
    "bits_u64": lambda k: mr.bits(k, (6,), dtype=np.uint64),
    "uniform_f64": lambda k: mr.uniform(k, (6,), dtype=np.float64),
    "normal_f64": lambda k: mr.normal(k, (6,), dtype=np.float64),
    "randint_i64": lambda k: mr.randint(k, (6,), 0, 10**12, dtype=np.int64),
}


@pytest.mark.parametrize("name", sorted(CASES_X64))
def test_matches_jax_golden_values_with_x64(name):
    want = _golden(f"x64/{name}")
    with minixla.config.x64():
        got = np.asarray(jit(CASES_X64[name])(mr.PRNGKey(2**40 + 5)))
    assert got.dtype == want.dtype
    if name.endswith("f64"):
        np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14)
    else:
        np.testing.assert_array_equal(got, want)


def test_against_live_jax():
    jax = pytest.importorskip("jax")
    key = jax.random.PRNGKey(1234)
    ours = mr.PRNGKey(1234)
    sub = jax.random.split(key, 5)[3]
    np.testing.assert_array_equal(jit(lambda k: mr.split(k, 5)[3])(ours), sub)
    np.testing.assert_array_equal(
        jit(lambda k: mr.randint(k, (50,), 0, 1000))(ours), jax.random.randint(key, (50,), 0, 1000)
    )
    np.testing.assert_array_equal(
        jit(lambda k: mr.permutation(k, 2000))(ours), jax.random.permutation(key, 2000)
    )  # two sorting rounds
    np.testing.assert_allclose(
        jit(lambda k: mr.normal(k, (500,)))(ours), jax.random.normal(key, (500,)), atol=1e-6
    )


def test_erf_inv_matches_scipy():
    special = pytest.importorskip("scipy.special")
    x = np.linspace(-0.999999, 0.999999, 2001).astype(np.float32)
    np.testing.assert_allclose(
        jit(mr.erf_inv)(x), special.erfinv(x.astype(np.float64)), rtol=2e-6, atol=1e-6
    )
    with minixla.config.x64():
        x64 = np.linspace(-0.9999, 0.9999, 101)
        np.testing.assert_allclose(jit(mr.erf_inv)(x64), special.erfinv(x64), rtol=1e-12)


def test_sample_statistics():
    key = mr.PRNGKey(7)
    u = jit(lambda k: mr.uniform(k, (20000,)))(key)
    n = jit(lambda k: mr.normal(k, (20000,)))(key)
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03
    t = jit(lambda k: mr.truncated_normal(k, -0.5, 1.5, (5000,)))(key)
    assert -0.5 < t.min() and t.max() < 1.5
    c = jit(lambda k: mr.choice(k, 5, (4000,)))(key)
    assert set(np.unique(c)) == set(range(5))
    no_repeat = jit(lambda k: mr.choice(k, np.arange(10, dtype=np.int32), (10,), replace=False))(
        key
    )
    assert sorted(no_repeat) == list(range(10))


def test_keys_through_vmap_and_loops():
    keys = jit(lambda k: mr.split(k, 4))(mr.PRNGKey(3))
    batched = jit(vmap(lambda k: mr.normal(k, (3,))))(keys)
    one = jit(lambda k: mr.normal(k, (3,)))
    np.testing.assert_allclose(batched, np.stack([one(k) for k in keys]), rtol=1e-6)
    perms = jit(vmap(lambda k: mr.permutation(k, 6)))(keys)
    np.testing.assert_array_equal(
        perms, np.stack([jit(lambda k: mr.permutation(k, 6))(k) for k in keys])
    )

    def walk(key):
        def step(carry, _):
            k, total = carry
            k, sub = mr.split(k)
            return (k, total + mr.uniform(sub)), mr.bits(sub)

        return lax.scan(step, (key, mnp.float32(0)), None, length=5)

    (_, total), drawn = jit(walk)(mr.PRNGKey(0))
    k, want_total, want_bits = mr.PRNGKey(0), 0.0, []
    for _ in range(5):
        pair = jit(mr.split)(k)
        k, sub = pair[0], pair[1]
        want_total += float(jit(mr.uniform)(sub))
        want_bits.append(int(jit(mr.bits)(sub)))
    np.testing.assert_allclose(total, want_total, rtol=1e-6)
    np.testing.assert_array_equal(drawn, want_bits)


def test_outside_jit_and_traced_seeds():
    np.testing.assert_array_equal(mr.split(mr.PRNGKey(0), 3), _golden("0/split3"))
    from_traced = jit(lambda s: mr.bits(mr.PRNGKey(s), (3, 5)))(np.int32(42))
    np.testing.assert_array_equal(from_traced, _golden("42/bits"))


def test_bad_keys_and_arguments_are_clear_errors():
    with pytest.raises(minixla.FrontendError, match=r"test_random.py:\d+: .*uint32\[2\]"):
        jit(lambda k: mr.normal(k))(np.zeros(3, np.uint32))
    with pytest.raises(minixla.FrontendError, match="unsigned"):
        jit(lambda k: mr.bits(k, dtype=np.int32))(mr.PRNGKey(0))
    with pytest.raises(minixla.FrontendError, match="scalar seed"):
        mr.PRNGKey(np.arange(2))
    with pytest.raises(minixla.FrontendError, match="without replacement"):
        jit(lambda k: mr.choice(k, 3, (4,), replace=False))(mr.PRNGKey(0))
