"""XLA's async shorthand `<op>-start`, `<op>-update`, `<op>-done`, late binding included.

`%s = ((T...), R, state...) op-start(args), attrs` is an async-start whose called computation
wraps one `op` over parameters for `args`; the attributes `op` takes go to it, the generic ones
(metadata, sharding, ...) stay on the async op. `op-update(prev, more...)` and `op-done(prev)`
continue the chain and share its computation.

Late binding: operands after the first of an `op-update` bind more operands of the wrapped op,
each a new parameter of the wrapped computation, so a chain can start with `op-start()`. The
output element `R` may stay `()` until a later op of the chain gives it; the wrapped op's shape
is the first complete output, else the done's shape, else its inferred shape, else `()`.

An `op-update`/`op-done` of a value passed through a loop (a get-tuple-element or a parameter,
not an async op) wraps a fresh `op` read off the context shape `((T...), R, ...)`.
"""

from __future__ import annotations

from ..ir.computation import HloComputation
from ..ir.instruction import HloInstruction
from ..ir.shapes import Shape
from .lexer import ATTR

_THROUGH_LOOPS = ("get-tuple-element", "parameter")


def is_unbound(shape: Shape | None) -> bool:
    """`()` in an async context's output element: the output buffer is not bound yet."""
    return shape is None or (shape.is_tuple and not shape.tuple_shapes)


