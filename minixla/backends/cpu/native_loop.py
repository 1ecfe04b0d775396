"""A while loop as one Numba function: condition and body kernels called in native code.

When every instruction of a loop's condition and body is a generated kernel, a view, a
copy, a broadcast of a scalar, a dynamic-update-slice, a scatter, a float dot (BLAS GEMM,
gemm.py) or one of XLA:CPU's LAPACK calls that lapack.py compiles (with tuples,
get-tuple-elements, parameters and array constants around them), the driver does not run the
loop in Python.
`native_while` emits one function

    @njit(nogil=True, cache=CACHE)
    def loop(s0, s1, b2, b3, c4, status):   # state leaves, temporaries, constants, flag
        while True:
            k0(s0, c4, b2)                    # the condition's kernels
            if not b2[0]:
                break
            k1(h.as_shape(s1, (4, 8)), b3)       # the body's kernels
            for i in range(32):               # body results into the state buffers
                s1[i] = b3[i]
        ...

and the driver calls it once per call of the while. A body result whose kernel may write it
into its state buffer (nothing later reads the old value; `_direct_results`) is written
there, not copied after the body. Every buffer travels flattened (1-d,
C order); kernels get the rank their signature asks for through a reshape. Temporaries are
allocated once at compile time (calls of an executable are serialized), so the loop
allocates nothing. State leaves the body writes are private to the loop: copied once per call
before the loop unless the computation made them for the loop alone, as on the Python path.
Anything else (nested control flow, GEMMs or LAPACK calls large enough for BLAS threads,
other thunks, fallbacks, bf16, empty arrays, large temporaries) keeps the Python loop around
the driver functions.
"""

from __future__ import annotations

import contextlib
import re
from typing import NamedTuple

import numpy as np

from . import lapack
from .blas_threads import always_serial, threads_for
from .cache import module_name
from .gemm import gemm_spec
from .jit import kernel_id
from .kernels import KernelSpec, read_in_place, window_range
from .thunks import GemmDot
from ..codegen.scalar import KERNEL_TYPES

# Temporaries of a native loop live for the executable's lifetime; beyond this many bytes
# the loop is not "small" and keeps the Python path (whose temporaries share the arena).
MAX_TEMP_BYTES = 1 << 20
_STRUCTURE = ("parameter", "get-tuple-element", "tuple", "view", "alias")
# A state leaf, temporary or constant (arguments of the loop function), or a constant block
# of one: the same buffer in every iteration.
_FIXED_BUFFER = re.compile(r"[scn]\d+(\[\d+:\d+\])?")


class _Ineligible(Exception):
    pass


