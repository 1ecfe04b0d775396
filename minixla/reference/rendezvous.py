"""Where the devices of one multi-device run meet: collectives exchange values here.

Each device thread runs inside `running_on(DeviceContext)`. A collective calls
`exchange(instr, group, value, combine)`: every device of the group deposits its value under
a key (instruction, group, how many times this device has run the instruction); the last one
to arrive computes every participant's result with `combine` and wakes the others. A device
that is missing after the timeout, or one that fails, ends the whole run with an error that
names the instruction and the devices that did not arrive; nobody waits forever.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import ExecutionError

DEFAULT_TIMEOUT_SECONDS = 60.0


class CollectiveTimeoutError(ExecutionError):
    """A collective waited longer than the timeout for some devices of its group."""


class CollectiveAbortedError(ExecutionError):
    """Another device failed, so this device's collective can never complete."""


@dataclass
class _Slot:
    size: int
    inputs: dict[int, Any] = field(default_factory=dict)
    outputs: list | None = None
    error: BaseException | None = None
    taken: int = 0


class Rendezvous:
    """The meeting point of one run on `devices` devices."""

    def __init__(self, devices: int, timeout: float = DEFAULT_TIMEOUT_SECONDS):
        self.devices = devices
        self.timeout = timeout
        self._cond = threading.Condition()
        self._slots: dict[tuple, _Slot] = {}
        self._failed: tuple[int, BaseException] | None = None

    def fail(self, device: int, error: BaseException) -> None:
        """Device `device` stopped with `error`: wake every waiter so it gives up."""
        with self._cond:
            if self._failed is None:
                self._failed = (device, error)
            self._cond.notify_all()

    def exchange(
        self,
        key: tuple,
        group: tuple[int, ...],
        device: int,
        value,
        combine: Callable[[list], list],
        what: str,
    ):
        rank = group.index(device)
        with self._cond:
            slot = self._slots.setdefault(key, _Slot(len(group)))
            slot.inputs[rank] = value
            if len(slot.inputs) == slot.size:
                try:
                    slot.outputs = combine([slot.inputs[i] for i in range(slot.size)])
                except BaseException as exc:  # every participant reports it
                    slot.error = exc
                self._cond.notify_all()
            else:
                self._wait(slot, group, what)
            slot.taken += 1
            if slot.taken == slot.size:
                del self._slots[key]
            if slot.error is not None:
                raise slot.error
            return slot.outputs[rank]

    def _wait(self, slot: _Slot, group, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while slot.outputs is None and slot.error is None:
            if self._failed is not None:
                raise CollectiveAbortedError(
                    f"{what}: device {self._failed[0]} failed, so the collective cannot complete"
                )
            left = deadline - time.monotonic()
            if left <= 0:
                arrived = sorted(group[r] for r in slot.inputs)
                missing = [d for d in group if d not in arrived]
                raise CollectiveTimeoutError(
                    f"{what} timed out after {self.timeout:g} s: devices {missing} did not "
                    f"arrive (arrived: {arrived}); a device took another path through the "
                    f"program, or the replica groups do not match"
                )
            self._cond.wait(left)


@dataclass
class DeviceContext:
    """What a collective needs to know on one device thread."""

    device: int
    replicas: int
    partitions: int
    rendezvous: Rendezvous
    occurrences: Counter = field(default_factory=Counter)

    @property
    def replica(self) -> int:
        return self.device // self.partitions

    @property
    def partition(self) -> int:
        return self.device % self.partitions


_local = threading.local()


def current() -> DeviceContext | None:
    """The device this thread runs as, or None outside a multi-device run."""
    return getattr(_local, "context", None)


@contextmanager
def running_on(context: DeviceContext):
    saved = current()
    _local.context = context
    try:
        yield context
    finally:
        _local.context = saved


def exchange(instr, group: tuple[int, ...], value, combine: Callable[[list], list]):
    """Runs `combine` on the values of every device in `group` (in group order) and returns
    this device's entry of its result. Outside a multi-device run the group is this device."""
    context = current()
    if context is None or len(group) == 1:
        return combine([value])[0]
    context.occurrences[(instr.name, group)] += 1
    key = (instr.name, group, context.occurrences[(instr.name, group)])
    return context.rendezvous.exchange(
        key, group, context.device, value, combine, f"{instr.opcode} %{instr.name}"
    )
