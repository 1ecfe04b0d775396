"""row-fusion: reductions over rows fused into the loop that reads them back (softmax, norms).

After `fusion`, softmax over the rows of x is three kernels: the row max, exp(x - max) with its
row sum, and the divide, and the exponentials go to memory and back. When a reduction over the
trailing (minor) dims of an array is read back by a loop over that array through a broadcast
along the kept dims, the whole chain can run one row at a time: per row, each reduction is a
loop over the row, which stays in cache, and the outputs are one more. This pass merges such a
producer into its consumer; what it builds is a *row program* (`row_rank`), which the cpu
kernel builder emits as one loop over the rows (cpu/loops.py). XLA's GPU backend does the same
for softmax-like chains (SoftmaxRewriterTriton).
"""

from __future__ import annotations

from math import prod

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import ELEMENTWISE
from .base import register_pass
from .fusion import InstructionFusion
from .fusion_cost import (
    FUSIBLE_KINDS,
    MAX_FUSED_OPS,
    MAX_FUSION_OPERANDS,
    MAX_REDUCES_PER_FUSION,
    fused_size,
)
from .hlo_utils import NameUniquer, reaches, sequential_computations, single_op_computation

# Fewer rows than this would leave the cores with too few rows each; the separate kernels
# thread their elementwise parts over every element.
MIN_ROWS = 32


def row_shape(comp: HloComputation) -> tuple[tuple[int, ...], int] | None:
    """(D, k) of a computation's first reduce when it reduces the trailing dims of its input:
    the input dims D and the number k >= 1 of kept (row) dims."""
    for instr in comp.instructions:
        if instr.opcode == "reduce":
            return _reduce_rows(instr)
    return None


def _reduce_rows(reduce: HloInstruction):
    if reduce.operand_count != 2 or not reduce.shape.is_array:
        return None
    dims = reduce.operand(0).shape.dims
    reduced = sorted(reduce.attrs["dimensions"])
    kept = len(dims) - len(reduced)
    if kept < 1 or reduced != list(range(kept, len(dims))):
        return None
    return dims, kept


def is_row_broadcast(instr: HloInstruction, dims, kept: int) -> bool:
    """A broadcast of a row value (dims D[:k]) back over the rows' elements (dims D)."""
    return (
        instr.opcode == "broadcast"
        and instr.shape.dims == tuple(dims)
        and instr.operand(0).shape.dims == tuple(dims[:kept])
        and list(instr.attrs["dimensions"]) == list(range(kept))
    )


def reduce_dependent(comp: HloComputation, seeds=frozenset()) -> set[int]:
    """Ids of the instructions of `comp` that depend on a reduce (or on a seeded instruction)."""
    dependent: set[int] = set()
    for instr in comp.post_order():
        if (
            instr.opcode == "reduce"
            or id(instr) in seeds
            or any(id(o) in dependent for o in instr.operands)
        ):
            dependent.add(id(instr))
    return dependent


def _outputs(comp: HloComputation) -> list[HloInstruction]:
    root = comp.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def follows_rows(comp: HloComputation, dims, kept: int, seeds=frozenset()) -> set[int] | None:
    """Can `comp` run row by row over D = `dims`? Every reduce reduces the trailing dims of a
    D-shaped input to the row dims; every value that depends on a reduction (or on a seeded
    parameter) is a row value combined elementwise, a broadcast of one back over the row, or a
    D-shaped value combined elementwise; and every output has dims D or D[:k]. Returns the ids
    of those dependent values (`reduce_dependent`), or None when it cannot."""
    dims, rows = tuple(dims), tuple(dims[:kept])
    dependent = reduce_dependent(comp, seeds)
    for out in _outputs(comp):
        if not out.shape.is_array or out.shape.dims not in (dims, rows):
            return None
    for instr in comp.post_order():
        if instr.opcode == "reduce":
            if _reduce_rows(instr) != (dims, kept):
                return None
            continue
        if id(instr) not in dependent or id(instr) in seeds or instr.opcode == "tuple":
            continue
        if instr.shape.dims not in (dims, rows) or not instr.shape.is_array:
            return None
        if is_row_broadcast(instr, dims, kept):
            continue
        if instr.opdef.kind != ELEMENTWISE or instr.opcode == "map":
            return None
        for operand in instr.operands:
            if id(operand) in dependent and operand.shape.dims != instr.shape.dims:
                return None
    return dependent


