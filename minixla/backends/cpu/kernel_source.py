"""The source of one op kernel (opkernels.py, sort_kernels.py, rng_kernels.py): arguments in
the fusion kernels' calling convention (operands, then one output per result leaf; scalars as
one-element arrays), body lines, and the elemental emitter for inlined scalar computations."""

from __future__ import annotations


from ..codegen.elemental import Elemental
from ..codegen.scalar import kernel_type
from .kernels import _HEADER, CpuWriter, KernelSpec
from .loops import SPLIT_ARG

# Scratch a kernel keeps in its stack frame, per array (h.stack_array); bigger scratch comes
# from malloc (h.heap_array) and is freed at the end. Neither allocates through Numba's
# runtime, so the kernel can live in a program's library (native_library.py).
STACK_SCRATCH_BYTES = 1 << 15


def on_stack(count: int, dtype: str) -> bool:
    """Does a scratch array of `count` elements of NumPy type `dtype` go on the stack?"""
    import numpy as np

    return count * np.dtype(dtype).itemsize <= STACK_SCRATCH_BYTES


class OpSource:
    """One op kernel under construction: arguments, body lines and the elemental emitter for
    inlined scalar computations."""

    def __init__(self, instr):
        self.instr = instr
        self.w = CpuWriter()
        self.w.depth = 1
        self.params = [f"p{i}" for i in range(len(instr.operands))]
        leaves = [s for _, s in instr.shape.leaves()]
        self.out_shapes = leaves
        self.outs = [f"o{k}" for k in range(len(leaves))]
        self.heap: list[str] = []  # scratch arrays to free before the kernel returns
        self.work = 0  # the kernel_work of a kernel whose outermost loop threads split
        for shape in [op.shape for op in instr.operands] + leaves:
            kernel_type(shape.dtype)

    def line(self, text: str) -> None:
        self.w.line(text)

    def open(self, var: str, bound) -> None:
        self.line(f"for {var} in range({bound}):")
        self.w.depth += 1

    def open_split(self, var: str, bound: int, work: int) -> None:
        """The outermost loop, of which each thread runs its part (loops.SPLIT_ARG) when the
        kernel's `work` gets threads."""
        self.work = work
        part = SPLIT_ARG
        self.line(f"for {var} in range({part}[0] * {bound} // {part}[1], ")
        self.line(f"        ({part}[0] + 1) * {bound} // {part}[1]):")
        self.w.depth += 1

    def close(self, levels: int = 1) -> None:
        self.w.depth -= levels

    def load(self, array: str, dtype: str, index) -> str:
        load = f"{array}[{', '.join(index) if index else '0'}]"
        return self.bind(f"h.bf16_load({load})" if dtype == "bf16" else load)

    def store(self, array: str, dtype: str, index, value: str) -> None:
        # rounded first: a to_apply of another type (f32 add on bf16 scatter operands) leaves
        # values off the bf16 grid, and bf16_store only keeps the upper half
        value = f"h.bf16_store(h.round_bf16({value}))" if dtype == "bf16" else value
        self.line(f"{array}[{', '.join(index) if index else '0'}] = {value}")

    def scratch(self, name: str, count: int, dtype: str) -> None:
        """`name` = a 1-d scratch array of `count` elements of NumPy type `dtype` ("int64")."""
        if on_stack(count, dtype):
            self.line(f"{name} = h.stack_array({count}, np.{dtype})")
        else:
            self.line(f"{name} = h.heap_array({count}, np.{dtype})")
            self.heap.append(name)

    def converted(self, value: str, source: str, target: str) -> str:
        """`value` of HLO type `source` as type `target` (itself when they are one)."""
        if source == target:
            return value
        from ...ir import Shape
        from ..codegen.scalar import Retyped, emit_scalar

        convert = Retyped("convert", {}, Shape.array(target, ()), [Shape.array(source, ())])
        return self.bind(emit_scalar(self.w, convert, [value]))

    def bind(self, expr: str, prefix: str = "v") -> str:
        name = self.w.var(prefix)
        self.line(f"{name} = {expr}")
        return name

    def inline(self, comp, args: list[str]) -> list[str]:
        return Elemental(self.w, {}).inline(comp, args)

    def accumulate(self, accumulators: list[str], elements: list[str]) -> list[str]:
        """One step of this op's to_apply; a bf16 sum or product stays in f32 (rounding is
        left to the caller, see elemental.accumulates_in_f32)."""
        return Elemental(self.w, {}).accumulate(self.instr, accumulators, elements)

    def const(self, value, dtype: str) -> str:
        return self.w.const(value, dtype)

    def spec(self, name: str = "kernel", reduce_flags: bool = False) -> KernelSpec:
        """`reduce_flags`: compile with 'reassoc', so LLVM may vectorize the kernel's sums (as
        the fusion kernels with reductions are)."""
        instr = self.instr
        fastmath = "{'contract', 'reassoc'}" if reduce_flags else "{'contract'}"
        lines = [_HEADER.format(doc=f"Kernel for {instr.opcode}.")]  # no name: alike, shared
        lines += [f"{n} = {text}" for text, n in self.w.constants.items()]
        lines += [f"{n} = {key}" for key, n in self.w.math_names.items()]
        split = [SPLIT_ARG] if self.work else []
        lines += [
            "",
            "",
            f"@njit(parallel=False, fastmath={fastmath}, error_model='numpy', "
            "boundscheck=False, nogil=True, cache=CACHE)",
            f"def {name}({', '.join(self.params + self.outs + split)}):",
        ]
        lines += self.w.lines or ["    pass"]
        lines += [f"    h.free_array({name})" for name in self.heap]
        source = "\n".join(lines) + "\n"
        shapes = [op.shape for op in instr.operands] + self.out_shapes
        args = [("param", i) for i in range(len(instr.operands))] + [
            ("out", k) for k in range(len(self.outs))
        ]
        ndims, dtypes = [max(s.rank, 1) for s in shapes], [s.dtype for s in shapes]
        if self.work:
            args, ndims, dtypes = args + [("split", None)], ndims + [1], dtypes + ["s64"]
        spec = KernelSpec(
            name, source, args, ndims, dtypes, False, bool(self.work), 1, work=self.work
        )
        spec.kid = spec.content_id()
        return spec
