"""pallas_call: a kernel over blocks, run once per grid step, lowered to HLO.

The kernel body is traced once per (block shapes, dtypes) with the frontend's tracer: every ref
holds a block-shaped traced value, a load is a (dynamic) slice of it, a store a
dynamic-update-slice that replaces it. The result is the step: an HLO computation from program
ids and blocks to new blocks. How the grid around it runs:

* on cpu and cuda, the whole grid is compiled into one native kernel that runs the step inline
  (native.py, native_cuda.py; NATIVE_GRIDS), the index maps evaluated once per step up front;
* otherwise (the interpreter, or a step those cannot emit) the step module is compiled by the
  backend and a host loop (_GridRunner) calls it per grid step;
* with lowering="loop", the grid becomes one while loop over the flattened grid index whose
  state is the outputs and the scratch buffers, an ordinary HLO computation that every backend
  compiles and `jit` inlines.

Inputs and outputs are padded up to whole blocks, so a grid that overhangs the array reads
padding and its writes past the end are dropped; a kernel must then mask what it computes
from the padding (`pl.load(..., mask=)` / `pl.store(..., mask=)`).
"""

from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

from ..frontend.errors import FrontendError, user_location
from ..frontend.jit import jit
from ..frontend.shape_struct import ShapeDtypeStruct
from ..frontend.tracer import Tracer, current_builder

_local = threading.local()


class PallasError(FrontendError):
    """A kernel, block spec or call that pallas_call cannot run; names the kernel."""


def _kernel_label(kernel) -> str:
    code = getattr(kernel, "__code__", None)
    name = getattr(kernel, "__name__", type(kernel).__name__)
    if code is None:
        return f"kernel {name}"
    return f"kernel {name} ({os.path.basename(code.co_filename)}:{code.co_firstlineno})"


def _kernel_location(kernel):
    code = getattr(kernel, "__code__", None)
    return (code.co_filename, code.co_firstlineno) if code is not None else None