class AsyncSugar:
    """The chains one parser has desugared: wrapped computation -> its one instruction."""

    def __init__(self, parser):
        self.parser = parser
        self.wrapped: dict[int, HloInstruction] = {}

    def parse(
        self, comp: HloComputation, name: str, shape: Shape | None, stem: str, suffix: str, op_token
    ) -> HloInstruction:
        parser = self.parser
        parser.expect("(")
        operands = []
        if not parser.peek().is_punct(")"):
            operands.append(parser.parse_operand(comp))
            while parser.accept(","):
                operands.append(parser.parse_operand(comp))
        parser.expect(")")
        if suffix == "-start":
            return self._start(comp, name, shape, stem, operands, op_token)
        return self._continue(comp, name, shape, stem, suffix, operands, op_token)

    # -- the three forms ------------------------------------------------------------------
    def _start(self, comp, name, shape, stem, operands, op_token) -> HloInstruction:
        if shape is None or not shape.is_tuple or len(shape.tuple_shapes) < 2:
            raise self.parser.error(
                f"{stem}-start needs its ((operands), result, ...) shape", op_token.start
            )
        output = shape.tuple_shapes[1]
        wrapped, inner = self._wrap(
            stem, [o.shape for o in operands], None if is_unbound(output) else output
        )
        instr = HloInstruction("async-start", shape, operands, name=name)
        self._attributes(instr, inner)
        self._require(inner, name, op_token)
        self._register(wrapped)
        instr.attrs["calls"] = wrapped
        comp.add_instruction(instr)
        return instr

    def _continue(self, comp, name, shape, stem, suffix, operands, op_token) -> HloInstruction:
        parser = self.parser
        previous = operands[0] if operands else None
        if previous is None or (suffix == "-done" and len(operands) != 1):
            raise parser.error(
                f"{stem}{suffix} needs the async op it continues as its "
                f"{'one' if suffix == '-done' else 'first'} operand",
                op_token.start,
            )
        context = previous.shape
        wrapped = (
            previous.attrs.get("calls")
            if previous.opcode in ("async-start", "async-update")
            else None
        )
        if wrapped is not None and wrapped.has_root and wrapped.root.opcode != stem:
            raise parser.error(
                f"{stem}{suffix} continues an async {wrapped.root.opcode}", op_token.start
            )
        fresh = wrapped is None
        if fresh:
            if previous.opcode not in _THROUGH_LOOPS or not _is_context(context):
                raise parser.error(
                    f"{stem}{suffix} needs the async op it continues as its "
                    f"first operand, got {previous.opcode}",
                    op_token.start,
                )
            output = context.tuple_shapes[1]
            wrapped, _ = self._wrap(
                stem,
                list(context.tuple_shapes[0].tuple_shapes),
                None if is_unbound(output) else output,
            )
        inner = self.wrapped.get(id(wrapped))
        if wrapped is not None and inner is not None:  # our own: late operands become params
            self._bind(wrapped, inner, [o.shape for o in operands[1:]])
        if shape is None:
            if not _is_context(context):
                raise parser.error(f"{stem}{suffix} needs its result shape", op_token.start)
            shape = self._default_shape(suffix, context, operands, inner)
        instr = HloInstruction("async" + suffix, shape, operands, {"calls": wrapped}, name=name)
        self._attributes(instr, inner)
        if fresh and wrapped is not None and inner is not None:
            self._require(inner, name, op_token)
            self._register(wrapped)
        if inner is not None and inner.shape is None:
            output = (
                shape
                if suffix == "-done"
                else shape.tuple_shapes[1]
                if _is_context(shape)
                else None
            )
            if not is_unbound(output) or suffix == "-done":
                inner.shape = output
        comp.add_instruction(instr)
        return instr

    # -- helpers --------------------------------------------------------------------------
    def _wrap(self, stem: str, operand_shapes, result: Shape | None):
        parser = self.parser
        wrapped = HloComputation(parser.unique_computation_name(f"{stem}.wrapped"))
        parser.computations[wrapped.name] = None  # taken while its attributes are parsed
        # None: a shape the text leaves out, inferred when the chain ends (finish)
        inner = HloInstruction(stem, result, name=f"{stem}.wrapped")  # type: ignore[arg-type]
        wrapped.add_instruction(inner)
        wrapped.root = inner
        inner.name = parser.instruction_names(inner.name)
        self._bind(wrapped, inner, operand_shapes)
        self.wrapped[id(wrapped)] = inner
        return wrapped, inner

    def _register(self, wrapped: HloComputation) -> None:
        """Adds a new wrapped computation after the ones its attributes called (callees
        come first in the module)."""
        self.parser.computations[wrapped.name] = wrapped
        self.parser.inline_computations.append(wrapped)

    def _bind(self, wrapped: HloComputation, inner: HloInstruction, shapes) -> None:
        """Each shape becomes the wrapped computation's next parameter and inner's operand."""
        for shape in shapes:
            number = len(wrapped.parameters)
            name = self.parser.instruction_names(f"{inner.opcode}.param.{number}")
            param = HloInstruction.parameter(number, shape, name=name)
            param.parent = wrapped
            wrapped.instructions.insert(wrapped.instructions.index(inner), param)
            inner.append_operand(param)

    def _attributes(self, instr: HloInstruction, inner: HloInstruction | None) -> None:
        """The trailing attributes: the wrapped op's own to it, the generic ones to `instr`."""
        parser = self.parser
        while parser.peek().is_punct(",") and parser.lookahead(1).kind == ATTR:
            parser.next()
            attr = parser.lookahead(0).text
            own = inner is not None and attr in inner.opdef.attr_names + inner.opdef.calls
            if inner is not None and own and attr in inner.attrs:  # repeated later in the chain
                token = parser.lookahead(0)
                scratch = HloInstruction(inner.opcode, None)  # type: ignore[arg-type]
                parser.parse_attribute(scratch)
                if scratch.attrs[attr] != inner.attrs[attr]:
                    raise parser.error(
                        f"{attr} differs from the one %{inner.name} was given", token.start
                    )
                continue
            parser.parse_attribute(inner if own else instr)

    def _require(self, inner: HloInstruction, name: str, op_token) -> None:
        for required in inner.opdef.required_attrs:
            if required not in inner.attrs:
                raise self.parser.error(
                    f"{inner.opcode} {name} is missing required attribute {required}",
                    op_token.start,
                )

    @staticmethod
    def _default_shape(suffix, context, operands, inner) -> Shape:
        if suffix == "-done":
            output = context.tuple_shapes[1]
            if is_unbound(output) and inner is not None and inner.shape is not None:
                return inner.shape
            return output
        bound = list(context.tuple_shapes[0].tuple_shapes) + [o.shape for o in operands[1:]]
        return Shape.tuple_of([Shape.tuple_of(bound), *context.tuple_shapes[1:]])

    def finish(self) -> None:
        """Gives every wrapped op still without a shape (a chain without a done) one."""
        from ..ir.shape_inference import infer_shape

        for inner in self.wrapped.values():
            if inner.shape is not None:
                continue
            try:
                inner.shape = infer_shape(inner).with_default_layout()
            except Exception:  # the operands bound so far do not fit the op: keep `()`
                inner.shape = Shape.tuple_of(())


def _is_context(shape: Shape) -> bool:
    return shape.is_tuple and len(shape.tuple_shapes) >= 2 and shape.tuple_shapes[0].is_tuple


__all__ = ["AsyncSugar", "is_unbound"]
