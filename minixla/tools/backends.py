"""`minixla backends`: which backends exist and, for those that cannot run here, why."""

from __future__ import annotations


def add_arguments(parser) -> None:
    pass


def main(args) -> int:
    from ..backends import available

    for name, status in available().items():
        print(f"{name:12s} {'available' if status is True else 'unavailable: ' + str(status)}")
    return 0
