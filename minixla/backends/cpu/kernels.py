"""Kernel sources: one Numba function per fused computation (or lone op), as Python text.

A kernel takes the fusion's parameters, its array constants and one preallocated output array
per result, and fills the outputs with loops over their index space; the loop body comes from
the elemental emitter. Outputs of different dims (a multi-output reduction fusion) get one
loop nest each inside the same kernel.

Loops run over the output in row-major order, so the innermost loop walks contiguous memory
and LLVM vectorizes it. When the fusion is purely elementwise every array is passed flattened
and the kernel is one loop whose bound comes from the array, so the same kernel serves every
shape. Large kernels use `prange` on the outermost loop and are compiled with parallel=True.

Only 'contract' fast-math is on (FMA formation, which only removes roundings); kernels with
reductions also get 'reassoc' so LLVM can vectorize the accumulation (XLA:CPU does the same).
Neither flag assumes away NaN, inf or signed zeros.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from .elemental import Elemental, Writer
from .plan import is_view_op
from .scalar import NotEmittable, kernel_type

PARALLEL_THRESHOLD = 1 << 18  # elements touched; below it threads cost more than they save


@dataclass
class KernelSpec:
    """A generated kernel: its module source and how the driver must call it."""
    name: str
    source: str
    args: list[tuple]  # ("param", number) | ("const", instr) | ("out", index)
    ndims: list[int]  # rank each argument is passed with (1 for flattened arrays)
    dtypes: list[str]  # HLO element type of each argument
    flat: bool
    parallel: bool
    loop_nests: int = 1  # outputs of different dims get a loop nest each
    kid: str = field(default="")  # content hash: source + signature

    def numba_signature(self):
        from numba import from_dtype, types
        from ...ir.dtypes import numpy_dtype
        arrays = [types.Array(from_dtype(storage_dtype(d)), n, "C")
                  for d, n in zip(self.dtypes, self.ndims)]
        return types.void(*arrays)

    def signature_text(self) -> str:
        return ", ".join(f"{d}[{n}d]" for d, n in zip(self.dtypes, self.ndims))


_HEADER = '''"""{doc}"""
import math
import numpy as np
from numba import njit, prange
from minixla.backends.cpu import helpers as h
from minixla.backends.cpu.mathlib import MATH_F32, MATH_F64
'''


def outputs_of(comp) -> list:
    """The fusion's results: root tuple elements, or the root (variadic reduce: its leaves)."""
    root = comp.root
    if root.opcode == "tuple":
        if any(op.shape.is_tuple for op in root.operands):
            raise NotEmittable("nested tuple outputs")
        return [(op, None) for op in root.operands]
    if root.shape.is_tuple:
        if root.opcode != "reduce":
            raise NotEmittable(f"tuple-shaped {root.opcode} root")
        return [(root, k) for k in range(len(root.shape.tuple_shapes))]
    return [(root, None)]


def _leaf_shape(instr, k):
    return instr.shape if k is None else instr.shape.tuple_shapes[k]


def is_flat(comp, outputs) -> bool:
    """Every array in the fusion has the output's dims (or is a scalar) and nothing moves data,
    so one flat index addresses all of them."""
    dims = _leaf_shape(*outputs[0]).dims
    for instr, k in outputs:
        if _leaf_shape(instr, k).dims != dims:
            return False
    for instr in comp.instructions:
        if instr.shape.is_tuple or instr.opcode == "tuple":
            if instr is not comp.root:
                return False
            continue
        if instr.shape.rank and instr.shape.dims != dims:
            return False
        if instr.opcode in ("broadcast",) and instr.operand(0).shape.rank != 0:
            return False
        if instr.opcode == "bitcast" and not is_view_op(instr):
            return False  # moves elements through layouts
        if instr.opcode in ("iota", "reduce", "transpose", "slice", "reverse", "pad",
                            "concatenate", "dynamic-slice", "dynamic-update-slice", "gather"):
            return False
    return True


