"""A whole pallas_call grid as one numba.cuda kernel: one CUDA block per program.

    def grid_kernel(in0, ..., out0, ..., offsets, failed):
        a1 = cuda.shared.array((64,), np.float32)      # the step's block arrays
        tid, t = cuda.threadIdx.x, cuda.blockIdx.x     # block t runs the parallel programs t
        for u in range(INNER):                         # ... and the sequential axes in order
            step = t * INNER + u
            for lin in range(tid, 64, THREADS):        # every loop nest split over the threads
                ...
            cuda.syncthreads()                         # before the next nest reads it

The step body is step_source.py's, with this module's Target: block arrays (reductions, dots,
loop state, reused values) and scratch buffers live in shared memory, so a kernel compiles
this way only when they fit in 48 KiB (else it runs step by step, with the reason logged).
The grid axes that run as CUDA blocks are native.py's parallel axes; with none, one block runs
the whole grid in order. Inputs, outputs and the offsets table stay in device memory, read and
written at each block's offsets.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from ..backends.codegen.scalar import NotEmittable
from ..backends.cuda.kernels import HEADER, CudaElemental, CudaWriter
from ..frontend import dtypes as dt
from .native import GridSource, GridSpec, array_dims_of, kernel_array, padded_input
from .step_source import Target, WindowReads, storage_type

SHARED_BYTES = 48 * 1024


class CudaBlockElemental(WindowReads, CudaElemental):
    pass


class SharedMemoryTarget(Target):
    """Block arrays in shared memory; loop nests split over the block's threads."""

    elemental = CudaBlockElemental

    def __init__(self, threads: int):
        self.threads = threads
        self.shared_bytes = 0

    def alloc(self, emitter, dims, dtype: str) -> str:
        self.shared_bytes += math.prod(dims) * np.dtype(storage_type(dtype)[3:]).itemsize
        if self.shared_bytes > SHARED_BYTES:
            raise NotEmittable(
                f"the step's block arrays need more than {SHARED_BYTES} bytes of shared memory"
            )
        return emitter.w.declare("a", f"cuda.shared.array({tuple(dims)}, {storage_type(dtype)})")

    def open_nest(self, emitter, dims) -> list[str]:
        w = emitter.w
        linear = w.var("lin")
        w.line(f"for {linear} in range(tid, {math.prod(dims)}, {self.threads}):")
        w.depth += 1
        index = []
        for d, size in enumerate(dims):
            var = w.var("i")
            stride = math.prod(dims[d + 1 :])
            expr = linear if stride == 1 else f"{linear} // {stride}"
            w.line(f"{var} = {expr if d == 0 else f'{expr} % {size}'}")
            index.append(var)
        return index

    def close_nest(self, emitter, dims) -> None:
        emitter.w.depth -= 1

    def sync(self, emitter) -> None:
        emitter.w.line("cuda.syncthreads()")

    def dot(self, emitter, instr, lhs: str, rhs: str, m: int, k: int, n: int) -> str:
        if tuple(instr.shape.dims) != (m, n):
            raise NotEmittable("a dot with a vector operand in a cuda grid")
        dtype = instr.shape.dtype
        out = self.alloc(emitter, (m, n), dtype)
        w = emitter.w
        i, j = self.open_nest(emitter, (m, n))
        acc, kk = w.var("acc"), w.var("k")
        w.line(f"{acc} = {storage_type(dtype)}(0)")
        w.line(f"for {kk} in range({k}):")
        w.line(f"    {acc} += {lhs}[{i}, {kk}] * {rhs}[{kk}, {j}]")
        w.line(f"{out}[{i}, {j}] = {acc}")
        self.close_nest(emitter, (m, n))
        self.sync(emitter)
        return out

    def reshaped(self, emitter, name: str, dims) -> str:
        raise NotEmittable("a reshaped dot result in a cuda grid")

    def rebind(self, emitter, state: list[str], new: list[str]) -> None:
        """Shared buffers cannot be rebound: the new values are copied into the state."""
        if set(state) & set(new):
            raise NotEmittable("a loop whose body permutes its state (in a cuda grid)")
        for dest, source in zip(state, new):
            if isinstance(dest, tuple):
                raise NotEmittable("a loop state element that is a block of an operand")
            self._copy_array(emitter, dest, source)

    def _copy_array(self, emitter, dest: str, source: str) -> None:
        dims = emitter.shapes[dest]
        index = self.open_nest(emitter, dims)
        at = ", ".join(index)
        emitter.w.line(f"{dest}[{at}] = {source}[{at}]")
        self.close_nest(emitter, dims)
        self.sync(emitter)


