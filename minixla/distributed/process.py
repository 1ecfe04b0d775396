"""This process's place in a job: `initialize()`, `process_index()`, `process_count()`.

Under a launcher (`mpiexec -n P python script.py`) rank and size come from MPI; started
plainly, the job is this one process and no MPI library is loaded. The launcher is
recognized by the environment it gives each rank (MPICH/Hydra, Intel MPI, Open MPI, PMIx).
"""

from __future__ import annotations

import os
import sys

from ..errors import MinixlaError
from .transport import LocalTransport, PointToPointTransport

DEFAULT_COLLECTIVE_TIMEOUT_SECONDS = 60.0
TIMEOUT_ENV = "MINIXLA_COLLECTIVE_TIMEOUT"
_LAUNCHER_ENV = ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK")

_transport: PointToPointTransport | None = None
_saved_excepthook = None


def launched_by_mpi() -> bool:
    return any(name in os.environ for name in _LAUNCHER_ENV)


def _timeout_from(collective_timeout) -> float:
    source = "collective_timeout"
    if collective_timeout is None:
        collective_timeout = os.environ.get(TIMEOUT_ENV, DEFAULT_COLLECTIVE_TIMEOUT_SECONDS)
        source = TIMEOUT_ENV
    try:
        seconds = float(collective_timeout)
    except (TypeError, ValueError):
        seconds = -1.0
    if not seconds > 0:
        raise MinixlaError(
            f"{source}={collective_timeout!r}: the collective timeout must be "
            f"a positive number of seconds"
        )
    return seconds


def initialize(collective_timeout: float | None = None) -> PointToPointTransport:
    """Joins the job this process belongs to and returns its transport. Idempotent: a later
    call returns the same transport (a given timeout replaces the current one).

    collective_timeout: seconds a collective waits for the other ranks before it fails
    naming them (default $MINIXLA_COLLECTIVE_TIMEOUT, else 60)."""
    global _transport, _saved_excepthook
    timeout = _timeout_from(collective_timeout)
    if _transport is not None:
        if collective_timeout is not None and hasattr(_transport, "timeout"):
            _transport.timeout = timeout
        return _transport
    if not launched_by_mpi():
        _transport = LocalTransport()
        return _transport
    try:
        from .mpi_transport import MPITransport, report_and_abort

        _transport = MPITransport(timeout)
    except ImportError as exc:
        raise MinixlaError(
            f"this process was started by an MPI launcher, but mpi4py cannot "
            f"be imported ({exc}); install it with "
            f"pip install 'minixla[distributed]'"
        ) from None
    if _transport.size > 1:
        _saved_excepthook = sys.excepthook
        transport = _transport
        sys.excepthook = lambda kind, error, tb: report_and_abort(transport, kind, error, tb)
    return _transport


def shutdown() -> None:
    """Leaves the job: frees this module's communicators and restores sys.excepthook.
    MPI itself is finalized when the interpreter exits. Idempotent."""
    global _transport, _saved_excepthook
    if _transport is None:
        return
    close = getattr(_transport, "close", None)
    if close is not None:
        close()
    if _saved_excepthook is not None:
        sys.excepthook = _saved_excepthook
        _saved_excepthook = None
    _transport = None


def is_initialized() -> bool:
    return _transport is not None


def transport() -> PointToPointTransport:
    """The transport of this job (initializing it if needed)."""
    return initialize() if _transport is None else _transport


def process_index() -> int:
    """This process's rank, 0..process_count()-1."""
    return transport().rank


def process_count() -> int:
    return transport().size