# -- the user-facing pieces ---------------------------------------------------------------------
def cdiv(a: int, b: int) -> int:
    """Ceiling division, for grid sizes: cdiv(10, 4) == 3."""
    return -(-a // b)


class Slice:
    """`ds(start, size)`: `size` elements from `start` (which may be traced) along one dim."""

    __slots__ = ("start", "size")

    def __init__(self, start, size: int):
        if not isinstance(size, (int, np.integer)) or size < 0:
            raise PallasError(f"pl.ds: the size must be a non-negative Python int, got {size!r}")
        self.start = start
        self.size = int(size)

    def __repr__(self) -> str:
        return f"ds({self.start!r}, {self.size})"


def ds(start, size: int) -> Slice:
    return Slice(start, size)


dslice = ds


class BlockSpec:
    """The block of an operand one grid step sees: `block_shape` (None squeezes a dim of
    size 1) at block index `index_map(*program_ids)` (in units of blocks)."""

    def __init__(self, block_shape=None, index_map=None):
        self.block_shape = None if block_shape is None else tuple(block_shape)
        self.index_map = index_map

    def __repr__(self) -> str:
        return f"BlockSpec({self.block_shape}, {self.index_map})"


class VMEM:
    """A scratch buffer of `shape` and `dtype` (`pl.VMEM(shape, dtype)`, as in Pallas TPU); it
    keeps its value from one grid step to the next."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)


class _Context:
    """What the kernel body under trace can ask for: program ids, grid, its refs."""

    def __init__(self, kernel, ids, grid, refs):
        self.kernel = kernel
        self.ids = ids
        self.grid = grid
        self.refs = refs
        self.masked = False
        self.builder = current_builder()
        self.bounds_checks: list = []  # (pred[] that a window overhangs its ref, message)


@contextlib.contextmanager
def _kernel_context(ctx: _Context):
    previous = getattr(_local, "ctx", None)
    _local.ctx = ctx
    try:
        yield ctx
    finally:
        _local.ctx = previous


def _context(what: str) -> _Context:
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        raise PallasError(f"{what} is only available inside a kernel run by pl.pallas_call")
    return ctx


def program_id(axis: int):
    """The index of this grid step along grid axis `axis` (an int32 scalar)."""
    ctx = _context("pl.program_id")
    if not 0 <= axis < len(ctx.grid):
        raise PallasError(f"pl.program_id({axis}): the grid {ctx.grid} has {len(ctx.grid)} axes")
    return ctx.ids[axis]


def num_programs(axis: int) -> int:
    """The size of grid axis `axis` (a Python int)."""
    ctx = _context("pl.num_programs")
    if not 0 <= axis < len(ctx.grid):
        raise PallasError(f"pl.num_programs({axis}): the grid {ctx.grid} has {len(ctx.grid)} axes")
    return ctx.grid[axis]


def when(condition):
    """`@pl.when(cond)` runs the decorated function's stores only where `cond` holds."""

    def decorator(fn):
        ctx = _context("pl.when")
        if isinstance(condition, (bool, np.bool_)):
            if condition:
                fn()
            return fn
        from .. import numpy as mnp

        before = [ref.value for ref in ctx.refs]
        fn()
        for ref, old in zip(ctx.refs, before):
            if ref.value is not old:
                ref.value = mnp.where(condition, ref.value, old)
        return fn

    return decorator


# -- refs ------------------------------------------------------------------------------------------
class Ref:
    """A kernel argument: a block of an input, output or scratch buffer. `ref[idx]` loads,
    `ref[idx] = v` stores; idx takes ints, slices, `pl.ds` and `...`."""

    def __init__(self, value: Tracer, name: str, ctx_kernel):
        self.value = value
        self.name = name
        self._kernel = ctx_kernel
        self._builder = current_builder()

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> np.dtype:
        return self.value.dtype

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    def __getitem__(self, idx):
        return load(self, idx)

    def __setitem__(self, idx, value):
        store(self, idx, value)

    def __array__(self, *args, **kwargs):
        raise PallasError(
            f"{self.name} is a kernel ref, not an array: load it with "
            f"{self.name.split()[0]}_ref[...] and compute with minixla.numpy"
        )

    def __repr__(self) -> str:
        return f"Ref<{self.name}: {self.dtype}{list(self.shape)}>"


def _normalize(ref: Ref, idx):
    """Per dim: (start: int | Tracer, size, squeezed)."""
    if idx is None or idx is Ellipsis:
        idx = ()
    if not isinstance(idx, tuple):
        idx = (idx,)
    ellipses = [k for k, i in enumerate(idx) if i is Ellipsis]
    if len(ellipses) > 1:
        raise PallasError(f"{ref.name}: an index may hold at most one `...`")
    if ellipses:
        at = ellipses[0]
        fill = ref.ndim - (len(idx) - 1)
        idx = idx[:at] + (slice(None),) * fill + idx[at + 1 :]
    if len(idx) > ref.ndim:
        raise PallasError(
            f"{ref.name}: {len(idx)} indices for a ref of rank {ref.ndim} (shape {ref.shape})"
        )
    idx = tuple(idx) + (slice(None),) * (ref.ndim - len(idx))
    dims = []
    for d, (i, extent) in enumerate(zip(idx, ref.shape)):
        if isinstance(i, Slice):
            _integer_start(ref, i.start, d)
            dims.append((i.start, i.size, False))
        elif isinstance(i, slice):
            if i.step not in (None, 1):
                raise PallasError(f"{ref.name}: strided slices are not supported; use pl.ds")
            start, stop, _ = i.indices(extent)
            dims.append((start, max(stop - start, 0), False))
        elif isinstance(i, (int, np.integer)):
            if not -extent <= i < extent:
                raise PallasError(
                    f"{ref.name}: index {i} is out of bounds for dim {d} of size {extent}"
                )
            dims.append((int(i) % extent, 1, True))
        elif isinstance(i, Tracer) and i.ndim == 0:
            _integer_start(ref, i, d)
            dims.append((i, 1, True))
        else:
            raise PallasError(
                f"{ref.name}: unsupported index {i!r} for dim {d} (use ints, "
                f"slices, pl.ds or scalar values)"
            )
    return dims


def _integer_start(ref: Ref, start, dim: int) -> None:
    if isinstance(start, Tracer) and (start.ndim != 0 or start.dtype.kind not in "iu"):
        raise PallasError(
            f"{ref.name}: the start of dim {dim} must be an integer scalar, got "
            f"{start.dtype}{list(start.shape)}"
        )
    if not isinstance(start, (Tracer, int, np.integer)):
        raise PallasError(
            f"{ref.name}: the start of dim {dim} must be an int or an integer "
            f"scalar value, got {type(start).__name__}"
        )


def _static(start) -> bool:
    return isinstance(start, (int, np.integer))


def _check_static_bounds(ref: Ref, dims, masked: bool, what: str) -> None:
    if masked:
        return
    for d, ((start, size, _), extent) in enumerate(zip(dims, ref.shape)):
        if _static(start) and (start < 0 or start + size > extent):
            raise PallasError(
                f"{what} of {ref.name}: elements [{start}, {start + size}) of "
                f"dim {d} are out of bounds for size {extent} (mask them with "
                f"pl.load(..., mask=) / pl.store(..., mask=))"
            )


def _check_dynamic_bounds(ref: Ref, dims, what: str) -> None:
    """An unmasked window at a computed start would be clamped into the ref (a silent wrong
    answer); the grid runner checks this flag after every step and raises. Windows inside
    lax loop bodies are not checked (their values cannot leave the loop)."""
    from .. import numpy as mnp

    ctx = getattr(_local, "ctx", None)
    if ctx is None or current_builder() is not ctx.builder:
        return
    flag = None
    for (start, size, _), extent in zip(dims, ref.shape):
        if _static(start):
            continue
        out = (start < 0) | (start + size > extent)
        flag = out if flag is None else flag | out
    if flag is not None:
        where = user_location()
        at = f"{os.path.basename(where[0])}:{where[1]}: " if where else ""
        window = ", ".join(
            f"{size} from {'a computed start' if not _static(s) else s}" for s, size, _ in dims
        )
        ctx.bounds_checks.append(
            (
                mnp.asarray(flag),
                f"{at}{what} of {ref.name} (shape "
                f"{ref.shape}) with window ({window}) reaches outside the "
                f"ref; mask it with pl.{what}(..., mask=)",
            )
        )


def _padded(value, dims):
    """`value` padded at the high end of every dim a window may overhang, so dynamic starts
    up to the dim's size are not clamped back into range."""
    from .. import numpy as mnp

    widths = []
    for (start, size, _), extent in zip(dims, value.shape):
        overhang = size if not _static(start) else max(start + size - extent, 0)
        widths.append((0, overhang))
    if not any(high for _, high in widths):
        return value, False
    return mnp.pad(value, widths), True


def _window(value, dims):
    from .. import lax
    from .. import numpy as mnp

    if all(
        _static(s) and s == 0 and size == extent and not sq
        for (s, size, sq), extent in zip(dims, value.shape)
    ):
        return value
    out = lax.dynamic_slice(value, [s for s, _, _ in dims], [size for _, size, _ in dims])
    keep = [size for _, size, sq in dims if not sq]
    return mnp.reshape(out, tuple(keep)) if len(keep) != len(dims) else out


def load(ref: Ref, idx=None, *, mask=None, other=None):
    """The window `idx` of `ref`; where `mask` is false the result is `other` (default 0)
    and nothing outside the ref is read."""
    from .. import numpy as mnp

    if not isinstance(ref, Ref):
        raise PallasError(f"pl.load expects a kernel ref, got {type(ref).__name__}")
    dims = _normalize(ref, idx)
    _check_static_bounds(ref, dims, mask is not None, "load")
    if mask is None:
        _check_dynamic_bounds(ref, dims, "load")
        return _window(ref.value, dims)
    _context("pl.load(mask=)").masked = True
    source, _ = _padded(ref.value, dims)
    window = _window(source, dims)
    fill = mnp.zeros((), ref.dtype) if other is None else mnp.asarray(other).astype(ref.dtype)
    return mnp.where(mask, window, fill)


def store(ref: Ref, idx, value, *, mask=None) -> None:
    """Writes `value` (broadcast to the window, cast to the ref's dtype) into window `idx` of
    `ref`; where `mask` is false the ref keeps its contents."""
    from .. import lax
    from .. import numpy as mnp

    if not isinstance(ref, Ref):
        raise PallasError(f"pl.store expects a kernel ref, got {type(ref).__name__}")
    if current_builder() is not ref._builder:
        raise PallasError(
            f"store to {ref.name} inside a lax loop or cond body: carry the "
            f"value through the loop and store it after the loop"
        )
    dims = _normalize(ref, idx)
    _check_static_bounds(ref, dims, mask is not None, "store")
    if mask is None:
        _check_dynamic_bounds(ref, dims, "store")
    window_shape = tuple(size for _, size, sq in dims if not sq)
    value = mnp.asarray(value)
    try:
        value = mnp.broadcast_to(value.astype(ref.dtype), window_shape)
    except FrontendError:
        raise PallasError(
            f"store to {ref.name}: a value of shape {tuple(value.shape)} does "
            f"not fit the window of shape {window_shape}"
        ) from None
    target, padded = _padded(ref.value, dims) if mask is not None else (ref.value, False)
    if mask is not None:
        _context("pl.store(mask=)").masked = True
        value = mnp.where(mask, value, _window(target, dims))
    full = tuple(size for _, size, _ in dims)
    value = mnp.reshape(value, full) if full != window_shape else value
    if all(
        _static(s) and s == 0 and size == extent for (s, size, _), extent in zip(dims, target.shape)
    ):
        updated = value
    else:
        updated = lax.dynamic_update_slice(target, value, [s for s, _, _ in dims])
    if padded:
        updated = updated[tuple(slice(0, extent) for extent in ref.shape)]
    ref.value = updated


# -- pallas_call ----------------------------------------------------------------------------------
def _as_list(value):
    if isinstance(value, (list, tuple)):
        return list(value), True
    return [value], False


class _Operand:
    """One input or output: its full shape, block shape (None dims kept as 1) and map."""

    def __init__(self, label: str, shape, dtype, spec, kernel):
        self.label = label
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)
        spec = spec if spec is not None else BlockSpec()
        if not isinstance(spec, BlockSpec):
            raise PallasError(
                f"{_kernel_label(kernel)}: the spec of {label} must be a "
                f"pl.BlockSpec, got {type(spec).__name__}",
                _kernel_location(kernel),
            )
        block = spec.block_shape if spec.block_shape is not None else self.shape
        if len(block) != len(self.shape):
            raise PallasError(
                f"{_kernel_label(kernel)}: the block shape {block} of {label} has "
                f"rank {len(block)}, but {label} has shape {self.shape}",
                _kernel_location(kernel),
            )
        self.squeezed = tuple(b is None for b in block)
        self.block = tuple(1 if b is None else int(b) for b in block)
        if any(b <= 0 for b in self.block):
            raise PallasError(
                f"{_kernel_label(kernel)}: the block shape {block} of {label} must be positive",
                _kernel_location(kernel),
            )
        self.index_map = spec.index_map
        self.padded = tuple(cdiv(n, b) * b for n, b in zip(self.shape, self.block))

    @property
    def divides(self) -> bool:
        return self.padded == self.shape

    def starts(self, ids, kernel):
        if self.index_map is None:
            return [0] * len(self.shape)
        got = self.index_map(*ids)
        got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
        if len(got) != len(self.shape):
            raise PallasError(
                f"{_kernel_label(kernel)}: the index map of {self.label} returned "
                f"{len(got)} block indices, but its block shape {self.block} has "
                f"rank {len(self.shape)}",
                _kernel_location(kernel),
            )
        return [g * b for g, b in zip(got, self.block)]

    def block_value_shape(self):
        return tuple(b for b, sq in zip(self.block, self.squeezed) if not sq)


