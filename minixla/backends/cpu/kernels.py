"""Kernel sources: one Numba function per fused computation (or lone op), as Python text.

A kernel takes the fusion's parameters, its array constants and one preallocated output array
per result, and fills the outputs with loops over their index space; the loop body comes from
the elemental emitter. Outputs of different dims (a multi-output reduction fusion) get one
loop nest each inside the same kernel.

Loops run over the output in row-major order, so the innermost loop walks contiguous memory
and LLVM vectorizes it. When the fusion is purely elementwise every array is passed flattened
and the kernel is one loop whose bound comes from the array, so the same kernel serves every
shape. Kernels whose estimated work is large take one more argument, the part of their
outermost loop to run (loops.py); the driver runs the parts on threads, as many as it picks
per call (driver.run_split).

Only 'contract' fast-math is on (FMA formation, which only removes roundings); kernels with
reductions also get 'reassoc' so LLVM can vectorize the accumulation (XLA:CPU does the same).
Neither flag assumes away NaN, inf or signed zeros.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field

from ..codegen.elemental import Elemental, Writer
from ..codegen.kernels import is_flat, kernel_signature, leaf_shape, outputs_of
from ..codegen.plan import row_major
from .loops import SPLIT_ARG, emit_nest, plan_nests


def _cores() -> int:
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cores or 1


def _default_parallel_threshold() -> int:
    """Elements a Pallas grid touches before it runs on threads (pallas/native.py): 2^18; with
    fewer than four cores, never."""
    return 1 << 18 if _cores() >= 4 else 1 << 62


PARALLEL_THRESHOLD = _default_parallel_threshold()

# A generated kernel can be split across threads when its estimated work (`kernel_work`) is at
# least this (an add of 2^15 floats, a few microseconds), where its parts repay handing them
# to the program library's pool; how many threads it runs on is decided per call
# (blas_threads.py), and kernels loaded through Numba split only from a larger size. A machine
# with one core never threads.
PARALLEL_WORK = 1 << 17 if _cores() >= 2 else 1 << 62  # blas_threads.POOL_SPLIT_WORK
TRANSCENDENTAL_WORK = 8  # a vectorized exp/tanh/log costs about eight simple flops


def kernel_work(comp, params, outputs) -> int:
    """A kernel's estimated serial cost in element operations: every element it reads or
    writes, every flop, and TRANSCENDENTAL_WORK per transcendental (cost_analysis's counts
    for the fused computation)."""
    from ...passes.cost_analysis import FLOPS, TRANSCENDENTALS, computation_cost

    moved = sum(p.shape.numel() for p in params) + sum(leaf_shape(i, k).numel() for i, k in outputs)
    cost = computation_cost(comp)
    return int(moved + cost[FLOPS] + TRANSCENDENTAL_WORK * cost[TRANSCENDENTALS])


@dataclass
class KernelSpec:
    """A generated kernel: its module source and how the driver must call it."""

    name: str
    source: str
    # ("param", number) | ("const", instr) | ("out", index) | ("split", None): the part of
    # the outermost loop to run, last (loops.SPLIT_ARG)
    args: list[tuple]
    ndims: list[int]  # rank each argument is passed with (1 for flattened arrays)
    dtypes: list[str]  # HLO element type of each argument
    flat: bool
    parallel: bool
    loop_nests: int = 1  # outputs of different dims get a loop nest each
    kid: str = field(default="")  # content hash: source + signature
    work: int = 0  # kernel_work, for the thread count of a parallel kernel
    # parameter number -> the block of it the kernel is passed (parameter_windows)
    windows: dict = field(default_factory=dict)

    def numba_signature(self):
        from numba import from_dtype, types

        arrays = [
            types.Array(from_dtype(storage_dtype(d)), n, "C")
            for d, n in zip(self.dtypes, self.ndims)
        ]
        return types.void(*arrays)

    def signature_text(self) -> str:
        return ", ".join(f"{d}[{n}d]" for d, n in zip(self.dtypes, self.ndims))

    def content_id(self, salt: str = "") -> str:
        """The kernel's identity: a hash of its source and signature (and `salt`)."""
        text = self.source + self.signature_text() + salt
        return hashlib.sha256(text.encode()).hexdigest()[:32]


_HEADER = '''"""{doc}"""
import math
import numpy as np
from numba import njit
from minixla.backends.cpu import helpers as h
from minixla.backends.cpu.mathlib import MATH_F32, MATH_F64
'''


