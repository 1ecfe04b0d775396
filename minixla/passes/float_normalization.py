"""float-normalization: compute narrow-float ops (bf16, f16, f8, f6, f4) in f32.

As XLA's FloatNormalization: an op whose (opcode, element type) the backend does not support
natively gets f32 operands (a `convert` in front of each narrow one) and computes in f32; a
narrow result is converted back right after it. Each op is still rounded to the narrow type
exactly once, which is the interpreter's (and XLA:CPU's) per-op rounding rule, so results stay
bit-identical. Ops that only move or select data, and ops whose arithmetic lives in a called
computation (reduce, sort, scatter, map, ...), are native, and so are those called computations:
how a reduction accumulates narrow floats (the interpreter: in f32, rounded once) is the
backend's business, and rewriting its combiner per op would change the result.
Only the entry, control-flow bodies and fused computations are rewritten.
"""

from __future__ import annotations

from ..ir.dtypes import FLOAT
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.opcodes import COLLECTIVE, CONTROL, LEAF, MOVEMENT
from .base import Pass, register_pass
from .hlo_utils import NameUniquer, fused_computations, sequential_computations

NARROW_FLOATS = frozenset(
    {
        "bf16",
        "f16",
        "f8e5m2",
        "f8e4m3fn",
        "f8e4m3b11fnuz",
        "f8e5m2fnuz",
        "f8e4m3fnuz",
        "f8e4m3",
        "f8e3m4",
        "f8e8m0fnu",
        "f4e2m1fn",
        "f6e2m3fn",
        "f6e3m2fn",
    }
)
# Native in every type: they round nothing, or their arithmetic is in a called computation.
ALWAYS_NATIVE = frozenset(
    {
        "convert",
        "bitcast-convert",
        "reduce-precision",
        "stochastic-convert",
        "copy",
        "select",
        "map",
        "reduce",
        "reduce-window",
        "select-and-scatter",
        "sort",
        "scatter",
        "all-reduce",
        "reduce-scatter",
        "all-reduce-start",
        "scan",
        "custom-call",
        "rng",
        "rng-bit-generator",
        "topk",
        "batch-norm-training",
        "batch-norm-inference",
        "batch-norm-grad",
    }
)


def is_narrow(dtype: str) -> bool:
    return dtype in NARROW_FLOATS


@register_pass
class FloatNormalization(Pass):
    name = "float-normalization"

    def __init__(
        self, supported: set[tuple[str, str]] | frozenset = frozenset(), compute_type: str = "f32"
    ):
        self.supported = frozenset(supported)  # extra (opcode, dtype) the backend runs natively
        self.compute_type = compute_type

    def run(self, module: HloModule) -> bool:
        names = NameUniquer(module)
        changed = False
        sequential = sequential_computations(module)
        fused = fused_computations(module)
        for comp in module.computations:
            if id(comp) not in fused and comp not in sequential:
                continue
            for instr in comp.post_order():
                if self.needs_normalization(instr):
                    self.normalize(instr, names)
                    changed = True
        return changed

    def needs_normalization(self, instr: HloInstruction) -> bool:
        kind = instr.opdef.kind
        if kind in (MOVEMENT, CONTROL, LEAF, COLLECTIVE) or instr.opcode in ALWAYS_NATIVE:
            return False
        if instr.shape.is_tuple:  # no multi-result arithmetic op needs it
            return False
        types = {o.shape.dtype for o in instr.operands if o.shape.is_array}
        types.add(instr.shape.dtype)
        narrow = {t for t in types if is_narrow(t)}
        return any((instr.opcode, t) not in self.supported for t in narrow)

    def normalize(self, instr: HloInstruction, names: NameUniquer) -> None:
        comp = instr.computation
        wide_operands = [self._widen(o, names) for o in instr.operands]
        wide_shape = (
            instr.shape.with_dtype(self.compute_type)
            if is_narrow(instr.shape.dtype)
            else instr.shape
        )
        wide = comp.add_instruction(instr.clone(wide_operands, name=names(instr.name)))
        wide.shape = wide_shape
        if wide_shape == instr.shape:
            comp.replace_instruction(instr, wide)
            return
        back = HloInstruction("convert", instr.shape, [wide], name=names("convert"))
        comp.replace_instruction(instr, comp.add_instruction(back))

    def _widen(self, operand: HloInstruction, names: NameUniquer) -> HloInstruction:
        if not operand.shape.is_array or not is_narrow(operand.shape.dtype):
            return operand
        if operand.shape.element_type.kind != FLOAT:
            return operand
        for user in operand.users:  # reuse an existing widening convert
            if user.opcode == "convert" and user.shape == operand.shape.with_dtype(
                self.compute_type
            ):
                return user
        convert = HloInstruction(
            "convert", operand.shape.with_dtype(self.compute_type), [operand], name=names("convert")
        )
        return operand.computation.add_instruction(convert)
