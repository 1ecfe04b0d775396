"""Driver code: one generated Python function per control computation (entry, while bodies and
conditions, branches, called computations, fusions that do not become one kernel).

A driver function calls kernels and thunks in schedule order on preallocated buffers and
returns its root; while/conditional/call become Python control flow around calls of other
driver functions. Nothing walks instructions at run time: `build_program` decides everything
once and emits straight-line source such as

    def entry(p0, p1):
        p0 = np.ascontiguousarray(p0)
        k0(p0.reshape(-1), p1.reshape(-1), a3.reshape(-1))    # fusion.3 -> arena slot
        v4 = np.empty((1024,), dt_f32)                          # the result: a fresh array
        k1(a3, v4)
        return v4

The dispatch and the lowerings both backends share are in codegen/driver.py; this module is the
CPU's hook table (`HOOKS`): the rules that pick kernel (generated Numba), thunk (BLAS, NumPy
copies, library and custom calls) or scatter for an instruction, the interpreter's handler as
the fallback, and the lowerings of those kinds. Its builder adds the CPU's buffer assignment,
donated arguments and native while loops.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ...reference import denormals
from .. import flush_denormals_requested
from ..codegen.driver import (
    CONTROL,
    DriverBuilder,
    DriverFunction,
    Hooks,
    dus_rule,
    fusion_rule,
    loop_limit,
    single_op_rule,
    while_lines,
)
from ..codegen.driver import nest as _nest
from ..codegen.driver import source as _source
from ..codegen.plan import (
    ALIGNMENT,
    constant_value,
    is_view_op,
    loop_carried_updates,
    needs_copy,
    plan_computation,
)
from . import convolution, donation, gemm, lapack, libcalls, native_loop, opkernels, thunks
from .blas_threads import run_split, use_threads
from .kernels import (
    PARALLEL_WORK,
    KernelSpec,
    build_kernel,
    kernel_arg,
    read_in_place,
    window_view,
)


@dataclass
class Program:
    source: str
    namespace: dict
    kernels: dict[str, KernelSpec]  # global name -> spec (compiled and bound by the backend)
    entry: str
    arena_bytes: int
    fallbacks: Counter = field(default_factory=Counter)
    assignment: object = None  # the BufferAssignment the arena follows, if any
    fallback_reasons: list = field(default_factory=list)  # (instruction, why no kernel)
    aliases: list = field(default_factory=list)  # AliasEntry: outputs in donated arguments

    def dump_files(self) -> dict[str, str]:
        """What `--dump_to` writes for this program: driver, kernels, buffer assignment."""
        files = {
            "cpu.driver.py": self.source,
            "cpu.kernels.py": "\n\n".join(
                f"# kernel {name}\n{spec.source}" for name, spec in self.kernels.items()
            ),
        }
        if self.assignment is not None:
            files["buffer-assignment.txt"] = self.assignment.report()
        return files


class _Builder(DriverBuilder):
    def __init__(self, module, options: dict):
        super().__init__(module, options)
        self.parallel_threshold = int(options.get("parallel_threshold", PARALLEL_WORK))
        self.allow_native_loops = bool(options.get("native_loops", True))
        self.ns: dict = {
            "np": np,
            "_contiguous": _contiguous,
            "_loop_input": _loop_input,
            "_into_donated": donation.into_donated,
        }
        self.views: list[tuple[str, int, object]] = []  # (name, arena offset, shape)
        self.view_bytes: dict[str, tuple] = {}  # arena view -> (offset, dims, dtype)
        self.kernel_args: dict[str, tuple[str, str]] = {}  # argument expr -> (global, expr)
        self.carried: dict[int, dict] = {}  # id(while body) -> {state leaf: in-place DUS}
        self.native_loops: dict[int, tuple | None] = {}  # id(while) -> native_while's answer
        self.assignment = _buffer_assignment(module, options)
        self.arena_bytes = self.assignment.arena_size if self.assignment is not None else 0
        self.aliases = donation.aliases(module, self.assignment)  # outputs in donated buffers
        self.flush_denormals = flush_denormals_requested(options)
        if self.flush_denormals:
            from ...reference.evaluator import Evaluator

            self._evaluator = Evaluator(module, flush_denormals=True)
            self.ns.update(_flushed=denormals.flushed, _flush=denormals.flush_in_place)

    def bind(self, prefix: str, value) -> str:
        name = self.fresh_name(prefix)
        self.ns[name] = value
        return name

    bind_host = bind

    def fixed_arg(self, name: str, expr: str) -> str:
        """A kernel argument reshaped (or viewed) from an arena view or a constant is the same
        array on every call: it is made once, after the arena exists, and bound as a global
        (a reshape per call costs about a microsecond, which small loops pay per iteration)."""
        if expr == name or not (name in self.view_bytes or name in self.ns):
            return expr
        if expr not in self.kernel_args:
            self.kernel_args[expr] = (self.fresh_name("r"), expr)
        return self.kernel_args[expr][0]

    def dtype(self, shape) -> str:
        name = f"dt_{shape.dtype}"
        self.ns.setdefault(name, shape.numpy_dtype)
        return name

    def kernel_spec(self, comp) -> KernelSpec:
        return build_kernel(
            comp, parallel_threshold=self.parallel_threshold, flush_denormals=self.flush_denormals
        )

    # -- the module's buffer assignment ------------------------------------------------------
    def _allocation(self, instr, leaf=()):
        try:
            return self.assignment.allocation_of(instr, leaf)
        except (KeyError, AttributeError):
            return None

    def _shares_operand_buffer(self, instr) -> bool:
        """A reshape may stay a view unless buffer assignment gave it storage of its own (it
        may then reuse the operand's storage as soon as the reshape has run)."""
        if self.assignment is None:
            return True
        mine = self._allocation(instr)
        return mine is None or mine is self._allocation(instr.operand(0))

    def shared_slot(self, instr, leaf, decision) -> int | None:
        """The arena offset buffer assignment chose for a temporary, when the driver can use
        it: not an output, and not a kernel with several loop nests writing over an input
        (the second nest would read what the first overwrote)."""
        allocation = self._allocation(instr, leaf)
        if allocation is None or not allocation.in_arena or allocation.maybe_live_out:
            return None
        how, spec = decision
        for number, operand in enumerate(instr.operands):
            if all(
                self._allocation(operand, i) is not allocation for i, _ in operand.shape.leaves()
            ):
                continue
            # Writing over an input is only safe where every element is read before it is
            # written: an in-place update, or a one-nest kernel reading the input elementwise.
            if how in ("dus", "scatter") and number == 0:
                continue
            if how == "kernel" and spec.loop_nests == 1 and _can_share(instr, number):
                continue
            return None
        return allocation.offset

    def native_loop(self, loop):
        """native_loop.native_while's answer for `loop`, made once (it binds buffers)."""
        if not self.allow_native_loops:
            return None
        if id(loop) not in self.native_loops:
            updates = self.body_updates(loop.attrs["body"])
            self.native_loops[id(loop)] = native_loop.native_while(
                self, loop, updates, self.max_while_iterations
            )
        return self.native_loops[id(loop)]

    def private_leaves(self, loop, decisions) -> frozenset:
        """State leaves a native loop copies before it writes them: the ones its body
        rewrites, and the in-place updated ones this computation did not make for it alone."""
        written = decisions[id(loop)][1].written
        updates = self.body_updates(loop.attrs["body"])
        return frozenset(written | {i for i in updates if not _owned_by_loop(decisions, loop, i)})

    # -- functions -------------------------------------------------------------------------
    def body_updates(self, body) -> dict:
        """The state leaves `body` updates in place (decided before its function is
        emitted; only for a body no other instruction calls)."""
        if id(body) not in self.carried:
            callers = [
                i
                for i in self.module.all_instructions()
                if any(v is body for v in i.attrs.values())
            ]
            updates = {}
            if all(
                c.opcode == "while" and c.attrs["body"] is body and c.attrs["condition"] is not body
                for c in callers
            ):
                decisions = {id(i): self.decide(i) for i in body.instructions}
                order = list(body.instructions) if self.module.is_scheduled else body.post_order()
                updates = loop_carried_updates(body, lambda i: decisions[id(i)][0], order)
            self.carried[id(body)] = updates
        return self.carried[id(body)]

    def new_function(self, comp, order, decisions, is_entry: bool) -> _Function:
        shared = None
        if self.assignment is not None:

            def shared(i, leaf):
                return self.shared_slot(i, leaf, decisions[id(i)])

        how = lambda i: decisions[id(i)][0]  # noqa: E731
        carried = {id(d) for d in self.carried.get(id(comp), {}).values()}
        donated = donation.EntryDonations()
        if is_entry and self.aliases:
            donated = donation.direct_writes(comp, order, decisions, self.assignment, _can_share)
            carried |= donated.in_place
        native = {
            id(i): self.private_leaves(i, decisions)
            for i in order
            if decisions[id(i)][0] == "while" and decisions[id(i)][1] is not None
        }
        plan = plan_computation(
            comp,
            order=order,
            is_entry=is_entry,
            how=how,
            shared=shared,
            carried=carried,
            native_loops=native,
        )
        base = self.arena_bytes
        self.arena_bytes += -(-plan.arena_bytes // ALIGNMENT) * ALIGNMENT
        fn = _Function(self, comp, plan, decisions, base, is_entry)
        fn.donated = donated
        return fn


class _Function(DriverFunction):
    """Source of one driver function."""

    donated = donation.EntryDonations()

    def exit(self, value, kinds, shape) -> str:
        if self.is_entry and self.b.aliases:
            outputs = {tuple(e.output_index): donation.argument(e) for e in self.b.aliases}
            return donation.exit_expression(self, value, kinds, shape, outputs, _exit, _source)
        return _exit(value, kinds, shape, self.is_entry)

    def host_value(self, expr: str) -> str:
        return f"_flushed({expr})" if self.b.flush_denormals else expr

    def outputs(self, instr) -> list[str]:
        """A buffer name per array leaf: an arena view, or a fresh array made here."""
        names = []
        for leaf, shape in instr.shape.leaves():
            target = self.donated.targets.get((id(instr), leaf))
            if target is not None:  # written straight into the donated argument
                names.append(self.b.fresh_name("v"))
                self.lines.append(f"{names[-1]} = {target}")
                continue
            slot = self.plan.slots.get((id(instr), leaf))
            if slot is not None:
                view = self.b.fresh_name("a")
                offset = slot.offset if slot.shared else self.base + slot.offset
                self.b.views.append((view, offset, shape))
                self.b.view_bytes[view] = (offset, tuple(shape.dims), shape.dtype)
                names.append(view)
                continue
            var = self.b.fresh_name("v")
            self.lines.append(f"{var} = np.empty({tuple(shape.dims)!r}, {self.b.dtype(shape)})")
            names.append(var)
        self.names[id(instr)] = (
            names[0] if not instr.shape.is_tuple else _nest(instr.shape, iter(names))
        )
        return names


def _loop_input(array):
    # A state leaf the native loop only reads, flat; a read-only one (a constant, a donated
    # argument already used) is copied, since the loop's signature takes writeable arrays.
    flat = array.reshape(-1)
    return flat if flat.flags.writeable else flat.copy()


def _contiguous(array):
    # np.ascontiguousarray would turn a 0-d array into a 1-d one.
    return array if array.flags.c_contiguous else np.ascontiguousarray(array)


def _exit(value, kinds, shape, is_entry: bool) -> str:
    """The returned expression, copying leaves that may not be handed out as they are."""
    if shape.is_tuple:
        parts = [
            _exit(
                value[i] if isinstance(value, tuple) else f"{_source(value)}[{i}]",
                kinds[i],
                s,
                is_entry,
            )
            for i, s in enumerate(shape.tuple_shapes)
        ]
        return "(" + "".join(p + ", " for p in parts) + ")"
    if shape.is_token or not needs_copy(kinds, is_entry):
        return _source(value)
    return f"np.array({_source(value)})"


# ---- lowerings ------------------------------------------------------------------------------


def _parameter(fn: _Function, instr, _):
    name = f"p{instr.parameter_number}"
    if fn.is_entry and instr.shape.is_array:
        fn.lines.append(f"{name} = _contiguous({name})")
    if fn.is_entry and fn.b.flush_denormals:
        fn.lines.append(f"{name} = _flushed({name})")
    fn.names[id(instr)] = name


def _constant(fn: _Function, instr, _):
    value = constant_value(instr)
    value = (
        np.array(instr.literal if value is None else value, copy=True, order="C")
        if not instr.shape.is_tuple
        else instr.literal
    )
    if fn.b.flush_denormals:
        value = denormals.flushed(value)
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    fn.names[id(instr)] = fn.b.bind("c", value)


def _kernel(fn: _Function, instr, spec: KernelSpec, outs=None):
    outs = fn.outputs(instr) if outs is None else outs
    leaf_shapes = [s for _, s in instr.shape.leaves()]
    if any(s.numel() == 0 for s in leaf_shapes):
        return  # nothing to compute; an empty output needs no writes
    operands = instr.operands
    args, names = [], []
    for (kind, what), dtype in zip(spec.args, spec.dtypes):
        if kind == "split":  # the part, which run_split passes
            continue
        expr = None
        if kind == "param":
            name, rank = _source(fn.value(operands[what])), operands[what].shape.rank
            if what in spec.windows:  # never the same memory as an output (in-place pairs)
                expr = window_view(name, operands[what].shape, spec.windows[what])
        elif kind == "const":
            literal = denormals.flushed(what.literal) if fn.b.flush_denormals else what.literal
            name = fn.b.bind("c", np.ascontiguousarray(literal))
            rank = what.shape.rank
        else:
            name, rank = outs[what], leaf_shapes[what].rank
        names.append(expr or name)
        args.append(fn.b.fixed_arg(name, kernel_arg(expr or name, rank, spec.flat, dtype)))
    # an arena view's bytes, dims and type: buffer assignment shares a parameter's in place
    spec, args = read_in_place(spec, [fn.b.view_bytes.get(name) for name in names], args)
    if spec.parallel:  # in parts, as many as its work gets threads in this call
        runner = fn.b.bind_host("run_split", run_split)
        fn.lines.append(f"{runner}({fn.b.kernel(spec)}, {spec.work}, {', '.join(args)})")
    else:
        fn.lines.append(f"{fn.b.kernel(spec)}({', '.join(args)})")
    _flush_outputs(fn, instr, outs)


def _thunk(fn: _Function, instr, run):
    outs = fn.outputs(instr)
    out = outs[0] if not instr.shape.is_tuple else _source(fn.value(instr))
    name = fn.b.bind("t", run)
    fn.lines.append(f"{name}({', '.join([out] + fn.operands(instr))})")
    _flush_outputs(fn, instr, outs)


def _flush_outputs(fn: _Function, instr, outs) -> None:
    """With flush_denormals: subnormal results of ops that compute (not only move) values
    become zeros, in the buffers they were written to."""
    if not fn.b.flush_denormals or instr.opdef.kind == "movement":
        return
    for out, (_, shape) in zip(outs, instr.shape.leaves()):
        if shape.is_array and denormals.smallest_normal(shape.numpy_dtype) is not None:
            fn.lines.append(f"_flush({out})")


def _scatter(fn: _Function, instr, specs):
    """In place (the plan lets it write operand 0): the kernel without its copy loop."""
    copying, in_place = specs
    if id(instr) in fn.plan.in_place:
        fn.names[id(instr)] = fn.value(instr.operand(0))
        _kernel(fn, instr, in_place, outs=[fn.names[id(instr)]])
    else:
        _kernel(fn, instr, copying)


def _dus_lowering(fn: _Function, instr, _):
    in_place = id(instr) in fn.plan.in_place
    run = thunks.dynamic_update_slice(instr, in_place)
    if in_place:
        fn.names[id(instr)] = fn.value(instr.operand(0))
        out = fn.names[id(instr)]
    else:
        (out,) = fn.outputs(instr)
    name = fn.b.bind("t", run)
    fn.lines.append(f"{name}({', '.join([out] + fn.operands(instr))})")


def _while(fn: _Function, instr, native):
    """A Python loop around the condition and body functions. State leaves the body updates
    in place are copied once before the loop unless this computation made them for the loop
    alone (copy-insertion's copy), so the loop owns every buffer it writes."""
    body = instr.attrs["body"]
    updates = fn.b.body_updates(body)
    init = instr.operand(0)
    state = fn.value(init)
    if native is not None:
        return _native_while(fn, instr, native, state)
    if updates:
        leaves = (
            list(state)
            if isinstance(state, tuple)
            else [f"{state}[{k}]" for k in range(len(instr.shape.tuple_shapes))]
        )
        for i in updates:
            if not _owned_by_loop(fn.decisions, instr, i):
                leaves[i] = f"np.array({_source(leaves[i])})"
        state = tuple(leaves)
    cond = fn.b.function(instr.attrs["condition"])
    name = fn.b.function(body)
    var = fn.b.fresh_name("s")
    fn.lines += while_lines(fn, instr, var, _source(state), cond, name)
    fn.names[id(instr)] = var


def _native_while(fn: _Function, instr, native, state) -> None:
    """The whole loop as one native function (native_loop.py); the state leaves it writes
    are private to the loop, as on the Python path."""
    name, fixed, uses_blas = native.name, native.fixed, native.uses_blas
    private = fn.b.private_leaves(instr, fn.decisions)
    leaves = (
        list(state)
        if isinstance(state, tuple)
        else [f"{state}[{k}]" for k in range(len(instr.shape.tuple_shapes))]
    )
    for i in private:
        leaves[i] = f"np.array({_source(leaves[i])})"
    var, status = fn.b.fresh_name("s"), fn.b.bind("st", np.zeros(1, np.int64))
    fn.lines.append(f"{var} = {_source(tuple(leaves))}")
    args = (
        [
            f"{var}[{i}].reshape(-1)" if i in private else f"_loop_input({var}[{i}])"
            for i in range(len(leaves))
        ]
        + list(fixed)
        + [status]
    )
    if uses_blas:  # the loop's GEMMs are all below the size that gets a second thread
        fn.lines.append(f"{fn.b.bind_host('blas_threads', use_threads)}(1)")
    fn.lines.append(f"{name}({', '.join(args)})")
    if fn.b.max_while_iterations is not None:
        fail = fn.b.bind_host("loop_limit", loop_limit)
        fn.lines += [
            f"if {status}[0]:",
            f"    {status}[0] = 0",
            f"    {fail}({instr.name!r}, {int(fn.b.max_while_iterations)})",
        ]
    fn.names[id(instr)] = var


def _owned_by_loop(decisions, loop, i: int) -> bool:
    """Is state leaf i a buffer this computation wrote only to hand it to this loop?"""
    init = loop.operand(0)
    if init.opcode != "tuple" or init.users != [loop]:
        return False
    leaf = init.operand(i)
    how = decisions[id(leaf)][0]
    return (
        how in ("kernel", "thunk")
        and leaf.users == [init]
        and init.operands.count(leaf) == 1
        and leaf.shape.is_array
    )


def _can_share(instr, number: int) -> bool:
    from ...passes.dataflow import can_share_operand_buffer

    return can_share_operand_buffer(instr, number)


# ---- the hook table ---------------------------------------------------------------------------


def _view(b: _Builder, instr):
    """A view of operand 0; a reshape that buffer assignment gave storage of its own copies."""
    if not is_view_op(instr):
        return None
    if instr.opcode == "reshape" and not b._shares_operand_buffer(instr):
        return "thunk", thunks.reshape_copy(instr)
    return "view", None


def _control(b: _Builder, instr):
    if instr.opcode not in CONTROL:
        return None
    return instr.opcode, b.native_loop(instr) if instr.opcode == "while" else None


def _dot(b: _Builder, instr):
    if instr.opcode != "dot":
        return None
    if opkernels.is_small_dot(instr):
        return "kernel", opkernels.small_dot(instr)
    if not thunks.blas_dot_ok(instr):
        return None
    if gemm.available(instr.shape.dtype):
        return "thunk", thunks.GemmDot(instr, b.ns, b.kernel(gemm.gemm_spec(instr.shape.dtype)))
    return "thunk", thunks.dot(instr)


def _lapack_call(b: _Builder, instr):
    """XLA:CPU's LAPACK FFI targets lapack.py compiles: the batch in one kernel call."""
    found = lapack.plan(instr) if instr.opcode == "custom-call" else None
    if found is None:
        return None
    return "thunk", lapack.LapackCall(found, b.ns, b.kernel(lapack.kernel_spec(found)))


def _custom_call(b: _Builder, instr):
    return ("thunk", thunks.custom_call(instr)) if instr.opcode == "custom-call" else None


def _movement(b: _Builder, instr):
    """Data movement as NumPy copies (memcpy-speed, no compile time)."""
    if instr.opcode in thunks.MOVEMENT and not instr.shape.is_tuple:
        return "thunk", thunks.MOVEMENT[instr.opcode](instr)
    return None


def _convolution(b: _Builder, instr):
    """Overlap-add's GEMM and compiled sums where the plan picks them; else the libcall."""
    if instr.opcode != "convolution" or instr.shape.is_tuple:
        return None
    spec = convolution.plan(instr, native=True)
    if spec.strategy != "overlap-add":
        return None
    kernel = b.kernel(convolution.overlap_add_kernel(instr, spec))
    return "thunk", convolution.OverlapAdd(spec, b.ns, kernel)


def _libcall(b: _Builder, instr):
    if instr.opcode in libcalls.LIBCALLS and not instr.shape.is_tuple:
        return "thunk", libcalls.LIBCALLS[instr.opcode](instr)
    return None


def _scatter_kernels(b: _Builder, instr):
    """A copying kernel and one that updates operand 0 where the plan allows."""
    if instr.opcode == "scatter" and not instr.shape.is_tuple:
        return "scatter", (opkernels.scatter(instr), opkernels.scatter(instr, True))
    return None


def _op_kernel(b: _Builder, instr):
    build = opkernels.BUILDERS.get(instr.opcode)
    return ("kernel", build(instr)) if build is not None else None


# How the CPU computes what the shared dispatch leaves to it, in order; then the interpreter.
HOOKS = Hooks(
    rules=(
        _view,
        _control,
        fusion_rule,
        _dot,
        _lapack_call,
        _custom_call,
        _movement,
        dus_rule,
        single_op_rule(frozenset({"reduce", "transpose", "bitcast"}), tuples=frozenset({"reduce"})),
        _convolution,
        _libcall,
        _scatter_kernels,
        _op_kernel,
    ),
    fallback=thunks.fallback,
    lowering={
        "parameter": _parameter,
        "constant": _constant,
        "kernel": _kernel,
        "thunk": _thunk,
        "dus": _dus_lowering,
        "scatter": _scatter,
        "while": _while,
    },
)
_Builder.hooks = HOOKS


def _buffer_assignment(module, options: dict):
    """The module's buffer assignment (passes/buffer_assignment.py) when the pipeline scheduled
    the module; None means the driver's own plan places every temporary."""
    if not options.get("buffer_assignment", True) or not module.is_scheduled:
        return None
    try:
        from ...passes.buffer_assignment import InputOutputAliasError, assign_buffers
    except ImportError:
        return None
    try:
        return assign_buffers(module)
    except InputOutputAliasError:
        raise  # an impossible must-alias is the user's error, not a missed optimization
    except Exception as exc:  # noqa: BLE001 - an unusable assignment only costs memory
        from ...runtime.metrics import count

        count(f"cpu.buffer_assignment.failed.{type(exc).__name__}")
        return None


def build_program(module, options: dict) -> Program:
    """Driver source, its global bindings and the kernels it needs (not yet compiled)."""
    builder = _Builder(module, options)
    entry = builder.function(module.entry, is_entry=True)
    arena = np.empty(builder.arena_bytes + ALIGNMENT, np.uint8)
    start = (-arena.ctypes.data) % ALIGNMENT
    for name, offset, shape in builder.views:
        nbytes = shape.numel() * shape.numpy_dtype.itemsize
        raw = arena[start + offset : start + offset + nbytes]
        builder.ns[name] = raw.view(shape.numpy_dtype).reshape(shape.dims)
    builder.ns["_arena"] = arena
    for alias, expr in builder.kernel_args.values():
        builder.ns[alias] = eval(expr, builder.ns)  # noqa: S307 - our own generated expression
    source = "\n\n".join(reversed(builder.chunks))
    return Program(
        source,
        builder.ns,
        builder.kernels,
        entry,
        builder.arena_bytes,
        builder.fallbacks,
        builder.assignment,
        builder.fallback_reasons,
        builder.aliases,
    )
