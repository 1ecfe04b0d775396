"""scan-expander: XLA's `scan` as a `while` loop, for backends that compile loops but not scan.

    scan(xs..., inits...), dimensions={d}, num_carries=n, to_apply=f
      -> while((i, xs..., carries..., outputs...)) with the outputs zero-filled,
         condition i < length; each trip reads the inputs' slices at k (i, or length-1-i
         with is_reverse) by dynamic-slice and reshape, calls f on them and the carries,
         writes f's outputs at k by dynamic-update-slice and hands its carries on;
      -> a tuple of the loop's outputs and carries.

The call is inlined by call-inliner, which runs next; the loop is then an ordinary `while`
for fusion and the native loop compiler.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .hlo_utils import NameUniquer

INDEX = Shape.array("s32", ())


@register_pass
class ScanExpander(Pass):
    name = "scan-expander"

    def run(self, module: HloModule) -> bool:
        scans = [
            instr
            for comp in list(module.computations)
            for instr in comp.instructions
            if instr.opcode == "scan"
        ]
        if not scans:
            return False
        self.module, self.names = module, NameUniquer(module)
        for scan in scans:
            self._expand(scan)
        return True

    def _new(self, comp: HloComputation, opcode: str, shape: Shape, operands, attrs=None):
        instr = HloInstruction(opcode, shape, operands, attrs or {}, name=self.names(opcode))
        return comp.add_instruction(instr)

    def _constant(self, comp: HloComputation, value, shape: Shape) -> HloInstruction:
        return comp.add_instruction(HloInstruction.constant(value, shape, self.names("constant")))

    def _expand(self, scan: HloInstruction) -> None:
        comp, carried = scan.computation, scan.attrs.get("num_carries", 0)
        (axis,) = scan.attrs["dimensions"]
        operands = list(scan.operands)
        inputs, inits = operands[: len(operands) - carried], operands[len(operands) - carried :]
        shapes = list(scan.shape.tuple_shapes) if scan.shape.is_tuple else [scan.shape]
        stacked = shapes[: len(shapes) - carried]
        length = inputs[0].shape.dims[axis]
        state = Shape.tuple_of(
            [INDEX, *(x.shape for x in inputs), *(c.shape for c in inits), *stacked]
        )
        zeros = [
            self._new(
                comp,
                "broadcast",
                s,
                [self._constant(comp, 0, Shape.array(s.dtype, ()))],
                {"dimensions": ()},
            )
            for s in stacked
        ]
        if length == 0:  # no steps: empty outputs and the carries as they came
            values = [*zeros, *inits]
        else:
            start = self._constant(comp, 0, INDEX)
            init = self._new(comp, "tuple", state, [start, *inputs, *inits, *zeros])
            loop = self._new(
                comp,
                "while",
                state,
                [init],
                {"condition": self._condition(state, length), "body": self._body(scan, state)},
            )
            first = 1 + len(inputs) + carried
            values = [
                self._new(comp, "get-tuple-element", shapes[k], [loop], {"index": index})
                for k, index in enumerate(
                    [*range(first, first + len(stacked)), *range(1 + len(inputs), first)]
                )
            ]
        value = self._new(comp, "tuple", scan.shape, values) if scan.shape.is_tuple else values[0]
        comp.replace_instruction(scan, value)

    def _condition(self, state: Shape, length: int) -> HloComputation:
        cond = HloComputation(self.names("scan_condition"))
        param = cond.add_instruction(HloInstruction.parameter(0, state, self.names("state")))
        i = self._new(cond, "get-tuple-element", INDEX, [param], {"index": 0})
        bound = self._constant(cond, length, INDEX)
        cond.root = self._new(
            cond, "compare", Shape.array("pred", ()), [i, bound], {"direction": "LT"}
        )
        return self.module.add_computation(cond)

    def _body(self, scan: HloInstruction, state: Shape) -> HloComputation:
        carried = scan.attrs.get("num_carries", 0)
        (axis,) = scan.attrs["dimensions"]
        shapes = list(state.tuple_shapes)
        inputs_n = scan.operand_count - carried
        length = shapes[1].dims[axis]
        body = HloComputation(self.names("scan_body"))
        param = body.add_instruction(HloInstruction.parameter(0, state, self.names("state")))
        parts = [
            self._new(body, "get-tuple-element", shape, [param], {"index": k})
            for k, shape in enumerate(shapes)
        ]
        i, inputs = parts[0], parts[1 : 1 + inputs_n]
        carries = parts[1 + inputs_n : 1 + inputs_n + carried]
        buffers = parts[1 + inputs_n + carried :]
        at = i
        if scan.attrs.get("is_reverse"):
            last = self._constant(body, length - 1, INDEX)
            at = self._new(body, "subtract", INDEX, [last, i])
        zero = self._constant(body, 0, INDEX)

        def starts(rank: int) -> list:
            return [at if d == axis else zero for d in range(rank)]

        slices = []
        for x in inputs:
            dims = x.shape.dims
            window = Shape.array(x.shape.dtype, dims[:axis] + (1,) + dims[axis + 1 :])
            piece = self._new(
                body,
                "dynamic-slice",
                window,
                [x, *starts(len(dims))],
                {"dynamic_slice_sizes": window.dims},
            )
            slices.append(
                self._new(
                    body,
                    "reshape",
                    Shape.array(x.shape.dtype, dims[:axis] + dims[axis + 1 :]),
                    [piece],
                )
            )
        step = scan.attrs["to_apply"]
        call = self._new(body, "call", step.root.shape, [*slices, *carries], {"to_apply": step})
        returned = (
            [
                self._new(body, "get-tuple-element", s, [call], {"index": k})
                for k, s in enumerate(step.root.shape.tuple_shapes)
            ]
            if step.root.shape.is_tuple
            else [call]
        )
        outputs, new_carries = returned[: len(buffers)], returned[len(buffers) :]
        written = []
        for buffer, out in zip(buffers, outputs):
            dims = buffer.shape.dims
            row = self._new(
                body,
                "reshape",
                Shape.array(out.shape.dtype, dims[:axis] + (1,) + dims[axis + 1 :]),
                [out],
            )
            written.append(
                self._new(
                    body, "dynamic-update-slice", buffer.shape, [buffer, row, *starts(len(dims))]
                )
            )
        one = self._constant(body, 1, INDEX)
        following = self._new(body, "add", INDEX, [i, one])
        body.root = self._new(body, "tuple", state, [following, *inputs, *new_carries, *written])
        return self.module.add_computation(body)
