"""Device threads meeting in a ProcessRendezvous: shared by test_distributed.py in one
process and by its `mpiexec` jobs (each process runs the threads of its own devices)."""

from __future__ import annotations

import threading

import numpy as np

import minixla.distributed as dist


def device_value(device: int, step: int) -> np.ndarray:
    return np.random.default_rng(1000 * step + device).normal(size=(3, 2)).astype(np.float32)


def _sum(values):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return [total] * len(values)


def _rotate(values):
    return [values[(i + 1) % len(values)] for i in range(len(values))]


def patterns(num_devices: int) -> dict[str, list[tuple[int, ...]]]:
    """Each pattern splits the devices into the groups of one collective."""
    every = tuple(range(num_devices))
    return {
        "all": [every],
        "strided": [every[0::2], every[1::2]],
        "pairs": [every[i : i + 2] for i in range(0, num_devices, 2)],
    }


def expected(group, device, step, combine):
    return combine([device_value(d, step) for d in group])[group.index(device)]


def run_devices(transport, num_devices: int, steps: int = 3, fail_device=None):
    """Runs this process's device threads; returns {device: error} for the devices that
    raised. Checks every result against the same combine on all devices' values."""
    rendezvous = dist.ProcessRendezvous(num_devices, transport, timeout=20)
    errors = {}

    def device_thread(device):
        try:
            for step in range(steps):
                if device == fail_device and step == 1:
                    raise ValueError(f"device {device} failed on purpose")
                for name, groups in patterns(num_devices).items():
                    group = next(g for g in groups if device in g)
                    for combine in (_sum, _rotate):
                        key = (name, combine.__name__, group, step)
                        got = rendezvous.exchange(
                            key,
                            group,
                            device,
                            device_value(device, step),
                            combine,
                            f"{name}{combine.__name__}",
                        )
                        want = expected(group, device, step, combine)
                        assert np.array_equal(got, want), (device, key)
        except BaseException as exc:
            errors[device] = exc
            rendezvous.fail(device, exc)

    threads = [
        threading.Thread(target=device_thread, args=(d,))
        for d in dist.local_devices(transport.rank, num_devices, transport.size)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors
