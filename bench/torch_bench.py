#!/usr/bin/env python
"""minixla's torch.compile backend next to eager PyTorch and Inductor on small models.

    python bench/torch_bench.py [--backend cpu|interpreter] [--repeat N] [--only NAME ...]
                                [--clock wall|cpu] [--large]

For each model it prints the median time of a forward pass (no grad) and of a
forward+backward pass, for eager torch, `torch.compile` with Inductor (its default) and
`torch.compile(backend="minixla")`, and the ratio of each to eager. The three systems are
timed interleaved (one call of each per round, after warm-up calls that compile), so machine
noise hits them alike. Compile time is excluded; the first-call time is printed separately.
A system that fails on a model is reported as such and left out of that model's rounds.

The default models are small (a call costs tens of microseconds of framework overhead, which
dynamo and AOTAutograd add to Inductor and minixla alike); `--large` runs the same six
architectures at sizes where the arithmetic dominates (`<name>_large`).

`--clock cpu` times each call by the CPU time of the process (all its threads) instead of the
wall clock: on a machine shared with other work, waiting for a core then does not count, while
work on extra threads still does.

Everything computes on one thread: torch is told so, and the process is pinned to one core,
which minixla's BLAS and kernel thread counts follow (blas_threads.py). Left to choose,
minixla gives a large GEMM two BLAS threads on an idle two-core machine; under `--clock cpu`
OpenBLAS's idle worker then spins on after each call and its CPU time counts (a 256x128x1024
GEMM: 0.46 ms of wall time, 12 ms of process time, against 0.77 ms on one thread).
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # this checkout's minixla
import minixla.torch  # noqa: E402,F401  (registers the "minixla" backend)


class ConvNet(nn.Module):
    def __init__(self, width: int = 16, image: int = 16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Linear(2 * width * (image // 4) ** 2, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.body(x), 1))


class ResidualBlock(nn.Module):
    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class AttentionLM(nn.Module):
    def __init__(self, vocab: int = 64, width: int = 32, heads: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)

    def forward(self, tokens):
        x = self.embed(tokens)
        length = tokens.shape[1]
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        y, _ = self.attn(x, x, x, attn_mask=mask, need_weights=False)
        return self.out(self.norm(x + y))


class LSTMRegressor(nn.Module):
    def __init__(self, features: int = 16, hidden: int = 32):
        super().__init__()
        self.lstm = nn.LSTM(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.lstm(x)[0][:, -1])


MODELS = {
    "mlp": (
        lambda: nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 10)),
        lambda: torch.randn(32, 64),
    ),
    "cnn": (ConvNet, lambda: torch.randn(8, 3, 16, 16)),
    "resnet_block": (ResidualBlock, lambda: torch.randn(4, 16, 8, 8)),
    "transformer_layer": (
        lambda: nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
        lambda: torch.randn(4, 16, 32),
    ),
    "attention_lm": (AttentionLM, lambda: torch.randint(0, 64, (4, 16))),
    "lstm": (LSTMRegressor, lambda: torch.randn(4, 8, 16)),
}
LARGE = {
    "mlp_large": (
        lambda: nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 10)),
        lambda: torch.randn(256, 512),
    ),
    "cnn_large": (lambda: ConvNet(32, 32), lambda: torch.randn(32, 3, 32, 32)),
    "resnet_block_large": (lambda: ResidualBlock(64), lambda: torch.randn(16, 64, 16, 16)),
    "transformer_layer_large": (
        lambda: nn.TransformerEncoderLayer(256, 8, 1024, dropout=0.0, batch_first=True),
        lambda: torch.randn(8, 128, 256),
    ),
    "attention_lm_large": (
        lambda: AttentionLM(2000, 256, 8),
        lambda: torch.randint(0, 2000, (8, 128)),
    ),
    "lstm_large": (lambda: LSTMRegressor(128, 256), lambda: torch.randn(32, 8, 128)),
}


def systems(model, backend: str):
    return {
        "eager": model,
        "inductor": torch.compile(copy.deepcopy(model)),
        "minixla": torch.compile(
            copy.deepcopy(model), backend="minixla", options={"backend": backend}
        ),
    }


def forward(fn, x):
    with torch.no_grad():
        fn(x)


def forward_backward(fn, x):
    fn(x).float().sum().backward()


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def bench(name: str, backend: str, repeat: int, clock=time.perf_counter) -> list[str]:
    factory, make_input = {**MODELS, **LARGE}[name]
    torch.manual_seed(0)
    x = make_input()
    lines = []
    for mode, step in (("forward", forward), ("fwd+bwd", forward_backward)):
        torch._dynamo.reset()
        fns = systems(factory(), backend)
        first, failed = {}, {}
        for sys_name, fn in list(fns.items()):  # compile and warm up
            start = time.perf_counter()
            try:
                step(fn, x)
                step(fn, x)
            except Exception as exc:  # a system that cannot run this model is reported
                failed[sys_name] = type(exc).__name__
                del fns[sys_name]
            first[sys_name] = time.perf_counter() - start
        times = {sys_name: [] for sys_name in fns}
        for _ in range(repeat):
            for sys_name, fn in fns.items():
                start = clock()
                step(fn, x)
                times[sys_name].append(clock() - start)
        medians = {k: statistics.median(v) for k, v in times.items()}
        eager = medians["eager"]
        cells = " | ".join(
            f"fails ({failed[k]})"
            if k in failed
            else f"{medians[k] * 1e3:.3f} ms ({medians[k] / eager:.2f}x)"
            for k in ("eager", "inductor", "minixla")
        )
        lines.append(f"| {name} | {mode} | {cells} | {first['minixla']:.1f} s |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=minixla.torch.BACKENDS)
    parser.add_argument("--repeat", type=int, default=21)
    parser.add_argument("--only", nargs="+", choices=sorted({**MODELS, **LARGE}))
    parser.add_argument("--clock", default="wall", choices=sorted(CLOCKS))
    parser.add_argument("--large", action="store_true", help="the realistic sizes")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if hasattr(os, "sched_setaffinity"):  # one core for minixla's BLAS and kernels too
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    torch._dynamo.config.allow_rnn = True  # dynamo traces into nn.LSTM instead of breaking
    print(
        f"torch {torch.__version__}, minixla backend {args.backend}, "
        f"median of {args.repeat}, one thread, {args.clock} clock"
    )
    print("| model | pass | eager | inductor | minixla | minixla first call |")
    print("|---|---|---|---|---|---|")
    for name in args.only or (LARGE if args.large else MODELS):
        for line in bench(name, args.backend, args.repeat, CLOCKS[args.clock]):
            print(line, flush=True)


if __name__ == "__main__":
    main()
