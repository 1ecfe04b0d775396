"""Passes that move or fold data-rearranging ops: reshape-mover, transpose-folding and
broadcast-canonicalizer.

- reshape-mover (XLA's ReshapeMover): an elementwise op whose operands are all the same
  reshape or transpose (or broadcasts of scalars, which can take any shape) is done before
  the rearrangement instead: op(reshape(a), reshape(b)) -> reshape(op(a, b)). Rearranges then
  sink towards the outputs, where they meet and cancel or become free bitcasts.
- transpose-folding (XLA's TransposeFolding): dot(transpose(a), b) -> dot(a, b) with the
  contracting and batch dimensions renumbered, when the transpose keeps the order of the
  dimensions that survive into the result.
- broadcast-canonicalizer (XLA's BroadcastCanonicalizer): a broadcast's `dimensions` are
  made increasing by transposing its operand first, so backends see one form only.
- movement-converts: a data-movement op whose result has another float type than a float
  operand (mixed precision: XLA's test modules write `f32 transpose(f64 p)`) reads a convert
  of that operand instead, so the op only moves values. The other passes move, merge and
  drop movement ops as if they kept values; on the mixed op they dropped its rounding
  (`convert(bf16 reshape(f64 x))` became f64 x). It runs first.
- reduction-converts: a reduce or reduce-window whose float inputs or initial values have
  other types than its reducer's parameters (mixed precision: an f64 init starting a bf16
  reducer) reads converts of them, so kernels see one type per value, as the interpreter
  converts them (XLA's float normalization does the same for called computations).
"""

from __future__ import annotations

from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import ELEMENTWISE, MOVEMENT
from ..reference.ops_reduce import reducer_operand_shapes
from .base import Pass, register_pass
from .hlo_utils import NameUniquer, remove_if_dead

REARRANGES = ("reshape", "transpose")


def _instructions(module: HloModule):
    for comp in module.computations:
        for instr in comp.post_order():
            if instr.parent is comp:
                yield instr


def _equivalent(a: HloInstruction, b: HloInstruction) -> bool:
    return (
        a.opcode == b.opcode
        and a.shape.dims == b.shape.dims
        and a.operand(0).shape.dims == b.operand(0).shape.dims
        and a.attrs.get("dimensions") == b.attrs.get("dimensions")
    )


def _like(shape, original):
    """A new shape gets a default layout when the shape it replaces had one."""
    return shape.with_default_layout() if original.layout is not None else shape


