"""Timing shared by the benchmarks: every contender runs alone in its own block, in turns.

Called in turns call by call, one contender's idle threads (OpenBLAS's and XLA's workers spin
for a while after each call) slow the other's next call: jax.jit on the GPT-2 block took
5.8 ms run alone and 10.0 ms between minixla's calls. So each round gives every contender a
block of BLOCK_SECONDS after a pause of SETTLE_SECONDS, and the first call of each block
(waking threads, refilling caches) is not counted. Rounds alternate the contenders, so load
from other work on a shared machine falls on all of them alike; medians are reported.
"""

from __future__ import annotations

import statistics
import time

BLOCK_SECONDS = 0.25
SETTLE_SECONDS = 0.25


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternating_blocks(contenders: list, rounds: int) -> list[list[float]]:
    """Run times of each callable in `contenders` (None: skipped, no times) over `rounds`."""
    times: list[list[float]] = [[] for _ in contenders]
    for _ in range(rounds):
        for fn, out in zip(contenders, times):
            if fn is None:
                continue
            time.sleep(SETTLE_SECONDS)
            fn()
            deadline = time.perf_counter() + BLOCK_SECONDS
            out.append(timed(fn))
            while time.perf_counter() < deadline and len(out) < 1000 * rounds:
                out.append(timed(fn))
    return times


def median(times: list[float]) -> float | None:
    return statistics.median(times) if times else None