# The opcodes mathlib.MATH_F32 and MATH_F64 implement (mathlib builds its tables from this).
MATH_OPCODES = (
    "exponential",
    "exponential-minus-one",
    "log",
    "log-plus-one",
    "tanh",
    "logistic",
    "sine",
    "cosine",
    "tan",
    "erf",
    "power",
    "atan2",
    "cbrt",
    "sqrt",
    "rsqrt",
)


class CpuWriter(Writer):
    """Kernel text for Numba on the CPU: transcendental functions come from mathlib's
    vectorizable tables (`MATH_F32`/`MATH_F64`, imported by the kernel header). Emitting
    needs only their opcodes, so it does not import mathlib (nor Numba)."""

    def __init__(self):
        super().__init__()
        self.split_inner_reductions = True  # reductions compile with reassoc
        self.native_shifts = True

    def math_table(self, dtype: str):
        if dtype not in ("f32", "f64"):
            return None
        return MATH_OPCODES, f"MATH_{dtype.upper()}"


def build_kernel(
    comp,
    name: str = "kernel",
    *,
    parallel_threshold: int = PARALLEL_WORK,
    flush_denormals: bool = False,
) -> KernelSpec:
    """The kernel for fused computation `comp`; raises NotEmittable when some instruction
    cannot be computed per element. flush_denormals: every float op's subnormal results
    become zeros of their sign."""
    windows = parameter_windows(comp)
    if windows:
        comp = windowed(comp, windows)
    outputs = outputs_of(comp)
    flat = is_flat(comp, outputs)
    writer = CpuWriter()
    writer.flush_denormals = flush_denormals
    params, arrays, args, ndims, dtypes, arg_names = kernel_signature(comp, outputs, flat)
    work = kernel_work(comp, params, outputs)
    groups = plan_nests(outputs, flat, comp)
    parallel = work >= parallel_threshold and len(groups) == 1
    hoisted: list[str] = []
    em = Elemental(writer, arrays, hoist=hoisted, flat=flat)
    body: list[str] = []
    for group in groups:
        writer.lines = []
        writer.depth = 1
        emit_nest(em, writer, group, flat, parallel)
        body.extend(writer.lines)
    parallel = parallel and any(f"{SPLIT_ARG}[1]" in line for line in body)
    if parallel:
        args, ndims, dtypes = args + [("split", None)], ndims + [1], dtypes + ["s64"]
        arg_names = arg_names + [SPLIT_ARG]
    fastmath = {"contract", "reassoc"} if writer.uses_reduce else {"contract"}
    # No names in the source: fusions alike are one kernel, compiled once (a long chain of
    # elementwise ops splits into fusions that repeat).
    lines = [_HEADER.format(doc="Kernel for a fused computation.")]
    lines += [f"{n} = {text}" for text, n in writer.constants.items()]
    lines += [f"{n} = {key}" for key, n in writer.math_names.items()]
    lines += [
        "",
        "",
        f"@njit(fastmath={{{', '.join(map(repr, sorted(fastmath)))}}}, "
        f"error_model='numpy', "
        f"boundscheck=False, nogil=True, cache=CACHE)",
        f"def {name}({', '.join(arg_names)}):",
    ]
    lines += ["    " + line for line in hoisted]
    lines += body
    source = "\n".join(lines) + "\n"
    spec = KernelSpec(name, source, args, ndims, dtypes, flat, parallel, len(groups), work=work)
    spec.kid = spec.content_id()
    spec.windows = windows
    return spec


Window = tuple  # ((start, limit), ...) per dim


def parameter_windows(comp) -> dict[int, Window]:
    """{parameter number: block} for each parameter the fused computation reads only through
    slices that stay inside one C-contiguous block smaller than the whole array (a leading
    index, or a range of rows). The caller passes that block, a view, and the kernel reads it
    from offset 0: a fusion that slices step t out of an unrolled loop's inputs is then the
    same kernel at every step, compiled once instead of once per step."""
    windows = {}
    for p in comp.parameters:
        if not p.users or any(u.opcode != "slice" or not u.shape.numel() for u in p.users):
            continue
        if not row_major(p.shape):
            continue
        dims = p.shape.dims
        starts, limits = list(dims), [0] * len(dims)
        for user in p.users:
            for d, ((start, _, stride), size) in enumerate(
                zip(user.attrs["slice"], user.shape.dims)
            ):
                starts[d] = min(starts[d], start)
                limits[d] = max(limits[d], start + (size - 1) * stride + 1)
        cut = [d for d in range(len(dims)) if (starts[d], limits[d]) != (0, dims[d])]
        if cut and all(limits[d] - starts[d] == 1 for d in range(cut[-1])):
            windows[p.parameter_number] = tuple(zip(starts, limits))
    return windows