class _Emitter:
    """Native source for the condition and body of one while loop."""

    def __init__(self, builder, loop, updates: dict):
        self.b = builder
        self.loop = loop
        self.updates = {id(dus) for dus in updates.values()}
        self.state_shapes = list(loop.shape.tuple_shapes)
        self.params = [f"s{i}" for i in range(len(self.state_shapes))]  # state leaves
        self.fixed: list[str] = []  # temporaries and constants: driver globals passed in
        self.fixed_dtypes: list[str] = []
        self.callees: dict[str, str] = {}  # local name -> kernel module name
        self.lines: list[str] = []
        self.temp_bytes = 0
        self.uses_blas = False  # calls NumPy's BLAS: the driver sets one BLAS thread first
        self.whole = ""  # the `part` argument that runs a split kernel whole
        self.views: dict[str, str] = {}  # as_shape expression -> its name, made before the loop
        self.prologue: list[str] = []
        # body results written straight into their state leaf: instruction -> {leaf: state}
        self.direct: dict[int, dict[int, int]] = {}

    # -- buffers ------------------------------------------------------------------------
    def temp(self, shape) -> str:
        _check_type(shape)
        self.temp_bytes += shape.numel() * shape.numpy_dtype.itemsize
        if self.temp_bytes > MAX_TEMP_BYTES:
            raise _Ineligible("temporaries too large")
        name = self.b.bind("n", np.empty(shape.numel(), shape.numpy_dtype))
        self.fixed.append(name)
        self.fixed_dtypes.append(shape.dtype)
        return name

    def constant(self, instr) -> str:
        from ..codegen.plan import constant_value

        value = constant_value(instr)
        value = instr.literal if value is None else value
        if instr.shape.is_tuple:
            raise _Ineligible("tuple constant")
        _check_type(instr.shape)
        array = np.array(value, dtype=instr.shape.numpy_dtype, copy=True).reshape(-1)
        array.flags.writeable = False
        name = self.b.bind("c", array)
        self.fixed.append(name)
        self.fixed_dtypes.append(instr.shape.dtype)
        return name

    def shaped(self, name: str, shape, rank: int) -> str:
        """A flat buffer as the rank a kernel or slice expects. The loop's buffers never
        change, so the view is made once before the loop: made per iteration, each view
        costs a reference count up and down (a scan of 4 floats: 80 ns per step)."""
        if rank <= 1:
            return name
        view = f"h.as_shape({name}, {tuple(shape.dims)!r})"
        if not _FIXED_BUFFER.fullmatch(name):
            return view
        if view not in self.views:
            self.views[view] = f"view{len(self.views)}"
            self.prologue.append(f"{self.views[view]} = {view}")
        return self.views[view]

    # -- computations -------------------------------------------------------------------
    def computation(self, comp, body: bool = False) -> object:
        """Emits `comp`'s instructions; returns the (nested) buffer names of its root."""
        names: dict[int, object] = {}
        order = list(comp.instructions) if self.b.module.is_scheduled else comp.post_order()
        decisions = []
        for instr in order:
            if instr.opcode in ("while", "conditional", "call") or instr.shape.is_token:
                raise _Ineligible(f"{instr.opcode} inside the loop")
            decisions.append(self.b.decide(instr))
        if body:
            self.direct = _direct_results(comp, order, decisions)
        for instr, (how, detail) in zip(order, decisions):
            names[id(instr)] = self.instruction(instr, how, detail, names)
        return names[id(comp.root)]

    def instruction(self, instr, how, detail, names):
        op = instr.opcode
        operand = lambda k: names[id(instr.operand(k))]  # noqa: E731
        if how == "parameter":
            if (
                instr.parameter_number != 0
                or not instr.shape.is_tuple
                or any(s.is_tuple for s in instr.shape.tuple_shapes)
            ):
                raise _Ineligible("state is not a flat tuple")
            return tuple(self.params)
        if how == "get-tuple-element":
            value = operand(0)
            if not isinstance(value, tuple):
                raise _Ineligible("get-tuple-element of a computed tuple")
            return value[instr.attrs["index"]]
        if how == "tuple":
            return tuple(operand(k) for k in range(len(instr.operands)))
        if how in ("view", "alias"):
            if instr.shape.is_tuple:
                raise _Ineligible("tuple view")
            return operand(0)
        if how == "constant":
            return self.constant(instr)
        if how == "kernel":
            return self.kernel(instr, detail, names)
        if how == "thunk" and op in ("copy", "reshape") and not instr.shape.is_tuple:
            out = self.temp(instr.shape)
            self.lines += _copy(out, operand(0), instr.shape.numel())
            return out
        if how == "thunk" and op == "broadcast" and instr.operand(0).shape.rank == 0:
            out = self.temp(instr.shape)
            self.lines += _copy(out, f"{operand(0)}[0:1]", instr.shape.numel(), every=0)
            return out
        if how == "dus":
            return self.dynamic_update_slice(instr, names)
        if how == "scatter":  # a loop-carried update writes the state buffer in place
            copying, in_place = detail
            if id(instr) not in self.updates:
                return self.kernel(instr, copying, names)
            target = names[id(instr.operand(0))]
            return self.kernel(instr, in_place, names, outs=[target])
        if how == "thunk" and isinstance(detail, GemmDot):
            return self.gemm(instr, detail.plan, names)
        if how == "thunk" and isinstance(detail, lapack.LapackCall):
            return self.lapack(instr, detail.plan, names)
        raise _Ineligible(f"{op} lowered as {how}")

    def kernel(self, instr, spec: KernelSpec, names, outs=None):
        leaves = [s for _, s in instr.shape.leaves()]
        if any(s.numel() == 0 for s in leaves):
            raise _Ineligible("empty array")
        if "bf16" in spec.dtypes:
            raise _Ineligible("bf16 kernel")
        if outs is None:
            direct = self.direct.get(id(instr), {})
            outs = [
                self.params[direct[n]] if n in direct else self.temp(s)
                for n, s in enumerate(leaves)
            ]
        args = []
        for (kind, what), rank in zip(spec.args, spec.ndims):
            if kind == "split":  # a split kernel runs whole inside a loop
                args.append(self.whole_part())
                continue
            if kind == "param":
                operand = instr.operands[what]
                name, shape = names[id(operand)], operand.shape
                if what in spec.windows and not isinstance(name, tuple):
                    name, shape = _window(name, shape, spec.windows[what])
            elif kind == "const":
                name, shape = self.constant(what), what.shape
            else:
                name, shape = outs[what], leaves[what]
            if isinstance(name, tuple):
                raise _Ineligible("tuple kernel argument")
            args.append(self.shaped(name, shape, rank))
        # a parameter that is an output's very buffer (an update in place) is read through
        # the output's argument, or LLVM's overlap check runs the loop scalar
        buffers = [
            None if kind == "param" and what in spec.windows else arg
            for (kind, what), arg in zip(spec.args, args)
        ]
        spec, args = read_in_place(spec, buffers, args)
        callee = self.call(spec)
        self.lines.append(f"{callee}({', '.join(args)})")
        if not instr.shape.is_tuple:
            return outs[0]
        from ..codegen.driver import nest

        return nest(instr.shape, iter(outs))

    def gemm(self, instr, plan, names):
        """The dot thunk's GEMM kernel, called with the thunk's arguments. Only GEMMs below
        the size that gets a second BLAS thread: those run on one thread whatever the load,
        which the driver sets before the loop (a larger GEMM repays the Python loop)."""
        if plan.empty:
            raise _Ineligible("empty dot")
        if not always_serial(plan.flops):
            raise _Ineligible("a dot large enough for BLAS threads")
        args = []
        for number, copy in ((0, plan.copy_lhs), (1, plan.copy_rhs)):
            operand = instr.operand(number)
            name = names[id(operand)]
            if isinstance(name, tuple):
                raise _Ineligible("tuple dot operand")
            if copy is not None:  # into [batch, m, k] / [batch, k, n] order, as the thunk does
                dims, perm = copy
                ordered = tuple(dims[d] for d in perm)
                into = self.temp(operand.shape)
                loops = [f"j{k}" for k in range(len(dims))]
                at = [""] * len(dims)
                for k, d in enumerate(perm):  # into[j...] = the source at j in perm's order
                    at[d] = loops[k]
                self.lines += _nest(
                    ordered,
                    f"h.as_shape({into}, {ordered!r})[{', '.join(loops)}] = "
                    f"h.as_shape({name}, {dims!r})[{', '.join(at)}]",
                )
                name = into
            args.append(name)
        direct = self.direct.get(id(instr), {})
        out = self.params[direct[0]] if direct else self.temp(instr.shape)
        dims = self.b.bind("c", plan.dims.copy())
        self.fixed.append(dims)
        self.fixed_dtypes.append("s64")
        callee = self.call(gemm_spec(instr.shape.dtype))
        scratch = self.temp(instr.shape) if plan.scratch else out  # else unread
        self.lines.append(f"{callee}({args[0]}, {args[1]}, {out}, {dims}, {scratch})")
        self.uses_blas = True
        return out

    def lapack(self, instr, found, names):
        """lapack.py's batched kernel, called with the thunk's arguments. Only calls whose
        size gets one BLAS thread, as for GEMMs (the driver sets it before the loop)."""
        if found.empty or threads_for(found.flops) != 1:
            raise _Ineligible("a LAPACK call without matrices or with BLAS threads")
        if found.routine == "gesdd" and found.dims[3] == lapack.FLAG["N"]:
            raise _Ineligible("gesdd without vectors")  # the thunk zeroes u and vt
        inputs = [names[id(o)] for o in instr.operands[: lapack.input_count(found)]]
        if any(isinstance(name, tuple) for name in inputs):
            raise _Ineligible("tuple LAPACK operand")
        leaves = [s for _, s in instr.shape.leaves()]
        direct = self.direct.get(id(instr), {})
        outs = [
            self.params[direct[n]] if n in direct else self.temp(s) for n, s in enumerate(leaves)
        ]
        dims = self.b.bind("c", found.dims.copy())
        self.fixed.append(dims)
        self.fixed_dtypes.append("s64")
        scratch = [self.scratch(n, dtype) for n, dtype in lapack.scratch_buffers(found)]
        callee = self.call(lapack.kernel_spec(found))
        self.lines.append(f"{callee}({', '.join([*inputs, *outs, dims, *scratch])})")
        self.uses_blas = True
        if not instr.shape.is_tuple:
            return outs[0]
        from ..codegen.driver import nest

        return nest(instr.shape, iter(outs))

    def scratch(self, elements: int, dtype: str) -> str:
        """A buffer of `elements` of HLO type `dtype`, made once before the loop."""
        from ...ir.shapes import Shape

        return self.temp(Shape.array(dtype, (elements,)))

    def whole_part(self) -> str:
        if not self.whole:
            part = np.array([0, 1], np.int64)
            part.flags.writeable = False
            self.whole = self.b.bind("c", part)
            self.fixed.append(self.whole)
            self.fixed_dtypes.append("s64")
        return self.whole

    def call(self, spec: KernelSpec) -> str:
        """The loop's local name for kernel `spec` (compiled and loaded before the loop)."""
        callee = f"k{len(self.callees)}"
        self.callees[callee] = module_name(kernel_id(spec))
        self.b.kernel(spec)
        return callee

    def dynamic_update_slice(self, instr, names):
        target, update = instr.operand(0), instr.operand(1)
        _check_type(instr.shape)
        if update.shape.numel() == 0:
            raise _Ineligible("empty update")
        if id(instr) in self.updates:
            out = names[id(target)]
        else:
            out = self.temp(instr.shape)
            self.lines += _copy(out, names[id(target)], instr.shape.numel())
        dims, sizes = instr.shape.dims, update.shape.dims
        if not dims:
            self.lines.append(f"{out}[0] = {names[id(update)]}[0]")
            return out
        begins = []
        for d, (dim, size) in enumerate(zip(dims, sizes)):
            start = names[id(instr.operand(2 + d))]
            var = f"{out}_b{d}_{len(self.lines)}"
            self.lines.append(f"{var} = min(max(np.int64({start}[0]), 0), {dim - size})")
            begins.append(var)
        loops = [f"j{d}" for d in range(len(sizes))]
        target, source = f"{out}_t{len(self.lines)}", f"{out}_u{len(self.lines)}"
        self.lines.append(f"{target} = {self.shaped(out, instr.shape, 2)}")
        self.lines.append(f"{source} = {self.shaped(names[id(update)], update.shape, 2)}")
        # the positions are never negative; said to LLVM, the copy loses Numba's
        # negative-index fix-ups and vectorizes (dus_loop: 2.0-2.6 -> 0.64-0.68 ms)
        at = [f"{b} + {j}" for b, j in zip(begins, loops)]
        body = "; ".join(f"h.assume_nonnegative({a})" for a in at)
        self.lines += _nest(
            sizes, f"{body}; {target}[{', '.join(at)}] = {source}[{', '.join(loops)}]"
        )
        return out