def _trace_step(kernel, ins, outs, grid, ids, in_blocks, out_blocks, scratch_vals):
    """Runs the kernel body on traced blocks: (new output blocks in full block shape, new
    scratch values, whether it masked a load or store)."""
    from .. import numpy as mnp

    refs = [
        Ref(mnp.reshape(b, op.block_value_shape()), f"input {k}", kernel)
        for k, (op, b) in enumerate(zip(ins, in_blocks))
    ]
    refs += [
        Ref(mnp.reshape(b, op.block_value_shape()), f"output {k}", kernel)
        for k, (op, b) in enumerate(zip(outs, out_blocks))
    ]
    refs += [Ref(s, f"scratch {k}", kernel) for k, s in enumerate(scratch_vals)]
    ctx = _Context(kernel, ids, grid, refs)
    with _kernel_context(ctx):
        result = kernel(*refs)
    if result is not None:
        raise PallasError(
            f"{_kernel_label(kernel)} returned a value; kernels write their "
            f"results through output refs",
            _kernel_location(kernel),
        )
    out_refs = refs[len(ins) : len(ins) + len(outs)]
    new_outs = [
        mnp.reshape(ref.value, op.block).astype(op.dtype) for op, ref in zip(outs, out_refs)
    ]
    new_scratch = [r.value for r in refs[len(ins) + len(outs) :]]
    return new_outs, new_scratch, ctx.masked, ctx.bounds_checks


