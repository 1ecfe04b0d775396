"""Donated arguments in the cpu driver: which entry instructions write their result straight
into the argument buffer it aliases, and the exit that returns every aliased output there.

Buffer assignment (passes/buffer_assignment.py) decides whether an output may take a donated
parameter's buffer: the parameter is dead when the output is written, or read elementwise by
the writer. The driver writes there directly when it agrees: the writer is a kernel (one loop
nest when it reads the argument), a thunk that does not read it, or a dynamic-update-slice or
scatter (these update the argument in place), and no fallback, call, loop or conditional sees
the argument (their results may be NumPy views of it). Every other aliased output (an alias
buffer assignment skipped, a module without buffer assignment, a loop's result) is copied into
its argument at the exit, so on cpu an aliased output always comes back in the donated buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..codegen.plan import BUFFER_KINDS, MAY_ALIAS_KINDS, VIEW_KINDS


@dataclass
class EntryDonations:
    targets: dict = field(default_factory=dict)  # (id(instr), leaf) -> argument expression
    in_place: set = field(default_factory=set)  # ids of DUS/scatter updating an argument


def aliases(module, assignment) -> list:
    """The AliasEntry of every output the entry returns in a donated argument's buffer."""
    if assignment is None:
        return list(module.input_output_alias)
    return list(assignment.aliases) + [entry for entry, _ in assignment.skipped_aliases]


def argument(entry) -> str:
    """The driver expression of the donated argument leaf."""
    return f"p{entry.param_number}" + "".join(f"[{i}]" for i in entry.param_index)


def direct_writes(comp, order, decisions, assignment, can_share) -> EntryDonations:
    found = EntryDonations()
    if assignment is None:
        return found
    for entry in assignment.aliases:
        param = comp.parameter(entry.param_number)
        storage = assignment.allocation_of(param, entry.param_index)
        views = _views_of(param, order, decisions)
        if views is None:
            continue
        shape = param.shape.subshape(entry.param_index)
        for instr in order:
            how, spec = decisions[id(instr)]
            if how not in BUFFER_KINDS:
                continue
            for leaf, leaf_shape in instr.shape.leaves():
                if (
                    leaf_shape.dims != shape.dims
                    or leaf_shape.dtype != shape.dtype
                    or _allocation(assignment, instr, leaf) is not storage
                ):
                    continue
                reading = [k for k, op in enumerate(instr.operands) if id(op) in views]
                if how in ("dus", "scatter") and reading == [0]:
                    found.in_place.add(id(instr))
                elif not reading or (
                    how == "kernel"
                    and spec.loop_nests == 1
                    and all(can_share(instr, k) for k in reading)
                ):
                    found.targets[(id(instr), leaf)] = argument(entry)
    return found


def _allocation(assignment, instr, leaf):
    try:
        return assignment.allocation_of(instr, leaf)
    except KeyError:
        return None


def _views_of(param, order, decisions) -> set | None:
    """Ids of the entry values that are `param`'s storage seen through views; None when a
    lowering that may return a view of its operands sees it."""
    group = {id(param)}
    for instr in order:
        if not any(id(op) in group for op in instr.operands):
            continue
        how = decisions[id(instr)][0]
        if how in MAY_ALIAS_KINDS:
            return None
        if how in VIEW_KINDS:
            group.add(id(instr))
    return group


def exit_expression(fn, value, kinds, shape, outputs: dict, plain_exit, source) -> str:
    """The entry's returned expression when some outputs alias arguments (`outputs`: output
    index -> argument expression). Other outputs that need copies are taken first, then
    every aliased output is put into its argument (by into_donated)."""
    leaves = list(_leaves(value, kinds, shape))
    parts = {}
    for index, leaf_value, leaf_kinds, leaf_shape in leaves:
        if index in outputs and leaf_shape.is_array:
            continue
        expr = plain_exit(leaf_value, leaf_kinds, leaf_shape, True)
        if expr != source(leaf_value):
            var = fn.b.fresh_name("e")
            fn.lines.append(f"{var} = {expr}")
            expr = var
        parts[index] = expr
    donated = [
        (index, outputs[index], source(v))
        for index, v, _, s in leaves
        if index in outputs and s.is_array
    ]
    names = [fn.b.fresh_name("d") for _ in donated]
    fn.lines.append(
        f"{''.join(n + ', ' for n in names)}= _into_donated("
        f"({''.join(t + ', ' for _, t, _ in donated)}), "
        f"({''.join(v + ', ' for _, _, v in donated)}))"
    )
    parts.update((index, name) for (index, _, _), name in zip(donated, names))
    return _nested(shape, parts)


def _leaves(value, kinds, shape, index=()):
    if not shape.is_tuple:
        yield index, value, kinds, shape
        return
    for i, sub in enumerate(shape.tuple_shapes):
        part = value[i] if isinstance(value, tuple) else f"{value}[{i}]"
        yield from _leaves(part, kinds[i], sub, index + (i,))


def _nested(shape, parts, index=()) -> str:
    if not shape.is_tuple:
        return parts[index]
    return (
        "("
        + "".join(_nested(s, parts, index + (i,)) + ", " for i, s in enumerate(shape.tuple_shapes))
        + ")"
    )


def into_donated(targets: tuple, values: tuple) -> tuple:
    """Each value in its donated argument: left as it is when it is already there, else
    copied in. A value that may overlap another argument is copied first, so no write
    clobbers what a later one reads. An output of another shape (input_output_alias lets a
    bf16[10,11,12] argument hold its bf16[11,10,12] transpose) is written as a view of the
    argument's bytes; one of another byte size cannot live there and is returned as is."""
    values = tuple(
        v
        if v is t or not any(np.may_share_memory(v, u) for u in targets if u is not t)
        else np.array(v)
        for t, v in zip(targets, values)
    )
    out = []
    for target, value in zip(targets, values):
        if value is not target and (value.shape, value.dtype) != (target.shape, target.dtype):
            if value.nbytes != target.nbytes or not target.flags.c_contiguous:
                out.append(value)
                continue
            view = target.reshape(-1).view(np.uint8).view(value.dtype).reshape(value.shape)
            view[...] = value
            out.append(view)
            continue
        if value is not target:
            target[...] = value
        out.append(target)
    return tuple(out)
