"""CUDA kernel sources: one numba.cuda kernel per fused computation (or lone op), as Python text.

The per-element code is the shared codegen layer's: the same elemental emitter
(codegen/elemental.py) and scalar rules (codegen/scalar.py) as the CPU's produce the value of
every output at a symbolic index. Only the loops around it are GPU-specific. A kernel is one of:

* loop: one thread per output element, a grid-stride loop over the flattened output
  (`for lin in range(cuda.grid(1), N, cuda.gridsize(1))`), the index recovered with // and %;
  elementwise-only fusions index every array flat, so one kernel serves every shape;
* block (reduce.py): outputs computed by reductions get a group of threads each, which split the
  reduced elements and combine their partial results through shared memory;
* tile (tiles.py): a transpose read at the output index goes through a shared-memory tile so
  both its reads and the kernel's writes are coalesced;
* matmul and in-place window updates (matmul.py, indexing.py): fixed templates.

Outputs of different dims (a multi-output fusion) get one loop each in the same kernel.
Emitting needs neither a GPU nor numba.cuda: kernels are text until the runtime compiles them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from ..codegen.elemental import Elemental, Writer
from ..codegen.kernels import is_flat, kernel_signature, leaf_shape, outputs_of
from .target import Geometry

# Opcodes the math tables in helpers.py provide (f32 and f64).
MATH_OPCODES = frozenset(
    {
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
        "cbrt",
        "sqrt",
        "rsqrt",
        "power",
        "atan2",
    }
)

HEADER = '''"""{doc}"""
from numba import cuda
from minixla.backends.cuda import helpers as h
np = h.np
math = h.math
'''


@dataclass
class KernelSpec:
    """A generated kernel: its source, how the driver passes arguments, and its launch shape."""

    name: str
    source: str
    args: list[tuple]  # ("param", number) | ("const", instr) | ("out", index)
    ndims: list[int]  # rank each argument is passed with (1: flattened, or a scalar)
    dtypes: list[str]  # HLO element type of each argument
    flat: bool
    threads: int  # per block
    blocks: int
    kind: str = "loop"
    loop_nests: int = 1
    kid: str = field(default="")

    def finish(self) -> KernelSpec:
        text = self.source + self.signature_text()
        self.kid = hashlib.sha256(text.encode()).hexdigest()[:32]
        return self

    def signature_text(self) -> str:
        return ", ".join(f"{d}[{n}d]" for d, n in zip(self.dtypes, self.ndims))

    def numba_signature(self):
        from numba.cuda import types
        from numba.cuda.np.numpy_support import from_dtype

        return types.void(
            *[
                types.Array(from_dtype(storage_dtype(d)), n, "C")
                for d, n in zip(self.dtypes, self.ndims)
            ]
        )


def storage_dtype(dtype: str):
    """NumPy dtype of a device buffer: bf16 (and other types Numba cannot hold) as raw bits."""
    import numpy as np
    from numba.np.numpy_support import from_dtype

    from ...ir.dtypes import numpy_dtype

    np_dtype = numpy_dtype(dtype)
    try:
        from_dtype(np_dtype)
        return np_dtype
    except Exception:  # noqa: BLE001 - ml_dtypes types are unknown to Numba
        return np.dtype(f"u{np_dtype.itemsize}")


class CudaWriter(Writer):
    """Kernel text under construction; transcendental functions come from helpers.MATH_*."""

    def __init__(self):
        super().__init__()
        self.shared: list[str] = []  # shared/local array declarations, at the kernel's top

    def math_table(self, dtype: str):
        return (MATH_OPCODES, f"h.MATH_{dtype.upper()}") if dtype in ("f32", "f64") else None

    def declare(self, prefix: str, text: str) -> str:
        name = self.var(prefix)
        self.shared.append(f"{name} = {text}")
        return name


class CudaElemental(Elemental):
    """The shared elemental emitter plus the GPU's own handlers: reductions done by a block of
    threads and reduce-window (reduce.py), transposes read from a shared tile (tiles.py),
    gather (indexing.py)."""

    def __init__(self, writer: CudaWriter, arrays: dict, *, hoist, flat: bool):
        super().__init__(writer, arrays, hoist=hoist, flat=flat)
        self.block = None  # reduce.Block while emitting a block group
        self.tile_value: tuple[int, str] | None = None  # (id(transpose), value source)

    def _emit_here(self, instr, index):
        if self.tile_value is not None and id(instr) == self.tile_value[0]:
            return self.bind(self.tile_value[1])
        if self.block is not None and self.block.takes(self, instr):
            from .reduce import block_reduce

            return block_reduce(self, instr, index)
        if instr.opcode in GPU_ELEMENTAL:
            return GPU_ELEMENTAL[instr.opcode](self, instr, index)
        return super()._emit_here(instr, index)

    def inline(self, comp, args: list[str], shapes=None) -> list[str]:
        """A combiner applied to `args`; variadic reduces' combiners return tuples."""
        if comp.root.opcode != "tuple":
            return super().inline(comp, args, shapes)
        args = self.as_parameters(comp, args, shapes)
        inner = Elemental(self.w, {}, scalars=dict(enumerate(args)))
        return [inner.value(op, ()) for op in comp.root.operands]


def _gather(em, instr, index):
    from .indexing import gather

    return gather(em, instr, index)


