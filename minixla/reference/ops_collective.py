"""Interpreter handlers for collectives, replica-id and partition-id.

On a device thread of a multi-device run (runtime/rendezvous.py) a collective exchanges its
operands with the other devices of its group (ir/sharding.py's `participants` decides who
that is); outside one, every group is this device alone. Each `_combine_*` function is the
op's semantics: the values of all participants in group order in, every participant's
result out.
"""

from __future__ import annotations

import numpy as np

from ..errors import ExecutionError, UnsupportedError
from ..ir.sharding import participants, permute_peers
from . import rendezvous
from .evaluator import as_dtype


def _context_counts():
    context = rendezvous.current()
    if context is None:
        return None, 1, 1
    return context.device, context.replicas, context.partitions


def _group(instr) -> tuple[int, ...]:
    device, replicas, partitions = _context_counts()
    if device is None:
        return (0,)
    try:
        return participants(instr, device, replicas, partitions)
    except ValueError as exc:
        raise ExecutionError(f"{instr.opcode} %{instr.name}: {exc}") from None


def _check_same_shapes(instr, values: list) -> None:
    first = [np.shape(v) for v in values[0]]
    for rank, operands in enumerate(values[1:], 1):
        if [np.shape(v) for v in operands] != first:
            raise ExecutionError(
                f"{instr.opcode} %{instr.name}: participant {rank} has "
                f"operand shapes {[np.shape(v) for v in operands]}, "
                f"participant 0 has {first}"
            )


def _result_shape(instr):
    shape = instr.shape
    if instr.opcode.endswith("-start") and instr.opcode != "all-reduce-start" and shape.is_tuple:
        return shape.tuple_shapes[1]  # (operands, results, ...): the results
    return shape


def _result_leaves(instr):
    shape = _result_shape(instr)
    return list(shape.tuple_shapes) if shape.is_tuple else [shape]


def _run(instr, ops, combine):
    group = _group(instr)

    def checked(values):
        _check_same_shapes(instr, values)
        return combine(values)

    results = rendezvous.exchange(instr, group, list(ops), checked)
    leaves = _result_leaves(instr)
    results = [as_dtype(np.asarray(r), s) for r, s in zip(results, leaves)]
    return tuple(results) if _result_shape(instr).is_tuple else results[0]


def _reduce_all(ev, instr, values: list, k: int):
    comp = instr.attrs["to_apply"]
    total = values[0][k]
    for operands in values[1:]:
        total = np.asarray(ev.apply_scalar(comp, [total, operands[k]]))
    return total


def _all_reduce(ev, instr, ops):
    def combine(values):
        sums = [_reduce_all(ev, instr, values, k) for k in range(len(ops))]
        return [sums] * len(values)

    return _run(instr, ops, combine)


def _all_gather(ev, instr, ops):
    dim = instr.attrs["dimensions"][0]

    def combine(values):
        gathered = [np.concatenate([v[k] for v in values], axis=dim) for k in range(len(ops))]
        return [gathered] * len(values)

    return _run(instr, ops, combine)


def _split(array, pieces: int, dim: int, instr) -> list:
    if array.shape[dim] % pieces:
        raise ExecutionError(
            f"{instr.opcode} %{instr.name}: dimension {dim} of size "
            f"{array.shape[dim]} does not split into {pieces} pieces"
        )
    return np.split(array, pieces, axis=dim)


def _reduce_scatter(ev, instr, ops):
    dim = instr.attrs["dimensions"][0]

    def combine(values):
        pieces = [
            _split(_reduce_all(ev, instr, values, k), len(values), dim, instr)
            for k in range(len(ops))
        ]
        return [[p[rank] for p in pieces] for rank in range(len(values))]

    return _run(instr, ops, combine)