def build_kernel(comp, name: str = "kernel", *,
                 parallel_threshold: int = PARALLEL_THRESHOLD) -> KernelSpec:
    """The kernel for fused computation `comp`; raises NotEmittable when some instruction
    cannot be computed per element."""
    outputs = outputs_of(comp)
    flat = is_flat(comp, outputs)
    writer = Writer()
    params = sorted(comp.parameters, key=lambda p: p.parameter_number)
    constants = [i for i in comp.post_order() if i.opcode == "constant" and i.shape.rank]
    arrays, args, ndims, dtypes = {}, [], [], []
    for p in params:
        arrays[id(p)] = f"p{p.parameter_number}"
        args.append(("param", p.parameter_number))
        _add_arg(p.shape, flat, ndims, dtypes)
    for k, c in enumerate(constants):
        arrays[id(c)] = f"c{k}"
        args.append(("const", c))
        _add_arg(c.shape, flat, ndims, dtypes)
    for k, (instr, leaf) in enumerate(outputs):
        args.append(("out", k))
        _add_arg(_leaf_shape(instr, leaf), flat, ndims, dtypes)
    for d in dtypes:
        kernel_type(d)
    touched = max([p.shape.numel() for p in params]
                  + [_leaf_shape(i, k).numel() for i, k in outputs] + [1])
    parallel = touched >= parallel_threshold
    hoisted: list[str] = []
    em = Elemental(writer, arrays, hoist=hoisted, flat=flat)
    body: list[str] = []
    groups = _group_by_dims(outputs)
    for group in groups:
        writer.lines = []
        writer.depth = 1
        _emit_loop_nest(em, writer, group, flat, parallel)
        body.extend(writer.lines)
    parallel = parallel and any("prange" in line for line in body)
    arg_names = [arrays[id(p)] for p in params] + [arrays[id(c)] for c in constants] + \
        [f"o{k}" for k in range(len(outputs))]
    fastmath = {"contract", "reassoc"} if writer.uses_reduce else {"contract"}
    lines = [_HEADER.format(doc=f"Kernel for computation {comp.name}.")]
    lines += [f"{n} = {text}" for text, n in writer.constants.items()]
    lines += [f"{n} = {key}" for key, n in writer.math_names.items()]
    lines += ["", "",
              f"@njit(parallel={parallel}, fastmath={{{', '.join(map(repr, sorted(fastmath)))}}}, "
              f"error_model='numpy', "
              f"boundscheck=False, nogil=True, cache=CACHE)",
              f"def {name}({', '.join(arg_names)}):"]
    lines += ["    " + line for line in hoisted]
    lines += body
    source = "\n".join(lines) + "\n"
    spec = KernelSpec(name, source, args, ndims, dtypes, flat, parallel, len(groups))
    spec.kid = hashlib.sha256((source + spec.signature_text()).encode()).hexdigest()[:32]
    return spec


def _add_arg(shape, flat: bool, ndims: list, dtypes: list) -> None:
    ndims.append(1 if flat or shape.rank == 0 else shape.rank)  # scalars: 1-element arrays
    dtypes.append(shape.dtype)


def _group_by_dims(outputs):
    groups: dict[tuple, list] = {}
    for k, (instr, leaf) in enumerate(outputs):
        groups.setdefault(_leaf_shape(instr, leaf).dims, []).append((k, instr, leaf))
    return list(groups.values())


def _emit_loop_nest(em: Elemental, w: Writer, group, flat: bool, parallel: bool) -> None:
    dims = _leaf_shape(group[0][1], group[0][2]).dims
    if len(group) == 1 and is_column_reduce(group[0][1]) and group[0][2] is None:
        _emit_column_reduce(em, w, group[0][0], group[0][1], parallel)
        return
    if flat and dims:
        loops = [("i0", f"o{group[0][0]}.shape[0]")]
        index: tuple[str, ...] = ("i0",)
    else:
        loops, index = _loops(dims, tile=_tiled(em, group))
    _open(w, loops, parallel)
    em.push()
    for k, instr, leaf in group:
        value = em.value(instr, index)
        if leaf is not None:
            value = value[leaf]
        if _leaf_shape(instr, leaf).dtype == "bf16":
            value = f"h.bf16_store({value})"
        w.line(f"o{k}[{', '.join(index) if index else '0'}] = {value}")
    em.pop()
    w.depth -= len(loops)


TILE = 32  # a 32x32 f32 tile of the transposed operand spans 32 cache lines and fits in L1


