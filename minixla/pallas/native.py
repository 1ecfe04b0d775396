"""A whole pallas_call grid compiled to one Numba function (the cpu backend's native path).

    @njit(parallel=..., ...)
    def grid_kernel(in0, ..., out0, ..., scratch0, ..., offsets, failed):
        for t in prange(OUTER):          # the parallel grid axes, flattened (range if none)
            for u in range(INNER):       # the other axes, in row-major order
                step = t * INNER + u
                pid0 = np.int32(step // 4 % 16) ...
                b_in0 = in0[offsets[step, 0]:offsets[step, 0] + 64, 0:1024]   # block views
                <the step computation, step_source.py>
                <stores of the new output blocks and scratch buffers>

Index maps are plain Python functions of the program ids, so they are evaluated once per grid
step when the kernel is compiled, into `offsets` (the element offset of every block at every
step; a map selecting a block outside its array is reported then). The kernel reads and
writes blocks in place through views; inputs and outputs are padded up to whole blocks only
when a block does not divide its array, exactly as on the step path.

Which grid axes may run in parallel (`plan_parallel`): with `dimension_semantics`, the leading
axes marked "parallel"; without, the leading axes whose steps write disjoint output blocks,
and none when the kernel has scratch buffers (they carry values from one step to the next).
Threads are used only when the grid touches at least the cpu backend's parallel threshold of
elements (on fewer than four cores, never); each parallel iteration then gets its own scratch.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..backends.codegen.elemental import Writer
from ..backends.cpu.kernels import PARALLEL_THRESHOLD, CpuWriter, storage_dtype
from ..backends.codegen.scalar import NotEmittable
from ..frontend import dtypes as dt
from .step_source import StepEmitter, Target, array_dims, offset_index, storage_type

HEADER = '''"""{doc}"""
import math
import numpy as np
from numba import njit, prange
from minixla.backends.cpu import helpers as h
from minixla.backends.cpu.mathlib import MATH_F32, MATH_F64
'''

SEMANTICS = ("parallel", "arbitrary")


class GridPlan:
    """The grid's steps in row-major order: every block's element offsets per step, and how
    many leading axes run in parallel."""

    def __init__(self, grid, operands, starts_of):
        self.grid = tuple(grid)
        self.steps = math.prod(self.grid)
        self.columns, width = [], 0
        for op in operands:
            self.columns.append(width)
            width += len(op.shape)
        self.offsets = np.zeros((max(self.steps, 1), max(width, 1)), np.int64)
        for step, ids in enumerate(itertools.product(*(range(g) for g in self.grid))):
            for op, column in zip(operands, self.columns):
                self.offsets[step, column : column + len(op.shape)] = starts_of(op, ids)
        self.parallel_axes = 0

    def inner(self, axes: int) -> int:
        return math.prod(self.grid[axes:]) or 1  # an empty grid: no outer iterations

    def outer(self, axes: int) -> int:
        return self.steps // self.inner(axes)

    def disjoint(self, axes: int, out_columns) -> bool:
        """Whether steps that differ in the leading `axes` program ids never write the same
        output block."""
        inner = self.inner(axes)
        for column, rank in out_columns:
            owner: dict[tuple, int] = {}
            for step in range(self.steps):
                block = tuple(self.offsets[step, column : column + rank])
                if owner.setdefault(block, step // inner) != step // inner:
                    return False
        return True


def plan_parallel(plan: GridPlan, out_columns, semantics, has_scratch: bool) -> int:
    """The number of leading grid axes whose steps may run at the same time; raises ValueError
    when declared parallel axes write the same output block."""
    if semantics is not None:
        axes = next((k for k, s in enumerate(semantics) if s != "parallel"), len(semantics))
        if axes and not plan.disjoint(axes, out_columns):
            raise ValueError(
                f"the grid axes {list(range(axes))} are declared parallel, but "
                f"steps that differ along them write the same output block"
            )
        return axes
    if has_scratch:
        return 0
    return next((a for a in range(len(plan.grid), 0, -1) if plan.disjoint(a, out_columns)), 0)


class GridSpec:
    """The generated grid kernel, in the form backends/cpu/jit.py compiles and caches."""

    def __init__(self, name: str, source: str, args: list[tuple[str, int]]):
        self.name = name
        self.source = source
        self.args = args  # (HLO element type, rank passed) per argument

    def numba_signature(self):
        from numba import from_dtype, types

        return types.void(
            *(types.Array(from_dtype(storage_dtype(d)), n, "C") for d, n in self.args)
        )

    def signature_text(self) -> str:
        return ", ".join(f"{d}[{n}d]" for d, n in self.args)


class GridSource:
    """Builds the grid kernel's source for a traced step module."""

    scratch_args = True  # scratch buffers are arguments (the cuda grid keeps them per block)

    def __init__(
        self,
        module,
        ins,
        outs,
        scratch,
        plan: GridPlan,
        checks: int,
        threads: bool,
        target: Target | None = None,
        writer: Writer | None = None,
    ):
        self.module, self.ins, self.outs, self.scratch = module, ins, outs, scratch
        self.plan, self.checks, self.threads = plan, checks, threads
        self.w = writer or CpuWriter()
        self.em = StepEmitter(self.w, target or Target())

    def arg_names(self) -> list[str]:
        scratch = len(self.scratch) if self.scratch_args else 0
        return (
            [f"in{k}" for k in range(len(self.ins))]
            + [f"out{k}" for k in range(len(self.outs))]
            + [f"scratch{k}" for k in range(scratch)]
            + ["offsets", "failed"]
        )

    def args(self) -> list[tuple[str, int]]:
        arrays = [(dt.hlo_name(op.dtype), max(len(op.shape), 1)) for op in self.ins + self.outs]
        if self.scratch_args:
            arrays += [(dt.hlo_name(d), max(len(s), 1)) for s, d in self.scratch]
        return arrays + [("s64", 2), ("s64", 1)]

    def program_ids(self, w) -> dict[int, str]:
        grid = self.plan.grid
        scalars = {}
        for axis, size in enumerate(grid):
            stride = math.prod(grid[axis + 1 :])
            expr = "step" if stride == 1 else f"step // {stride}"
            expr = "0" if size == 1 else (f"{expr} % {size}" if axis else expr)
            w.line(f"pid{axis} = np.int32({expr})")
            scalars[axis] = f"pid{axis}"
        return scalars

    def block_offsets(self, w, name: str, op, column: int) -> tuple[str, ...]:
        """Names of the element offsets of `op`'s block at this step ("0" where fixed)."""
        offsets = []
        for d, b in enumerate(op.block):
            if b == op.padded[d]:
                offsets.append("0")
                continue
            w.line(f"o_{name}_{d} = offsets[step, {column + d}]")
            offsets.append(f"o_{name}_{d}")
        return tuple(offsets)

    def body(self) -> list[str]:
        """The loops over the grid and the step inside them."""
        w, plan = self.w, self.plan
        axes = plan.parallel_axes if self.threads else 0
        outer, inner = plan.outer(axes), plan.inner(axes)
        w.line(f"for t in {'prange' if self.threads else 'range'}({outer}):")
        w.depth += 1
        scratch = [f"scratch{k}" for k in range(len(self.scratch))]
        if self.threads:  # each parallel iteration has its own scratch
            for k, (shape, dtype) in enumerate(self.scratch):
                w.line(
                    f"local{k} = np.zeros({array_dims_of(shape)}, "
                    f"{storage_type(dt.hlo_name(dtype))})"
                )
                scratch[k] = f"local{k}"
        w.line(f"for u in range({inner}):")
        w.depth += 1
        w.line(f"step = t * {inner} + u")
        self.step(scratch)
        return w.lines

    def step(self, scratch: list[str]) -> None:
        w, em = self.w, self.em
        entry = self.module.entry
        params = sorted(entry.parameters, key=lambda p: p.parameter_number)
        scalars = self.program_ids(w)
        grid_rank = len(self.plan.grid)
        operands = self.ins + self.outs
        names = [f"in{k}" for k in range(len(self.ins))] + [
            f"out{k}" for k in range(len(self.outs))
        ]
        windows = [
            (name, self.block_offsets(w, name, op, column))
            for name, op, column in zip(names, operands, self.plan.columns)
        ]
        windows += [(name, ("0",) * len(shape)) for name, (shape, _) in zip(scratch, self.scratch)]
        for param, window in zip(params[grid_rank:], windows):
            em.windows[id(param)] = window
        dests = windows[len(self.ins) :]
        em.computation(entry, scalars)
        roots = list(entry.root.operands)
        n_state = len(self.outs) + len(self.scratch)
        for k, flag in enumerate(roots[n_state:]):
            w.line(f"if {em.scalar(flag, scalars)} and failed[{k}] < 0:")
            w.line(f"    failed[{k}] = step")
        self.store_state(roots[:n_state], params[grid_rank + len(self.ins) :], dests, scalars)

    def store_state(self, roots, dest_params, dests, scalars) -> None:
        """New output blocks and scratch values into their arrays. A value computed from its
        own destination's old contents goes through a temporary array (only the window, for
        a store through `pl.ds`), and every store waits until all values are computed (one
        may read another's destination)."""
        em = self.em
        stores = [
            (root, param, dest)
            for root, param, dest in zip(roots, dest_params, dests)
            if root is not param
        ]
        staged = []
        for root, param, dest in stores:
            if param.users:
                update = window_update(root, param)
                staged.append(
                    (
                        root,
                        dest,
                        self.stage_window(update, scalars)
                        if update
                        else em.array_of(root, scalars),
                    )
                )
        for root, param, dest in stores:
            if not param.users:
                self.store(root, dest, scalars)
        for root, dest, temp in staged:
            if isinstance(temp, tuple):
                self.store_window(root, dest, *temp)
            else:
                self.store(root, dest, scalars)

    def store(self, root, dest, scalars) -> None:
        rank = root.shape.rank
        name, offsets = dest
        self.em.fill(
            name,
            array_dims(root.shape),
            lambda el, index: el.value(root, index if rank else ()),
            root.shape.dtype,
            scalars,
            offsets,
        )

    def stage_window(self, update, scalars):
        """(the new window's array, its clamped starts) of a window update."""
        em, w = self.em, self.w
        values = em.array_of(update.operand(1), scalars)
        size, full = update.operand(1).shape.dims, update.shape.dims
        starts = []
        for start, n, whole in zip(update.operands[2:], size, full):
            var = w.var("s")
            w.line(f"{var} = min(max(np.int64({em.scalar(start, scalars)}), 0), {whole - n})")
            starts.append(var)
        return values, tuple(starts), tuple(size)

    def store_window(self, root, dest, values: str, starts, size) -> None:
        """dest[start + j] = values[j] where that lies inside `root` (the rest overhangs)."""
        em, w = self.em, self.w
        name, offsets = dest
        index = em.target.open_nest(em, size)
        at = tuple(f"{s} + {i}" for s, i in zip(starts, index))
        inside = [
            f"{a} < {n}"
            for a, n, m, padded in zip(at, root.shape.dims, size, update_dims(root))
            if padded > n
        ]
        target = f"{name}[{', '.join(offset_index(offsets, at))}]"
        statement = f"{target} = {values}[{', '.join(index)}]"
        if inside:
            w.line(f"if {' and '.join(inside)}:")
            statement = "    " + statement
        w.line(statement)
        em.target.close_nest(em, size)
        em.target.sync(em)

    def source(self, name: str, doc: str) -> str:
        body = self.body()
        w = self.w
        fastmath = "{'contract', 'reassoc'}" if w.uses_reduce else "{'contract'}"
        lines = [HEADER.format(doc=doc)]
        lines += [f"{n} = {text}" for text, n in w.constants.items()]
        lines += [f"{n} = {key}" for key, n in w.math_names.items()]
        lines += [
            "",
            "",
            f"@njit(parallel={self.threads}, fastmath={fastmath}, "
            f"error_model='numpy', boundscheck=False, nogil=True, cache=CACHE)",
            f"def {name}({', '.join(self.arg_names())}):",
        ]
        return "\n".join(lines + body) + "\n"