class CudaGridSource(GridSource):
    """GridSource with the program loop of a CUDA block instead of (p)range loops."""

    scratch_args = False

    def body(self) -> list[str]:
        w, plan = self.w, self.plan
        inner = plan.inner(plan.parallel_axes)
        w.depth = 1
        w.line("tid = cuda.threadIdx.x")
        w.line("t = cuda.blockIdx.x")
        scratch = []
        for shape, dtype in self.scratch:
            name = self.em.target.alloc(self.em, array_dims_of(shape), dt.hlo_name(dtype))
            index = self.em.target.open_nest(self.em, array_dims_of(shape))
            w.line(f"{name}[{', '.join(index)}] = 0")
            self.em.target.close_nest(self.em, array_dims_of(shape))
            scratch.append(name)
        self.em.target.sync(self.em)
        w.line(f"for u in range({inner}):")
        w.depth += 1
        w.line(f"step = t * {inner} + u")
        self.step(scratch)
        return w.lines

    def source(self, name: str, doc: str) -> str:
        body = self.body()
        w = self.w
        lines = [HEADER.format(doc=doc)]
        lines += [f"{n} = {text}" for text, n in w.constants.items()]
        lines += [f"{n} = {key}" for key, n in w.math_names.items()]
        lines += ["", "", f"def {name}({', '.join(self.arg_names())}):"]
        lines += ["    " + line for line in w.shared]
        return "\n".join(lines + body) + "\n"


class CudaGrid:
    """A traced step (core._GridRunner) compiled with its grid into one CUDA kernel; calling
    it copies the inputs to the device, runs the grid and copies the outputs back."""

    def __init__(self, runner, plan):
        from ..backends.cuda.runtime import compile_kernel
        from ..backends.cuda.target import geometry
        from ..runtime.metrics import count

        call = runner.call
        self.ins, self.outs, self.scratch = runner.ins, runner.outs, runner.scratch
        self.plan = plan
        self.checks = len(runner.check_messages)
        self.threads = geometry({}).threads
        self.blocks = plan.outer(plan.parallel_axes)
        target = SharedMemoryTarget(self.threads)
        builder = CudaGridSource(
            runner.module,
            self.ins,
            self.outs,
            self.scratch,
            plan,
            self.checks,
            False,
            target,
            CudaWriter(),
        )
        self.source = builder.source(
            "grid_kernel",
            f"The grid of pallas kernel {call.name} "
            f"({list(plan.grid)}), one CUDA block per program.",
        )
        spec = GridSpec("grid_kernel", self.source, builder.args())
        spec.kind = "pallas-grid"
        spec.kid = hashlib.sha256((self.source + spec.signature_text()).encode()).hexdigest()[:32]
        self.kernel, how = compile_kernel(spec)
        count(f"cuda.kernel.{how}")
        self._offsets = None

    def __call__(self, arrays):
        from ..backends.cuda.runtime import cuda

        if self._offsets is None:
            self._offsets = cuda.to_device(self.plan.offsets)
        ins = [cuda.to_device(kernel_array(padded_input(a, op))) for a, op in zip(arrays, self.ins)]
        outs = [np.zeros(op.padded, op.dtype) for op in self.outs]
        device_outs = [cuda.to_device(kernel_array(o)) for o in outs]
        failed = cuda.to_device(np.full(max(self.checks, 1), -1, np.int64))
        if self.blocks:
            self.kernel[self.blocks, self.threads](*ins, *device_outs, self._offsets, failed)
        results = []
        for host, device, op in zip(outs, device_outs, self.outs):
            bits = device.copy_to_host()
            host = (
                bits.view(op.dtype).reshape(host.shape)
                if bits.dtype != op.dtype
                else bits.reshape(host.shape)
            )
            results.append(host[tuple(slice(0, n) for n in op.shape)] if not op.divides else host)
        return results, [int(f) for f in failed.copy_to_host()[: self.checks]]
