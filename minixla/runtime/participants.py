"""How many devices each collective of a module needs, checked before compiling.

Executables run on one device. A collective whose replica groups (or whose shapes: an
all-gather that concatenates two pieces) name more participants than that cannot be
evaluated faithfully, so it is a compile-time UnsupportedError naming the instruction
instead of a wrong-shaped result. collective-permute is not checked: on one device its
pairs decide whether the device receives its own data or zeros.
"""

from __future__ import annotations

import re

from ..errors import UnsupportedError
from ..ir.module import HloModule

# Collectives whose replica groups list the devices that combine their data.
_GROUPED = frozenset(
    {
        "all-reduce",
        "all-reduce-start",
        "all-gather",
        "all-gather-start",
        "all-to-all",
        "reduce-scatter",
        "collective-broadcast",
        "ragged-all-to-all",
    }
)
_IOTA_GROUPS = re.compile(r"\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*<=")


def check_participants(module: HloModule, devices: int = 1) -> None:
    """Raises UnsupportedError for the first collective that needs more than `devices`."""
    for instr in module.all_instructions():
        if instr.opcode not in _GROUPED:
            continue
        needed = max(_group_size(module, instr), _size_from_shapes(instr))
        if needed > devices:
            raise UnsupportedError(
                f"{instr.opcode} %{instr.name} combines data from {needed} devices, but the "
                f"module runs on {devices}; multi-device execution is not supported"
            )


def _header_int(module: HloModule, key: str) -> int:
    try:
        return max(int(module.header_attrs.get(key, "1")), 1)
    except ValueError:
        return 1


def _group_size(module: HloModule, instr) -> int:
    text = str(instr.attrs.get("replica_groups", "{}")).replace(" ", "")
    iota = _IOTA_GROUPS.match(text)
    if iota:
        size = int(iota.group(2))
    elif text in ("{}", "{{}}", ""):
        size = _header_int(module, "replica_count")  # empty groups: every replica
    else:
        size = max(
            len([t for t in group.split(",") if t])
            for group in re.findall(r"\{([\d,]*)\}", text) or [""]
        )
    if "channel_id" in instr.attrs and not instr.attrs.get("use_global_device_ids"):
        size *= _header_int(module, "num_partitions")  # cross-replica-and-partition
    return size


def _size_from_shapes(instr) -> int:
    """all-gather grows its dimension, reduce-scatter shrinks it, by the participant count."""
    if (
        instr.opcode not in ("all-gather", "all-gather-start", "reduce-scatter")
        or "dimensions" not in instr.attrs
    ):
        return 1
    axis = instr.attrs["dimensions"][0]
    shape = instr.shape
    if instr.opcode == "all-gather-start" and shape.is_tuple:  # (operands, results)
        shape = shape.tuple_shapes[-1]
    results = shape.tuple_shapes if shape.is_tuple else (shape,)
    sizes = [1]
    for operand, result in zip(instr.operands, results):
        small, large = (
            (operand.shape, result) if instr.opcode != "reduce-scatter" else (result, operand.shape)
        )
        if axis < small.rank and small.dims[axis] > 0:
            sizes.append(large.dims[axis] // small.dims[axis])
    return max(sizes)
