"""Which process runs which device when N devices are spread over P processes.

Devices are grouped per process in order: with N/P devices each, device d runs on process
d // (N/P) as that process's local device d % (N/P). A collective over a group of devices
combines the devices of one process in memory and crosses processes only between the
processes that `processes_of` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from .transport import DistributedError


@dataclass(frozen=True)
class DevicePlacement:
    device: int  # the global device id, 0..N-1
    process: int  # the rank that runs it
    local_device: int  # its index among that process's devices


def devices_per_process(num_devices: int, num_processes: int) -> int:
    if num_devices < 1 or num_processes < 1:
        raise DistributedError(
            f"{num_devices} devices over {num_processes} processes: both counts must be positive"
        )
    if num_devices % num_processes:
        raise DistributedError(
            f"{num_devices} devices do not spread evenly over "
            f"{num_processes} processes; the device count must be a "
            f"multiple of the process count"
        )
    return num_devices // num_processes


def place(device: int, num_devices: int, num_processes: int) -> DevicePlacement:
    per = devices_per_process(num_devices, num_processes)
    if not 0 <= device < num_devices:
        raise DistributedError(f"device {device} is not one of the {num_devices} devices")
    return DevicePlacement(device, device // per, device % per)


def placements(num_devices: int, num_processes: int) -> list[DevicePlacement]:
    """Every device's placement, by device id."""
    return [place(d, num_devices, num_processes) for d in range(num_devices)]


def local_devices(process: int, num_devices: int, num_processes: int) -> list[int]:
    """The global ids of the devices process `process` runs."""
    per = devices_per_process(num_devices, num_processes)
    if not 0 <= process < num_processes:
        raise DistributedError(f"process {process} is not one of the {num_processes} processes")
    return list(range(process * per, (process + 1) * per))


def processes_of(group: Iterable[int], num_devices: int, num_processes: int) -> list[int]:
    """The sorted ranks that run at least one device of `group`."""
    return sorted({place(d, num_devices, num_processes).process for d in group})
