"""Training PyTorch models with torch.optim through `torch.compile(..., backend="minixla")`.

A small CNN (convolution, BatchNorm, max pooling) learns to classify random images, and a
small transformer encoder learns to sort short sequences of tokens. The forward and the
backward graphs run as minixla-compiled HLO; the optimizers are torch's own.
Run `python examples/torch_train.py [--backend interpreter|cpu] [--steps N]`.
"""

import argparse
import copy

import torch
import torch.nn as nn

import minixla.torch  # noqa: F401  (registers the "minixla" backend)


class SmallCNN(nn.Module):
    def __init__(self, classes: int = 4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(16 * 2 * 2, classes)

    def forward(self, images):
        return self.head(torch.flatten(self.features(images), 1))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 8, width: int = 32, length: int = 6):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.1)
        self.encoder = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.out(self.encoder(self.embed(tokens) + self.position))


def cnn_task(generator):
    images = torch.randn(16, 1, 8, 8, generator=generator)
    labels = torch.randint(0, 4, (16,), generator=generator)
    return SmallCNN(), images, labels


def sort_task(generator):
    tokens = torch.randint(0, 8, (16, 6), generator=generator)
    return TinyTransformer(), tokens, tokens.sort(-1).values


def train(model, inputs, targets, steps: int, make_optimizer):
    optimizer = make_optimizer(model.parameters())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        logits = model(inputs)
        loss = nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        )
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main(steps: int = 20, backend: str = "interpreter", verbose: bool = True):
    """Trains both models compiled by minixla and, from the same start, eagerly; returns
    {task: (minixla losses, eager losses)}."""
    results = {}
    tasks = {
        "cnn (SGD)": (cnn_task, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
        "transformer (Adam)": (sort_task, lambda p: torch.optim.Adam(p, lr=3e-3)),
    }
    for name, (task, make_optimizer) in tasks.items():
        torch.manual_seed(0)
        model, inputs, targets = task(torch.Generator().manual_seed(1))
        eager = copy.deepcopy(model)
        compiled = torch.compile(model, backend="minixla", options={"backend": backend})
        ours = train(compiled, inputs, targets, steps, make_optimizer)
        theirs = train(eager, inputs, targets, steps, make_optimizer)
        results[name] = (ours, theirs)
        if verbose:
            print(
                f"{name}: loss {ours[0]:.4f} -> {ours[-1]:.4f} with minixla "
                f"(eager: {theirs[0]:.4f} -> {theirs[-1]:.4f})"
            )
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="interpreter", choices=minixla.torch.BACKENDS)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    main(args.steps, args.backend)