def _loops(dims, *, tile: bool):
    """(loop var, range arguments) from outer to inner, and the index they produce. With
    `tile`, the two minor dims are walked in TILE x TILE blocks (cache-blocked transposes)."""
    loops = [(f"i{d}", str(n)) for d, n in enumerate(dims)]
    index = tuple(f"i{d}" for d in range(len(dims)))
    if not tile or len(dims) < 2:
        return loops, index
    a, b = len(dims) - 2, len(dims) - 1
    # Block loops count blocks (prange takes no step).
    blocks = [(f"t{d}", str(-(-dims[d] // TILE))) for d in (a, b)]
    inner = [(f"i{d}", f"t{d} * {TILE}, min(t{d} * {TILE} + {TILE}, {dims[d]})") for d in (a, b)]
    return loops[:a] + blocks + inner, index


def _open(w: Writer, loops, parallel: bool) -> None:
    for depth, (var, bounds) in enumerate(loops):
        w.line(f"for {var} in {'prange' if parallel and depth == 0 else 'range'}({bounds}):")
        w.depth += 1


def _tiled(em: Elemental, group) -> bool:
    """Tile when some transpose in the fusion reads its operand's minor dim along a non-minor
    output dim: untiled, every element of the inner loop would touch a new cache line."""
    seen, stack = set(), [instr for _, instr, _ in group]
    while stack:
        instr = stack.pop()
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        source = minor_source(instr)
        if source is not None and source != instr.operand(0).shape.rank - 1 \
                and instr.shape.dims[-1] > 1:
            return True
        stack.extend(instr.operands)
    return False


def minor_source(instr):
    """For a transpose, or a bitcast that permutes dims through layouts: the operand dim that
    the result's minor dim walks along (None for other ops)."""
    if instr.opcode == "transpose":
        return instr.attrs["dimensions"][-1]
    if instr.opcode != "bitcast" or instr.shape.dims == instr.operand(0).shape.dims and \
            instr.shape.minor_to_major() == instr.operand(0).shape.minor_to_major():
        return None
    from .elemental import physical_order
    out_order, in_order = physical_order(instr.shape), physical_order(instr.operand(0).shape)
    if sorted(instr.shape.dims) != sorted(instr.operand(0).shape.dims) or \
            [instr.shape.dims[d] for d in out_order] != \
            [instr.operand(0).shape.dims[d] for d in in_order]:
        return None  # not a pure permutation
    return in_order[out_order.index(instr.shape.rank - 1)]


def is_column_reduce(instr) -> bool:
    """A single-input reduce that keeps its input's minor dim."""
    if instr.opcode != "reduce" or instr.operand_count != 2 or instr.shape.is_tuple or \
            instr.shape.dtype == "bf16":  # the output array would hold bit patterns
        return False
    rank = instr.operand(0).shape.rank
    return bool(instr.attrs["dimensions"]) and rank - 1 not in instr.attrs["dimensions"]


def _emit_column_reduce(em: Elemental, w: Writer, k: int, instr, parallel: bool) -> None:
    """Accumulate into the output while reading the input in row-major order, so the inner
    loop runs along the kept minor dim: contiguous, and independent lanes vectorize without
    reassociation. Threads split the first kept dim, or blocks of the minor dim."""
    operand, init = instr.operands
    in_dims, reduced = operand.shape.dims, set(instr.attrs["dimensions"])
    out = f"o{k}"
    init_value = em.value(init, ())
    out_loops, out_index = _loops(instr.shape.dims, tile=False)
    _open(w, out_loops, False)
    w.line(f"{out}[{', '.join(out_index) or '0'}] = {init_value}")
    w.depth -= len(out_loops)
    loops = [(f"i{d}", str(n)) for d, n in enumerate(in_dims)]
    if parallel and 0 in reduced:  # split the minor dim into blocks, one per task
        last = len(in_dims) - 1
        block = max(512, -(-in_dims[last] // 16))  # long contiguous runs per row
        loops = [("jb", str(-(-in_dims[last] // block)))] + loops[:-1] + \
            [(f"i{last}", f"jb * {block}, min(jb * {block} + {block}, {in_dims[last]})")]
    _open(w, loops, parallel)
    em.push()
    index = tuple(f"i{d}" for d in range(len(in_dims)))
    target = f"{out}[{', '.join(f'i{d}' for d in range(len(in_dims)) if d not in reduced)}]"
    element = em.value(operand, index)
    (combined,) = em.inline(instr.attrs["to_apply"], [target, element])
    w.line(f"{target} = {combined}")
    em.pop()
    w.depth -= len(loops)


def single_op_computation(instr):
    """A fused computation holding just `instr` (operands become parameters), so a lone op
    goes through the same kernel builder as a fusion."""
    from ...ir.computation import HloComputation
    from ...ir.instruction import HloInstruction
    params = [HloInstruction.parameter(i, op.shape, name=f"param_{i}")
              for i, op in enumerate(instr.operands)]
    clone = instr.clone(params)
    clone.name = instr.name
    return HloComputation(f"single.{instr.name}", params + [clone], clone)


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
