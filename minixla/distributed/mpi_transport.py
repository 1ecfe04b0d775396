"""The transport between the processes of an `mpiexec` job, over mpi4py.

Messages travel on two private duplicates of MPI_COMM_WORLD: one for collective data, one
for failure notices. Each data message carries a key (the collective's description and
which occurrence of it this is, or the caller's own key) and waits in a mailbox until the
collective with that key asks for it, so ranks never take each other's data for another
collective, and threads of one process can route with their own keys. All calls are
non-blocking and polled against a deadline: a rank waiting in a collective notices both a
timeout (naming the ranks that did not arrive) and a failure notice from a rank that raised.

When an exception leaves the script, the failing rank prints it, notifies every other rank,
gives them a moment to report, and ends the job with MPI_Abort, so no rank hangs.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Any, Sequence

import numpy as np

from .transport import (
    CollectiveMismatchError,
    CollectiveTimeoutError,
    DistributedError,
    PointToPointTransport,
    RankFailedError,
)

_DATA_TAG = 1
_BYTES_TAG = 3
_NOTICE_TAG = 2
# How long a failing rank waits for the others to report their own error before aborting.
OUTPUT_DRAIN_SECONDS = 0.5
ABORT_GRACE_SECONDS = 2.0
_POLL_SLEEP_MAX = 0.002
_SPIN_SECONDS = 0.02


class _Letter:
    """A message in the mailbox; an array's bytes may still be arriving."""

    def __init__(self, what: str, payload, request=None):
        self.what, self._payload, self._request = what, payload, request

    def arrived(self) -> bool:
        if self._request is not None and self._request.Test():
            self._request = None
        return self._request is None

    def value(self):
        return self._payload


class _KeepAlive:
    """A send request that holds on to the buffer it sends from until it completes."""

    def __init__(self, request, buffer):
        self.request, self.buffer = request, buffer

    def Test(self) -> bool:
        return self.request.Test()


