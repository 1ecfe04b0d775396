"""The step computation of a kernel as Numba statements, to be inlined into a grid loop.

The step is HLO over blocks (core.py traces it). Most of its instructions are computed per
element where they are used, by the backends' shared elemental emitter
(backends/codegen/elemental.py): a loop nest over an output block asks for the value of the
root at `(i0, i1)` and the emitter walks the operands at the indices each op maps that to. A
few values become block arrays ("materialized") instead:

* reductions, dots and while loops (fori_loop), which are not a function of one index;
* values with several users that are not cheap to recompute (the `e` of a softmax feeds its sum
  and its division);
* elementwise values that a broadcast expands (a row's `sqrt(var + eps)` is computed once per
  row, not once per element).

Scalars are one-element arrays (the elemental emitter reads them as `a[0]`). A `Target` says how
arrays are allocated and loops are run, so the same emitter serves the cpu grid (native.py:
`np.empty` and plain loops) and the cuda grid (native_cuda.py: shared memory, loops split over a
block's threads). An instruction it cannot emit raises NotEmittable, and the caller falls back to
running the step through a backend.
"""

from __future__ import annotations

import math

from ..backends.codegen.elemental import Elemental, Writer
from ..backends.cpu.kernels import storage_dtype
from ..backends.codegen.scalar import NotEmittable, kernel_type

# Reading these through an index costs no more than reading their operand.
CHEAP = frozenset(
    {
        "parameter",
        "constant",
        "iota",
        "broadcast",
        "reshape",
        "bitcast",
        "copy",
        "slice",
        "dynamic-slice",
        "transpose",
        "get-tuple-element",
        "pad",
        "reverse",
        "convert",
        "tuple",
    }
)
FORWARDING = frozenset({"reshape", "bitcast", "copy"})


def storage_type(dtype: str) -> str:
    """The NumPy type an array of HLO `dtype` holds (bf16: its bit patterns)."""
    kernel_type(dtype)
    return "np." + storage_dtype(dtype).name


def array_dims(shape) -> tuple[int, ...]:
    return tuple(shape.dims) if shape.rank else (1,)


def subscript(index) -> str:
    return ", ".join(index) if index else "0"


def store_expr(value: str, dtype: str) -> str:
    return f"h.bf16_store({value})" if dtype == "bf16" else value


class WindowReads:
    """Elemental emitter mixin: blocks of the kernel's operands are read from the whole array
    at the block's offsets (`in0[o0 + i, o1 + j]`), so the compiler knows the array is
    contiguous, which it cannot for a view of it."""

    windows: dict[int, tuple[str, tuple[str, ...]]] = {}

    def _emit_here(self, instr, index):
        window = self.windows.get(id(instr))
        if window is None:
            return super()._emit_here(instr, index)
        name, offsets = window
        load = f"{name}[{subscript(offset_index(offsets, index))}]"
        return self.bind(f"h.bf16_load({load})" if instr.shape.dtype == "bf16" else load)


def offset_index(offsets, index) -> tuple[str, ...]:
    return tuple(f"{o} + {i}" if o != "0" else i for o, i in zip(offsets, index))


class BlockElemental(WindowReads, Elemental):
    pass


class Target:
    """Where block arrays live and how a loop nest over one is run (the cpu grid's way)."""

    elemental = BlockElemental

    def alloc(self, emitter: "StepEmitter", dims, dtype: str) -> str:
        name = emitter.w.var("a")
        emitter.w.line(f"{name} = np.empty({tuple(dims)}, {storage_type(dtype)})")
        return name

    def open_nest(self, emitter: "StepEmitter", dims) -> list[str]:
        """Opens loops over `dims` (at the current depth); returns the index variables."""
        index = []
        for d in dims:
            var = emitter.w.var("i")
            emitter.w.line(f"for {var} in range({d}):")
            emitter.w.depth += 1
            index.append(var)
        return index

    def close_nest(self, emitter: "StepEmitter", dims) -> None:
        emitter.w.depth -= len(dims)

    def dot(self, emitter: "StepEmitter", instr, lhs: str, rhs: str, m: int, k: int, n: int) -> str:
        out = emitter.w.var("a")
        if instr.shape.dtype in ("f32", "f64"):
            emitter.w.line(f"{out} = np.dot({lhs}, {rhs})")
            return out
        ty = storage_type(instr.shape.dtype)
        emitter.w.line(f"{out} = np.zeros(({m}, {n}), {ty})")
        i, kk, j = (emitter.w.var("i") for _ in range(3))
        for var, bound in ((i, m), (kk, k), (j, n)):
            emitter.w.line(f"for {var} in range({bound}):")
            emitter.w.depth += 1
        emitter.w.line(f"{out}[{i}, {j}] += {lhs}[{i}, {kk}] * {rhs}[{kk}, {j}]")
        emitter.w.depth -= 3
        return out

    def reshaped(self, emitter: "StepEmitter", name: str, dims) -> str:
        out = emitter.w.var("a")
        emitter.w.line(f"{out} = {name}.reshape({tuple(dims)})")
        return out

    def rebind(self, emitter: "StepEmitter", state: list[str], new: list[str]) -> None:
        """A loop's state takes the body's new values (all at once: they may swap)."""
        emitter.w.line(f"{', '.join(state)} = {', '.join(new)}")

    def sync(self, emitter: "StepEmitter") -> None:
        """Between writing an array and reading it elsewhere (nothing to do on one thread)."""