def _window(name: str, shape, window) -> tuple[str, object]:
    """The block `window` of flat buffer `name` holding `shape`, and the block's shape."""
    first, stop, dims = window_range(shape, window)
    return f"{name}[{first}:{stop}]", shape.with_dims(dims)


def _copy(dst: str, src: str, count: int, every: int = 1) -> list[str]:
    """Lines copying `count` elements of flat `src` into `dst` (every=0: its first element
    into each). A loop, not `dst[:] = src`, whose shape check formats its error message with
    Numba's string machinery (seconds to compile) and needs Numba's runtime."""
    return [f"for i in range({count}):", f"    {dst}[i] = {src}[{'i' if every else '0'}]"]


def _nest(dims, statement: str) -> list[str]:
    """`statement` inside loops j0, j1, ... over `dims`."""
    lines = [f"{'    ' * d}for j{d} in range({n}):" for d, n in enumerate(dims)]
    return lines + ["    " * len(dims) + statement]


def _check_type(shape) -> None:
    if not shape.is_array or shape.dtype not in KERNEL_TYPES or shape.dtype == "bf16":
        raise _Ineligible(f"element type of {shape}")


class NativeLoop(NamedTuple):
    name: str  # global name of the loop kernel
    fixed: list  # names of its fixed arguments (temporaries, constants)
    written: set  # state leaves it overwrites besides the in-place updates
    uses_blas: bool  # it calls NumPy's BLAS (the driver sets one BLAS thread first)


