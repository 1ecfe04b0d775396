"""Driver code for the CUDA backend: one generated Python function per control computation.

The shared driver (codegen/driver.py) decides and emits; this module is CUDA's hook table. A
driver function runs its computation's instructions in schedule order on buffers the shared
plan (codegen/plan.py) placed: parameters, constants, views of one device arena, fresh device
arrays for values that leave the computation. Every value is a
device array; the only host<->device copies are the executable's edges (parameters in, results
out), the predicate of a `while` and the selector of a `conditional` (one scalar each), and
ops that run on the host (fallbacks, reported as `fallback.<opcode>`):

    def entry_1(p0):
        p0 = _param0(p0)                          # host -> device (or a device array as is)
        k0[64, 256](p0, a3)                       # fusion.3 -> an arena view
        v4 = _empty((1024,), dt_f32)
        k1[16, 256](a3, v4)
        return v4                                 # the executable copies results to the host

Emitting needs no GPU and does not import numba.cuda: kernels are source text, constants host
arrays, and device objects (`_empty`, `_param0`, the arena views, compiled kernels) are bound
into the namespace by runtime.py when the program is loaded.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ...errors import UnsupportedError
from ...reference.custom_call import lookup_custom_call
from ..codegen.driver import (
    DriverBuilder,
    DriverFunction,
    Hooks,
    control_rule,
    dus_rule,
    fusion_rule,
    single_op_rule,
    view_rule,
)
from ..codegen.driver import nest as _nest
from ..codegen.driver import source as _src
from ...passes.hlo_utils import single_op_computation
from ..codegen.plan import constant_value, needs_copy, plan_computation
from ..codegen.scalar import NotEmittable
from .indexing import build_scatter_kernel, build_window_kernel, window_ok
from .kernels import KernelSpec, build_kernel, storage_dtype
from .matmul import build_dot_kernel
from .target import geometry

# Lone ops that become single-op kernels (besides elementwise ones).
KERNEL_OPS = frozenset(
    {
        "reduce",
        "transpose",
        "bitcast",
        "broadcast",
        "slice",
        "concatenate",
        "pad",
        "reverse",
        "copy",
        "dynamic-slice",
        "gather",
        "map",
        "reduce-window",
    }
)


@dataclass
class Program:
    source: str
    entry: str
    kernels: dict[str, KernelSpec]  # global name -> spec (compiled by the runtime)
    host: dict[str, object]  # global name -> host callable (fallbacks, custom calls)
    constants: dict[str, object]  # global name -> host value, uploaded by the runtime
    views: list[tuple[str, int, object]]  # (global name, arena offset, shape)
    dtypes: dict[str, object]  # global name -> storage dtype
    params: dict[str, object]  # entry parameter converters: global name -> Shape
    arena_bytes: int
    fallbacks: Counter = field(default_factory=Counter)
    fallback_reasons: list = field(default_factory=list)  # (instruction, why no kernel)


class _Builder(DriverBuilder):
    def __init__(self, module, options: dict):
        super().__init__(module, options)
        self.geometry = geometry(options)
        self.host: dict[str, object] = {}
        self.constants: dict[str, object] = {}
        self.views: list = []
        self.dtypes: dict[str, object] = {}
        self.params: dict[str, object] = {}
        self.arena_bytes = 0

    def dtype(self, shape) -> str:
        name = f"dt_{shape.dtype}"
        self.dtypes.setdefault(name, storage_dtype(shape.dtype))
        return name

    def bind_host(self, prefix: str, fn) -> str:
        name = self.fresh_name(prefix)
        self.host[name] = fn
        return name

    def kernel_spec(self, comp) -> KernelSpec:
        return build_kernel(comp, self.geometry)

    def new_function(self, comp, order, decisions, is_entry: bool) -> _Function:
        plan = plan_computation(
            comp, order=order, is_entry=is_entry, how=lambda i: decisions[id(i)][0]
        )
        base, self.arena_bytes = (
            self.arena_bytes,
            self.arena_bytes + -(-plan.arena_bytes // 256) * 256,
        )
        return _Function(self, comp, plan, decisions, base, is_entry)


class _Function(DriverFunction):
    # Predicates and selectors are device scalars, read back to the host.
    truth, index = "_truth({})", "_scalar({})"

    def exit(self, value, kinds, shape) -> str:
        """The returned expression; leaves that may be reused storage are copied (entry: the
        runtime's `_own`, a device copy only when results stay on the device)."""
        if shape.is_tuple:
            parts = [
                self.exit(
                    value[i] if isinstance(value, tuple) else f"{_src(value)}[{i}]", kinds[i], s
                )
                for i, s in enumerate(shape.tuple_shapes)
            ]
            return "(" + "".join(p + ", " for p in parts) + ")"
        if shape.is_token or not needs_copy(kinds, self.is_entry):
            return _src(value)
        return f"{'_own' if self.is_entry else '_dcopy'}({_src(value)})"

    def outputs(self, instr) -> list[str]:
        names = []
        for leaf, shape in instr.shape.leaves():
            slot = self.plan.slots.get((id(instr), leaf))
            if slot is not None:
                view = self.b.fresh_name("a")
                self.b.views.append((view, self.base + slot.offset, shape))
                names.append(view)
                continue
            var = self.b.fresh_name("v")
            # Entry results may be buffers kept from call to call (runtime.py decides).
            make = f"_result({var!r}, " if self.is_entry else "_empty("
            self.lines.append(f"{var} = {make}{tuple(shape.dims)!r}, {self.b.dtype(shape)})")
            names.append(var)
        self.names[id(instr)] = (
            names[0] if not instr.shape.is_tuple else _nest(instr.shape, iter(names))
        )
        return names

    def launch(self, spec: KernelSpec, args: list[str]) -> None:
        self.lines.append(
            f"{self.b.kernel(spec)}[{spec.blocks}, {spec.threads}]({', '.join(args)})"
        )


def _arg(name: str, rank: int, flat: bool) -> str:
    """An array argument the way the kernel indexes it (scalars as one-element arrays)."""
    if rank == 0:
        return f"{name}.reshape(1)"
    return f"{name}.reshape(-1)" if flat and rank > 1 else name


# ---- lowerings ----------------------------------------------------------------------------------


def _parameter(fn: _Function, instr, _):
    name = f"p{instr.parameter_number}"
    if fn.is_entry:
        converter = f"_param{instr.parameter_number}"
        fn.b.params[converter] = instr.shape
        fn.lines.append(f"{name} = {converter}({name})")
    fn.names[id(instr)] = name


def _constant(fn: _Function, instr, _):
    value = constant_value(instr)
    name = fn.b.fresh_name("c")
    fn.b.constants[name] = (instr.literal if value is None else value, instr.shape)
    fn.names[id(instr)] = name


def _kernel(fn: _Function, instr, spec: KernelSpec):
    outs = fn.outputs(instr)
    leaf_shapes = [s for _, s in instr.shape.leaves()]
    if any(s.numel() == 0 for s in leaf_shapes):
        return  # an empty output needs no writes
    if spec.kind == "scatter":  # updates are combined into a copy of the operand
        fn.lines.append(f"{outs[0]}.copy_to_device({_src(fn.value(instr.operand(0)))})")
        if instr.operand(2).shape.numel() == 0:
            return
        view = f".view(dt_{spec.dtypes[0]})" if spec.dtypes[0] != instr.shape.dtype else ""
        fn.b.dtype(instr.shape.with_dtype(spec.dtypes[0]))
        outs = [f"{outs[0]}.reshape(-1){view}"]
    args = []
    for kind, what in spec.args:
        if kind == "param":
            operand = instr.operand(what)
            args.append(_arg(_src(fn.value(operand)), operand.shape.rank, spec.flat))
        elif kind == "const":
            name = fn.b.fresh_name("c")
            fn.b.constants[name] = (what.literal, what.shape)
            args.append(_arg(name, what.shape.rank, spec.flat))
        else:
            args.append(_arg(outs[what], leaf_shapes[what].rank, spec.flat))
    fn.launch(spec, args)


def _dus(fn: _Function, instr, _):
    if id(instr) in fn.plan.in_place:
        fn.names[id(instr)] = fn.value(instr.operand(0))
        if window_ok(instr):
            spec = build_window_kernel(instr, fn.b.geometry)
            fn.launch(
                spec, [_arg(_src(fn.value(op)), op.shape.rank, False) for op in instr.operands]
            )
        return
    try:
        spec = build_kernel(single_op_computation(instr), fn.b.geometry)
    except NotEmittable:
        fn.b.fallbacks[instr.opcode] += 1
        _thunk(fn, instr, into_output(host_fallback(instr, fn.b.evaluator)))
        return
    _kernel(fn, instr, spec)


def _thunk(fn: _Function, instr, run):
    fn.outputs(instr)
    name = fn.b.bind_host("t", run)
    fn.lines.append(f"{name}({', '.join([_src(fn.value(instr))] + fn.operands(instr))})")


# ---- host work ----------------------------------------------------------------------------------


def host_fallback(instr, evaluator):
    """Runs `instr` with the interpreter's handler on host copies of its operands; the result
    is uploaded as fresh device arrays."""
    from ...reference.evaluator import handlers

    if instr.opcode not in handlers():
        raise UnsupportedError(
            f"the cuda backend does not implement {instr.opcode} (instruction %{instr.name})"
        )
    shapes = [op.shape for op in instr.operands]

    def run(*operands):
        from .runtime import to_device, to_host

        result = evaluator.apply(instr, [to_host(x, s) for x, s in zip(operands, shapes)])
        return to_device(result, instr.shape)

    return run


def into_output(run):
    """A host fallback written into storage the plan provides: (out, *operands)."""

    def thunk(out, *operands):
        from .runtime import fill

        fill(out, run(*operands))

    return thunk


def _custom_call(instr):
    """Targets registered for "cuda": `fn(out, *operands, backend_config=str)` on device arrays;
    a returned value (host or device) is copied into `out`."""
    target = instr.attrs["custom_call_target"]
    from ...ir.attrs import backend_config_string

    fn = lookup_custom_call(target, "cuda")
    config = backend_config_string(instr.attrs.get("backend_config"))
    shape = instr.shape

    def run(out, *operands):
        result = fn(out, *operands, backend_config=config)
        if result is not None:
            from .runtime import fill, to_device

            fill(out, to_device(result, shape))

    return run


# ---- the hook table ---------------------------------------------------------------------------


def _custom_call_rule(b: _Builder, instr):
    return ("thunk", _custom_call(instr)) if instr.opcode == "custom-call" else None


def _dot_rule(b: _Builder, instr):
    return ("kernel", build_dot_kernel(instr, b.geometry)) if instr.opcode == "dot" else None


def _scatter_rule(b: _Builder, instr):
    if instr.opcode != "scatter":
        return None
    return "kernel", build_scatter_kernel(instr, b.geometry)


# How CUDA computes what the shared dispatch leaves to it, in order; then the interpreter on
# host copies.
HOOKS = Hooks(
    rules=(
        view_rule,
        control_rule,
        fusion_rule,
        dus_rule,
        _custom_call_rule,
        _dot_rule,
        _scatter_rule,
        single_op_rule(KERNEL_OPS, tuples=frozenset({"reduce"})),
    ),
    fallback=host_fallback,
    lowering={
        "parameter": _parameter,
        "constant": _constant,
        "kernel": _kernel,
        "thunk": _thunk,
        "dus": _dus,
    },
)
_Builder.hooks = HOOKS


def build_program(module, options: dict) -> Program:
    """Driver source, kernel sources and what the runtime must bind (nothing compiled yet)."""
    builder = _Builder(module, options)
    entry = builder.function(module.entry, is_entry=True)
    source = "\n\n".join(reversed(builder.chunks))
    return Program(
        source,
        entry,
        builder.kernels,
        builder.host,
        builder.constants,
        builder.views,
        builder.dtypes,
        builder.params,
        builder.arena_bytes,
        builder.fallbacks,
        builder.fallback_reasons,
    )