def reads_back(comp: HloComputation, dims, kept: int, dependent: set[int]) -> bool:
    """Is some row value that depends on a reduction broadcast back over the rows?"""
    return any(
        is_row_broadcast(i, dims, kept) and id(i.operand(0)) in dependent for i in comp.instructions
    )


def row_rank(comp: HloComputation) -> int | None:
    """k when `comp` is a row program over (D, k): it follows rows (above) and reads a row
    value that depends on a reduction back over the rows; None otherwise."""
    found = row_shape(comp)
    if found is None:
        return None
    dims, kept = found
    dependent = follows_rows(comp, dims, kept)
    return kept if dependent is not None and reads_back(comp, dims, kept, dependent) else None


@register_pass
class RowFusion(InstructionFusion):
    """Merges a row reduction (a reduce, or a fusion whose reductions are over rows) into the
    fusion that reads its results back over the same rows."""

    name = "row-fusion"

    def run(self, module: HloModule) -> bool:
        self.module, self.names = module, NameUniquer(module)
        self.touched: dict[int, HloComputation] = {}
        changed = False
        for comp in sequential_computations(module):
            while self._fuse_one(comp):
                changed = True
        self.names = NameUniquer(module)
        for fused in self.touched.values():
            if fused.parent is not None:
                self._rename_parameters(fused)
        return changed

    def _fuse_one(self, comp: HloComputation) -> bool:
        for consumer in comp.post_order():
            if consumer.opcode != "fusion" or consumer.attrs.get("kind") not in FUSIBLE_KINDS:
                continue
            for source in _sources(consumer):
                if self._fits(source, consumer):
                    self._merge_rows(consumer, source)
                    return True
        return False

    def _fits(self, source: HloInstruction, consumer: HloInstruction) -> bool:
        if any(i.control_predecessors or i.control_successors for i in (source, consumer)):
            return False
        body = _body(source)
        fused = consumer.attrs["calls"]
        readers = [
            fused.parameter(number)
            for number, operand in enumerate(consumer.operands)
            if _output_index(operand, source) is not None
        ]
        found = row_shape(body) or _read_back_shape(fused, readers)
        if found is None:
            return False
        dims, kept = found
        if prod(dims[:kept]) < MIN_ROWS:
            return False
        dependent = follows_rows(body, dims, kept)
        if dependent is None:
            return False
        # A source without reductions of its own computes row values from ones that have.
        outputs = _outputs(body)
        seeds = set()
        for number, operand in enumerate(consumer.operands):
            index = _output_index(operand, source)
            if index is not None and (
                id(outputs[index]) in dependent or outputs[index].shape.dims == dims[:kept]
            ):
                seeds.add(id(fused.parameter(number)))
        reading = follows_rows(fused, dims, kept, frozenset(seeds)) if seeds else None
        if reading is None or not reads_back(fused, dims, kept, reading):
            return False
        if fused_size(consumer) + fused_size(source) > MAX_FUSED_OPS:
            return False
        operands = {id(o) for o in consumer.operands if _output_index(o, source) is None}
        if len(operands | {id(o) for o in source.operands}) > MAX_FUSION_OPERANDS:
            return False
        reduces = sum(i.opcode == "reduce" for i in fused.instructions + body.instructions)
        if reduces > MAX_REDUCES_PER_FUSION:
            return False
        return not any(
            _output_index(o, source) is None and reaches(source, o) for o in consumer.operands
        )

    def _merge_rows(self, consumer: HloInstruction, source: HloInstruction) -> None:
        fused = consumer.attrs["calls"]
        operands = list(consumer.operands)
        args = [
            fused.add_instruction(o.clone([], name=self.names(o.name)))
            if o.opcode == "constant" and o.shape.rank == 0
            else self._parameter_for(fused, operands, o)
            for o in source.operands
        ]
        source_outputs = self._absorb(fused, source, args)
        for number, operand in enumerate(operands):
            index = _output_index(operand, source)
            if index is not None:
                fused.parameter(number).replace_all_uses_with(source_outputs[index])
        merged = self._combine(consumer, source, operands, source_outputs)
        for old in (consumer, source):
            for user in list(old.users):  # get-tuple-elements the consumer read
                if not user.users and not user.is_root():
                    user.computation.remove_instruction(user)
            if old.parent is not None:
                old.parent.remove_instruction(old)
        for operand in source.operands:  # a lone reduce's init, now cloned into the fusion
            if operand.opcode == "constant" and not operand.users and operand.parent is not None:
                operand.parent.remove_instruction(operand)
        self._forget(source)
        self._prune(merged)

    def _prune(self, fusion: HloInstruction) -> None:
        """Drops outputs nobody reads (a source's results that only the consumer read)."""
        if not fusion.shape.is_tuple or fusion.is_root():
            return
        comp = fusion.computation
        for user in list(fusion.users):
            if not user.users and not user.is_root():
                comp.remove_instruction(user)
        root = fusion.attrs["calls"].root
        used = sorted({user.attrs["index"] for user in fusion.users})
        if len(used) == len(root.operands):
            return
        readers = list(fusion.users)
        pruned = self._rebuild(fusion, list(fusion.operands), [root.operands[i] for i in used])
        for reader in readers:
            position = used.index(reader.attrs["index"])
            if pruned.shape.is_tuple:
                comp.replace_instruction(reader, self._gte(pruned, position))
            else:
                comp.replace_instruction(reader, pruned)
        if fusion.parent is not None:
            comp.remove_instruction(fusion)