def native_while(builder, loop, updates: dict, limit) -> NativeLoop | None:
    """The native function running `loop`, or None when its condition or body is not made
    only of native pieces (the Python loop then)."""
    if (
        builder.flush_denormals
        or not loop.shape.is_tuple
        or any(s.is_tuple for s in loop.shape.tuple_shapes)
    ):
        return None
    em = _Emitter(builder, loop, updates)
    saved = (
        dict(builder.kernels),
        dict(builder.kernel_names),
        len(builder.fallback_reasons),
        builder.fallbacks.copy(),
    )
    try:
        for shape in em.state_shapes:
            _check_type(shape)
            if shape.numel() == 0:
                raise _Ineligible("empty state leaf")
        em.lines.append("while True:")
        body_lines = []
        em.lines, outer = [], em.lines
        predicate = em.computation(loop.attrs["condition"])
        if isinstance(predicate, tuple):
            raise _Ineligible("tuple predicate")
        cond_lines = em.lines + [f"if not {predicate}[0]:", "    break"]
        if limit is not None:
            cond_lines += [
                "iterations += 1",
                f"if iterations > {int(limit)}:",
                "    status[0] = 1",
                "    break",
            ]
        em.lines = []
        result = em.computation(loop.attrs["body"], body=True)
        sizes = [shape.numel() for shape in em.state_shapes]
        body_lines, written = _write_back(em.params, result, sizes)
        written |= {k for leaves in em.direct.values() for k in leaves.values()}
        body_lines = em.lines + body_lines
    except _Ineligible:
        builder.kernels, builder.kernel_names = saved[0], saved[1]
        del builder.fallback_reasons[saved[2] :]
        builder.fallbacks = saved[3]
        for name in em.fixed:
            builder.ns.pop(name, None)
        return None
    lines = em.prologue + outer + ["    " + line for line in cond_lines + body_lines]
    args = em.params + em.fixed + ["status"]
    source = _source(em.callees, args, lines, loop.name, limit is not None)
    dtypes = [s.dtype for s in em.state_shapes] + em.fixed_dtypes + ["s64"]
    spec = KernelSpec("loop", source, [], [1] * len(args), dtypes, True, False)
    spec.kid = spec.content_id()
    return NativeLoop(builder.kernel(spec), em.fixed, written, em.uses_blas)