def _is_scalar_splat(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and instr.operand(0).shape.rank == 0


@register_pass
class ReshapeMover(Pass):
    name = "reshape-mover"

    def run(self, module: HloModule) -> bool:
        self.names = NameUniquer(module)
        changed = False
        for instr in list(_instructions(module)):
            if instr.parent is not None and self._sink(instr):
                changed = True
        return changed

    def _sink(self, instr: HloInstruction) -> bool:
        if (
            instr.opdef.kind != ELEMENTWISE
            or not instr.shape.is_array
            or instr.opcode in ("map", "rng")
            or not instr.operands
        ):
            return False
        if instr.opcode == "bitcast-convert" and instr.shape.dims != instr.operand(0).shape.dims:
            return False  # it changes the element width, adding or dropping the last dim
        moved = [o for o in instr.operands if o.opcode in REARRANGES]
        if not moved or any(
            not _equivalent(o, moved[0]) or len(o.distinct_users()) != 1 for o in moved
        ):
            return False
        if any(o.opcode not in REARRANGES and not _is_scalar_splat(o) for o in instr.operands):
            return False
        if all(_is_scalar_splat(o.operand(0)) for o in moved):
            return False  # nothing worth moving: let algsimp fold the splats
        model = moved[0]
        source_dims = model.operand(0).shape.dims
        comp = instr.computation
        operands = []
        for operand in instr.operands:
            if operand.opcode in REARRANGES:
                operands.append(operand.operand(0))
            else:  # a scalar splat takes the pre-rearrangement shape directly
                splat = operand.clone([operand.operand(0)], name=self.names(operand.name))
                splat.shape = _like(operand.shape.with_dims(source_dims), operand.shape)
                splat.attrs["dimensions"] = ()
                operands.append(comp.add_instruction(splat))
        inner = instr.clone(operands, name=self.names(instr.name))
        inner.shape = _like(instr.shape.with_dims(source_dims), instr.shape)
        comp.add_instruction(inner)
        outer = model.clone([inner], name=self.names(model.name))
        outer.shape = _like(instr.shape.with_dims(instr.shape.dims), instr.shape)
        old_operands = list(instr.operands)
        comp.replace_instruction(instr, comp.add_instruction(outer))
        for operand in old_operands:
            remove_if_dead(operand)
        return True


@register_pass
class TransposeFolding(Pass):
    name = "transpose-folding"

    def run(self, module: HloModule) -> bool:
        changed = False
        for instr in list(_instructions(module)):
            if instr.opcode != "dot" or instr.parent is None:
                continue
            for side, number in (("lhs", 0), ("rhs", 1)):
                changed |= self._fold(instr, side, number)
        return changed

    @staticmethod
    def _fold(dot: HloInstruction, side: str, number: int) -> bool:
        transpose = dot.operand(number)
        if transpose.opcode != "transpose":
            return False
        perm = list(transpose.attrs["dimensions"])
        contracting = list(dot.attrs.get(f"{side}_contracting_dims", ()))
        batch = list(dot.attrs.get(f"{side}_batch_dims", ()))
        free = [d for d in range(len(perm)) if d not in contracting and d not in batch]
        mapped_free = [perm[d] for d in free]
        if mapped_free != sorted(mapped_free):
            return False  # the result's dimension order would change
        dot.attrs[f"{side}_contracting_dims"] = tuple(perm[d] for d in contracting)
        if batch:
            dot.attrs[f"{side}_batch_dims"] = tuple(perm[d] for d in batch)
        dot.replace_operand(number, transpose.operand(0))
        remove_if_dead(transpose)
        return True


@register_pass
class BroadcastCanonicalizer(Pass):
    name = "broadcast-canonicalizer"

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        changed = False
        for instr in list(_instructions(module)):
            dims = list(instr.attrs.get("dimensions", ())) if instr.opcode == "broadcast" else []
            if dims == sorted(dims):
                continue
            order = sorted(range(len(dims)), key=lambda i: dims[i])
            operand = instr.operand(0)
            shape = _like(
                operand.shape.with_dims([operand.shape.dims[i] for i in order]), operand.shape
            )
            transpose = HloInstruction(
                "transpose", shape, [operand], {"dimensions": tuple(order)}, name=names("transpose")
            )
            instr.parent.add_instruction(transpose)
            instr.replace_operand(0, transpose)
            instr.attrs["dimensions"] = tuple(sorted(dims))
            changed = True
        return changed


@register_pass
class MovementConverts(Pass):
    name = "movement-converts"

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        changed = False
        for instr in list(_instructions(module)):
            if instr.opdef.kind != MOVEMENT or instr.opcode in ("bitcast", "scatter"):
                continue
            if not (instr.shape.is_array and instr.shape.element_type.is_float):
                continue
            for number in range(instr.operand_count):
                changed |= _read_converted(instr, number, instr.shape, names)
        return changed


@register_pass
class ReductionConverts(Pass):
    name = "reduction-converts"

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        changed = False
        for instr in list(_instructions(module)):
            if instr.opcode not in ("reduce", "reduce-window"):
                continue
            for number, param in enumerate(reducer_operand_shapes(instr)):
                if param.element_type.is_float:
                    changed |= _read_converted(instr, number, param, names)
        return changed


def _read_converted(instr: HloInstruction, number: int, wanted, names: NameUniquer) -> bool:
    """Makes operand `number` of `instr`, where it is an array of another float type than
    `wanted`'s, a convert of it to that type; whether it did."""
    shape = instr.operand(number).shape
    if not (shape.is_array and shape.element_type.is_float) or shape.dtype == wanted.dtype:
        return False
    convert = HloInstruction(
        "convert",
        _like(shape.with_dtype(wanted.dtype), shape),
        [instr.operand(number)],
        name=names("convert"),
    )
    instr.replace_operand(number, instr.computation.add_instruction(convert))
    return True
