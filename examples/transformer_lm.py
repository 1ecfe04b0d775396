"""Training a tiny transformer language model with `minixla.value_and_grad`.

The corpus is generated: each sequence counts upward modulo the vocabulary from a random
start, with a random stride per sequence, so the next token is predictable from the two before
it. The model is one pre-norm block (causal multi-head attention and a GELU MLP) with learned
token and position embeddings, trained by Adam on next-token cross-entropy; each call of
`train` runs a block of steps in one compiled HLO while loop. Run
`python examples/transformer_lm.py` to watch the loss fall.
"""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax, nn

VOCAB, SEQ, WIDTH, HEADS = 12, 10, 32, 2


def make_data(rng, n: int = 32):
    starts = rng.integers(0, VOCAB, (n, 1))
    strides = rng.integers(1, 4, (n, 1))
    return ((starts + strides * np.arange(SEQ + 1)) % VOCAB).astype(np.int32)


def init_params(rng):
    def dense(fan_in, fan_out):
        return (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)

    return {
        "embed": dense(VOCAB, WIDTH),
        "pos": dense(SEQ, WIDTH) * 0.1,
        "qkv": dense(WIDTH, 3 * WIDTH),
        "proj": dense(WIDTH, WIDTH),
        "up": dense(WIDTH, 2 * WIDTH),
        "down": dense(2 * WIDTH, WIDTH),
        "unembed": dense(WIDTH, VOCAB),
    }


def attention(params, h):
    batch, seq, _ = h.shape
    q, k, v = mnp.split(h @ params["qkv"], 3, axis=-1)

    def heads(t):
        return t.reshape(batch, seq, HEADS, WIDTH // HEADS).transpose(0, 2, 1, 3)

    q, k, v = heads(q), heads(k), heads(v)
    scores = mnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(WIDTH // HEADS)
    causal = np.tril(np.ones((seq, seq), bool))
    weights = nn.softmax(mnp.where(causal, scores, -1e9), axis=-1)
    out = mnp.einsum("bhqk,bhkd->bhqd", weights, v).transpose(0, 2, 1, 3)
    return out.reshape(batch, seq, WIDTH) @ params["proj"]


def logits(params, tokens):
    h = params["embed"][tokens] + params["pos"]
    h = h + attention(params, nn.layer_norm(h))
    h = h + nn.gelu(nn.layer_norm(h) @ params["up"]) @ params["down"]
    return nn.layer_norm(h) @ params["unembed"]


def loss(params, batch):
    inputs, targets = batch[:, :-1], batch[:, 1:]
    log_probs = nn.log_softmax(logits(params, inputs))
    return -mnp.mean(mnp.sum(log_probs * nn.one_hot(targets, VOCAB), axis=-1))


def adam_steps(state, batch, lr, steps):
    """`steps` Adam updates; state is (params, first moments, second moments, step count)."""

    def step(_, state):
        params, m, v, t = state
        grads = minixla.grad(loss)(params, batch)
        t = t + 1
        m = {k: 0.9 * m[k] + 0.1 * grads[k] for k in params}
        v = {k: 0.999 * v[k] + 0.001 * grads[k] ** 2 for k in params}
        params = {
            k: params[k] - lr * (m[k] / (1 - 0.9**t)) / (mnp.sqrt(v[k] / (1 - 0.999**t)) + 1e-8)
            for k in params
        }
        return params, m, v, t

    state = lax.fori_loop(0, steps, step, state)
    return state, loss(state[0], batch)


def main(
    blocks: int = 6,
    steps: int = 50,
    lr: float = 3e-3,
    seed: int = 0,
    verbose: bool = True,
    backend: str | None = None,
) -> dict:
    train = minixla.jit(adam_steps, static_argnums=3, backend=backend)
    rng = np.random.default_rng(seed)
    batch = make_data(rng)
    params = init_params(rng)
    zeros = {k: np.zeros_like(p) for k, p in params.items()}
    state = (params, zeros, dict(zeros), np.float32(0))
    losses = [float(minixla.jit(loss, backend=backend)(params, batch))]
    if verbose:
        print(f"step    0: loss {losses[0]:.4f}")
    for block in range(blocks):
        state, value = train(state, batch, lr, steps)
        losses.append(float(value))
        if verbose:
            print(f"step {(block + 1) * steps:4d}: loss {value:.4f}")
    return {"losses": losses, "params": state[0]}


if __name__ == "__main__":
    main()
