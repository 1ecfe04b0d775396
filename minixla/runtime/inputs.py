"""Seeded random arguments for a module's entry, with valid values for index operands.

Integer parameters that flow (through shape-preserving ops) into gather/scatter indices or
dynamic-slice starts get values inside the indexed operand's bounds, so random runs exercise real
indexing rather than clamping.
"""
from __future__ import annotations

import numpy as np

from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shapes import Shape

# Ops whose output carries its input's values unchanged (for tracing index uses).
_PASS_THROUGH = {"convert", "reshape", "broadcast", "bitcast", "copy", "concatenate", "slice",
                 "transpose", "get-tuple-element", "tuple", "clamp", "select"}


def _index_bound(instr: HloInstruction, seen: set[int] | None = None) -> int | None:
    """The smallest operand dimension that values of `instr` index into, if any."""
    seen = seen if seen is not None else set()
    if id(instr) in seen:
        return None
    seen.add(id(instr))
    bounds = []
    for user in instr.users:
        position = [i for i, o in enumerate(user.operands) if o is instr]
        if user.opcode == "gather" and 1 in position:
            bounds.append(min(user.operand(0).shape.dims or (1,)))
        elif user.opcode == "scatter" and (user.operand_count - 1) // 2 in position:
            bounds.append(min(user.operand(0).shape.dims or (1,)))
        elif user.opcode in ("dynamic-slice", "dynamic-update-slice"):
            first = 1 if user.opcode == "dynamic-slice" else 2
            for p in position:
                if p >= first:
                    bounds.append(user.operand(0).shape.dims[p - first]
                                  if user.operand(0).rank > p - first else 1)
        elif user.opcode in _PASS_THROUGH:
            bound = _index_bound(user, seen)
            if bound is not None:
                bounds.append(bound)
        elif user.opcode in ("call", "while", "conditional", "fusion"):
            for comp in user.called_computations:
                for p in position:
                    index = p - 1 if user.opcode == "conditional" else p
                    if user.opcode == "while" or 0 <= index < len(comp.parameters):
                        param = comp.parameters[0 if user.opcode == "while" else index]
                        bound = _index_bound(param, seen)
                        if bound is not None:
                            bounds.append(bound)
    return min(bounds) if bounds else None


def random_array(shape: Shape, rng: np.random.Generator, bound: int | None = None):
    if shape.is_tuple:
        return tuple(random_array(s, rng, bound) for s in shape.tuple_shapes)
    dtype = shape.numpy_dtype
    etype = shape.element_type
    if etype.kind == "pred":
        return rng.random(shape.dims) < 0.5
    if etype.is_integer:
        if bound is not None:
            return rng.integers(0, max(bound, 1), shape.dims).astype(dtype)
        low = 0 if etype.kind == "unsigned" else -10
        return rng.integers(low, 11, shape.dims).astype(dtype)
    if etype.is_complex:
        return (rng.standard_normal(shape.dims) + 1j * rng.standard_normal(shape.dims)
                ).astype(dtype)
    return rng.standard_normal(shape.dims).astype(np.float32).astype(dtype)


def random_arguments(module: HloModule, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    shapes = module.program_shape().parameters
    params = {p.parameter_number: p for p in module.entry.parameters}
    return [random_array(shape, rng, _index_bound(params[i]) if i in params else None)
            for i, shape in enumerate(shapes)]
