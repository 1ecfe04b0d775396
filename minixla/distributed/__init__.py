"""Running one program over several processes: `mpiexec -n P python script.py`.

    import minixla.distributed as dist
    dist.initialize()
    t = dist.transport()
    total = t.allreduce(local_array)          # the same bits on every rank

Started without a launcher, the job is this single process. See docs/distributed.md.
"""

from .placement import (
    DevicePlacement,
    devices_per_process,
    local_devices,
    place,
    placements,
    processes_of,
)
from .rendezvous import DeviceFailedError, ProcessRendezvous
from .process import (
    initialize,
    is_initialized,
    launched_by_mpi,
    process_count,
    process_index,
    shutdown,
    transport,
)
from .transport import (
    REDUCTIONS,
    CollectiveMismatchError,
    CollectiveTimeoutError,
    DistributedError,
    LocalTransport,
    PointToPointTransport,
    RankFailedError,
    Transport,
)

__all__ = [
    "initialize",
    "shutdown",
    "is_initialized",
    "launched_by_mpi",
    "process_index",
    "process_count",
    "transport",
    "Transport",
    "PointToPointTransport",
    "LocalTransport",
    "REDUCTIONS",
    "DistributedError",
    "CollectiveTimeoutError",
    "RankFailedError",
    "CollectiveMismatchError",
    "DevicePlacement",
    "devices_per_process",
    "place",
    "placements",
    "local_devices",
    "processes_of",
    "ProcessRendezvous",
    "DeviceFailedError",
]
