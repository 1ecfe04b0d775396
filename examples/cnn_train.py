"""Training a small convolutional network with `minixla.value_and_grad`.

The data are generated 8x8 images of a horizontal or a vertical bar in noise; the net is
conv 3x3 -> relu -> 2x2 max pool -> dense, trained by SGD on softmax cross-entropy. Each call
of `train` runs a block of SGD steps in one compiled HLO while loop. Run
`python examples/cnn_train.py` to watch the loss fall.
"""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax, nn


def make_data(rng, n: int = 64, size: int = 8):
    labels = rng.integers(0, 2, n)
    images = rng.normal(0, 0.3, (n, size, size, 1)).astype(np.float32)
    where = rng.integers(1, size - 1, n)
    for i, (label, k) in enumerate(zip(labels, where)):
        if label:
            images[i, :, k, 0] += 1.0
        else:
            images[i, k, :, 0] += 1.0
    return images, labels.astype(np.int32)


def init_params(rng, channels: int = 4, size: int = 8):
    flat = (size // 2) ** 2 * channels
    return {
        "conv": (rng.standard_normal((3, 3, 1, channels)) / 3).astype(np.float32),
        "bias": np.zeros(channels, np.float32),
        "dense": (rng.standard_normal((flat, 2)) / np.sqrt(flat)).astype(np.float32),
        "out": np.zeros(2, np.float32),
    }


def logits(params, images):
    h = lax.conv_general_dilated(
        images, params["conv"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )
    h = nn.relu(h + params["bias"])
    h = lax.reduce_window(h, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return h.reshape(h.shape[0], -1) @ params["dense"] + params["out"]


def loss(params, images, labels):
    log_probs = nn.log_softmax(logits(params, images))
    return -mnp.mean(mnp.sum(log_probs * nn.one_hot(labels, 2), axis=-1))


def sgd_steps(params, images, labels, lr, steps):
    def step(_, p):
        grads = minixla.grad(loss)(p, images, labels)
        return {k: p[k] - lr * grads[k] for k in p}

    params = lax.fori_loop(0, steps, step, params)
    accuracy = mnp.mean(mnp.argmax(logits(params, images), axis=-1) == labels)
    return params, loss(params, images, labels), accuracy


def main(
    blocks: int = 6,
    steps: int = 50,
    lr: float = 0.5,
    seed: int = 0,
    verbose: bool = True,
    backend: str | None = None,
) -> dict:
    train = minixla.jit(sgd_steps, static_argnums=4, backend=backend)
    rng = np.random.default_rng(seed)
    images, labels = make_data(rng)
    params = init_params(rng)
    losses = [float(minixla.jit(loss, backend=backend)(params, images, labels))]
    if verbose:
        print(f"step    0: loss {losses[0]:.4f}")
    for block in range(blocks):
        params, value, accuracy = train(params, images, labels, lr, steps)
        losses.append(float(value))
        if verbose:
            print(f"step {(block + 1) * steps:4d}: loss {value:.4f}  accuracy {accuracy:.2f}")
    return {"losses": losses, "accuracy": float(accuracy), "params": params}


if __name__ == "__main__":
    main()
