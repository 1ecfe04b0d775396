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
from .hlo_utils import NameUniquer, element, make_tuple

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
            init = make_tuple([start, *inputs, *inits, *zeros], comp, self.names)
            body = self._body(scan, init.shape, axis, length)
            loop = self._new(
                comp,
                "while",
                init.shape,
                [init],
                {"condition": self._condition(init.shape, length), "body": body},
            )
            first = 1 + len(inputs) + carried  # the state is (i, inputs, carries, outputs)
            order = [*range(first, first + len(stacked)), *range(1 + len(inputs), first)]
            values = [element(loop, k, self.names) for k in order]
        value = make_tuple(values, comp, self.names) if scan.shape.is_tuple else values[0]
        comp.replace_instruction(scan, value)

    def _condition(self, state: Shape, length: int) -> HloComputation:
        cond = HloComputation(self.names("scan_condition"))
        param = cond.add_instruction(HloInstruction.parameter(0, state, self.names("state")))
        i = element(param, 0, self.names)
        bound = self._constant(cond, length, INDEX)
        cond.root = self._new(
            cond, "compare", Shape.array("pred", ()), [i, bound], {"direction": "LT"}
        )
        return self.module.add_computation(cond)

    def _body(self, scan: HloInstruction, state: Shape, axis: int, length: int) -> HloComputation:
        inputs_n = scan.operand_count - scan.attrs.get("num_carries", 0)
        body = HloComputation(self.names("scan_body"))
        param = body.add_instruction(HloInstruction.parameter(0, state, self.names("state")))
        parts = [element(param, k, self.names) for k in range(len(state.tuple_shapes))]
        i, inputs = parts[0], parts[1 : 1 + inputs_n]
        carries = parts[1 + inputs_n : scan.operand_count + 1]
        buffers = parts[scan.operand_count + 1 :]
        at = i
        if scan.attrs.get("is_reverse"):
            last = self._constant(body, length - 1, INDEX)
            at = self._new(body, "subtract", INDEX, [last, i])
        zero = self._constant(body, 0, INDEX)

        def starts(rank: int) -> list:
            return [at if d == axis else zero for d in range(rank)]

        def one_row(shape: Shape, dtype: str) -> Shape:  # `shape` with its scanned dim 1
            return Shape.array(dtype, shape.dims[:axis] + (1,) + shape.dims[axis + 1 :])

        slices = []
        for x in inputs:
            window = one_row(x.shape, x.shape.dtype)
            piece = self._new(
                body,
                "dynamic-slice",
                window,
                [x, *starts(x.shape.rank)],
                {"dynamic_slice_sizes": window.dims},
            )
            dims = x.shape.dims[:axis] + x.shape.dims[axis + 1 :]
            slices.append(self._new(body, "reshape", Shape.array(x.shape.dtype, dims), [piece]))
        step = scan.attrs["to_apply"]
        call = self._new(body, "call", step.root.shape, [*slices, *carries], {"to_apply": step})
        returned = (
            [element(call, k, self.names) for k in range(len(step.root.shape.tuple_shapes))]
            if step.root.shape.is_tuple
            else [call]
        )
        outputs, new_carries = returned[: len(buffers)], returned[len(buffers) :]
        written = []
        for buffer, out in zip(buffers, outputs):
            row = self._new(body, "reshape", one_row(buffer.shape, out.shape.dtype), [out])
            written.append(
                self._new(
                    body,
                    "dynamic-update-slice",
                    buffer.shape,
                    [buffer, row, *starts(buffer.shape.rank)],
                )
            )
        one = self._constant(body, 1, INDEX)
        following = self._new(body, "add", INDEX, [i, one])
        body.root = make_tuple([following, *inputs, *new_carries, *written], body, self.names)
        return self.module.add_computation(body)
