"""Donated arguments: the parameter leaves a module's caller gives up, checked before a call
and accounted for after it (docs/semantics.md, "Donation").

A parameter leaf is donated when an `input_output_alias` entry or a `buffer_donor` names it.
Before the call every donated NumPy array must be donatable: writeable, C-contiguous, aligned,
and sharing no memory with another argument. For a must-alias entry an array that is not is an
ExecutionError; otherwise a backend that writes into donated buffers gets a private copy and
the caller's array is left alone. After the call, a donated array whose memory holds the
result aliased to it is consumed: that result comes back as a new view of the memory, and the
caller's array is made read-only, so a later write through it raises. Any other result that
shares memory with an argument is copied: results never alias arguments unless donated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ExecutionError
from ..ir.module import HloModule

Index = tuple[int, ...]

try:
    from numpy.lib.array_utils import byte_bounds
except ImportError:  # NumPy 1.x
    byte_bounds = np.byte_bounds


@dataclass(frozen=True)
class Donations:
    """kinds: (parameter, index) -> "must-alias", "may-alias" or "donor";
    outputs: output index -> the (parameter, index) it aliases."""

    kinds: dict[tuple[int, Index], str]
    outputs: dict[Index, tuple[int, Index]]

    @staticmethod
    def of(module: HloModule, matched=()) -> "Donations":
        """From the header; `matched`: AliasEntry pairs a backend made for buffer donors."""
        kinds: dict[tuple[int, Index], str] = {
            (n, tuple(i)): "donor" for n, i in module.buffer_donors
        }
        outputs = {}
        for entry in module.input_output_alias:
            key = (entry.param_number, tuple(entry.param_index))
            kinds[key] = entry.kind
            outputs[tuple(entry.output_index)] = key
        for entry in matched:
            outputs.setdefault(
                tuple(entry.output_index), (entry.param_number, tuple(entry.param_index))
            )
        return Donations(kinds, outputs)


def leaf(value, index: Index):
    for i in index:
        value = value[i]
    return value


def _with_leaf(value, index: Index, new):
    if not index:
        return new
    parts = list(value)
    parts[index[0]] = _with_leaf(parts[index[0]], index[1:], new)
    return tuple(parts)


def _array_leaves(value, index: Index = ()) -> list:
    """(index, array) for every array leaf of nested tuples and lists (a loop, not a
    generator: it runs on every call of every executable)."""
    if isinstance(value, np.ndarray):
        return [(index, value)]
    out: list = []
    if isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            if isinstance(v, np.ndarray):
                out.append((index + (i,), v))
            elif isinstance(v, (tuple, list)):
                out.extend(_array_leaves(v, index + (i,)))
    return out


def _overlapping(arrays: list[np.ndarray]) -> set[int]:
    """Positions in `arrays` of those that share bytes with another one (by byte bounds, a
    sweep over the sorted intervals)."""
    spans = sorted((*byte_bounds(a), k) for k, a in enumerate(arrays) if a.nbytes)
    found: set[int] = set()
    furthest = None
    for n, (lo, hi, k) in enumerate(spans):
        if furthest is not None and lo < furthest:
            found.add(k)
        if n + 1 < len(spans) and spans[n + 1][0] < hi:
            found.add(k)
        furthest = hi if furthest is None else max(furthest, hi)
    return found


def _shared(paths: list, leaves: list):
    """A test `(path, array) -> shares memory with another argument leaf`: pairwise bounds
    checks for a few leaves (about a microsecond each), one sorted sweep for many."""
    if len(leaves) <= 16:
        position = {p: k for k, p in enumerate(paths)}
        return lambda path, array: any(
            np.may_share_memory(array, other)
            for k, other in enumerate(leaves)
            if k != position[path]
        )
    found = {paths[k] for k in _overlapping(leaves)}
    return lambda path, array: path in found


def _not_donatable(array: np.ndarray) -> str | None:
    if not array.flags.writeable:
        return "it is read-only (a donated array is consumed by the call that takes it)"
    if not array.flags.c_contiguous:
        return "it is not C-contiguous"
    if not array.flags.aligned:
        return "it is not aligned"
    return None


def take(donations: Donations, args: list, arrays: list, *, writes: bool, module: HloModule):
    """(arrays, accepted): `arrays` (checked arguments) with a private copy for each donated
    leaf that is not donatable when the backend writes into donated buffers, and the
    (parameter, index) keys whose memory the backend may hold a result in (none when it never
    writes into arguments: a pass-through result is then copied like any other). `args` are
    the caller's own values: a leaf check_arguments had to make (a Python scalar) is private."""
    accepted: set[tuple[int, Index]] = set()
    if not donations.kinds:
        return arrays, accepted
    flat = _array_leaves(arrays)
    paths, leaves = [p for p, _ in flat], [a for _, a in flat]
    shared = None
    for (number, index), kind in donations.kinds.items():
        path = (number,) + index
        array = leaf(arrays, path)
        if not isinstance(array, np.ndarray):
            continue
        private = not isinstance(leaf(args, path), np.ndarray)
        if not private and shared is None:
            shared = _shared(paths, leaves)
        reason = (
            None
            if private
            else "it shares memory with another argument"
            if shared(path, array)
            else _not_donatable(array)
        )
        if reason is None:
            if writes:
                accepted.add((number, index))
        elif kind == "must-alias":
            name = module.entry.parameter(number).name
            at = f" at {{{','.join(map(str, index))}}}" if index else ""
            raise ExecutionError(
                f"{module.name}: argument {number} ({name}){at} must alias an "
                f"output (input_output_alias must-alias), but {reason}; pass "
                f"a writeable C-contiguous array of its own"
            )
        elif writes:
            arrays = list(_with_leaf(arrays, path, np.array(array)))
            accepted.add((number, index))
    return arrays, accepted


def _all_fresh(result, arrays: list) -> bool:
    """The result is an array or a flat tuple of arrays, each owning its memory, and no
    argument (all arrays) is one of them or views one."""
    leaves = (result,) if type(result) is np.ndarray else result
    if type(leaves) is not tuple:
        return False
    for value in leaves:
        if type(value) is not np.ndarray or value.base is not None:
            return False
    results = {id(value) for value in leaves}  # one pass over each side (a graph with
    # many saved activations has many of both)
    for a in arrays:
        if not isinstance(a, np.ndarray) or id(a) in results or id(a.base) in results:
            return False
    return True


def settle(donations: Donations, accepted: set, result, arrays: list, shape) -> object:
    """The result as the caller gets it: aliased outputs held in accepted donated memory
    become new views (their arguments made read-only); anything else sharing an argument's
    memory is copied."""
    if not accepted and _all_fresh(result, arrays):
        return result  # the common case: fresh arrays, array arguments
    args = [a for _, a in _array_leaves(arrays)]
    if not args:
        return result
    owners = {id(a) for a in args} | {id(a.base) for a in args if a.base is not None}
    consumed = []
    for index, value in _array_leaves(result):
        if value.base is None and id(value) not in owners:
            continue  # storage of its own that no argument views
        source = donations.outputs.get(index)
        if source in accepted and shape.subshape(index).is_array:
            donated = leaf(arrays, (source[0],) + source[1])
            if (
                isinstance(donated, np.ndarray)
                and np.may_share_memory(value, donated)
                and not any(np.may_share_memory(value, a) for a in args if a is not donated)
            ):
                result = _with_leaf(result, index, value.view())
                consumed.append(donated)
                continue
        if any(np.may_share_memory(value, a) for a in args):
            result = _with_leaf(result, index, value.copy())
    for array in consumed:
        array.flags.writeable = False
    return result
