"""Training a one-hidden-layer regression MLP with `minixla.value_and_grad`.

Each call of `train` runs `steps` SGD steps inside one compiled HLO while loop
(lax.fori_loop); the parameters are donated, so they become input_output_alias entries.
Run `python examples/train_loop.py` to watch the loss fall.
"""

import numpy as np

import minixla
import minixla.numpy as mnp
from minixla import lax


def make_data(rng, n: int = 64):
    x = rng.uniform(-2, 2, (n, 1)).astype(np.float32)
    y = (np.sin(x) + 0.1 * x**2).astype(np.float32)
    return x, y


def init_params(rng, hidden: int = 16):
    return {
        "w1": rng.standard_normal((1, hidden)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, 1)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros(1, np.float32),
    }


def loss(params, x, y):
    """Mean squared error of tanh(x w1 + b1) w2 + b2."""
    h = mnp.tanh(x @ params["w1"] + params["b1"])
    err = h @ params["w2"] + params["b2"] - y
    return mnp.mean(err * err)


loss_and_grads = minixla.value_and_grad(loss)


def sgd_steps(params, x, y, lr, steps):
    def step(_, p):
        _, grads = loss_and_grads(p, x, y)
        return {k: p[k] - lr * grads[k] for k in p}

    params = lax.fori_loop(0, steps, step, params)
    return params, loss(params, x, y)


train = minixla.jit(sgd_steps, donate_argnums=0, static_argnums=4)


def main(
    epochs: int = 5, steps: int = 50, lr: float = 0.1, seed: int = 0, verbose: bool = True
) -> dict:
    rng = np.random.default_rng(seed)
    x, y = make_data(rng)
    params = init_params(rng)
    initial = {k: v.copy() for k, v in params.items()}
    losses = []
    for epoch in range(epochs):
        params, loss = train(params, x, y, lr, steps)
        losses.append(float(loss))
        if verbose:
            print(f"after {(epoch + 1) * steps:4d} steps: loss {loss:.5f}")
    if verbose:
        aliases = train.lower(params, x, y, lr, steps).module.input_output_alias
        print(
            f"{len(aliases)} donated parameter buffers alias outputs; "
            f"{train.compile_count} compilation(s)"
        )
    return {
        "x": x,
        "y": y,
        "initial": initial,
        "params": params,
        "losses": losses,
        "lr": lr,
        "steps": steps,
    }


if __name__ == "__main__":
    main()
