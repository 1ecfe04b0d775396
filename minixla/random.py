"""`minixla.random`: JAX-compatible threefry2x32 random numbers (see docs/random.md).

key = minixla.random.PRNGKey(0)
key, sub = minixla.random.split(key)
x = minixla.random.normal(sub, (3, 4))
"""

from .frontend.random_api import (
    PRNGKey,
    bernoulli,
    bits,
    categorical,
    choice,
    erf_inv,
    fold_in,
    gumbel,
    key,
    normal,
    permutation,
    randint,
    split,
    threefry_2x32,
    truncated_normal,
    uniform,
)

__all__ = [
    "PRNGKey",
    "bernoulli",
    "bits",
    "categorical",
    "choice",
    "erf_inv",
    "fold_in",
    "gumbel",
    "key",
    "normal",
    "permutation",
    "randint",
    "split",
    "threefry_2x32",
    "truncated_normal",
    "uniform",
]
