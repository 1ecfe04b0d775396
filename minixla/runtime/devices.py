"""The CPU devices of this process: `minixla.devices()`.

Their number comes from $MINIXLA_NUM_CPU_DEVICES, else XLA's
`--xla_force_host_platform_device_count=N` in $XLA_FLAGS, else 1. All of them live in one
process; a multi-device executable runs one thread per device (runtime/spmd.py), and in a
job of several processes each process runs only its share of the program's devices.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import MinixlaError

_XLA_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\S+)")


@dataclass(frozen=True)
class Device:
    id: int
    platform: str = "cpu"

    def __repr__(self) -> str:
        return f"CpuDevice(id={self.id})"


def device_count() -> int:
    text = os.environ.get("MINIXLA_NUM_CPU_DEVICES")
    source = "MINIXLA_NUM_CPU_DEVICES"
    if text is None:
        match = _XLA_FLAG.search(os.environ.get("XLA_FLAGS", ""))
        text, source = (
            (match.group(1), "--xla_force_host_platform_device_count") if match else ("1", "")
        )
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise MinixlaError(f"{source}={text!r}: the device count must be a positive integer")
    return count


def devices() -> list[Device]:
    """The CPU devices available to multi-device executables, ids 0..N-1."""
    return [Device(i) for i in range(device_count())]