class StepEmitter:
    """Emits computations of the step into `writer`; `arrays` maps id(instr) to the array
    variable holding its value (parameters: the block views the grid loop set up)."""

    def __init__(self, writer: Writer, target: Target):
        self.w = writer
        self.target = target
        self.arrays: dict[int, str] = {}
        self.windows: dict[int, tuple[str, tuple[str, ...]]] = {}  # block parameters
        self.fresh: set[str] = set()  # arrays allocated here: contiguous, in row-major order
        self.shapes: dict[str, tuple[int, ...]] = {}  # their dims

    # -- loop nests --------------------------------------------------------------------------
    def fill(self, dest: str, dims, value_at, dest_dtype: str, scalars=None, offsets=None) -> None:
        """`dest[offsets + index] = value_at(elemental, index)` over `dims`; loop-invariant
        values are computed in front of the loops."""
        w = self.w
        outer_lines, depth = w.lines, w.depth
        hoisted: list[str] = []
        w.lines = []
        em = self.target.elemental(w, self.arrays, hoist=hoisted, flat=False)
        em.scalars = dict(scalars or {})
        em.windows = self.windows
        index = self.target.open_nest(self, dims)
        value = value_at(em, tuple(index))
        at = offset_index(offsets, index) if offsets else index
        w.line(f"{dest}[{subscript(at)}] = {store_expr(value, dest_dtype)}")
        self.target.close_nest(self, dims)
        body, w.lines = w.lines, outer_lines
        w.lines.extend("    " * depth + line for line in hoisted)
        w.lines.extend(body)
        self.target.sync(self)

    def scalar(self, instr, scalars=None) -> str:
        """An expression for a scalar value, emitted in place."""
        em = self.target.elemental(self.w, self.arrays, hoist=None, flat=False)
        em.scalars = dict(scalars or {})
        em.windows = self.windows
        return em.value(instr, ())

    def materialize(self, instr, scalars=None) -> str:
        name = self.copy(instr, scalars)
        self.arrays[id(instr)] = name
        return name

    # -- computations ------------------------------------------------------------------------
    def computation(self, comp, scalars=None) -> None:
        """Materializes what `comp` needs as arrays (its root is left to the caller)."""
        wanted = _wanted_arrays(comp)
        for instr in comp.post_order():
            if id(instr) in self.arrays or instr is comp.root:
                continue
            if instr.opcode == "while":
                self.while_loop(instr, scalars)
            elif instr.opcode == "dot":
                self.dot(instr, scalars)
            elif id(instr) in wanted:
                self.materialize(instr, scalars)

    def array_of(self, instr, scalars=None) -> str:
        return self.arrays.get(id(instr)) or self.materialize(instr, scalars)

    def while_loop(self, instr, scalars) -> None:
        """A while loop over state arrays; elements the body passes through unchanged keep
        their array, the others are rebound to the body's new arrays each iteration."""
        init = instr.operand(0)
        cond, body = instr.attrs["condition"], instr.attrs["body"]
        if init.opcode != "tuple" or body.root.opcode != "tuple":
            raise NotEmittable("a while loop whose state is not a tuple")
        param = body.parameters[0]
        passthrough = [
            op.opcode == "get-tuple-element" and op.operand(0) is param and op.attrs["index"] == k
            for k, op in enumerate(body.root.operands)
        ]
        state = [
            self._kept(e, scalars) if keep else self.copy(e, scalars)
            for e, keep in zip(init.operands, passthrough)
        ]
        for comp in (cond, body):  # a computation shared by two loops is emitted for each
            for member in comp.instructions:
                self.arrays.pop(id(member), None)
                self.windows.pop(id(member), None)
        for comp in (cond, body):
            self._bind_state(comp.parameters[0], state)
        self.w.line("while True:")
        self.w.depth += 1
        self.computation(cond)
        self.w.line(f"if not {self.scalar(cond.root)}:")
        self.w.line("    break")
        self.computation(body)
        changed = [k for k, keep in enumerate(passthrough) if not keep]
        new = [self.array_of(body.root.operand(k)) for k in changed]
        if changed:
            self.target.rebind(self, [state[k] for k in changed], new)
        self.w.depth -= 1
        self._bind_state(instr, state)

    def _kept(self, instr, scalars):
        """A loop state element the body never changes: the block window or array it is."""
        if id(instr) in self.windows:
            return self.windows[id(instr)]
        return self.arrays.get(id(instr)) or self.materialize(instr, scalars)

    def copy(self, instr, scalars=None) -> str:
        """A fresh array holding `instr` (also: a loop's state must not start as a view)."""
        if instr.shape.is_tuple:
            raise NotEmittable(f"a tuple-shaped {instr.opcode} inside a kernel")
        dims = array_dims(instr.shape)
        name = self.target.alloc(self, dims, instr.shape.dtype)
        rank = instr.shape.rank
        self.fill(
            name,
            dims,
            lambda em, index: em.value(instr, index if rank else ()),
            instr.shape.dtype,
            scalars,
        )
        self.fresh.add(name)
        self.shapes[name] = dims
        return name

    def _bind_state(self, tuple_value, state) -> None:
        """Elements of a loop's state (its parameter in cond and body, or its result) read
        from the state's arrays or windows."""
        for user in tuple_value.users:
            if user.opcode != "get-tuple-element":
                raise NotEmittable("a while loop's state used other than element by element")
            element = state[user.attrs["index"]]
            if isinstance(element, tuple):
                self.windows[id(user)] = element
            else:
                self.arrays[id(user)] = element

    def dot(self, instr, scalars) -> None:
        """A 2-d matrix product of operands copied into (m, k) and (k, n) arrays (the copy
        also applies any transpose, slice or conversion the operands come through)."""
        lhs, rhs = instr.operands
        attrs = instr.attrs
        if attrs.get("lhs_batch_dims") or attrs.get("rhs_batch_dims"):
            raise NotEmittable("a dot with batch dimensions")
        (lc,), (rc,) = attrs["lhs_contracting_dims"], attrs["rhs_contracting_dims"]
        if lhs.shape.rank > 2 or rhs.shape.rank > 2:
            raise NotEmittable("a dot of operands of rank above 2")
        dtype = instr.shape.dtype
        k = lhs.shape.dims[lc]
        m = math.prod(d for i, d in enumerate(lhs.shape.dims) if i != lc)
        n = math.prod(d for i, d in enumerate(rhs.shape.dims) if i != rc)
        a = self._operand_matrix(lhs, lc, dtype, (m, k), contracting_last=True, scalars=scalars)
        b = self._operand_matrix(rhs, rc, dtype, (k, n), contracting_last=False, scalars=scalars)
        out = self.target.dot(self, instr, a, b, m, k, n)
        if tuple(instr.shape.dims) != (m, n):
            out = self.target.reshaped(self, out, array_dims(instr.shape))
        self.fresh.add(out)
        self.shapes[out] = array_dims(instr.shape)
        self.arrays[id(instr)] = out

    def _operand_matrix(
        self, operand, contracting: int, dtype: str, dims, *, contracting_last: bool, scalars
    ) -> str:
        name = self.arrays.get(id(operand))
        natural = contracting == (operand.shape.rank - 1 if contracting_last else 0)
        if (
            name in self.fresh
            and natural
            and operand.shape.rank == 2
            and operand.shape.dtype == dtype
        ):
            return name
        out = self.target.alloc(self, dims, dtype)
        cast = kernel_type(dtype)
        rank = operand.shape.rank

        def value_at(em, index):
            row, col = index
            k, free = (col, row) if contracting_last else (row, col)
            full = [free] * rank
            if rank:
                full[contracting] = k
            value = em.value(operand, tuple(full))
            return value if operand.shape.dtype == dtype else f"{cast}({value})"

        self.fill(out, dims, value_at, dtype, scalars)
        self.fresh.add(out)
        self.shapes[out] = tuple(dims)
        return out


def _wanted_arrays(comp) -> set[int]:
    """Instructions of `comp` worth computing once into an array (see the module docstring)."""
    wanted = set()
    for instr in comp.instructions:
        if instr.shape.is_tuple:
            continue
        if instr.opcode == "reduce":
            wanted.add(id(instr))
        elif instr.shape.rank and len(instr.users) > 1 and instr.opcode not in CHEAP:
            wanted.add(id(instr))
        elif instr.opcode == "broadcast" and instr.shape.numel() > instr.operand(0).shape.numel():
            source = instr.operand(0)
            while source.opcode in FORWARDING:
                source = source.operand(0)
            if source.shape.rank and source.opdef.kind == "elementwise":
                wanted.add(id(source))
    return wanted
