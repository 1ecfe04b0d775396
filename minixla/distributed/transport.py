"""Collectives between processes for NumPy arrays, built on one point-to-point primitive.

A `Transport` moves arrays between the processes ("ranks") of one job. Every collective is
expressed through `route(what, sends, sources)`: this rank sends `sends[r]` to each rank `r`
and receives one value from each rank of `sources`. A transport only implements `route`
(over MPI in mpi_transport.py, or trivially for a job of one process), so the semantics of
each collective live once, here.

Reductions fold the gathered values in rank order on every rank, so each rank computes the
same sequence of floating-point operations and gets a bit-identical result, whatever the
reducer. This costs memory (every rank holds every contribution), not correctness.

The in-process counterpart is the multi-device runtime's rendezvous, where device threads
meet in shared memory; a process that runs several devices combines its own devices there
and uses a transport only between processes (see placement.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence, Union

import numpy as np

from ..errors import MinixlaError

Reducer = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Reduction:
    apply: Reducer
    dtype_kinds: str  # the NumPy dtype kinds it accepts: b bool, i/u integers, f/c floats


# The named reductions of allreduce and reduce_scatter. "and"/"or" are bitwise, which is
# logical for bool (XLA's pred) arrays.
REDUCTIONS: dict[str, Reduction] = {
    "sum": Reduction(np.add, "biufc"),
    "prod": Reduction(np.multiply, "biufc"),
    "max": Reduction(np.maximum, "biuf"),
    "min": Reduction(np.minimum, "biuf"),
    "and": Reduction(np.bitwise_and, "biu"),
    "or": Reduction(np.bitwise_or, "biu"),
}


class DistributedError(MinixlaError):
    """A collective between processes was misused or could not complete."""


class CollectiveTimeoutError(DistributedError):
    """Some ranks (`missing`) did not reach a collective within the timeout."""

    def __init__(self, message: str, missing: Sequence[int] = ()):
        super().__init__(message)
        self.missing = list(missing)


class RankFailedError(DistributedError):
    """Another rank raised, so the collective this rank waits in can never complete."""


class CollectiveMismatchError(CollectiveTimeoutError):
    """A collective timed out while the missing ranks waited in a different collective: the
    processes took different paths through the program."""


def describe(collective: str, name: str | None) -> str:
    """How errors name a collective: `all-reduce` or `all-reduce %sum.3`."""
    return f"{collective} %{name}" if name else collective


def reducer_for(op: Union[str, Reducer], dtype: np.dtype, collective: str) -> Reducer:
    if callable(op):
        return op
    if op not in REDUCTIONS:
        raise DistributedError(
            f"{collective}: unknown reduction {op!r}; the named ones are "
            f"{sorted(REDUCTIONS)}, or pass a function of two arrays"
        )
    if dtype.kind not in REDUCTIONS[op].dtype_kinds:
        raise DistributedError(f"{collective}: reduction {op!r} does not apply to {dtype} arrays")
    return REDUCTIONS[op].apply


def fold(values: Sequence[np.ndarray], reducer: Reducer, collective: str) -> np.ndarray:
    """((v0 . v1) . v2) ...: the same order on every rank."""
    total = np.asarray(values[0])
    for value in values[1:]:
        try:
            total = np.asarray(reducer(total, value))
        except TypeError as exc:
            raise DistributedError(
                f"{collective}: the reduction does not apply to {total.dtype} arrays ({exc})"
            ) from None
    return total


class Transport(Protocol):
    """What the multi-process runtime needs from a transport (see PointToPointTransport)."""

    rank: int
    size: int

    def route(
        self, what: str, sends: dict[int, Any], sources: Sequence[int], key=None
    ) -> dict[int, Any]: ...


class PointToPointTransport:
    """Every collective, written once on top of `route`. Subclasses set rank and size and
    implement `route`; `group` arguments are sorted lists of ranks (default: all)."""

    rank: int
    size: int

    def route(
        self, what: str, sends: dict[int, Any], sources: Sequence[int], key=None
    ) -> dict[int, Any]:
        """Sends sends[r] to each rank r, returns {s: what s sent} for each s of sources.
        `what` names the collective in errors; messages of one call share `key`."""
        raise NotImplementedError

    def _members(self, group, collective: str) -> list[int]:
        members = list(range(self.size)) if group is None else sorted(set(group))
        if any(not 0 <= r < self.size for r in members):
            raise DistributedError(
                f"{collective}: group {list(group)} names ranks outside 0..{self.size - 1}"
            )
        if self.rank not in members:
            raise DistributedError(f"{collective}: rank {self.rank} is not in group {members}")
        return members

    def _gather(self, value, members: list[int], what: str) -> list:
        received = self.route(what, {r: value for r in members}, members)
        return [received[r] for r in members]

    def allgather_objects(self, value, group=None, *, name=None) -> list:
        """Every member's `value`, in rank order (any picklable value)."""
        what = describe("all-gather", name)
        return self._gather(value, self._members(group, what), what)

    def allreduce(self, array, op: Union[str, Reducer] = "sum", group=None, *, name=None):
        what = describe("all-reduce", name)
        array = np.asarray(array)
        reducer = reducer_for(op, array.dtype, what)
        members = self._members(group, what)
        values = self._gather(array, members, what)
        _check_same_shapes(values, members, what)
        return fold(values, reducer, what)

    def allgather(self, array, axis: int = 0, group=None, *, name=None):
        """The members' arrays concatenated along `axis`, in rank order."""
        what = describe("all-gather", name)
        values = self._gather(np.asarray(array), self._members(group, what), what)
        return np.concatenate(values, axis=axis)

    def reduce_scatter(
        self, array, op: Union[str, Reducer] = "sum", axis: int = 0, group=None, *, name=None
    ):
        """The reduction of the members' arrays, cut into equal pieces along `axis`; member
        i gets piece i. Each piece is folded in rank order by its owner."""
        what = describe("reduce-scatter", name)
        array = np.asarray(array)
        reducer = reducer_for(op, array.dtype, what)
        members = self._members(group, what)
        pieces = _split(array, len(members), axis, what)
        received = self.route(what, dict(zip(members, pieces)), members)
        values = [received[r] for r in members]
        _check_same_shapes(values, members, what)
        return fold(values, reducer, what)

    def alltoall(self, array, split_axis: int = 0, concat_axis: int = 0, group=None, *, name=None):
        """Piece j of this rank's array (cut along `split_axis`) goes to member j; the pieces
        received are concatenated along `concat_axis` in rank order."""
        what = describe("all-to-all", name)
        members = self._members(group, what)
        pieces = _split(np.asarray(array), len(members), split_axis, what)
        received = self.route(what, dict(zip(members, pieces)), members)
        return np.concatenate([received[r] for r in members], axis=concat_axis)

    def permute(self, array, pairs: Sequence[tuple[int, int]], *, name=None):
        """collective-permute: for each (source, target) pair the source's array goes to the
        target. A rank that is no pair's target gets zeros, as in XLA."""
        what = describe("collective-permute", name)
        array = np.asarray(array)
        targets = [t for s, t in pairs if s == self.rank]
        sources = [s for s, t in pairs if t == self.rank]
        if len(sources) > 1 or len(set(t for _, t in pairs)) != len(pairs):
            raise DistributedError(f"{what}: pairs {list(pairs)} give a rank more than one source")
        ranks = {r for pair in pairs for r in pair}
        if any(not 0 <= r < self.size for r in ranks):
            raise DistributedError(
                f"{what}: pairs {list(pairs)} name ranks outside 0..{self.size - 1}"
            )
        received = self.route(what, {t: array for t in targets}, sources)
        return received[sources[0]] if sources else np.zeros_like(array)

    def sendrecv(self, array, dest: int, source: int, *, name=None):
        """Sends `array` to `dest` and returns what `source` sent to this rank."""
        what = describe("sendrecv", name)
        received = self.route(what, {dest: np.asarray(array)}, [source])
        return received[source]

    def broadcast(self, array, root: int = 0, group=None, *, name=None):
        what = describe("broadcast", name)
        members = self._members(group, what)
        if root not in members:
            raise DistributedError(f"{what}: root {root} is not in group {members}")
        sends = {r: np.asarray(array) for r in members} if self.rank == root else {}
        return self.route(what, sends, [root])[root]

    def barrier(self, group=None, *, name=None) -> None:
        what = describe("barrier", name)
        self._gather(None, self._members(group, what), what)


def _split(array: np.ndarray, pieces: int, axis: int, what: str) -> list[np.ndarray]:
    if array.ndim == 0 or array.shape[axis] % pieces:
        raise DistributedError(
            f"{what}: an array of shape {array.shape} does not split into "
            f"{pieces} equal pieces along axis {axis}"
        )
    return np.split(array, pieces, axis=axis)


def _check_same_shapes(values: list[np.ndarray], members: list[int], what: str) -> None:
    first = values[0]
    for rank, value in zip(members, values):
        if value.shape != first.shape or value.dtype != first.dtype:
            raise DistributedError(
                f"{what}: rank {rank} has a {value.dtype}{list(value.shape)}"
                f" array, rank {members[0]} a {first.dtype}"
                f"{list(first.shape)}"
            )


class LocalTransport(PointToPointTransport):
    """The transport of a job of one process: every message is to this process itself."""

    def __init__(self):
        self.rank, self.size = 0, 1

    def route(
        self, what: str, sends: dict[int, Any], sources: Sequence[int], key=None
    ) -> dict[int, Any]:
        return {source: sends[source] for source in sources}