def windowed(comp, windows: dict[int, Window]):
    """A copy of `comp` whose windowed parameters have their block's dims and whose slices
    start from the block's start; a slice that takes the whole block is the parameter."""
    copy = comp.clone()
    for p in copy.parameters:
        window = windows.get(p.parameter_number)
        if window is None:
            continue
        dims = [limit - start for start, limit in window]
        p.shape = p.shape.with_dims(dims).with_layout(p.shape.layout)
        for user in list(p.users):
            spec = tuple(
                (start - first, limit - first, stride)
                for (start, limit, stride), (first, _) in zip(user.attrs["slice"], window)
            )
            if all(spec[d] == (0, dims[d], 1) for d in range(len(dims))):
                copy.replace_instruction(user, p)
            else:
                user.attrs["slice"] = spec
    return copy


def window_range(shape, window: Window) -> tuple[int, int, tuple]:
    """(first, stop, dims): the block `window` of a row-major array of `shape` is its elements
    first..stop-1, with `dims`."""
    dims = tuple(limit - start for start, limit in window)
    first = 0
    for (start, _), size in zip(window, shape.dims):
        first = first * size + start
    return first, first + math.prod(dims), dims


def window_view(name: str, shape, window: Window) -> str:
    """Driver source for the block `window` of the C-contiguous array `name`: a view."""
    first, stop, dims = window_range(shape, window)
    return f"{name}.reshape(-1)[{first}:{stop}].reshape({dims!r})"


def read_in_place(spec: KernelSpec, buffers: list, args: list[str]):
    """(spec, args) for a call whose argument k names buffer `buffers[k]` (None: compare
    with nothing): a parameter that is one of the outputs' very buffer, with the same type
    and rank, is read through that output's argument (`reading_outputs`) and left out of
    `args`."""
    kinds = [kind for kind, _ in spec.args]
    outs = {b: k for k, b in enumerate(buffers) if kinds[k] == "out" and b is not None}
    pairs = {
        k: outs[b]
        for k, b in enumerate(buffers)
        if kinds[k] == "param"
        and b in outs
        and spec.dtypes[k] == spec.dtypes[outs[b]]
        and spec.ndims[k] == spec.ndims[outs[b]]
    }
    if not pairs:
        return spec, args
    return reading_outputs(spec, pairs), [a for k, a in enumerate(args) if k not in pairs]


def reading_outputs(spec: KernelSpec, pairs: dict[int, int]) -> KernelSpec:
    """`spec` with argument i (a parameter) read from argument pairs[i] (an output) instead:
    for a kernel whose parameter buffer is its output buffer, same dims and rank (an in-place
    update). The memory read is the same; but with two pointers to it LLVM's run-time overlap
    check fails and the loop runs scalar (a GELU over 2^20 floats: 21 ms in place against
    0.5 ms), while one pointer read and written at the same index vectorizes."""
    head, _, body = spec.source.partition(f"def {spec.name}(")
    signature, _, body = body.partition("):\n")
    names = [name.strip() for name in signature.split(",")]
    for i, j in pairs.items():
        body = re.sub(rf"\b{names[i]}\b", names[j], body)
    keep = [k for k in range(len(spec.args)) if k not in pairs]
    source = f"{head}def {spec.name}({', '.join(names[k] for k in keep)}):\n{body}"
    variant = KernelSpec(
        spec.name,
        source,
        [spec.args[k] for k in keep],
        [spec.ndims[k] for k in keep],
        [spec.dtypes[k] for k in keep],
        spec.flat,
        spec.parallel,
        spec.loop_nests,
        work=spec.work,
        windows=spec.windows,
    )
    variant.kid = variant.content_id()
    return variant


def storage_dtype(dtype: str):
    """NumPy dtype of a kernel's array argument: bf16 arrays travel as their bit patterns."""
    import numpy as np

    from ...ir.dtypes import numpy_dtype

    return np.dtype(np.uint16) if dtype == "bf16" else numpy_dtype(dtype)


def kernel_arg(name: str, rank: int, flat: bool, dtype: str = "") -> str:
    """Driver source passing array `name` the way the kernel indexes it."""
    if dtype == "bf16":
        name = f"{name}.view(np.uint16)"
    if rank == 0:
        return f"{name}.reshape(1)"
    return f"{name}.reshape(-1)" if flat and rank > 1 else name