def _check_masked(kernel, operands, masked: bool) -> None:
    ragged = [op for op in operands if not op.divides]
    if ragged and not masked:
        op = ragged[0]
        raise PallasError(
            f"{_kernel_label(kernel)}: the block shape {op.block} does not "
            f"divide the shape {op.shape} of {op.label}, and the kernel masks "
            f"no load or store; mask the tail with pl.load(..., mask=) / "
            f"pl.store(..., mask=)",
            _kernel_location(kernel),
        )


def _host_window(op: _Operand, ids, kernel):
    """The NumPy slices of `op`'s block at grid step `ids` (concrete ints)."""
    starts = op.starts(ids, kernel)
    try:
        starts = [int(s) for s in starts]
    except TypeError:
        raise PallasError(
            f"{_kernel_label(kernel)}: the index map of {op.label} must return "
            f"Python ints (got {starts!r})",
            _kernel_location(kernel),
        ) from None
    for d, (s, b, p) in enumerate(zip(starts, op.block, op.padded)):
        if s < 0 or s + b > p:
            raise PallasError(
                f"{_kernel_label(kernel)}: at grid step {tuple(ids)} the index "
                f"map of {op.label} selects elements [{s}, {s + b}) of dim {d}, "
                f"outside its {p} (whole-block) elements",
                _kernel_location(kernel),
            )
    return tuple(slice(s, s + b) for s, b in zip(starts, op.block))


def _grid_plan(call: "PallasCall", ins, outs, scratch):
    """Every block's offsets at every grid step, and the grid axes that may run in
    parallel (native.plan_parallel)."""
    from .native import GridPlan, plan_parallel

    kernel = call.kernel
    plan = GridPlan(
        call.grid, ins + outs, lambda op, ids: [w.start for w in _host_window(op, ids, kernel)]
    )
    columns = [(plan.columns[len(ins) + k], len(op.shape)) for k, op in enumerate(outs)]
    try:
        plan.parallel_axes = plan_parallel(plan, columns, call.dimension_semantics, bool(scratch))
    except ValueError as exc:
        raise PallasError(f"{_kernel_label(kernel)}: {exc}", _kernel_location(kernel)) from None
    return plan