def window_update(root, param):
    """The dynamic-update-slice when `root` is `param` with one window replaced (a store
    through `pl.ds`; padded, then cut back, when the window may overhang), else None."""
    node, cut = root, False
    if node.opcode == "slice":
        if any(start or stride != 1 for start, _, stride in node.attrs["slice"]):
            return None
        node, cut = node.operand(0), True
    if node.opcode != "dynamic-update-slice" or not node.shape.rank:
        return None
    base = node.operand(0)
    if base.opcode == "pad":
        if not cut or any(low or interior for low, _, interior in base.attrs["padding"]):
            return None
        base = base.operand(0)
    if (
        base is not param
        or tuple(root.shape.dims) != tuple(param.shape.dims)
        or len(node.operands) != 2 + node.shape.rank
    ):
        return None
    return node


def update_dims(root) -> tuple[int, ...]:
    """The dims of the (possibly padded) array a window update writes into."""
    node = root.operand(0) if root.opcode == "slice" else root
    return tuple(node.shape.dims)


def array_dims_of(shape) -> tuple[int, ...]:
    return tuple(shape) if len(shape) else (1,)


def touched_elements(ins, outs, scratch) -> int:
    return sum(math.prod(op.padded) for op in ins + outs) + sum(math.prod(s) for s, _ in scratch)