def _reduce_window(em, instr, index):
    from .reduce import reduce_window

    return reduce_window(em, instr, index)


GPU_ELEMENTAL = {"gather": _gather, "reduce-window": _reduce_window}


def group_by_dims(outputs):
    groups: dict[tuple, list] = {}
    for k, (instr, leaf) in enumerate(outputs):
        groups.setdefault(leaf_shape(instr, leaf).dims, []).append((k, instr, leaf))
    return list(groups.values())


def delinearize(em: Elemental, linear: str, dims) -> tuple[str, ...]:
    """Row-major index names for flat position `linear` of an array with `dims`."""
    if not dims:
        return ()
    names, stride = [], 1
    strides = []
    for size in reversed(dims):
        strides.append(stride)
        stride *= size
    strides.reverse()
    for d, (size, stride) in enumerate(zip(dims, strides)):
        expr = linear if stride == 1 else f"{linear} // {stride}"
        if d > 0 and size != 1:
            expr = f"({expr}) % {size}" if stride != 1 else f"{expr} % {size}"
        names.append("0" if size == 1 else em.bind(expr, "i"))
    return tuple(names)


def store(em: Elemental, k: int, instr, leaf, index) -> None:
    value = em.value(instr, index)
    if leaf is not None:
        value = value[leaf]
    if leaf_shape(instr, leaf).dtype == "bf16":
        value = f"h.bf16_store({value})"
    em.w.line(f"o{k}[{', '.join(index) if index else '0'}] = {value}")


def emit_loop_group(em: Elemental, group, flat: bool) -> None:
    """One thread per output element over a grid-stride loop."""
    w = em.w
    dims = leaf_shape(group[0][1], group[0][2]).dims
    bound = f"o{group[0][0]}.shape[0]" if flat else str(_numel(dims))
    linear = w.var("lin")
    w.line(f"for {linear} in range(cuda.grid(1), {bound}, cuda.gridsize(1)):")
    w.depth += 1
    em.push()
    index = (linear,) if flat and dims else delinearize(em, linear, dims)
    for k, instr, leaf in group:
        store(em, k, instr, leaf, index)
    em.pop()
    w.depth -= 1


def pointwise_reach(roots) -> list:
    """Instructions evaluated at the output index itself: the roots, and what they read through
    elementwise ops at the same index (not through broadcasts, slices, reduces, ...)."""
    seen, order, stack = set(), [], list(roots)
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        order.append(instr)
        if instr.opcode == "reduce":
            continue
        if (
            instr.opcode in ("get-tuple-element", "copy", "opt-barrier")
            or instr.opdef.kind == "elementwise"
        ):
            stack.extend(
                op
                for op in instr.operands
                if op.shape.is_tuple or op.shape.dims == instr.shape.dims
            )
    return order


def _numel(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def blocks_for(work: int, per_block: int, geometry: Geometry) -> int:
    return max(1, min(geometry.max_blocks, -(-work // max(per_block, 1))))


def build_kernel(comp, geometry: Geometry, name: str = "kernel") -> KernelSpec:
    """The kernel for fused computation `comp`; raises NotEmittable when some instruction
    cannot be computed per element on the GPU."""
    from . import reduce, tiles

    outputs = outputs_of(comp)
    flat = is_flat(comp, outputs) and not any(i.opcode in GPU_ELEMENTAL for i in comp.instructions)
    writer = CudaWriter()
    _, arrays, args, ndims, dtypes, arg_names = kernel_signature(comp, outputs, flat)
    hoisted: list[str] = []
    em = CudaElemental(writer, arrays, hoist=hoisted, flat=flat)
    groups = group_by_dims(outputs)
    layout = reduce.plan_blocks(groups, geometry) if not flat else None
    tile = tiles.candidate(groups) if layout is None and not flat else None
    writer.lines, writer.depth = [], 1
    if layout is not None:
        kind, blocks = "block", reduce.emit(em, layout, geometry)
        for group in layout.loop_groups:
            emit_loop_group(em, group, flat)
    elif tile is not None:
        kind, blocks = "tile", tiles.emit(em, groups[0], tile, geometry)
    else:
        kind = "loop"
        for group in groups:
            emit_loop_group(em, group, flat)
        work = max(_numel(leaf_shape(g[0][1], g[0][2]).dims) for g in groups)
        blocks = blocks_for(work, geometry.threads, geometry)
    threads = geometry.tile * geometry.tile_rows if kind == "tile" else geometry.threads
    source = assemble(writer, name, arg_names, f"Kernel for computation {comp.name}.", hoisted)
    return KernelSpec(
        name, source, args, ndims, dtypes, flat, threads, blocks, kind, len(groups)
    ).finish()


def assemble(writer: CudaWriter, name: str, arg_names, doc: str, hoisted=()) -> str:
    lines = [HEADER.format(doc=doc)]
    lines += [f"{n} = {text}" for text, n in writer.constants.items()]
    lines += [f"{n} = {key}" for key, n in writer.math_names.items()]
    lines += ["", "", f"def {name}({', '.join(arg_names)}):"]
    lines += ["    " + line for line in writer.shared]
    lines += ["    " + line for line in hoisted]
    lines += writer.lines
    return "\n".join(lines) + "\n"
