"""Runs a scheduled module the way a backend would under a BufferAssignment: every value is
written into its allocation's bytes (in physical layout order) and every operand is read back
from there, so a buffer overwritten while still needed shows up as a wrong result."""

from __future__ import annotations

import numpy as np

from minixla.reference.evaluator import Evaluator
from minixla.ir import layout_math
from minixla.passes.dataflow import FORWARDING


def _tiles(shape):
    return shape.layout.tiles if shape.layout is not None else ()


class BufferSimulator:
    def __init__(self, module, assignment):
        self.module, self.ba = module, assignment
        self.evaluator = Evaluator(module)
        arena = np.zeros(assignment.arena_size, np.uint8)
        self.storage = {}
        for allocation in assignment.allocations:
            self.storage[id(allocation)] = (
                arena[allocation.offset : allocation.offset + allocation.size]
                if allocation.in_arena
                else np.zeros(allocation.size, np.uint8)
            )

    def _bytes(self, instr, index):
        allocation = self.ba.allocation_of(instr, index)
        return self.storage[id(allocation)]

    def write(self, instr, index, array):
        shape = instr.shape.subshape(index)
        array = np.asarray(array, shape.numpy_dtype).reshape(shape.dims)
        flat = layout_math.logical_to_physical(array, shape.minor_to_major(), _tiles(shape))
        raw = flat.view(np.uint8)
        self._bytes(instr, index)[: raw.size] = raw

    def read(self, instr, index=()):
        shape = instr.shape.subshape(index)
        if shape.is_tuple:
            return tuple(self.read(instr, index + (i,)) for i in range(len(shape.tuple_shapes)))
        if not shape.is_array:
            return None
        dtype = shape.numpy_dtype
        count = layout_math.physical_size(shape.dims, shape.minor_to_major(), _tiles(shape))
        raw = self._bytes(instr, index)[: count * dtype.itemsize]
        flat = raw.view(dtype) if count else np.zeros(0, dtype)
        return layout_math.physical_to_logical(
            flat, shape.dims, shape.minor_to_major(), _tiles(shape)
        )

    def write_defined(self, instr, value):
        for index, leaf in instr.shape.leaves():
            if not leaf.is_array:
                continue
            if self.ba.value_at(instr, index).instr is instr:
                part = value
                for i in index:
                    part = part[i]
                self.write(instr, index, part)

    def run(self, args):
        entry = self.module.entry
        for param in entry.parameters:
            self.write_defined(param, args[param.parameter_number])
        self.execute(entry)
        return self.read(entry.root)

    def execute(self, comp):
        for instr in comp.instructions:
            op = instr.opcode
            if op == "parameter" or op in FORWARDING:
                continue
            if op == "while":
                cond, body = instr.attrs["condition"], instr.attrs["body"]
                while True:
                    self.execute(cond)
                    if not bool(self.read(cond.root)):
                        break
                    self.execute(body)
            elif op == "conditional":
                selector = np.asarray(self.read(instr.operand(0)))
                branches = instr.called_computations
                if "branch_computations" in instr.attrs:
                    index = int(selector)
                    index = index if 0 <= index < len(branches) else len(branches) - 1
                else:
                    index = 0 if bool(selector) else 1
                self.execute(branches[index])
            elif op == "call":
                self.execute(instr.attrs["to_apply"])
            else:
                operands = [self.read(o) for o in instr.operands]
                result = self.evaluator.table[op](self.evaluator, instr, operands)
                self.write_defined(instr, result)
