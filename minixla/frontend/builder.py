"""Builder: XlaBuilder-style construction of HLO computations, with shapes inferred at build time.

Every op goes through `Builder.emit`, which runs the shared shape rules (`infer_shape`) right
away, so a mismatch raises at the call that caused it and names the user's line. Values are
`XlaOp`s: an instruction plus the builder that owns it.

Sub-computations (reducers, comparators, loop bodies, branches) are built by child builders.
A child made for a loop or branch body may *capture* values of enclosing computations: a
captured value travels as an extra element of the body's tuple parameter (shared by a while's
condition and body, or by all branches of a conditional), so Python closures inside
`lax.while_loop` bodies just work. Reducer and comparator children cannot capture: HLO gives
them scalar parameters only.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir import HloComputation, HloInstruction, HloModule, Shape
from ..ir.module import NameUniquer
from ..ir.dtypes import ELEMENT_TYPES, from_numpy
from ..ir.shape_inference import infer_shape
from ..ir.shape_rules_base import same
from .errors import EscapedTracerError, FrontendError, FrontendShapeError, FrontendTypeError


class XlaOp:
    """A value in a computation under construction."""

    __slots__ = ("builder", "instr")

    def __init__(self, builder: "Builder", instr: HloInstruction):
        self.builder = builder
        self.instr = instr

    @property
    def shape(self) -> Shape:
        return self.instr.shape

    @property
    def dtype(self) -> str:
        return self.instr.shape.dtype

    @property
    def dims(self) -> tuple[int, ...]:
        return self.instr.shape.dims

    @property
    def rank(self) -> int:
        return self.instr.shape.rank

    def __repr__(self) -> str:
        return f"<XlaOp %{self.instr.name} = {self.shape.without_layout()} in {self.builder.name}>"


class _Names:
    """Module-wide unique names: instructions `base.N`, computations `base` or `base.N`."""

    def __init__(self):
        self.count = 0
        self.computations = NameUniquer()

    def instruction(self, base: str) -> str:
        self.count += 1
        return f"{base}.{self.count}"

    def computation(self, base: str) -> str:
        return self.computations(base)


class Captures:
    """The tuple parameter of loop or branch bodies: `num_state` state elements, then values
    captured from enclosing computations (`outer`, ops of the parent builder)."""

    def __init__(self, state_shapes):
        self.num_state = len(state_shapes)
        self.shapes = [s.with_default_layout() for s in state_shapes]
        self.outer: list[XlaOp] = []
        self._index: dict[int, int] = {}
        self.params: list[HloInstruction] = []  # tuple parameters kept in sync

    @property
    def tuple_shape(self) -> Shape:
        return Shape.tuple_of(self.shapes)

    def index_of(self, outer: XlaOp) -> int:
        key = id(outer.instr)
        if key not in self._index:
            self._index[key] = len(self.shapes)
            self.shapes.append(outer.shape)
            self.outer.append(outer)
            for param in self.params:  # the element exists in every body sharing the tuple
                param.shape = self.tuple_shape
        return self._index[key]


def as_shape(shape) -> Shape:
    """A Shape from a Shape, HLO text (`"f32[2,3]"`) or a (dtype, dims) pair."""
    if isinstance(shape, Shape):
        return shape
    if isinstance(shape, str):
        from ..text import parse_shape

        return parse_shape(shape)
    if isinstance(shape, tuple) and len(shape) == 2:
        dtype, dims = shape
        name = dtype if dtype in ELEMENT_TYPES else from_numpy(np.dtype(dtype)).name
        return Shape.array(name, dims)
    raise FrontendTypeError(f"expected a Shape, HLO shape text or (dtype, dims), got {shape!r}")


class Builder:
    """Builds one computation; `build(root)` returns it, `module(root)` a whole HloModule."""

    def __init__(
        self,
        name: str = "main",
        *,
        parent: "Builder | None" = None,
        captures: Captures | None = None,
    ):
        self.name = name
        self.parent = parent
        self.depth = parent.depth + 1 if parent is not None else 0
        self._names = parent._names if parent is not None else _Names()
        # module-wide: every sub-computation built so far, and cached scalar reducers
        self._computations: list[HloComputation] = parent._computations if parent else []
        self._reducers: dict = parent._reducers if parent is not None else {}
        self._instructions: list[HloInstruction] = []
        self._parameters: dict[int, HloInstruction] = {}
        self._captures = captures
        self._lifted: dict[int, XlaOp] = {}
        self._tuple_param: XlaOp | None = None
        self.built = False
        if captures is not None:
            self._tuple_param = self.parameter(captures.tuple_shape, "param")
            captures.params.append(self._tuple_param.instr)

    def __repr__(self) -> str:
        return f"<Builder {self.name}: {len(self._instructions)} instructions>"

    # -- values -----------------------------------------------------------------------------
    def parameter(self, shape, name: str = "", number: int | None = None) -> XlaOp:
        shape = as_shape(shape).with_default_layout()
        number = len(self._parameters) if number is None else number
        if number in self._parameters:
            raise FrontendError(f"{self.name} already has a parameter {number}")
        op = self.emit(
            "parameter", shape=shape, parameter_number=number, name=name or f"Arg_{number}"
        )
        self._parameters[number] = op.instr
        return op

    def constant(self, value, dtype=None) -> XlaOp:
        """A constant from a NumPy value; Python floats become f32 and ints s32."""
        if dtype is None and isinstance(value, (bool, int, float, complex)):
            dtype = {bool: np.bool_, int: np.int32, float: np.float32, complex: np.complex64}[
                type(value)
            ]
        if isinstance(dtype, str):
            dtype = Shape.array(dtype).numpy_dtype
        array = np.asarray(value, dtype=dtype)
        if array.dtype == object:
            raise FrontendTypeError(f"cannot make a constant out of {type(value).__name__}")
        shape = Shape.array(from_numpy(array.dtype), array.shape).with_default_layout()
        return self.emit("constant", shape=shape, literal=array, name="constant")

    @property
    def captures(self) -> Captures | None:
        return self._captures

    def tuple_element(self, index: int) -> XlaOp:
        """Element `index` of a loop or branch body's tuple parameter."""
        return self.emit("get-tuple-element", [self._tuple_param], {"index": index})

    def state(self) -> list[XlaOp]:
        """The state elements of a loop or branch body's tuple parameter."""
        return [self.tuple_element(i) for i in range(self._captures.num_state)]

    # -- emission ---------------------------------------------------------------------------
    def emit(
        self,
        opcode: str,
        operands=(),
        attrs: dict | None = None,
        *,
        shape: Shape | None = None,
        literal=None,
        parameter_number: int | None = None,
        name: str | None = None,
    ) -> XlaOp:
        """Adds one instruction; its shape comes from the shape rules (a declared `shape` is
        checked against them, and is required where the rules need one, e.g. reshape)."""
        if self.built:
            raise EscapedTracerError(f"computation {self.name} is already built")
        operands = [self.lift(as_op(o, opcode)) for o in operands]
        instr = HloInstruction(
            opcode,
            shape,
            [o.instr for o in operands],
            attrs or {},
            name=self._names.instruction(name or opcode),
            literal=literal,
            parameter_number=parameter_number,
        )
        if opcode not in ("parameter", "constant"):
            try:
                inferred = infer_shape(instr)
            except (ShapeError, ValueError, TypeError, IndexError, AttributeError) as exc:
                instr.drop_operands()
                raise FrontendShapeError(str(exc)) from None
            if shape is not None and not same(inferred, shape):
                instr.drop_operands()
                raise FrontendShapeError(
                    f"{opcode}: declared shape {shape.without_layout()} "
                    f"but the operands give {inferred}"
                )
            instr.shape = inferred.with_default_layout()
        self._instructions.append(instr)
        return XlaOp(self, instr)

    def lift(self, op: XlaOp) -> XlaOp:
        """`op` as a value of this builder: ops of enclosing computations are captured."""
        if op.builder is self:
            return op
        key = id(op.instr)
        if key in self._lifted:
            return self._lifted[key]
        if not self._is_ancestor(op.builder):
            raise EscapedTracerError(
                f"%{op.instr.name} belongs to computation {op.builder.name}, which does not "
                f"enclose {self.name} (a traced value escaped its trace?)"
            )
        if self._captures is None:
            raise FrontendError(
                f"computation {self.name} cannot use %{op.instr.name} of the "
                f"enclosing computation {op.builder.name}; only loop and "
                f"branch bodies capture values"
            )
        index = self._captures.index_of(self.parent.lift(op))
        lifted = self.emit("get-tuple-element", [self._tuple_param], {"index": index})
        self._lifted[key] = lifted
        return lifted

    def _is_ancestor(self, other: "Builder") -> bool:
        node = self.parent
        while node is not None:
            if node is other:
                return not other.built
            node = node.parent
        return False

    # -- sub-computations -------------------------------------------------------------------
    def child(self, name: str, captures: Captures | None = None) -> "Builder":
        return Builder(name, parent=self, captures=captures)

    def computation(self, fn, param_shapes, name: str = "region") -> HloComputation:
        """A computation from a Python callable that receives one XlaOp per parameter and
        returns an XlaOp or a tuple of them; an HloComputation is adopted as is."""
        if isinstance(fn, HloComputation):
            return self.adopt(fn)
        if not callable(fn):
            raise FrontendTypeError(
                f"expected a callable or HloComputation, got {type(fn).__name__}"
            )
        sub = self.child(name)
        params = [sub.parameter(shape, f"p{i}") for i, shape in enumerate(param_shapes)]
        out = fn(*params)
        return sub.build(out)

    def reducer(self, opcode: str, dtype: str, count: int = 1) -> HloComputation:
        """The cached scalar computation `(a, b) -> opcode(a, b)` (elementwise over `count`
        accumulators for variadic reduces)."""
        key = (opcode, dtype, count)
        if key not in self._reducers:
            shape = Shape.array(dtype, ())

            def body(*params):
                outs = [
                    params[i].builder.emit(opcode, [params[i], params[i + count]])
                    for i in range(count)
                ]
                return outs[0] if count == 1 else tuple(outs)

            self._reducers[key] = self._root().computation(
                body, [shape] * (2 * count), f"{opcode.replace('-', '_')}_{dtype}"
            )
        return self._reducers[key]

    def adopt(self, comp: HloComputation) -> HloComputation:
        """Makes a computation built elsewhere part of this module (renamed if it came from
        another builder, so names stay unique)."""
        if any(c is comp for c in self._computations):
            return comp
        copy = comp.clone(name=self._names.computation(comp.name))
        for instr in copy.instructions:
            instr.name = self._names.instruction(instr.name.split(".")[0])
        for callee in copy.called_computations():
            adopted = self.adopt(callee)
            for instr in copy.instructions:
                for attr in instr.opdef.calls:
                    value = instr.attrs.get(attr)
                    if isinstance(value, (list, tuple)):
                        instr.attrs[attr] = [adopted if c is callee else c for c in value]
                    elif value is callee:
                        instr.attrs[attr] = adopted
        self._computations.append(copy)
        return copy

    def _root(self) -> "Builder":
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    # -- finishing --------------------------------------------------------------------------
    def build(self, root=None) -> HloComputation:
        """The computation with `root` (an XlaOp, or a tuple/list of them) as its result.
        Instructions that do not reach the root are dropped (parameters stay)."""
        if root is None:
            if not self._instructions:
                raise FrontendError(f"computation {self.name} is empty")
            root = XlaOp(self, self._instructions[-1])
        elif isinstance(root, (tuple, list)):
            root = self.emit("tuple", list(root))
        else:
            root = self.lift(as_op(root, "build"))
        numbers = sorted(self._parameters)
        if numbers != list(range(len(numbers))):
            raise FrontendError(f"{self.name}: parameter numbers {numbers} are not 0..n-1")
        live = _reachable(root.instr)
        kept = []
        for instr in self._instructions:
            if id(instr) in live or instr.opcode == "parameter":
                kept.append(instr)
            else:
                instr.drop_operands()  # keep users lists exact for passes
        comp = HloComputation(self._names.computation(self.name), kept, root.instr)
        self.built = True
        if self.parent is not None:
            self._computations.append(comp)
        return comp

    def module(self, root=None, name: str | None = None) -> HloModule:
        """An HloModule whose entry is this builder's computation, with every sub-computation
        it calls and an entry_computation_layout of default (row-major) layouts."""
        if self.parent is not None:
            raise FrontendError(f"{self.name} builds a sub-computation, not a module")
        entry = self.build(root)
        module = HloModule(name or self.name)
        for comp in _callees(entry):
            module.add_computation(comp)
        module.add_computation(entry, entry=True)
        module.entry_computation_layout = module.program_shape()
        return module


def as_op(value, what: str) -> XlaOp:
    if isinstance(value, XlaOp):
        return value
    op = getattr(value, "op", None)  # a Tracer carries its XlaOp
    if isinstance(op, XlaOp):
        return op
    raise FrontendTypeError(
        f"{what} expects XlaOp operands, got {type(value).__name__} "
        f"(make constants with builder.constant(...))"
    )


def _reachable(root: HloInstruction) -> set[int]:
    live: set[int] = set()
    stack = [root]
    while stack:
        instr = stack.pop()
        if id(instr) not in live:
            live.add(id(instr))
            stack.extend(instr.operands)
    return live


def _callees(comp: HloComputation) -> list[HloComputation]:
    """Computations `comp` calls, transitively, callees first."""
    order: list[HloComputation] = []
    seen: set[int] = set()

    def visit(c: HloComputation) -> None:
        for callee in c.called_computations():
            if id(callee) not in seen:
                seen.add(id(callee))
                visit(callee)
                order.append(callee)

    visit(comp)
    return order
