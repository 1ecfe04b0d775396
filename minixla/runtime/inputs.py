"""Seeded random arguments for a module's entry, with valid values for index operands.

Integer parameters that feed gather/scatter indices or dynamic-slice starts (through
shape-preserving ops and into called computations) get values inside the operand's bounds, so
random runs index real elements; other integers are small, floats are standard normal and
preds are fair coins. `minixla run` and `minixla.testing` both draw their inputs here.
"""

from __future__ import annotations

import numpy as np
from ..ir.dtypes import iinfo

# Ops an index may pass through on its way to the op that uses it as an index.
_INDEX_PASSTHROUGH = (
    "convert",
    "reshape",
    "broadcast",
    "bitcast",
    "copy",
    "transpose",
    "slice",
    "concatenate",
    "get-tuple-element",
    "tuple",
    "clamp",
    "select",
)
_CALLS = ("call", "while", "conditional", "fusion")


def random_arguments(module, seed: int = 0) -> list:
    """One random argument per entry parameter (tuples nest), reproducible from `seed`."""
    rng = np.random.default_rng(seed)
    return [_random_value(rng, p.shape, _index_bound(p)) for p in module.entry.parameters]


def _random_value(rng, shape, bound: int | None):
    if shape.is_tuple:
        return tuple(_random_value(rng, s, None) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    etype, dims = shape.element_type, shape.dims
    dtype = shape.numpy_dtype
    if etype.kind == "pred":
        return rng.integers(0, 2, dims).astype(bool)
    if etype.is_integer:
        info = iinfo(dtype)  # ml_dtypes' for int4/uint4
        low, high = (0, bound) if bound is not None else (max(info.min, -8), min(info.max, 8))
        return rng.integers(max(low, info.min), min(high, info.max) + 1, dims).astype(dtype)
    if etype.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(dtype)
    return rng.standard_normal(dims).astype(np.float32).astype(dtype)


def _index_bound(param) -> int | None:
    """The largest start index valid wherever `param` is used as an index, or None."""
    if param.shape.is_tuple or not param.shape.element_type.is_integer:
        return None
    bounds = []
    stack, seen = [param], set()
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        for user in instr.users:
            positions = [i for i, o in enumerate(user.operands) if o is instr]
            if user.opcode in _INDEX_PASSTHROUGH:
                stack.append(user)
            elif user.opcode in _CALLS:  # follow the value into the called computations
                stack.extend(_callee_parameters(user, positions))
            bounds.extend(b for i in positions for b in [_bound_as_index(user, i)] if b is not None)
    return min(bounds) if bounds else None


def _callee_parameters(user, positions) -> list:
    params = []
    for comp in user.called_computations:
        for position in positions:
            number = (
                0
                if user.opcode == "while"
                else position - 1
                if user.opcode == "conditional"
                else position
            )
            if 0 <= number < len(comp.parameters):
                params.append(comp.parameters[number])
    return params


def _bound_as_index(user, position: int) -> int | None:
    opcode, attrs = user.opcode, user.attrs
    vector = user.operand(position).shape.rank == 1  # legacy form: one vector of all starts
    if opcode == "dynamic-slice" and position >= 1:
        return _start_bound(
            user.operand(0).shape.dims,
            attrs["dynamic_slice_sizes"],
            None if vector else position - 1,
        )
    if opcode == "dynamic-update-slice" and position >= 2:
        return _start_bound(
            user.operand(0).shape.dims, user.operand(1).shape.dims, None if vector else position - 2
        )
    if opcode == "gather" and position == 1:
        dims = user.operand(0).shape.dims
        sizes = attrs["slice_sizes"]
        return min((dims[d] - sizes[d] for d in attrs["start_index_map"]), default=None)
    if opcode == "scatter" and position == (user.operand_count - 1) // 2:
        dims = user.operand(0).shape.dims
        return min((dims[d] - 1 for d in attrs["scatter_dims_to_operand_dims"]), default=None)
    return None


def _start_bound(dims, sizes, axis: int | None) -> int | None:
    if axis is None:
        return max(0, min((d - s for d, s in zip(dims, sizes)), default=0))
    return max(0, dims[axis] - sizes[axis]) if axis < len(dims) else None


def fresh_copies(args):
    """Copies of arguments (nested like them), for running a module that consumes donated
    arguments more than once on the same inputs."""
    if isinstance(args, (tuple, list)):
        return type(args)(fresh_copies(a) for a in args)
    return args.copy() if isinstance(args, np.ndarray) else args