def _body(source: HloInstruction) -> HloComputation:
    """The computation a source runs: its fused computation, or the lone reduce as one."""
    if source.opcode == "fusion":
        return source.attrs["calls"]
    return single_op_computation(source)


def _read_back_shape(fused: HloComputation, readers) -> tuple[tuple[int, ...], int] | None:
    """(D, k) of the first broadcast back over rows of a value computed from `readers`."""
    reading = reduce_dependent(fused, frozenset(id(r) for r in readers))
    for instr in fused.post_order():
        if instr.opcode == "broadcast" and id(instr.operand(0)) in reading:
            rank = instr.operand(0).shape.rank
            if rank and is_row_broadcast(instr, instr.shape.dims, rank):
                return instr.shape.dims, rank
    return None


def _sources(consumer: HloInstruction) -> list[HloInstruction]:
    """Instructions whose results `consumer` reads (directly or through get-tuple-element)
    that compute row reductions (reduces and fusions holding one), or row values from them
    (elementwise ops and loop fusions over values that come from row reductions)."""
    found: dict[int, HloInstruction] = {}
    memo: dict[int, bool] = {}
    for operand in consumer.operands:
        source = operand.operand(0) if operand.opcode == "get-tuple-element" else operand
        if _from_rows(source, memo):
            found[id(source)] = source
    return list(found.values())


def _reduces_rows(instr: HloInstruction) -> bool:
    return instr.opcode == "reduce" or (
        instr.opcode == "fusion"
        and instr.attrs.get("kind") in FUSIBLE_KINDS
        and any(i.opcode == "reduce" for i in instr.attrs["calls"].instructions)
    )


def _from_rows(instr: HloInstruction, memo: dict[int, bool]) -> bool:
    """Does `instr` reduce rows, or compute elementwise from values that do?"""
    if id(instr) in memo:
        return memo[id(instr)]
    memo[id(instr)] = False  # cut cycles through get-tuple-element chains
    if _reduces_rows(instr):
        result = True
    elif instr.opcode == "get-tuple-element":
        result = _from_rows(instr.operand(0), memo)
    elif instr.shape.is_array and (
        (instr.opcode == "fusion" and instr.attrs.get("kind") == "kLoop")
        or (instr.opdef.kind == ELEMENTWISE and instr.opcode != "map")
    ):
        result = any(_from_rows(o, memo) for o in instr.operands)
    else:
        result = False
    memo[id(instr)] = result
    return result


def _output_index(operand: HloInstruction, source: HloInstruction) -> int | None:
    """Which output of `source` the consumer's operand is (None: not one of them)."""
    if operand is source:
        return 0
    if operand.opcode == "get-tuple-element" and operand.operand(0) is source:
        return operand.attrs["index"]
    return None
