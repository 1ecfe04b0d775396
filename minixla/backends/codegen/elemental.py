"""The elemental emitter: Python/Numba statements computing an instruction at a symbolic index.

XLA's CPU backend generates fused loops the same way (its "elemental IR emitter"): the value of
an instruction at output index `(i0, i1, ...)` is its scalar op applied to the operands' values
at the indices the op maps it to (a transpose permutes them, a slice shifts them, a broadcast
drops some). Indices here are Python source strings; each value becomes one assignment
`vN = ...`, memoized per (instruction, index) so a value used twice is computed once.

Values at index () do not depend on any loop variable; the top-level emitter hoists them in
front of the loops (the reduce init values, dynamic-slice offsets, scalar parameters).
Nested loops (a reduce inside a fusion) open a new memo scope, so nothing computed inside them
is reused outside.

Both backends use it: the CPU for Numba loops, CUDA inside its thread loops. What a target
changes is in its Writer subclass (`math_table`: where its transcendental functions are) and in
the handlers a subclass of Elemental adds (CUDA's block reductions and tiles).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection

from .scalar import NotEmittable, Retyped, emit_scalar, kernel_type, kind

Index = tuple[str, ...]
# Real float types a kernel computes in, and their smallest normal value (bf16: f32's range).
FLUSHED = {"f32": 2.0**-126, "bf16": 2.0**-126, "f64": 2.0**-1022}


class Writer:
    """One kernel's source under construction: module-level constants and body lines.

    A target subclasses it and overrides `math_table` (cpu: mathlib's vector functions, cuda:
    its helpers' libdevice tables); without one, transcendental ops use libm (`math.*`)."""

    def __init__(self):
        self.constants: dict[str, str] = {}  # literal source -> global name
        self.math_names: dict[str, str] = {}  # "MATH_F32['log']" -> global name
        self.lines: list[str] = []
        self.depth = 1
        self.counter = 0
        self.uses_reduce = False
        self.flush_denormals = False  # flush subnormal results of every op (reference/denormals.py)
        # A reduce over several dims sums its innermost loop into an accumulator of its own
        # (starting at the identity) and adds that to the running one after the loop: LLVM
        # vectorizes a reduction only when its accumulator starts in the loop's preheader.
        # Reassociates the sum, so only for targets that compile reductions with `reassoc`.
        self.split_inner_reductions = False
        # The target's helpers have `shift_left`/`shift_right_logical`/`shift_right_arithmetic`
        # in the operand's own width (Numba computes `<<` on narrow ints in 64 bits, which
        # LLVM does not narrow back: half as many lanes per vector).
        self.native_shifts = False

    def var(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    def const(self, value, dtype: str) -> str:
        from .scalar import literal

        if dtype[0] in "su" and dtype[1:].isdigit():
            # Integer constants wrap into their type (the scalar rules may ask for -1 as an
            # all-ones unsigned fill; NumPy 2 refuses np.uint8(-1)).
            bits = int(dtype[1:])
            value = int(value) & ((1 << bits) - 1)
            if dtype[0] == "s" and value >= 1 << (bits - 1):
                value -= 1 << bits
        text = literal(value, dtype)
        if text not in self.constants:
            self.constants[text] = f"K{len(self.constants)}"
        return self.constants[text]

    def cast(self, expr: str, dtype: str) -> str:
        return f"{kernel_type(dtype)}({expr})"

    def math_table(self, dtype: str) -> tuple[Collection[str], str] | None:
        """The target's math functions for float type `dtype`: the opcodes its table holds
        and the table's name in kernel source. None: the target has no table."""
        return None

    def has_math(self, opcode: str, dtype: str) -> bool:
        table = self.math_table(dtype)
        return table is not None and opcode in table[0]

    def math(self, opcode: str, dtype: str) -> str:
        table = self.math_table(dtype)
        if table is None or opcode not in table[0]:
            raise NotEmittable(f"no {opcode} for {dtype} in the target's math table")
        key = f"{table[1]}[{opcode!r}]"
        if key not in self.math_names:
            self.math_names[key] = f"{opcode.replace('-', '_')}_{dtype}"
        return self.math_names[key]


class Elemental:
    """Emits values of one computation's instructions. `sources` maps a parameter number to
    either an array argument name (read as `name[index]`) or, for inlined scalar computations,
    to a scalar expression."""

    def __init__(
        self,
        writer: Writer,
        arrays: dict[int, str],
        *,
        scalars=None,
        hoist: list[str] | None = None,
        flat: bool = False,
    ):
        self.w = writer
        self.arrays = arrays  # id(instr) -> array argument (parameters and array constants)
        self.scalars = scalars or {}  # parameter number -> expression (inlined computations)
        self.hoist = hoist  # lines emitted before the loops; None: emit in place
        self.flat = flat  # every array is indexed by one flat index (elementwise-only kernels)
        self.scopes: list[dict] = [{}]
        # id(concatenate or pad) -> (operand, offset): the loop being emitted covers only that
        # operand's range of the concatenated or padded dim (cpu/loops.py splits loops so);
        # a pad's operand None: its fill
        self.concat_pieces: dict[int, tuple] = {}

    # -- memo scopes -------------------------------------------------------------------------
    def _lookup(self, key):
        for scope in reversed(self.scopes):
            if key in scope:
                return scope[key]
        return None

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def bind(self, expr: str, prefix: str = "v", *, at_top: bool = False) -> str:
        """Assigns `expr` to a fresh variable (in front of the loops when `at_top`)."""
        name = self.w.var(prefix)
        if at_top and self.hoist is not None and self.w.lines is not self.hoist:
            self.hoist.append(f"{name} = {expr}")
        else:
            self.w.line(f"{name} = {expr}")
        return name

    # -- values ------------------------------------------------------------------------------
    def value(self, instr, index: Index):
        """Variable name(s) holding `instr` at `index` (a tuple of names for tuple shapes)."""
        index = () if instr.shape.rank == 0 and not instr.shape.is_tuple else tuple(index)
        key = (id(instr), index)
        found = self._lookup(key)
        if found is not None:
            return found
        # Hoist loop-invariant values, unless already emitting hoisted code (then the lines
        # would land inside a hoisted loop; LLVM hoists those itself).
        at_top = index == () and self.hoist is not None and self.w.lines is not self.hoist
        if at_top:
            saved, self.scopes = self.scopes, [self.scopes[0]]
        try:
            result = self._emit(instr, index, at_top)
        finally:
            if at_top:
                self.scopes = saved
        self.scopes[0 if at_top else -1][key] = result
        return result

    def _emit(self, instr, index: Index, at_top: bool):
        if at_top:
            # Everything a loop-invariant value needs is emitted in front of the loops too.
            lines, self.w.lines = self.w.lines, self.hoist
            depth, self.w.depth = self.w.depth, 0
            try:
                return self._emit_here(instr, index)
            finally:
                self.w.lines, self.w.depth = lines, depth
        return self._emit_here(instr, index)

    def _emit_here(self, instr, index: Index):
        if id(instr) in self.arrays:
            load = f"{self.arrays[id(instr)]}[{_subscript(index)}]"
            return self.bind(f"h.bf16_load({load})" if instr.shape.dtype == "bf16" else load)
        if instr.opcode == "parameter":
            if instr.parameter_number in self.scalars:
                return self.scalars[instr.parameter_number]
            raise NotEmittable(f"parameter {instr.parameter_number} has no source")
        handler = ELEMENTAL.get(instr.opcode)
        if handler is not None:
            return handler(self, instr, index)
        if instr.opdef.kind != "elementwise":
            raise NotEmittable(f"{instr.opcode} cannot be computed per element")
        args = [self.value(op, () if op.shape.rank == 0 else index) for op in instr.operands]
        return self.flushed(self.bind(emit_scalar(self.w, instr, args)), instr.shape.dtype)

    def flushed(self, name: str, dtype: str) -> str:
        """`name`, or zero of its sign when subnormal, if the kernel flushes subnormals."""
        if not self.w.flush_denormals or dtype not in FLUSHED:
            return name
        return self.bind(f"h.ftz({name}, {self.w.const(FLUSHED[dtype], dtype)})")

    def index_var(self, expr: str) -> str:
        """A plain name for an index expression (keeps emitted expressions short)."""
        if expr.isidentifier() or expr.lstrip("-").isdigit():
            return expr
        return self.bind(expr, "j")

    def inline(self, comp, args: list[str], shapes=None) -> list[str]:
        """Values of a scalar computation (to_apply of reduce/map) applied to `args`."""
        args = self.as_parameters(comp, args, shapes)
        inner = Elemental(self.w, {}, scalars=dict(enumerate(args)))
        root = inner.value(comp.root, ())
        return list(root) if isinstance(root, tuple) else [root]

    def as_parameters(self, comp, args: list[str], shapes) -> list[str]:
        """`args` converted to `comp`'s parameter types where `shapes` (the args' own) says
        they differ (mixed precision: an f32 operand mapped by a computation of f64
        parameters); as they are without `shapes`."""
        if shapes is None:
            return args
        return [
            arg
            if shape.dtype == param.shape.dtype
            else self.bind(emit_scalar(self.w, Retyped("convert", {}, param.shape, [shape]), [arg]))
            for arg, shape, param in zip(args, shapes, comp.parameters)
        ]

    def accumulate(self, reduce, accumulators: list[str], elements: list[str]) -> list[str]:
        """One step of `reduce`'s to_apply. A bf16 sum or product stays in f32 here and is
        rounded once at the end (see accumulates_in_f32), as XLA and the interpreter do."""
        comp = reduce.attrs["to_apply"]
        if not accumulates_in_f32(reduce):
            count = len(elements)
            results = [s for _, s in reduce.shape.leaves()]
            inputs = [op.shape for op in reduce.operands[:count]]
            return self.inline(comp, accumulators + elements, results + inputs)
        args = accumulators + elements
        operands = [args[o.parameter_number] for o in comp.root.operands]
        return [
            self.flushed(
                self.bind(emit_scalar(self.w, comp.root, operands, round_bf16=False)), "f32"
            )
        ]


def accumulates_in_f32(reduce) -> bool:
    """A one-input bf16 reduce whose to_apply is add or multiply of its two parameters."""
    comp = reduce.attrs["to_apply"]
    root, params = comp.root, comp.parameters
    return (
        reduce.operand_count == 2
        and reduce.operand(0).shape.dtype == "bf16"
        and len(params) == 2
        and root.opcode in ("add", "multiply")
        and {id(o) for o in root.operands} == {id(p) for p in params}
    )


def _subscript(index: Index) -> str:
    # Scalars travel as one-element 1-d arrays: Numba's a[()] on a 0-d array is a view.
    return ", ".join(index) if index else "0"


# ---- non-elementwise ops -----------------------------------------------------------------------

Handler = Callable[[Elemental, object, Index], object]
ELEMENTAL: dict[str, Handler] = {}


def handles(*opcodes: str):
    def register(fn: Handler) -> Handler:
        for opcode in opcodes:
            ELEMENTAL[opcode] = fn
        return fn

    return register


@handles("constant")
def _constant(em, instr, index):
    if instr.shape.rank != 0:
        raise NotEmittable("array constants are passed as kernel arguments")
    value = instr.literal.reshape(()).item()
    tiny = FLUSHED.get(instr.shape.dtype)
    if em.w.flush_denormals and tiny is not None and 0 < abs(value) < tiny:
        value = math.copysign(0.0, value)
    return em.w.const(value, instr.shape.dtype)


@handles("iota")
def _iota(em, instr, index):
    if em.flat:
        raise NotEmittable("iota needs the full index")
    return em.bind(em.w.cast(index[instr.attrs["iota_dimension"]], instr.shape.dtype))


@handles("broadcast")
def _broadcast(em, instr, index):
    operand = instr.operand(0)
    if em.flat:
        if operand.shape.rank != 0:
            raise NotEmittable("broadcast of an array needs the full index")
        return em.value(operand, ())
    return em.value(operand, tuple(index[d] for d in instr.attrs.get("dimensions", ())))


@handles("copy", "opt-barrier")
def _forward(em, instr, index):
    if instr.shape.is_tuple:
        raise NotEmittable("tuple-shaped copy")
    return em.value(instr.operand(0), index)


@handles("reshape", "bitcast")
def _reshape(em, instr, index):
    operand = instr.operand(0)
    value = _moved(em, instr, operand, index)
    src, dst = operand.shape.dtype, instr.shape.dtype
    if instr.opcode == "bitcast" and src != dst:  # XLA allows a same-width type change
        if "pred" in (src, dst) or "bf16" in (src, dst):
            raise NotEmittable(f"a bitcast from {src} to {dst}")
        return f"h.bitcast({value}, {kernel_type(dst)})"
    return value


def _moved(em, instr, operand, index):
    if instr.opcode == "bitcast" and not _default_layouts(instr, operand):
        if em.flat:
            raise NotEmittable("a bitcast between layouts needs the full index")
        return em.value(operand, bitcast_index(em, instr, index))
    if em.flat or operand.shape.dims == instr.shape.dims:
        return em.value(operand, index)
    return em.value(operand, reshape_index(em, instr.shape.dims, operand.shape.dims, index))


def physical_order(shape) -> list[int]:
    """Logical dims from major to minor in memory."""
    return list(reversed(shape.minor_to_major()))


def bitcast_index(em, instr, index: Index) -> Index:
    """Arrays here are stored in logical row-major order whatever their layout, so a bitcast
    (same bytes, new dims and layout) maps the result index to its physical position, and
    that position back to the operand's logical index."""
    operand = instr.operand(0)
    for shape in (instr.shape, operand.shape):
        if shape.layout is not None and shape.layout.tiles:
            raise NotEmittable("bitcast of a tiled layout")
    out_order, in_order = physical_order(instr.shape), physical_order(operand.shape)
    out_physical = [instr.shape.dims[d] for d in out_order]
    in_physical = [operand.shape.dims[d] for d in in_order]
    physical = tuple(index[d] for d in out_order)
    if out_physical != in_physical:
        physical = reshape_index(em, out_physical, in_physical, physical)
    logical = [""] * operand.shape.rank
    for k, d in enumerate(in_order):
        logical[d] = physical[k]
    return tuple(logical)


def _default_layouts(*instrs) -> bool:
    for instr in instrs:
        m2m = instr.shape.minor_to_major()
        if tuple(m2m) != tuple(range(instr.shape.rank - 1, -1, -1)):
            return False
        if instr.shape.layout is not None and instr.shape.layout.tiles:
            return False
    return True


def reshape_index(em: Elemental, out_dims, in_dims, index: Index) -> Index:
    """The operand index of a row-major reshape: dims are matched in groups of equal element
    count, and only inside a group is the index linearized and split again."""
    if 0 in out_dims or 0 in in_dims:
        return tuple("0" for _ in in_dims)  # no element is ever computed
    result: list[str] = []
    i = j = 0
    while i < len(out_dims) or j < len(in_dims):
        out_group, in_group = [i], [j]
        out_size = out_dims[i] if i < len(out_dims) else 1
        in_size = in_dims[j] if j < len(in_dims) else 1
        while out_size != in_size:
            if out_size < in_size:
                i += 1
                out_group.append(i)
                out_size *= out_dims[i]
            else:
                j += 1
                in_group.append(j)
                in_size *= in_dims[j]
        result.extend(
            _regroup(
                em,
                [d for d in out_group if d < len(out_dims)],
                [d for d in in_group if d < len(in_dims)],
                out_dims,
                in_dims,
                index,
            )
        )
        i, j = i + 1, j + 1
    return tuple(result)


def _regroup(em, out_group, in_group, out_dims, in_dims, index) -> list[str]:
    if len(out_group) == 1 and len(in_group) == 1:
        return [index[out_group[0]]]
    terms, stride = [], 1
    for d in reversed(out_group):
        if out_dims[d] != 1:
            terms.append(index[d] if stride == 1 else f"{index[d]} * {stride}")
        stride *= out_dims[d]
    linear = em.index_var(" + ".join(reversed(terms)) or "0")
    parts, stride = [], math.prod(in_dims[d] for d in in_group)
    for k, d in enumerate(in_group):
        stride //= in_dims[d]
        if in_dims[d] == 1:
            parts.append("0")
            continue
        expr = linear if stride == 1 else f"{linear} // {stride}"
        parts.append(em.index_var(expr if k == 0 else f"({expr}) % {in_dims[d]}"))
    return parts


@handles("transpose")
def _transpose(em, instr, index):
    if em.flat:
        raise NotEmittable("transpose needs the full index")
    operand_index = [""] * len(index)
    for k, d in enumerate(instr.attrs["dimensions"]):
        operand_index[d] = index[k]
    return em.value(instr.operand(0), tuple(operand_index))


@handles("slice")
def _slice(em, instr, index):
    if em.flat:
        raise NotEmittable("slice needs the full index")
    operand_index = []
    for i, (start, _, stride) in zip(index, instr.attrs["slice"]):
        expr = i if stride == 1 else f"{i} * {stride}"
        operand_index.append(em.index_var(f"{expr} + {start}" if start else expr))
    return em.value(instr.operand(0), tuple(operand_index))


@handles("reverse")
def _reverse(em, instr, index):
    if em.flat:
        raise NotEmittable("reverse needs the full index")
    dims = instr.shape.dims
    operand_index = tuple(
        em.index_var(f"{dims[d] - 1} - {i}") if d in instr.attrs["dimensions"] else i
        for d, i in enumerate(index)
    )
    return em.value(instr.operand(0), operand_index)


def _clamp_index(em, expr: str, high: int) -> str:
    return em.index_var(f"min(max({expr}, 0), {max(high, 0)})")


@handles("pad")
def _pad(em, instr, index):
    if em.flat:
        raise NotEmittable("pad needs the full index")
    operand, pad_value = instr.operands
    fill = em.value(pad_value, ())
    if operand.shape.numel() == 0:
        return fill
    resolved = em.concat_pieces.get(id(instr))
    if resolved is not None:  # this loop covers one range of the padded dim (loops.py)
        source, offset = resolved
        if source is None:
            return fill
        dim = next(d for d, (low, high, _) in enumerate(instr.attrs["padding"]) if low or high)
        local = list(index)
        local[dim] = em.index_var(f"{index[dim]} - {offset}") if offset else index[dim]
        return em.value(operand, tuple(local))
    conditions, operand_index = [], []
    for i, (low, _, interior), size in zip(index, instr.attrs["padding"], operand.shape.dims):
        shifted = em.index_var(f"{i} - {low}" if low else i)
        step = interior + 1
        position = shifted if step == 1 else em.index_var(f"{shifted} // {step}")
        conditions.append(f"{shifted} >= 0 and {position} < {size}")
        if step != 1:
            conditions.append(f"{shifted} % {step} == 0")
        operand_index.append(_clamp_index(em, position, size - 1))
    inside = em.bind(" and ".join(f"({c})" for c in conditions), "c")
    value = em.value(operand, tuple(operand_index))
    return em.bind(f"{value} if {inside} else {fill}")


@handles("concatenate")
def _concatenate(em, instr, index):
    if em.flat:
        raise NotEmittable("concatenate needs the full index")
    dim = instr.attrs["dimensions"][0]
    resolved = em.concat_pieces.get(id(instr))
    if resolved is not None:
        operand, start = resolved
        local = list(index)
        local[dim] = em.index_var(f"{index[dim]} - {start}") if start else index[dim]
        return em.value(operand, tuple(local))
    pieces, offset = [], 0
    for operand in instr.operands:
        size = operand.shape.dims[dim]
        if size:
            local = list(index)
            local[dim] = _clamp_index(
                em, f"{index[dim]} - {offset}" if offset else index[dim], size - 1
            )
            pieces.append((offset + size, em.value(operand, tuple(local))))
        offset += size
    expr = pieces[-1][1]
    for end, value in reversed(pieces[:-1]):
        expr = f"({value} if {index[dim]} < {end} else {expr})"
    return em.bind(expr)


def _dynamic_starts(em, starts, operand_dims, window_dims) -> list[str]:
    """Start indices clamped so the window fits, as XLA does; computed in front of the loops."""
    if len(starts) == 1 and starts[0].shape.rank == 1:
        raise NotEmittable("the legacy form: one vector holds every start")
    names = []
    for start, size, window in zip(starts, operand_dims, window_dims):
        value = em.value(start, ())
        names.append(
            em.bind(f"min(max(np.int64({value}), 0), {max(size - window, 0)})", "s", at_top=True)
        )
    return names


@handles("dynamic-slice")
def _dynamic_slice(em, instr, index):
    if em.flat:
        raise NotEmittable("dynamic-slice needs the full index")
    operand = instr.operand(0)
    starts = _dynamic_starts(em, instr.operands[1:], operand.shape.dims, instr.shape.dims)
    return em.value(operand, tuple(em.index_var(f"{i} + {s}") for i, s in zip(index, starts)))


@handles("dynamic-update-slice")
def _dynamic_update_slice(em, instr, index):
    if em.flat:
        raise NotEmittable("dynamic-update-slice needs the full index")
    operand, update = instr.operand(0), instr.operand(1)
    if update.shape.numel() == 0:
        return em.value(operand, index)
    starts = _dynamic_starts(em, instr.operands[2:], operand.shape.dims, update.shape.dims)
    inside = (
        " and ".join(f"{s} <= {i} < {s} + {n}" for i, s, n in zip(index, starts, update.shape.dims))
        or "True"
    )
    local = tuple(
        _clamp_index(em, f"{i} - {s}", n - 1) for i, s, n in zip(index, starts, update.shape.dims)
    )
    new, old = em.value(update, local), em.value(operand, index)
    return em.bind(f"{new} if {inside} else {old}")


@handles("map")
def _map(em, instr, index):
    args = [em.value(op, () if op.shape.rank == 0 else index) for op in instr.operands]
    shapes = [op.shape for op in instr.operands]
    (result,) = em.inline(instr.attrs["to_apply"], args, shapes)
    return em.bind(result)


@handles("dot")
def _scalar_dot(em, instr, index):
    """A dot of two scalars (XLA reads one in a reducer or comparator as a multiply): the
    product in dot's work type (f32 or f64 for floats, the result type for integers), rounded
    once to the result, as the interpreter computes it."""
    lhs, rhs = instr.operands
    result = instr.shape
    if lhs.shape.rank or rhs.shape.rank or kind(result.dtype) in ("pred", "complex"):
        raise NotEmittable("dot cannot be computed per element")
    work = result
    if kind(result.dtype) == "float":
        wide = "f64" in (result.dtype, lhs.shape.dtype, rhs.shape.dtype)
        work = result.with_dtype("f64" if wide else "f32")
    a, b = (
        em.bind(emit_scalar(em.w, Retyped("convert", {}, work, [op.shape]), [em.value(op, ())]))
        for op in (lhs, rhs)
    )
    product = em.bind(emit_scalar(em.w, Retyped("multiply", {}, work, [work, work]), [a, b]))
    value = emit_scalar(em.w, Retyped("convert", {}, result, [work]), [product])
    return em.flushed(em.bind(value), result.dtype)


@handles("tuple")
def _tuple(em, instr, index):
    # the root of a variadic reducer or comparator: one value per element
    return tuple(em.value(op, () if op.shape.rank == 0 else index) for op in instr.operands)


@handles("get-tuple-element")
def _get_tuple_element(em, instr, index):
    values = em.value(instr.operand(0), index)
    if not isinstance(values, tuple):
        raise NotEmittable("get-tuple-element of a non-tuple value")
    return values[instr.attrs["index"]]


_IDENTITIES = {"add": 0, "multiply": 1, "or": False, "and": True}


def _identity(reduce):
    """The identity of a one-input reduce whose to_apply is a plain add, multiply, maximum,
    minimum, and or or of its two parameters (None otherwise, or for a bf16 sum kept in f32)."""
    comp = reduce.attrs["to_apply"]
    root, params = comp.root, comp.parameters
    if (
        reduce.operand_count != 2
        or accumulates_in_f32(reduce)
        or len(params) != 2
        or {id(o) for o in root.operands} != {id(p) for p in params}
        or root.operand(0) is root.operand(1)
    ):
        return None
    dtype = reduce.shape.dtype
    if dtype == "pred" and root.opcode in ("and", "or"):
        return _IDENTITIES[root.opcode]
    if root.opcode in ("maximum", "minimum") and dtype != "pred":
        import numpy as np

        if dtype in FLUSHED or dtype in ("f16", "f64"):
            return -math.inf if root.opcode == "maximum" else math.inf
        if dtype[0] in "su" and dtype[1:].isdigit():
            info = np.iinfo(f"{'int' if dtype[0] == 's' else 'uint'}{dtype[1:]}")
            return info.min if root.opcode == "maximum" else info.max
        return None
    if root.opcode in ("add", "multiply") and dtype != "pred" and dtype[0] in "suf":
        return _IDENTITIES[root.opcode]
    return None


@handles("reduce")
def _reduce(em, instr, index):
    """A loop over the reduced dims with scalar accumulators, at one output index."""
    count = instr.operand_count // 2
    inputs, inits = instr.operands[:count], instr.operands[count:]
    dims = sorted(instr.attrs["dimensions"])
    if em.flat and dims:
        raise NotEmittable("reduce needs the full index")
    em.w.uses_reduce = True
    accumulators = []
    for init in inits:
        accumulators.append(em.bind(em.value(init, ()), "acc"))
    input_dims = inputs[0].shape.dims
    identity = _identity(instr) if em.w.split_inner_reductions and len(dims) > 1 else None
    loop_vars, kept = {}, iter(index)
    outer = accumulators
    for k, d in enumerate(dims):
        if identity is not None and k == len(dims) - 1:  # the innermost loop's own sum
            accumulators = [em.bind(em.w.const(identity, instr.shape.dtype), "acc")]
        loop_vars[d] = em.w.var("r")
        em.w.line(f"for {loop_vars[d]} in range({input_dims[d]}):")
        em.w.depth += 1
    full = tuple(loop_vars[d] if d in loop_vars else next(kept) for d in range(len(input_dims)))
    em.push()
    elements = [em.value(operand, full) for operand in inputs]
    combined = em.accumulate(instr, accumulators, elements)
    if len(combined) == 1:
        em.w.line(f"{accumulators[0]} = {combined[0]}")
    else:
        em.w.line(f"{', '.join(accumulators)} = {', '.join(combined)}")
    em.pop()
    em.w.depth -= 1
    if identity is not None:
        total = em.inline(instr.attrs["to_apply"], outer + accumulators)
        em.w.line(f"{outer[0]} = {total[0]}")
        accumulators = outer
    em.w.depth -= len(dims) - 1
    if accumulates_in_f32(instr):
        em.w.line(f"{accumulators[0]} = h.round_bf16({accumulators[0]})")
    return accumulators[0] if count == 1 and not instr.shape.is_tuple else tuple(accumulators)
