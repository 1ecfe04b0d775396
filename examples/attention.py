"""Causal multi-head self-attention, traced with minixla.jit.

Run `python examples/attention.py` to print the output and the attention weights of head 0.
"""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import nn


def init_params(rng, d_model: int = 16):
    scale = 1 / np.sqrt(d_model)
    names = ("wq", "wk", "wv", "wo")
    return {n: (rng.standard_normal((d_model, d_model)) * scale).astype(np.float32) for n in names}


def attention(params, x, num_heads):
    """x: [seq, d_model] -> ([seq, d_model], weights [heads, seq, seq])."""
    seq, d_model = x.shape
    d_head = d_model // num_heads

    def heads(w):  # [seq, d_model] -> [heads, seq, d_head]
        return (x @ w).reshape(seq, num_heads, d_head).transpose(1, 0, 2)

    q, k, v = heads(params["wq"]), heads(params["wk"]), heads(params["wv"])
    scores = mnp.einsum("hqd,hkd->hqk", q, k) / np.sqrt(d_head)
    causal = mnp.arange(seq)[:, None] >= mnp.arange(seq)[None, :]
    scores = mnp.where(causal, scores, -1e9)
    weights = nn.softmax(scores, axis=-1)
    mixed = mnp.einsum("hqk,hkd->qhd", weights, v).reshape(seq, d_model)
    out = nn.layer_norm(x + mixed @ params["wo"])
    return out, weights


attend = minixla.jit(attention, static_argnums=2)


def main(seq: int = 6, num_heads: int = 4, seed: int = 0, verbose: bool = True) -> dict:
    rng = np.random.default_rng(seed)
    params = init_params(rng)
    x = rng.standard_normal((seq, 16)).astype(np.float32)
    out, weights = attend(params, x, num_heads)
    if verbose:
        print(f"attention over {seq} tokens, {num_heads} heads")
        print("head 0 weights (causal: zeros above the diagonal):")
        print(np.array2string(weights[0], precision=3, suppress_small=True))
        print("output mean/std per token:", np.round(out.mean(-1), 4), np.round(out.std(-1), 4))
    return {"params": params, "x": x, "num_heads": num_heads, "out": out, "weights": weights}


if __name__ == "__main__":
    main()