def _direct_results(body, order, decisions) -> dict[int, dict[int, int]]:
    """The body results a kernel or GEMM may write straight into their state leaf k, with no
    copy after the body (XLA's while bodies share the state's buffers): the root's only
    element k (an instruction, or one output of a multi-output kernel), computed after every
    other read of leaf k, reading that leaf itself only where it may share the buffer
    (dataflow.can_share_operand_buffer). Returns {instruction: {output leaf: k}}."""
    from ...passes.dataflow import can_share_operand_buffer

    root, param = body.root, body.parameter(0)
    if root.opcode != "tuple":
        return {}
    leaf_of: dict[int, int] = {}  # the leaf an instruction names: its get-tuple-elements, views
    last_read: dict[int, int] = {}
    for position, (instr, (how, _)) in enumerate(zip(order, decisions)):
        if how == "get-tuple-element" and instr.operand(0) is param:
            leaf_of[id(instr)] = instr.attrs["index"]
            continue
        if how in ("view", "alias") and id(instr.operand(0)) in leaf_of:
            leaf_of[id(instr)] = leaf_of[id(instr.operand(0))]
            continue
        for operand in instr.operands:
            if id(operand) in leaf_of:
                last_read[leaf_of[id(operand)]] = position
    position_of = {id(instr): n for n, instr in enumerate(order)}
    how_of = {id(instr): how for instr, (how, _) in zip(order, decisions)}
    direct: dict[int, dict[int, int]] = {}
    for k, value in enumerate(root.operands):
        leaf, output = 0, ()
        if value.opcode == "get-tuple-element" and value.operand(0).shape.is_tuple:
            leaf, output, value = value.attrs["index"], (value.attrs["index"],), value.operand(0)
            if any(s.is_tuple for s in value.shape.tuple_shapes):
                continue
        elif value.shape.is_tuple:
            continue
        if (
            how_of.get(id(value)) not in ("kernel", "thunk")
            or sum(o is root.operands[k] for o in root.operands) != 1
            or last_read.get(k, -1) > position_of[id(value)]
            or any(
                leaf_of.get(id(o)) == k and not can_share_operand_buffer(value, n, output)
                for n, o in enumerate(value.operands)
            )
        ):
            continue
        direct.setdefault(id(value), {})[leaf] = k
    return direct


