"""HloVerifier rules for collectives, host transfers, infeed and shardings of control flow.

`COLLECTIVE_RULES` maps an opcode to a check `(instr) -> None` raising `RuleFailure`, run
with verifier_rules.INSTRUCTION_RULES; `check_module_collectives(module)` holds the rules
that compare instructions with each other (channels, layout-constrained all-reduces).
Replica-group sizes are checked only where the groups are listed: an empty `{}` means every
participant, whose count the module text does not always give (nor does it always give the
partition count that cross-replica-and-partition groups multiply by). Send shapes are not
checked: XLA's own pass tests load sends with two-element, non-tuple and mismatched shapes.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from .sharding import CROSS_REPLICA_AND_PARTITION, group_mode
from .shapes import Shape
from .verifier_rules import RuleFailure

if TYPE_CHECKING:
    from .instruction import HloInstruction

_GLOBAL_IDS = ("all-reduce", "all-reduce-start", "all-gather", "all-gather-start", "reduce-scatter")


def _group_size(instr) -> int | None:
    """The size of the listed replica groups, None for `{}` or groups of several sizes."""
    groups = instr.attrs.get("replica_groups")
    sizes = {len(g) for g in groups.groups} if groups is not None else set()
    return sizes.pop() if len(sizes) == 1 else None


def _global_device_ids(instr) -> None:
    """use_global_device_ids=true names devices by global id: it needs a channel_id and the
    groups spelled out."""
    if not instr.attrs.get("use_global_device_ids"):
        return
    if instr.attrs.get("channel_id") is None:
        raise RuleFailure("use_global_device_ids", "use_global_device_ids=true needs a channel_id")
    groups = instr.attrs.get("replica_groups")
    if groups is None or not groups.groups:
        raise RuleFailure(
            "use_global_device_ids", "use_global_device_ids=true needs non-empty replica_groups"
        )


def _results(instr) -> list:
    """One result shape per operand: the shape itself for one operand, else a tuple of N."""
    shape, count = instr.shape, instr.operand_count
    if count == 1:
        return [shape]
    if not shape.is_tuple or len(shape.tuple_shapes) != count:
        raise RuleFailure(
            "collective shape",
            f"{instr.opcode} of {count} operands returns a tuple of {count}, declared {shape}",
        )
    return list(shape.tuple_shapes)


def _uniform_groups(instr) -> None:
    """XLA's CheckReplicaGroups: every group of an all-gather, reduce-scatter or all-to-all
    has one size (all-reduce's may differ)."""
    groups = instr.attrs.get("replica_groups")
    if groups is not None and len({len(g) for g in groups.groups}) > 1:
        raise RuleFailure(
            "replica groups", f"{instr.opcode} needs replica groups of one size, got {groups}"
        )


def _shard_count(instr) -> int | None:
    """How many pieces an all-gather joins or a reduce-scatter cuts (XLA's GetSubgroupSize):
    the group size, times the partition count across replicas and partitions; None where
    the text leaves it to the module's configuration."""
    size = _group_size(instr)
    if size is None:
        return None
    if group_mode(instr) != CROSS_REPLICA_AND_PARTITION:
        return size
    module = instr.parent.module if instr.parent is not None else None
    partitions = module.header_attrs.get("num_partitions") if module is not None else None
    return size * int(partitions) if partitions is not None else None


def _gathered(instr) -> None:
    """all-gather and reduce-scatter of N > 1 operands return a tuple of N; along the
    gathered dim each result is the operand times the shard count (all-gather) or the
    operand is the result times it (reduce-scatter), as XLA's shape inference has it."""
    _global_device_ids(instr)
    _uniform_groups(instr)
    results = _results(instr)
    count = _shard_count(instr)
    dim = instr.attrs["dimensions"][0]
    if count is None:
        return
    for operand, result in zip(instr.operands, results):
        if not (operand.shape.is_array and result.is_array) or dim >= operand.shape.rank:
            continue
        have, got = operand.shape.dims[dim], result.dims[dim] if dim < result.rank else None
        if instr.opcode == "reduce-scatter" and have % count:
            raise RuleFailure(
                "shard count",
                f"reduce-scatter over groups of {count} cannot cut dim {dim} of {operand.shape}",
            )
        want = have * count if instr.opcode == "all-gather" else have // count
        if got != want:
            raise RuleFailure(
                "shard count",
                f"{instr.opcode} over groups of {count} turns dim {dim} of {operand.shape} "
                f"into {want}, declared {result}",
            )


def _maybe_tuple(shapes) -> Shape:
    return shapes[0] if len(shapes) == 1 else Shape.tuple_of(shapes)


def _start_shape(instr, want) -> None:
    if not instr.shape.compatible(want):
        raise RuleFailure(
            f"{instr.opcode} shape", f"{instr.opcode} returns {want}, declared {instr.shape}"
        )


def _all_reduce_start(instr) -> None:
    """all-reduce-start returns what all-reduce does: the operand, or a tuple of several."""
    _global_device_ids(instr)
    _start_shape(instr, _maybe_tuple([o.shape for o in instr.operands]))


def _all_gather_start(instr) -> None:
    """all-gather-start returns (operands, gathered results), each a tuple for several."""
    _global_device_ids(instr)
    _uniform_groups(instr)
    shape = instr.shape
    if not shape.is_tuple or len(shape.tuple_shapes) != 2:
        raise RuleFailure(
            "all-gather-start shape",
            f"all-gather-start returns (operands, results), declared {shape}",
        )
    _start_shape(
        instr,
        Shape.tuple_of([_maybe_tuple([o.shape for o in instr.operands]), shape.tuple_shapes[1]]),
    )


def _collective_permute_start(instr) -> None:
    """collective-permute-start returns (input, output, context...): the operand twice
    first, for the one-operand form."""
    _collective_permute(instr)
    if instr.operand_count != 1:
        return
    shape, operand = instr.shape, instr.operand(0).shape
    if (
        not shape.is_tuple
        or len(shape.tuple_shapes) < 2
        or not all(s.compatible(operand) for s in shape.tuple_shapes[:2])
    ):
        raise RuleFailure(
            "collective-permute-start shape",
            f"collective-permute-start returns ({operand}, {operand}, context...), "
            f"declared {shape}",
        )


def _all_to_all(instr) -> None:
    """The tuple form (no split dimension) sends operand i to the i-th member of the group."""
    _uniform_groups(instr)
    size = _group_size(instr)
    if (
        instr.attrs.get("dimensions") is None
        and instr.operand_count > 1
        and size is not None
        and instr.operand_count != size
    ):
        raise RuleFailure(
            "all-to-all operands",
            f"{instr.operand_count} operands for replica groups of {size}: one per member needed",
        )


def _is_index(shape) -> bool:
    """An index tuple: (s32[], s32[], ...)."""
    return shape.is_tuple and all(s.is_array and not s.rank for s in shape.tuple_shapes)


def _index_lists(shape) -> int | None:
    """How many index tuples `shape` gives: 1 for an index tuple, n for a tuple of n of them;
    None if it is neither."""
    if _is_index(shape):
        return 1
    if not shape.is_tuple or not all(_is_index(s) for s in shape.tuple_shapes):
        return None
    return len(shape.tuple_shapes)


def _in_place_slices(instr) -> int:
    """The combined form `collective-permute(input, output, input offsets, output offsets)`:
    inputs and outputs are one buffer or tuples of as many, each with a list of index tuples
    (one per slice). Returns how many slices each buffer has."""
    shapes = [o.shape for o in instr.operands]
    inputs, outputs = shapes[0], shapes[1]
    count = len(inputs.tuple_shapes) if inputs.is_tuple else None
    if inputs.is_tuple != outputs.is_tuple or (
        count is not None and len(outputs.tuple_shapes) != count
    ):
        raise RuleFailure(
            "collective-permute buffers",
            f"input buffers {inputs} and output buffers {outputs} do not match",
        )
    slices: set[int] = set()
    for what, offsets in (("input", shapes[2]), ("output", shapes[3])):
        per_buffer = (
            [offsets]
            if count is None
            else list(offsets.tuple_shapes)
            if offsets.is_tuple and len(offsets.tuple_shapes) == count
            else [None]
        )
        lists = [None if s is None else _index_lists(s) for s in per_buffer]
        counts = [n for n in lists if n is not None]
        if len(counts) < len(lists):
            raise RuleFailure(
                "collective-permute offsets",
                f"{what} offsets {offsets} do not list index tuples for each {what} buffer",
            )
        slices.update(counts)
    return max(slices)


def _collective_permute(instr) -> None:
    """Each device sends to at most one target and receives from at most one source; the
    combined in-place form may repeat one once per slice it moves."""
    in_place = instr.operand_count == 4 and instr.attrs.get("slice_sizes") is not None
    allowed = _in_place_slices(instr) if in_place else 1
    pairs = instr.attrs["source_target_pairs"].pairs
    for side, ids in (("source", [p[0] for p in pairs]), ("target", [p[1] for p in pairs])):
        often = [i for i, n in Counter(ids).items() if n > allowed]
        if often:
            times = "more than once" if allowed == 1 else f"more than {allowed} times"
            raise RuleFailure("source_target_pairs", f"device {often[0]} is a {side} {times}")


def _ragged_all_to_all(instr) -> None:
    """input_offsets, send_sizes, output_offsets and recv_sizes: one shape, of rank 1 or 2."""
    shapes = [o.shape for o in instr.operands[2:]]
    if (
        any(not s.is_array or s.rank > 2 for s in shapes)
        or len({(s.dims, s.dtype) for s in shapes}) != 1
    ):
        raise RuleFailure(
            "ragged-all-to-all operands",
            f"offsets and sizes must share one "
            f"shape of rank 1 or 2, got "
            f"{', '.join(map(str, shapes))}",
        )


def _tuple_of(instr, parts: list[str]) -> None:
    shape = instr.shape
    ok = shape.is_tuple and len(shape.tuple_shapes) == len(parts)
    for i, part in enumerate(parts if ok else ()):
        sub = shape.tuple_shapes[i]
        ok = ok and (
            part == "T"
            or (part == "token" and sub.is_token)
            or (part == "u32" and sub.is_array and sub.dtype == "u32" and not sub.rank)
        )
    if not ok:
        raise RuleFailure(
            f"{instr.opcode} shape",
            f"{instr.opcode} returns ({', '.join(parts)}[]), declared {shape}",
        )


def _infeed(instr) -> None:
    _tuple_of(instr, ["T", "token"])


def _recv(instr) -> None:
    _tuple_of(instr, ["T", "u32", "token"])


def _recv_done(instr) -> None:
    _tuple_of(instr, ["T", "token"])


def _sharding_text(instr) -> str | None:
    sharding = instr.attrs.get("sharding")
    return None if sharding is None else str(sharding)


def _consistent_shardings(instr, parts) -> None:
    """Where several of `parts` carry a sharding, they carry the same one."""
    seen = [(what, _sharding_text(i)) for what, i in parts if _sharding_text(i) is not None]
    if len({text for _, text in seen}) > 1:
        listed = ", ".join(f"{what} {text}" for what, text in seen)
        raise RuleFailure(
            "inconsistent sharding", f"{instr.opcode} state shardings differ: {listed}"
        )


def _while_sharding(instr) -> None:
    body, condition = instr.attrs.get("body"), instr.attrs.get("condition")
    if body is None or condition is None or not body.parameters or not condition.parameters:
        return
    _consistent_shardings(
        instr,
        [
            ("while", instr),
            ("body parameter", body.parameters[0]),
            ("body root", body.root),
            ("condition parameter", condition.parameters[0]),
        ],
    )


def _conditional_sharding(instr) -> None:
    branches = [c for c in instr.called_computations if c.has_root]
    _consistent_shardings(
        instr, [("conditional", instr)] + [(f"%{c.name} root", c.root) for c in branches]
    )


COLLECTIVE_RULES = {
    "all-reduce": _global_device_ids,
    "all-reduce-start": _all_reduce_start,
    "all-gather": _gathered,
    "reduce-scatter": _gathered,
    "all-gather-start": _all_gather_start,
    "all-to-all": _all_to_all,
    "collective-permute": _collective_permute,
    "collective-permute-start": _collective_permute_start,
    "ragged-all-to-all": _ragged_all_to_all,
    "infeed": _infeed,
    "recv": _recv,
    "recv-done": _recv_done,
    "while": _while_sharding,
    "conditional": _conditional_sharding,
}


def check_module_collectives(module) -> tuple[HloInstruction, RuleFailure] | None:
    """(instruction, failure) for instructions that disagree with each other, else None:
    host transfers on one channel send one shape with one set of frontend attributes, and
    all-reduces are either all layout-constrained or none is."""
    channels: dict[int, HloInstruction] = {}
    constrained: dict[bool, HloInstruction] = {}
    for comp in module.computations:
        for instr in comp.instructions:
            if (
                instr.opcode == "send"
                and instr.attrs.get("is_host_transfer")
                and instr.attrs.get("channel_id") is not None
            ):
                first = channels.setdefault(instr.attrs["channel_id"], instr)
                if not first.operand(0).shape.compatible(instr.operand(0).shape) or str(
                    first.attrs.get("frontend_attributes")
                ) != str(instr.attrs.get("frontend_attributes")):
                    return instr, RuleFailure(
                        "host transfer channel",
                        f"channel "
                        f"{instr.attrs['channel_id']} also carries "
                        f"%{first.name}, with another shape or "
                        f"frontend attributes",
                    )
            if instr.opcode == "all-reduce":
                constrained.setdefault(bool(instr.attrs.get("constrain_layout")), instr)
    if len(constrained) == 2:
        return constrained[True], RuleFailure(
            "constrain_layout",
            f"the module mixes "
            f"layout-constrained all-reduces with "
            f"unconstrained ones (%"
            f"{constrained[False].name})",
        )
    return None


__all__ = ["COLLECTIVE_RULES", "check_module_collectives"]
