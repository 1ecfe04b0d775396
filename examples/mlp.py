"""A two-layer MLP classifier's forward pass, traced with minixla.jit.

Run `python examples/mlp.py` to print the HLO minixla builds and the class probabilities.
"""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import nn


def init_params(rng, sizes=(16, 32, 4)):
    """Weights scaled by 1/sqrt(fan_in), zero biases: {"w1", "b1", "w2", "b2"}."""
    d_in, hidden, d_out = sizes
    return {
        "w1": (rng.standard_normal((d_in, hidden)) / np.sqrt(d_in)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, d_out)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros(d_out, np.float32),
    }


@minixla.jit
def forward(params, x):
    """Class probabilities and predicted labels for a batch `x`."""
    hidden = nn.gelu(x @ params["w1"] + params["b1"])
    logits = hidden @ params["w2"] + params["b2"]
    return nn.softmax(logits, axis=-1), mnp.argmax(logits, axis=-1)


def main(batch: int = 8, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    x = rng.standard_normal((batch, 16)).astype(np.float32)
    probs, labels = forward(params, x)
    if verbose:
        print(forward.lower(params, x).as_text())
        print("class probabilities (first 3 rows):")
        print(np.array2string(probs[:3], precision=4, suppress_small=True))
        print("predicted labels:", labels.tolist())
        print("rows sum to 1:", bool(np.allclose(probs.sum(-1), 1, atol=1e-5)))
    return {"params": params, "x": x, "probs": probs, "labels": labels}


if __name__ == "__main__":
    main()