class MPITransport(PointToPointTransport):
    def __init__(self, timeout: float):
        from mpi4py import MPI

        self._mpi = MPI
        world = MPI.COMM_WORLD
        self.rank, self.size = world.Get_rank(), world.Get_size()
        self.timeout = timeout
        self._data = world.Dup()
        self._notices = world.Dup()
        self._occurrences: dict[tuple, int] = {}
        self._mailbox: dict[tuple, _Letter] = {}  # (source, key) -> what it sent
        self._failed: dict[int, str] = {}  # rank -> its error, from notices
        self._broken: DistributedError | None = None  # the error that ended this transport
        self._lock = threading.Lock()
        self._notice_requests: list = []

    # -- the primitive -------------------------------------------------------------------
    def route(
        self, what: str, sends: dict[int, Any], sources: Sequence[int], key=None
    ) -> dict[int, Any]:
        """Messages are matched by `key`, or by default by `what` and how many messages for
        `what` the sender sent the receiver before (so collectives over any group of ranks
        match). Threads of one process may route concurrently with explicit keys."""
        with self._lock:
            self._raise_if_broken(what)
            requests = []
            received = {dest: value for dest, value in sends.items() if dest == self.rank}
            for dest, value in sends.items():
                if dest != self.rank:
                    their_key = key if key is not None else self._count(("to", dest, what))
                    requests += [(dest, r) for r in self._send(their_key, what, value, dest)]
            expected = {
                source: key if key is not None else self._count(("from", source, what))
                for source in sources
                if source != self.rank
            }
        pending = [s for s in sources if s != self.rank]
        start = time.monotonic()
        deadline = start + self.timeout
        sleep = 0.0
        while True:
            with self._lock:
                try:
                    self._raise_if_broken(what)
                    self._drain()
                    for source in list(pending):
                        address = (source, expected[source])
                        letter = self._mailbox.get(address)
                        if letter is not None and letter.arrived():
                            received[source] = self._mailbox.pop(address).value()
                            pending.remove(source)
                    requests = [(dest, r) for dest, r in requests if not r.Test()]
                    if not pending and not requests:
                        return received
                    self._check_notices(what)
                    if time.monotonic() > deadline:
                        self._timed_out(what, pending, [dest for dest, _ in requests])
                except DistributedError as exc:
                    self._broken = self._broken or exc
                    raise
            # MPI progresses only inside MPI calls: spin at first, then poll politely
            if time.monotonic() - start > _SPIN_SECONDS:
                sleep = min(_POLL_SLEEP_MAX, sleep + 0.0001)
            time.sleep(sleep)

    def _count(self, pair: tuple) -> tuple:
        self._occurrences[pair] = self._occurrences.get(pair, 0) + 1
        return (pair[2], self._occurrences[pair])

    def _raise_if_broken(self, what: str) -> None:
        if self._broken is not None:
            # after another rank's failure, still a RankFailedError: the cause is elsewhere
            kind = (
                RankFailedError if isinstance(self._broken, RankFailedError) else DistributedError
            )
            raise kind(
                f"{what} on rank {self.rank}: the transport is unusable after an "
                f"earlier failure ({self._broken})"
            )

    def _send(self, key, what: str, value, dest: int) -> list:
        """A NumPy array goes as a small header and its raw bytes (no pickling of the
        data); any other value is pickled with the header."""
        if isinstance(value, np.ndarray) and not value.dtype.hasobject:
            data = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
            header = (key, what, (value.dtype, value.shape))
            return [
                self._data.isend(header, dest=dest, tag=_DATA_TAG),
                _KeepAlive(
                    self._data.Isend([data, self._mpi.BYTE], dest=dest, tag=_BYTES_TAG), data
                ),
            ]
        return [self._data.isend((key, what, value), dest=dest, tag=_DATA_TAG)]

    def _drain(self) -> None:
        """Moves every message that has arrived into the mailbox, whoever it is for. The
        bytes of an array follow its header in order, so their receive is posted at once."""
        status = self._mpi.Status()
        while self._data.iprobe(source=self._mpi.ANY_SOURCE, tag=_DATA_TAG, status=status):
            source = status.Get_source()
            key, what, payload = self._data.recv(source=source, tag=_DATA_TAG)
            if isinstance(payload, tuple):
                dtype, shape = payload
                data = np.empty(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, np.uint8)
                request = self._data.Irecv([data, self._mpi.BYTE], source=source, tag=_BYTES_TAG)
                letter = _Letter(what, data.view(dtype).reshape(shape), request)
            else:
                letter = _Letter(what, payload)
            self._mailbox[(source, key)] = letter

    def _timed_out(self, what, missing, unfinished_sends):
        stuck = sorted(set(missing) | set(unfinished_sends))
        elsewhere = sorted(
            {
                (source, letter.what)
                for (source, _), letter in self._mailbox.items()
                if source in stuck
            }
        )
        hint = "".join(f"; rank {source} is in {their_what}" for source, their_what in elsewhere)
        error = CollectiveMismatchError if elsewhere else CollectiveTimeoutError
        raise error(
            f"{what} timed out after {self.timeout:g} s on rank {self.rank}: ranks {stuck} "
            f"did not arrive{hint} (set the timeout with MINIXLA_COLLECTIVE_TIMEOUT or "
            f"initialize(collective_timeout=...))",
            missing=stuck,
        )

    # -- failure notices -----------------------------------------------------------------
    def _poll_notices(self) -> None:
        while self._notices.iprobe(source=self._mpi.ANY_SOURCE, tag=_NOTICE_TAG):
            rank, text = self._notices.recv(source=self._mpi.ANY_SOURCE, tag=_NOTICE_TAG)
            self._failed.setdefault(rank, text)

    def _check_notices(self, what: str) -> None:
        self._poll_notices()
        if self._failed:
            rank = min(self._failed)
            raise RankFailedError(
                f"{what} on rank {self.rank}: rank {rank} failed, so the "
                f"collective cannot complete: {self._failed[rank]}"
            )

    def notify_failure(self, error: BaseException) -> None:
        """Tells every other rank that this one stopped with `error`."""
        text = f"{type(error).__name__}: {error}"
        for dest in range(self.size):
            if dest != self.rank:
                self._notice_requests.append(
                    self._notices.isend((self.rank, text), dest=dest, tag=_NOTICE_TAG)
                )

    def abort(self, error: BaseException) -> None:
        """Ends the job after `error` escaped on this rank: notify, let the others report
        for a moment, then MPI_Abort."""
        self.notify_failure(error)
        deadline = time.monotonic() + ABORT_GRACE_SECONDS
        while time.monotonic() < deadline:
            self._poll_notices()
            if len(self._failed) >= self.size - 1:
                break
            time.sleep(0.01)
        sys.stderr.write(
            f"[minixla rank {self.rank}] aborting the job after {type(error).__name__}\n"
        )
        sys.stderr.flush()
        # mpiexec drops output still in flight when the job is killed: let it drain first.
        time.sleep(OUTPUT_DRAIN_SECONDS)
        self._mpi.COMM_WORLD.Abort(1)

    def close(self) -> None:
        for comm in (self._data, self._notices):
            comm.Free()


def report_and_abort(transport: MPITransport, kind, error, tb) -> None:
    """sys.excepthook of a multi-process job: the traceback with the rank, then abort."""
    lines = traceback.format_exception(kind, error, tb)
    sys.stderr.write(
        "".join(
            f"[rank {transport.rank}] {line}" for line in "".join(lines).splitlines(keepends=True)
        )
    )
    sys.stderr.flush()
    transport.abort(error)
