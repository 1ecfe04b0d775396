"""The state of `rng`: a counter of draws that belongs to one executable.

Each draw seeds a NumPy generator from the counter, so an executable gives the same sequence
of values on every backend, and two executables of one program (a fresh compile, or a hit of
the compile memo that shares the compiled code) each start their own sequence. The executable
makes its stream the active one while it runs; an evaluator used on its own (constant folding,
tests) draws from its own.
"""

from __future__ import annotations

import contextvars

import numpy as np


class RandomStream:
    def __init__(self) -> None:
        self.draws = 0

    def generator(self) -> np.random.Generator:
        """A generator for the next draw."""
        seed, self.draws = self.draws, self.draws + 1
        return np.random.default_rng(seed)


_active: contextvars.ContextVar[RandomStream | None] = contextvars.ContextVar(
    "minixla_random_stream", default=None
)


def active_stream() -> RandomStream | None:
    return _active.get()


def activate(stream: RandomStream) -> contextvars.Token:
    return _active.set(stream)


def deactivate(token: contextvars.Token) -> None:
    _active.reset(token)