# backend -> "module:class" of its whole-grid compiler, loaded when first used
NATIVE_GRIDS = {
    "cpu": "minixla.pallas.native:NativeGrid",
    "cuda": "minixla.pallas.native_cuda:CudaGrid",
}


class _GridRunner:
    """The kernel body over blocks, traced once, and what runs it over the grid: the native
    grid kernel for the backend when there is one (`native`, `lowering` "native-<backend>"),
    else the compiled step and a host loop (`lowering` "step") that slices blocks out of the
    (padded) arrays, calls the step and writes the output blocks back in place."""

    def __init__(self, call: "PallasCall", specs, backend: str):
        from ..frontend import dtypes as dt
        from ..frontend.builder import Builder
        from ..frontend.numpy_api import asarray
        from ..frontend.tracer import tracing
        from ..ir import Shape
        from ..backends.compile import compile

        kernel = call.kernel
        self.call = call
        self.ins, self.outs = call._operands(specs)
        builder = Builder(f"pallas_{_identifier(call.name)}")
        with tracing(builder):
            ids = [
                Tracer(builder.parameter(Shape.array("s32", ()), f"program_id_{a}"))
                for a in range(len(call.grid))
            ]
            in_blocks = [
                Tracer(builder.parameter(Shape.array(dt.hlo_name(op.dtype), op.block), f"in{k}"))
                for k, op in enumerate(self.ins)
            ]
            out_blocks = [
                Tracer(builder.parameter(Shape.array(dt.hlo_name(op.dtype), op.block), f"out{k}"))
                for k, op in enumerate(self.outs)
            ]
            self.scratch = [(tuple(s.shape), np.dtype(s.dtype)) for s in call._scratch()]
            scratch = [
                Tracer(builder.parameter(Shape.array(dt.hlo_name(d), shp), f"scratch{k}"))
                for k, (shp, d) in enumerate(self.scratch)
            ]
            new_outs, new_scratch, masked, checks = _trace_step(
                kernel, self.ins, self.outs, call.grid, ids, in_blocks, out_blocks, scratch
            )
            self.check_messages = [message for _, message in checks]
            root = [asarray(v).op for v in new_outs + new_scratch + [f for f, _ in checks]]
        _check_masked(kernel, self.ins + self.outs, masked)
        self.module = builder.module(root, name=f"pallas_{_identifier(call.name)}")
        self._dump_kernel_source(backend)
        self.lowering, self.fallback_reason = "step", ""
        self.native = self._native(backend) if backend in NATIVE_GRIDS else None
        self.executable = compile(self.module, backend=backend) if self.native is None else None

    def _native(self, backend: str):
        """The whole grid compiled for `backend` (NATIVE_GRIDS), or None with the reason in
        `fallback_reason` (logged, and dumped beside the kernel source)."""
        import importlib
        import logging
        from ..backends.codegen.scalar import NotEmittable
        from ..runtime.metrics import count

        call = self.call
        module_name, _, class_name = NATIVE_GRIDS[backend].partition(":")
        grid_class = getattr(importlib.import_module(module_name), class_name)
        try:
            native = grid_class(self, _grid_plan(call, self.ins, self.outs, self.scratch))
        except NotEmittable as exc:
            self.fallback_reason = str(exc)
            count(f"pallas.fallback.{backend}")
            logging.getLogger("minixla.pallas").warning(
                "%s: the grid runs step by step on %s, not as one native kernel: %s",
                _kernel_label(call.kernel),
                backend,
                exc,
            )
            self._dump_grid_source(f"# not compiled natively: {exc}\n", False)
            return None
        self.lowering = f"native-{backend}"
        count(f"pallas.native.{backend}")
        self._dump_grid_source(native.source, True)
        return native

    def _dump_grid_source(self, text: str, native: bool) -> None:
        """With --dump_to: `<step module>.grid.py` (the grid kernel, or why there is none);
        a native grid also dumps the step module, which no backend compiles then."""
        from pathlib import Path
        from ..passes.base import DumpOptions, Dumper

        options = DumpOptions.from_flags()
        if not options.dump_to:
            return
        Path(options.dump_to).mkdir(parents=True, exist_ok=True)
        (Path(options.dump_to) / f"{self.module.name}.grid.py").write_text(text)
        if native:
            Dumper(options, self.module).module(self.module, "before_optimizations")

    def _dump_kernel_source(self, backend: str) -> None:
        """With --dump_to, the kernel's Python source and its blocks go next to the dumps of
        its step module, as `<step module>.kernel.py`."""
        import inspect
        from pathlib import Path
        from ..passes.base import DumpOptions

        dump_to = DumpOptions.from_flags().dump_to
        if not dump_to:
            return
        try:
            source = inspect.getsource(self.call.kernel)
        except (OSError, TypeError):
            source = "# (the kernel's source is not available)\n"
        blocks = "\n".join(
            f"#   {op.label}: shape {op.shape}, block {op.block}, {op.dtype}"
            for op in self.ins + self.outs
        )
        header = (
            f"# {_kernel_label(self.call.kernel)}, grid {list(self.call.grid)}, "
            f"compiled for {backend} as module {self.module.name}\n{blocks}\n\n"
        )
        Path(dump_to).mkdir(parents=True, exist_ok=True)
        (Path(dump_to) / f"{self.module.name}.kernel.py").write_text(header + source)

    def __call__(self, *arrays):
        import itertools

        kernel = self.call.kernel
        if self.native is not None:
            outs, failed = self.native(arrays)
            for step, message in zip(failed, self.check_messages):
                if step >= 0:
                    ids = tuple(int(i) for i in np.unravel_index(step, self.call.grid))
                    raise PallasError(
                        f"{message} (at grid step {ids}; {_kernel_label(kernel)})",
                        _kernel_location(kernel),
                    )
            return outs
        padded = [
            np.pad(a, [(0, p - n) for p, n in zip(op.padded, op.shape)]) if not op.divides else a
            for a, op in zip(arrays, self.ins)
        ]
        outs = [np.zeros(op.padded, op.dtype) for op in self.outs]
        scratch = [np.zeros(shape, dtype) for shape, dtype in self.scratch]
        n_out, n_state = len(outs), len(outs) + len(scratch)
        for ids in itertools.product(*(range(g) for g in self.call.grid)):
            in_blocks = [x[_host_window(op, ids, kernel)] for x, op in zip(padded, self.ins)]
            windows = [_host_window(op, ids, kernel) for op in self.outs]
            out_blocks = [o[w] for o, w in zip(outs, windows)]
            pids = [np.asarray(i, np.int32) for i in ids]
            result = self.executable(*pids, *in_blocks, *out_blocks, *scratch)
            for flag, message in zip(result[n_state:], self.check_messages):
                if flag:
                    raise PallasError(
                        f"{message} (at grid step {ids}; {_kernel_label(kernel)})",
                        _kernel_location(kernel),
                    )
            for o, w, value in zip(outs, windows, result[:n_out]):
                o[w] = value
            scratch = list(result[n_out:n_state])
        return [
            o[tuple(slice(0, n) for n in op.shape)] if not op.divides else o
            for o, op in zip(outs, self.outs)
        ]