def _all_to_all(ev, instr, ops):
    dims = instr.attrs.get("dimensions")
    if not dims:  # tuple form: operand j goes to participant j

        def combine(values):
            if any(len(v) != len(values) for v in values):
                raise ExecutionError(
                    f"all-to-all %{instr.name}: {len(ops)} operands for a group of {len(values)}"
                )
            return [[v[rank] for v in values] for rank in range(len(values))]

        return _run(instr, ops, combine)
    dim = dims[0]

    def combine_split(values):
        n = len(values)
        chunks = [[_split(v[k], n, dim, instr) for v in values] for k in range(len(ops))]
        return [
            [
                np.concatenate([per_source[rank] for per_source in chunks[k]], axis=dim)
                for k in range(len(ops))
            ]
            for rank in range(n)
        ]

    return _run(instr, ops, combine_split)


def _collective_broadcast(ev, instr, ops):
    return _run(instr, ops, lambda values: [values[0]] * len(values))


def _collective_permute(ev, instr, ops):
    """One operand, or the combined form: several operands moved along the same pairs."""
    if len(ops) != 1 and not (instr.shape.is_tuple and len(instr.shape.tuple_shapes) == len(ops)):
        raise UnsupportedError(
            f"collective-permute %{instr.name}: the in-place form with "
            f"{len(ops)} operands is not supported"
        )
    device, replicas, partitions = _context_counts()
    if device is None:  # one device: it keeps its data only under a pair 0 -> 0
        group = (0,)
    else:
        replica, partition = divmod(device, partitions)
        group = (
            tuple(replica * partitions + p for p in range(partitions))
            if instr.attrs.get("channel_id") is not None
            else tuple(r * partitions + partition for r in range(replicas))
        )

    def combine(values):
        out = []
        for member in group:
            try:
                source, _ = permute_peers(instr, member, replicas, partitions)
            except ValueError as exc:
                raise ExecutionError(f"collective-permute %{instr.name}: {exc}") from None
            out.append(
                [
                    values[group.index(source)][k]
                    if source in group
                    else np.zeros_like(values[0][k])
                    for k in range(len(ops))
                ]
            )
        return out

    return _run_in_group(instr, ops, combine, group)


def _run_in_group(instr, ops, combine, group):
    def checked(values):
        _check_same_shapes(instr, values)
        return combine(values)

    results = rendezvous.exchange(instr, group, list(ops), checked)
    leaves = _result_leaves(instr)
    if len(ops) == 1:
        return as_dtype(np.asarray(results[0]), leaves[0])
    return tuple(as_dtype(np.asarray(r), leaf) for r, leaf in zip(results, leaves))


def _start(handler):
    """`-start`: the collective runs here; the value is (operands, results, context...) as
    the declared shape says (all-reduce-start's is just the results)."""

    def start(ev, instr, ops):
        result = handler(ev, instr, ops)
        if instr.opcode == "all-reduce-start" or not instr.shape.is_tuple:
            return result
        extra = [np.zeros((), s.numpy_dtype) for s in instr.shape.tuple_shapes[2:]]
        operands = ops[0] if len(ops) == 1 else tuple(ops)
        return (operands, result, *extra)

    return start


def _done(ev, instr, ops):
    start = instr.operand(0)
    if start.opcode == "all-reduce-start" or not start.shape.is_tuple:
        return ops[0]
    return ops[0][1]


def _replica_id(ev, instr, ops):
    context = rendezvous.current()
    return np.array(0 if context is None else context.replica, instr.shape.numpy_dtype)


def _partition_id(ev, instr, ops):
    context = rendezvous.current()
    return np.array(0 if context is None else context.partition, instr.shape.numpy_dtype)


HANDLERS = {
    "all-reduce": _all_reduce,
    "all-reduce-start": _start(_all_reduce),
    "all-gather": _all_gather,
    "all-gather-start": _start(_all_gather),
    "reduce-scatter": _reduce_scatter,
    "all-to-all": _all_to_all,
    "collective-broadcast": _collective_broadcast,
    "collective-permute": _collective_permute,
    "collective-permute-start": _start(_collective_permute),
    "all-reduce-done": _done,
    "all-gather-done": _done,
    "collective-permute-done": _done,
    "replica-id": _replica_id,
    "partition-id": _partition_id,
}
