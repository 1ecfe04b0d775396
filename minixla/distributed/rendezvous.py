"""Where the device threads of several processes meet: the multi-process rendezvous.

It has the interface of the in-process rendezvous of the multi-device runtime
(`exchange(key, group, device, value, combine, what)` and `fail(device, error)`), so the
runtime can hand its device threads either one. The devices of `group` that this process
runs deposit their values here; the last of them to arrive sends them to the other
processes that run devices of the group (one message per process, matched by `key`),
receives theirs, and runs `combine` on all values in group order. Every process runs the
same `combine` on the same values, so all get the same results; each local device takes its
own entry. A group inside one process never touches the transport.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .placement import local_devices, place, processes_of
from .transport import CollectiveTimeoutError, DistributedError, PointToPointTransport


class DeviceFailedError(DistributedError):
    """A device of this process failed, so the collective cannot complete."""


@dataclass
class _Slot:
    size: int  # how many devices of the group this process runs
    inputs: dict[int, Any] = field(default_factory=dict)  # device -> value
    outputs: list | None = None
    error: BaseException | None = None
    taken: int = 0


class ProcessRendezvous:
    """The meeting point of one run of `num_devices` devices spread over the transport's
    processes (placement.py decides which process runs which device)."""

    def __init__(
        self, num_devices: int, transport: PointToPointTransport, timeout: float | None = None
    ):
        self.num_devices = num_devices
        self.transport = transport
        self.timeout = timeout if timeout is not None else getattr(transport, "timeout", 60.0)
        place(0, num_devices, transport.size)  # checks that the devices spread evenly
        self._cond = threading.Condition()
        self._slots: dict[tuple, _Slot] = {}
        self._failed: tuple[int, BaseException] | None = None

    def process_of(self, device: int) -> int:
        return place(device, self.num_devices, self.transport.size).process

    def fail(self, device: int, error: BaseException) -> None:
        """Device `device` of this process stopped with `error`: wake this process's
        waiters and tell the other processes."""
        with self._cond:
            first = self._failed is None
            if first:
                self._failed = (device, error)
            self._cond.notify_all()
        notify = getattr(self.transport, "notify_failure", None)
        if first and notify is not None:
            notify(error)

    def exchange(
        self,
        key: tuple,
        group: tuple[int, ...],
        device: int,
        value,
        combine: Callable[[list], list],
        what: str,
    ):
        if self.process_of(device) != self.transport.rank:
            raise DistributedError(
                f"{what}: device {device} runs on process "
                f"{self.process_of(device)}, not on {self.transport.rank}"
            )
        me = self.transport.rank
        local = [d for d in group if self.process_of(d) == me]
        with self._cond:
            slot = self._slots.setdefault(key, _Slot(len(local)))
            slot.inputs[device] = value
            leader = len(slot.inputs) == slot.size
        if leader:
            self._combine(slot, key, group, combine, what)
        else:
            self._wait(slot, local, what)
        with self._cond:
            slot.taken += 1
            if slot.taken == slot.size:
                del self._slots[key]
        if slot.error is not None:
            raise slot.error
        return slot.outputs[group.index(device)]

    def _combine(self, slot: _Slot, key, group, combine, what) -> None:
        outputs, error = None, None
        try:
            values = dict(slot.inputs)
            processes = processes_of(group, self.num_devices, self.transport.size)
            if len(processes) > 1:
                values = self._across_processes(values, processes, key, what)
            outputs = combine([values[d] for d in group])
        except BaseException as exc:  # every local participant reports it
            error = exc
        with self._cond:
            slot.outputs, slot.error = outputs, error
            self._cond.notify_all()

    def _across_processes(self, values: dict, processes: list[int], key, what) -> dict:
        try:
            received = self.transport.route(
                what, {p: values for p in processes}, processes, key=("rendezvous",) + tuple(key)
            )
        except CollectiveTimeoutError as exc:
            devices = {
                r: local_devices(r, self.num_devices, self.transport.size) for r in exc.missing
            }
            raise type(exc)(f"{exc}; those ranks run devices {devices}", exc.missing) from None
        merged = {}
        for process in processes:
            merged.update(received[process])
        return merged

    def _wait(self, slot: _Slot, local: list[int], what: str) -> None:
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while slot.outputs is None and slot.error is None:
                if self._failed is not None:
                    raise DeviceFailedError(
                        f"{what}: device {self._failed[0]} failed, so the "
                        f"collective cannot complete"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = [d for d in local if d not in slot.inputs]
                    raise CollectiveTimeoutError(
                        f"{what} timed out after {self.timeout:g} s on process "
                        f"{self.transport.rank}: devices {missing} did not arrive (arrived: "
                        f"{sorted(slot.inputs)})"
                    )
                self._cond.wait(min(left, 0.05))