_TARGETS = [0]


class PallasCall:
    """The callable pallas_call returns: arrays in, kernel outputs out. Outside a trace it
    runs the grid (_GridRunner); inside jit it is one custom call whose
    implementation is the same runner on the module's backend (lowering="loop" inlines the
    grid as an HLO while loop instead)."""

    def __init__(
        self,
        kernel,
        out_shape,
        grid,
        in_specs,
        out_specs,
        scratch_shapes,
        interpret,
        backend,
        name,
        lowering,
        compiler_params=None,
    ):
        self.kernel = kernel
        self.name = name or getattr(kernel, "__name__", "kernel")
        outs, self._multiple = _as_list(out_shape)
        for o in outs:
            if not hasattr(o, "shape") or not hasattr(o, "dtype"):
                raise PallasError(
                    f"{_kernel_label(kernel)}: out_shape entries must be "
                    f"ShapeDtypeStruct (or arrays), got {type(o).__name__}",
                    _kernel_location(kernel),
                )
        self.out_shapes = [ShapeDtypeStruct(o.shape, o.dtype) for o in outs]
        grid = () if grid is None else grid
        self.grid = tuple(int(g) for g in ((grid,) if isinstance(grid, int) else grid))
        self.in_specs = in_specs
        if out_specs is None:
            self.out_specs = [None] * len(outs)
        else:
            self.out_specs, _ = _as_list(out_specs)
            if len(self.out_specs) != len(outs):
                raise PallasError(
                    f"{_kernel_label(kernel)}: {len(self.out_specs)} out_specs "
                    f"for {len(outs)} outputs in out_shape",
                    _kernel_location(kernel),
                )
        self.scratch_shapes = list(scratch_shapes or ())
        if lowering not in ("custom_call", "loop"):
            raise PallasError(
                f"{_kernel_label(kernel)}: lowering must be 'custom_call' or "
                f"'loop', got {lowering!r}",
                _kernel_location(kernel),
            )
        self.lowering = lowering
        self.dimension_semantics, self.parallel_threshold = _compiler_params(
            kernel, compiler_params, len(self.grid)
        )
        self.interpret = bool(interpret)
        self.backend = "interpreter" if interpret else backend
        self._runners: dict = {}
        self._target = None
        self._jitted = jit(self._loop, backend=self.backend)

    # -- entry points ------------------------------------------------------------------------
    def __call__(self, *args):
        if current_builder() is not None:
            return self._loop(*args) if self.lowering == "loop" else self._custom_call(*args)
        if self.lowering == "loop":
            return self._jitted(*(np.asarray(a) for a in args))
        from ..frontend.eager import default_backend

        arrays = [np.asarray(a) for a in args]
        results = self.runner(arrays, self.backend or default_backend())(*arrays)
        return tuple(results) if self._multiple else results[0]

    def runner(self, arrays, backend: str) -> _GridRunner:
        """The compiled grid step for arguments like `arrays` on `backend`."""
        key = (backend, tuple((tuple(a.shape), np.dtype(a.dtype)) for a in arrays))
        if key not in self._runners:
            specs = [ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]
            self._runners[key] = _GridRunner(self, specs, backend)
        return self._runners[key]

    def lower(self, *args):
        """The HloModule of the grid step for these arguments (lowering="loop": of the
        whole call, the grid loop included)."""
        arrays = [np.asarray(a) for a in args]
        if self.lowering == "loop":
            return self._jitted.lower(*arrays).module
        return self.runner(arrays, "interpreter").module

    # -- internals ---------------------------------------------------------------------------
    def _scratch(self):
        for k, s in enumerate(self.scratch_shapes):
            if not hasattr(s, "shape") or not hasattr(s, "dtype"):
                raise PallasError(
                    f"{_kernel_label(self.kernel)}: scratch_shapes[{k}] must be "
                    f"pl.VMEM(shape, dtype) or a ShapeDtypeStruct",
                    _kernel_location(self.kernel),
                )
        return self.scratch_shapes

    def _operands(self, args):
        kernel = self.kernel
        specs = self.in_specs
        if specs is None:
            specs = [None] * len(args)
        specs = list(specs) if isinstance(specs, (list, tuple)) else [specs]
        if len(specs) != len(args):
            raise PallasError(
                f"{_kernel_label(kernel)}: called with {len(args)} arguments "
                f"but given {len(specs)} in_specs",
                _kernel_location(kernel),
            )
        ins = [
            _Operand(f"input {k}", a.shape, a.dtype, s, kernel)
            for k, (a, s) in enumerate(zip(args, specs))
        ]
        outs = [
            _Operand(f"output {k}", o.shape, o.dtype, s, kernel)
            for k, (o, s) in enumerate(zip(self.out_shapes, self.out_specs))
        ]
        return ins, outs

    def _register(self) -> str:
        """The custom-call target running this kernel, registered for every backend."""
        if self._target is not None:
            return self._target
        from ..reference.custom_call import register_custom_call

        _TARGETS[0] += 1
        target = f"pallas.{_identifier(self.name)}.{_TARGETS[0]}"
        fixed = "interpreter" if self.interpret else None

        def run_on(backend, operands):
            arrays = [np.asarray(a) for a in operands]
            results = self.runner(arrays, fixed or backend)(*arrays)
            return tuple(results) if self._multiple else results[0]

        def on_interpreter(*operands, result_shape=None, backend_config=""):
            return run_on("interpreter", operands)

        def on_cpu(out, *operands, backend_config=""):
            return run_on(self.backend or "cpu", operands)

        def on_cuda(out, *operands, backend_config=""):
            hosts = [o.copy_to_host() if hasattr(o, "copy_to_host") else o for o in operands]
            return run_on("cuda", hosts)

        register_custom_call(target, "interpreter", on_interpreter)
        register_custom_call(target, "cpu", on_cpu)
        register_custom_call(target, "cuda", on_cuda)
        self._target = target
        return target

    def _custom_call(self, *args):
        from .. import numpy as mnp
        from ..frontend import dtypes as dt
        from ..frontend.ops_control import CustomCall
        from ..frontend.ops_core import GetTupleElement
        from ..ir import Shape

        values = [mnp.asarray(a) for a in args]
        self._operands(values)  # spec errors at the call, not at run time
        shapes = [Shape.array(dt.hlo_name(o.dtype), o.shape) for o in self.out_shapes]
        shape = Shape.tuple_of(shapes) if self._multiple else shapes[0]
        builder = current_builder()
        op = CustomCall(
            builder,
            self._register(),
            [builder.lift(v.op) for v in values],
            shape,
            backend_config=f"pallas kernel {_kernel_label(self.kernel)} grid={list(self.grid)}",
        )
        if not self._multiple:
            return Tracer(op)
        return tuple(Tracer(GetTupleElement(op, k)) for k in range(len(shapes)))

    def _loop(self, *args):
        """The whole call as HLO: a while loop over the flattened grid whose state is the
        (padded) outputs and the scratch buffers."""
        from .. import lax
        from .. import numpy as mnp

        args = [mnp.asarray(a) for a in args]
        ins, outs = self._operands(args)
        kernel = self.kernel
        padded_ins = [
            mnp.pad(a, [(0, p - n) for p, n in zip(op.padded, op.shape)]) if not op.divides else a
            for a, op in zip(args, ins)
        ]
        out_init = [mnp.zeros(op.padded, op.dtype) for op in outs]
        scratch_init = [mnp.zeros(tuple(s.shape), np.dtype(s.dtype)) for s in self._scratch()]
        grid = self.grid
        masked = []

        def step(i, carry):
            out_vals, scratch_vals = carry
            ids = []
            for axis, size in enumerate(grid):
                inner = math.prod(grid[axis + 1 :])
                ids.append((i // inner) % size if size > 1 else mnp.zeros((), np.int32))
            in_starts = [op.starts(ids, kernel) for op in ins]
            out_starts = [op.starts(ids, kernel) for op in outs]
            in_blocks = [
                lax.dynamic_slice(x, st, op.block) if op.block != op.padded else x
                for op, x, st in zip(ins, padded_ins, in_starts)
            ]
            out_blocks = [
                lax.dynamic_slice(o, st, op.block) if op.block != op.padded else o
                for op, o, st in zip(outs, out_vals, out_starts)
            ]
            blocks, scratch, was_masked, _ = _trace_step(
                kernel, ins, outs, grid, ids, in_blocks, out_blocks, scratch_vals
            )
            masked.append(was_masked)
            new_outs = [
                lax.dynamic_update_slice(o, b, st) if op.block != op.padded else b
                for op, o, b, st in zip(outs, out_vals, blocks, out_starts)
            ]
            return new_outs, scratch

        if math.prod(grid) == 1:
            out_vals, _ = step(mnp.zeros((), np.int32), (out_init, scratch_init))
        else:
            out_vals, _ = lax.fori_loop(0, math.prod(grid), step, (out_init, scratch_init))
        _check_masked(kernel, ins + outs, any(masked))
        results = [
            o[tuple(slice(0, n) for n in op.shape)] if not op.divides else o
            for op, o in zip(outs, out_vals)
        ]
        return tuple(results) if self._multiple else results[0]


def _identifier(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_]", "_", name) or "kernel"


def _compiler_params(kernel, params, grid_rank: int):
    """(dimension_semantics or None, parallel_threshold or None) from `compiler_params`: a
    mapping or an object with those attributes (as Pallas' CompilerParams)."""
    if params is None:
        return None, None
    get = params.get if isinstance(params, dict) else lambda key: getattr(params, key, None)
    if isinstance(params, dict):
        unknown = sorted(set(params) - {"dimension_semantics", "parallel_threshold"})
        if unknown:
            raise PallasError(
                f"{_kernel_label(kernel)}: unknown compiler_params {unknown}",
                _kernel_location(kernel),
            )
    semantics, threshold = get("dimension_semantics"), get("parallel_threshold")
    if semantics is not None:
        semantics = tuple(semantics)
        if len(semantics) != grid_rank or any(
            s not in ("parallel", "arbitrary") for s in semantics
        ):
            raise PallasError(
                f"{_kernel_label(kernel)}: dimension_semantics must give "
                f"'parallel' or 'arbitrary' for each of the {grid_rank} grid "
                f"axes, got {semantics}",
                _kernel_location(kernel),
            )
    if threshold is not None and (not isinstance(threshold, int) or threshold < 0):
        raise PallasError(
            f"{_kernel_label(kernel)}: parallel_threshold must be a "
            f"non-negative int, got {threshold!r}",
            _kernel_location(kernel),
        )
    return semantics, threshold


def pallas_call(
    kernel,
    out_shape,
    *,
    grid=(),
    in_specs=None,
    out_specs=None,
    scratch_shapes=(),
    interpret: bool = False,
    backend: str | None = None,
    name: str | None = None,
    lowering: str = "custom_call",
    compiler_params=None,
    **unknown,
) -> PallasCall:
    """`kernel(*input_refs, *output_refs, *scratch_refs)` run once per step of `grid`; returns
    a callable over the inputs. interpret=True runs on the reference interpreter (NumPy);
    otherwise on `backend` (default: cpu when available)."""
    if unknown:
        raise PallasError(
            f"{_kernel_label(kernel)}: unknown pallas_call options {sorted(unknown)}",
            _kernel_location(kernel),
        )
    if not callable(kernel):
        raise PallasError(
            f"pallas_call: the kernel must be callable, got {type(kernel).__name__}",
            user_location(),
        )
    return PallasCall(
        kernel,
        out_shape,
        grid,
        in_specs,
        out_specs,
        scratch_shapes,
        interpret,
        backend,
        name,
        lowering,
        compiler_params,
    )