def use_threads(plan: GridPlan, ins, outs, scratch, threshold: int | None) -> bool:
    threshold = PARALLEL_THRESHOLD if threshold is None else threshold
    axes = plan.parallel_axes
    return axes > 0 and plan.outer(axes) > 1 and touched_elements(ins, outs, scratch) >= threshold


def open_disk_cache():
    """The cpu backend's compilation cache, when enabled and usable (else None)."""
    from ..backends.cpu import cache, jit

    if not cache.is_enabled({}):
        return None
    disk = cache.DiskCache(None)
    try:
        disk.prepare()
    except cache.CacheUnusable as exc:
        jit.warn_unusable(disk, str(exc))
        return None
    return disk


def compile_grid(spec: GridSpec):
    """The compiled grid kernel (through the cpu backend's memo and disk cache); raises
    NotEmittable when Numba cannot compile it, so the call runs step by step instead."""
    from numba.core.errors import NumbaError
    from ..backends.cpu import jit

    try:
        dispatcher, how = jit.obtain(spec, open_disk_cache())
    except NumbaError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NotEmittable(f"Numba could not compile the grid kernel: {first}") from exc
    return jit.entry_point(dispatcher, spec), how


class NativeGrid:
    """A traced step (core._GridRunner) compiled with its grid loop into one Numba function;
    calling it runs the whole grid on NumPy arrays."""

    def __init__(self, runner, plan: GridPlan):
        from ..runtime.metrics import count

        call = runner.call
        self.ins, self.outs, self.scratch = runner.ins, runner.outs, runner.scratch
        self.plan = plan
        self.checks = len(runner.check_messages)
        self.threads = use_threads(plan, self.ins, self.outs, self.scratch, call.parallel_threshold)
        builder = GridSource(
            runner.module, self.ins, self.outs, self.scratch, plan, self.checks, self.threads
        )
        self.source = builder.source(
            "grid_kernel",
            f"The grid of pallas kernel {call.name} ({list(plan.grid)}), one Numba function.",
        )
        self.spec = GridSpec("grid_kernel", self.source, builder.args())
        self.fn, how = compile_grid(self.spec)
        count(f"cpu.kernel.{how}")

    def __call__(self, arrays):
        """(the outputs, the first failing step of each bounds check or -1)."""
        ins = [kernel_array(padded_input(a, op)) for a, op in zip(arrays, self.ins)]
        outs = [np.zeros(op.padded, op.dtype) for op in self.outs]
        scratch = [np.zeros(shape, dtype) for shape, dtype in self.scratch]
        failed = np.full(max(self.checks, 1), -1, np.int64)
        self.fn(
            *ins,
            *(kernel_array(o) for o in outs),
            *(kernel_array(s) for s in scratch),
            self.plan.offsets,
            failed,
        )
        results = [
            o[tuple(slice(0, n) for n in op.shape)] if not op.divides else o
            for o, op in zip(outs, self.outs)
        ]
        return results, [int(f) for f in failed[: self.checks]]


def padded_input(array, op):
    array = np.asarray(array, op.dtype)
    if not op.divides:
        array = np.pad(array, [(0, p - n) for p, n in zip(op.padded, op.shape)])
    return np.ascontiguousarray(array)


def kernel_array(array):
    """The array as the kernel takes it: scalars as one element, bf16 as its bit patterns."""
    if array.ndim == 0:
        array = array.reshape(1)
    return array.view(np.uint16) if array.dtype.name == "bfloat16" else array