def _write_back(params: list[str], result, sizes: list[int]) -> tuple[list[str], set[int]]:
    """Copies of the body's results into the state buffers. A result that is another state
    leaf is read before any copy writes, so only when that leaf is not itself rewritten."""
    if not isinstance(result, tuple) or len(result) != len(params):
        raise _Ineligible("body root is not a tuple of the state")
    if any(isinstance(r, tuple) for r in result):
        raise _Ineligible("nested body result")
    rewritten = {p for p, r in zip(params, result) if r != p}
    lines: list[str] = []
    written: set[int] = set()
    for i, (p, r) in enumerate(zip(params, result)):
        if r == p:
            continue
        if r in rewritten:
            raise _Ineligible("state leaves exchanged")
        lines += _copy(p, r, sizes[i])
        written.add(i)
    return lines, written


def call_by_symbol(*kernels) -> None:
    """Makes the native loops compiled from here on call the compiled overloads of `kernels`
    (Numba dispatchers) by their symbols instead of linking a copy of each into the loop: LLVM
    then neither optimizes nor generates the bodies' machine code a second time (a loop that
    calls 12 kernels took 4.1 s to compile, 2.3 s of it generating their code again). The
    symbols resolve to the kernels' own code: registered with LLVM's JIT here, and in a
    program's library by the linker, which keeps every kernel's symbol global."""
    from llvmlite import binding
    from numba.core.registry import cpu_target

    context = cpu_target.target_context
    for dispatcher in kernels:
        for compiled in dispatcher.overloads.values():
            symbol = compiled.fndesc.mangled_name
            binding.add_symbol(symbol, compiled.library.get_pointer_to_function(symbol))
            with contextlib.suppress(KeyError):  # its lookups are memoized: a new selector
                context.remove_user_function(compiled.entry_point)
            context.insert_user_function(compiled.entry_point, compiled.fndesc, libs=())


def _source(callees: dict, args: list[str], lines: list[str], name: str, counted: bool) -> str:
    imports = [f"{local} = sys.modules[{module!r}].kernel" for local, module in callees.items()]
    return "\n".join(
        [
            f'"""Native while loop {name}."""',
            "import sys",
            "import numpy as np",
            "from numba import njit",
            "from minixla.backends.cpu import helpers as h",
            "from minixla.backends.cpu.native_loop import call_by_symbol",
            *imports,
            f"call_by_symbol({', '.join(callees)})",
            "",
            "",
            "@njit(error_model='numpy', boundscheck=False, nogil=True, cache=CACHE)",
            f"def loop({', '.join(args)}):",
            *(["    iterations = 0"] if counted else []),
            *["    " + line for line in lines],
            "",
        ]
    )
