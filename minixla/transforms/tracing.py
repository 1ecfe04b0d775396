"""Tracing for function transformations (grad, vjp, jvp, vmap, checkpoint, ...).

A transformation works on HLO: `trace` records the user's function into a computation, the
transformation walks that computation instruction by instruction and emits the transformed
program into the enclosing trace with per-opcode rules. Because the output is ordinary HLO in
the enclosing builder, transformations compose freely (`vmap(grad(f))`, `grad(grad(f))`) and a
differentiated `jit` function is just more HLO.

The function is traced by a child builder of the enclosing trace, so it may close over arrays
of that trace: they become extra elements of the computation's tuple parameter (`captured`),
after the argument leaves. A transformation sees every input, argument or captured, as an
operand of `Traced.operands`. Outside any trace, `staged` runs the transformed function under a
cached `jit`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..frontend.builder import Captures, XlaOp
from ..frontend.errors import FrontendError
from ..frontend.numpy_api import asarray
from ..frontend.pytree import TreeDef, flatten, unflatten
from ..frontend.tracer import Tracer, current_builder, tracing
from ..ir import HloComputation, HloInstruction


@dataclass
class Traced:
    """A function recorded as HLO.

    `computation` has one tuple parameter: the argument leaves, then the `captured` values of
    enclosing computations. Its root is a tuple of the output leaves."""

    computation: HloComputation
    in_tree: TreeDef
    out_tree: TreeDef
    args: list[Tracer]  # the argument leaves, as values of the enclosing trace
    captured: list[XlaOp]
    out_weak: list[bool]

    @property
    def operands(self) -> list[XlaOp]:
        """The inputs of `computation`, in the order of its tuple parameter."""
        return [a.op for a in self.args] + list(self.captured)

    @property
    def num_args(self) -> int:
        return len(self.args)

    @property
    def outputs(self) -> list[HloInstruction]:
        """The instructions that compute the output leaves."""
        return list(self.computation.root.operands)


def trace(fn, args: tuple, kwargs: dict | None = None, *, name: str = "traced") -> Traced:
    """Records `fn(*args, **kwargs)` into a child of the current trace.

    Argument leaves may be tracers, NumPy arrays or Python scalars (they become values of the
    enclosing trace first). Must be called inside a trace; see `staged` for the outside."""
    parent = current_builder()
    if parent is None:
        raise FrontendError(f"{name}: trace() needs an enclosing trace (use staged())")
    leaves, in_tree = flatten((tuple(args), dict(kwargs or {})))
    arg_tracers = [asarray(leaf) for leaf in leaves]
    caps = Captures([t.op.shape for t in arg_tracers])
    child = parent.child(name, caps)
    with tracing(child):
        inner = [Tracer(op, t.weak) for op, t in zip(child.state(), arg_tracers)]
        call_args, call_kwargs = unflatten(in_tree, inner)
        out = fn(*call_args, **call_kwargs)
        out_leaves, out_tree = flatten(out)
        outs = [asarray(leaf) for leaf in out_leaves]
    computation = child.build([o.op for o in outs])
    return Traced(
        computation, in_tree, out_tree, arg_tracers, list(caps.outer), [o.weak for o in outs]
    )


def input_index(instr: HloInstruction) -> int | None:
    """For `get-tuple-element(parameter)` inside a traced computation: which input it reads."""
    if instr.opcode == "get-tuple-element" and instr.operand(0).opcode == "parameter":
        return instr.attrs["index"]
    return None


def replay(computation: HloComputation, operands: list[XlaOp]) -> list[XlaOp]:
    """Emits a copy of a traced computation into the current trace, reading its tuple
    parameter's elements from `operands`; returns the root's elements (or the root)."""
    builder = current_builder()
    values: dict[int, XlaOp] = {}
    for instr in computation.post_order():
        if instr.opcode == "parameter":
            continue
        index = input_index(instr)
        if index is not None:
            values[id(instr)] = builder.lift(operands[index])
            continue
        values[id(instr)] = emit_like(instr, [values[id(o)] for o in instr.operands])
    root = computation.root
    if root.opcode == "tuple":
        return [values[id(o)] for o in root.operands]
    return [values[id(root)]]


def emit_like(instr: HloInstruction, operands: list[XlaOp]) -> XlaOp:
    """`instr` again, on new operands of the same shapes, in the current trace."""
    builder = current_builder()
    if instr.opcode == "constant":
        return builder.emit("constant", shape=instr.shape, literal=instr.literal, name="constant")
    return builder.emit(
        instr.opcode, operands, dict(instr.attrs), shape=instr.shape, name=instr.name.split(".")[0]
    )


def staged(transformed):
    """Makes a transformed function callable outside any trace: there it runs under a `jit`
    made once per transformed function (so repeated calls reuse the compiled program)."""
    jitted = []

    @functools.wraps(transformed)
    def wrapper(*args, **kwargs):
        if current_builder() is not None:
            return transformed(*args, **kwargs)
        if not jitted:
            from ..frontend.jit import jit

            jitted.append(jit(transformed))
        return jitted[0](*args, **kwargs)

    return wrapper
