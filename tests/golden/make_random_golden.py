"""Writes random_jax.json: jax.random outputs that tests/test_random.py compares against.

Run from the repository root with jax installed (JAX's defaults: x64 off, partitionable
threefry): python tests/golden/make_random_golden.py
"""

import json
from pathlib import Path

import jax
import numpy as np

CASES = {
    "key": lambda k: k,
    "split3": lambda k: jax.random.split(k, 3),
    "split2x2": lambda k: jax.random.split(k, (2, 2)),
    "fold_in7": lambda k: jax.random.fold_in(k, 7),
    "bits": lambda k: jax.random.bits(k, (3, 5)),
    "bits_u8": lambda k: jax.random.bits(k, (6,), dtype=np.uint8),
    "uniform": lambda k: jax.random.uniform(k, (4, 5)),
    "uniform_range": lambda k: jax.random.uniform(k, (7,), minval=-2.0, maxval=3.0),
    "normal": lambda k: jax.random.normal(k, (4, 5)),
    "bernoulli": lambda k: jax.random.bernoulli(k, 0.3, (16,)),
    "randint": lambda k: jax.random.randint(k, (12,), -5, 17),
    "randint_u8": lambda k: jax.random.randint(k, (8,), 0, 256, dtype=np.uint8),
    "permutation": lambda k: jax.random.permutation(k, 10),
    "permutation_rows": lambda k: jax.random.permutation(k, np.arange(12).reshape(4, 3)),
    "categorical": lambda k: jax.random.categorical(
        k, np.log(np.float32([0.1, 0.2, 0.7])), shape=(10,)
    ),
    "truncated_normal": lambda k: jax.random.truncated_normal(k, -1.0, 2.0, (8,)),
    "gumbel": lambda k: jax.random.gumbel(k, (8,)),
    "choice": lambda k: jax.random.choice(k, 7, (2, 3)),
    "choice_p": lambda k: jax.random.choice(k, 4, (12,), p=np.float32([0.1, 0.5, 0.15, 0.25])),
    "choice_p_unique": lambda k: jax.random.choice(
        k, 4, (3,), replace=False, p=np.float32([0.1, 0.5, 0.15, 0.25])
    ),
    "choice_unique": lambda k: jax.random.choice(
        k, np.arange(10, dtype=np.int32) * 2, (5,), replace=False
    ),
}
SEEDS = (0, 42, 2**31 - 1)
# With 64-bit types on (the seed keeps its high word, 64-bit bits and floats exist).
CASES_X64 = {
    "key": lambda k: k,
    "bits_u64": lambda k: jax.random.bits(k, (6,), dtype=np.uint64),
    "uniform_f64": lambda k: jax.random.uniform(k, (6,), dtype=np.float64),
    "normal_f64": lambda k: jax.random.normal(k, (6,), dtype=np.float64),
    "randint_i64": lambda k: jax.random.randint(k, (6,), 0, 10**12, dtype=np.int64),
}
SEED_X64 = 2**40 + 5


def main() -> None:
    assert jax.config.jax_threefry_partitionable and not jax.config.jax_enable_x64
    out = {}
    for seed in SEEDS:
        key = jax.random.PRNGKey(seed)
        for name, fn in CASES.items():
            value = np.asarray(fn(key))
            out[f"{seed}/{name}"] = {
                "dtype": str(value.dtype),
                "shape": list(value.shape),
                "values": value.ravel().tolist(),
            }
    with jax.enable_x64(True):
        key = jax.random.PRNGKey(SEED_X64)
        for name, fn in CASES_X64.items():
            value = np.asarray(fn(key))
            out[f"x64/{name}"] = {
                "dtype": str(value.dtype),
                "shape": list(value.shape),
                "values": value.ravel().tolist(),
            }
    path = Path(__file__).with_name("random_jax.json")
    path.write_text(json.dumps({"jax_version": jax.__version__, "cases": out}, indent=0) + "\n")


if __name__ == "__main__":
    main()
