"""Operations the driver runs without a generated kernel: library calls and NumPy copies.

* dot: the cblas GEMM of NumPy's BLAS, called by gemm.py's compiled kernel with transpose
  flags and leading dimensions (operands copied only where no GEMM form fits); where that
  library cannot be called, np.matmul on [batch, m, k] x [batch, k, n] views. BLAS gets as
  many threads as the GEMM's size pays for (blas_threads.py).
* data movement (broadcast, slice, concatenate, pad, reverse, dynamic-slice,
  dynamic-update-slice, copy): NumPy copies into the output buffer; these are memcpy-speed C
  loops and need no compile time. dynamic-update-slice writes only the window when the plan
  lets it update operand 0 in place.
* custom calls registered for "cpu": `fn(out, *operands, backend_config=str)` fills `out` (an
  array, or a tuple of arrays for a tuple result); a function that returns a value instead has
  that value copied into `out`.
* fallbacks: any other op runs the interpreter's handler, the executable spec, and is counted
  in metrics as `fallback.<opcode>` when the executable is built.
Each factory returns a callable taking (out, *operands) (fallbacks: (*operands) -> value).
"""

from __future__ import annotations

import math

import numpy as np

from ...reference.custom_call import lookup_custom_call
from .blas_threads import SPLIT_WORK, run_split, threads_for, use_threads


def dot(instr):
    """np.matmul on [batch, m, k] x [batch, k, n] views: where NumPy's BLAS cannot be called
    from compiled code (gemm.py found no cblas GEMM)."""
    attrs = instr.attrs
    lhs_shape, rhs_shape = instr.operand(0).shape, instr.operand(1).shape
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc = list(attrs.get("lhs_contracting_dims", ()))
    rc = list(attrs.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs_shape.rank) if d not in lb + lc]
    rf = [d for d in range(rhs_shape.rank) if d not in rb + rc]
    dims_l, dims_r = lhs_shape.dims, rhs_shape.dims
    batch = math.prod(dims_l[d] for d in lb)
    m, k = math.prod(dims_l[d] for d in lf), math.prod(dims_l[d] for d in lc)
    n = math.prod(dims_r[d] for d in rf)
    lhs_perm, rhs_perm = lb + lf + lc, rb + rc + rf
    identity_l = lhs_perm == list(range(len(dims_l)))
    identity_r = rhs_perm == list(range(len(dims_r)))
    flops = 2.0 * batch * m * k * n

    def run(out, lhs, rhs):
        use_threads(threads_for(flops))
        a = (lhs if identity_l else lhs.transpose(lhs_perm)).reshape(batch, m, k)
        b = (rhs if identity_r else rhs.transpose(rhs_perm)).reshape(batch, k, n)
        if batch == 1:
            np.matmul(a[0], b[0], out=out.reshape(m, n))
        else:
            np.matmul(a, b, out=out.reshape(batch, m, n))

    return run


class GemmDot:
    """A float dot as the GEMM kernel of gemm.py (NumPy's BLAS called from compiled code; a
    native while loop calls the same kernel with the same arguments). The compiled kernel is
    looked up by its global name in the driver's namespace, where the backend binds it."""

    def __init__(self, instr, namespace: dict, kernel: str):
        from . import gemm

        self.plan = gemm.plan(instr)
        self.namespace, self.kernel = namespace, kernel

    def __call__(self, out, lhs, rhs):
        plan = self.plan
        if plan.empty:
            return
        if plan.sets_threads:
            use_threads(threads_for(plan.flops))
        if plan.copy_lhs is not None:
            lhs = np.ascontiguousarray(lhs.transpose(plan.copy_lhs[1]))
        if plan.copy_rhs is not None:
            rhs = np.ascontiguousarray(rhs.transpose(plan.copy_rhs[1]))
        flat = out.reshape(-1)
        scratch = np.empty(plan.scratch, out.dtype) if plan.scratch else flat  # else unread
        self.namespace[self.kernel](lhs.reshape(-1), rhs.reshape(-1), flat, plan.dims, scratch)


def blas_dot_ok(instr) -> bool:
    """Same float element type in and out: BLAS computes it directly. Other dots (integers,
    narrow floats, mixed types) need a wider work type: the interpreter's dot."""
    dtypes = {instr.shape.dtype, instr.operand(0).shape.dtype, instr.operand(1).shape.dtype}
    return dtypes in ({"f32"}, {"f64"})


def broadcast(instr):
    dims = list(instr.attrs.get("dimensions", ()))
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    expanded = [1] * instr.shape.rank
    for i, d in enumerate(sorted(dims)):
        expanded[d] = instr.operand(0).shape.dims[order[i]]

    def run(out, x):
        if order != list(range(len(dims))):
            x = x.transpose(order)
        out[...] = x.reshape(expanded)

    return run


def slice_(instr):
    index = tuple(slice(start, limit, stride) for start, limit, stride in instr.attrs["slice"])

    def run(out, x):
        out[...] = x[index]

    return run


def concatenate(instr):
    axis = instr.attrs["dimensions"][0]

    def run(out, *xs):
        np.concatenate(xs, axis=axis, out=out)

    return run


def pad(instr):
    """Fill with the padding value, then copy the operand into a strided window (negative
    padding crops the operand first)."""
    src, dst, empty = [], [], False
    for (low, _, interior), size, out_size in zip(
        instr.attrs["padding"], instr.operand(0).shape.dims, instr.shape.dims
    ):
        step = interior + 1
        first = max(0, -(low // step))  # first k with low + k*step >= 0, ceil(-low/step)
        last = min(size, -(-(out_size - low) // step))  # one past the last k inside
        if first >= last:
            empty = True
            break
        src.append(slice(first, last))
        dst.append(slice(low + first * step, low + (last - 1) * step + 1, step))
    src, dst = tuple(src), tuple(dst)

    def run(out, x, value):
        out.fill(value.reshape(()))
        if not empty:
            out[dst] = x[src]

    return run


def reverse(instr):
    axes = tuple(instr.attrs["dimensions"])

    def run(out, x):
        out[...] = np.flip(x, axes)

    return run


def reshape_copy(instr):
    dims = instr.shape.dims

    def run(out, x):
        out[...] = x.reshape(dims)

    return run


def copy(instr):
    """out = x; a large copy in row blocks on the kernels' threads (NumPy lets go of the GIL
    while it copies): 16 MiB took 1.3-1.4 ms on one core, 0.5-0.9 on two."""
    work = 2.0 * instr.shape.numel()  # a load and a store per element, as kernel work counts
    rows = instr.shape.dims[0] if instr.shape.is_array and instr.shape.rank else 0

    def run(out, x):
        if rows > 1 and work >= SPLIT_WORK and out.flags.c_contiguous and x.flags.c_contiguous:
            run_split(_copy_rows, work, out, x)
        else:
            out[...] = x

    return run


def _copy_rows(out, x, part) -> None:
    rows = x.shape[0]
    first, stop = part[0] * rows // part[1], (part[0] + 1) * rows // part[1]
    out[first:stop] = x[first:stop]


def _starts(dims, window, starts) -> list[int]:
    if len(starts) == 1 and np.ndim(starts[0]) == 1:
        starts = list(starts[0])  # the legacy form: one vector holds every start
    return [min(max(int(s), 0), d - w) for s, d, w in zip(starts, dims, window)]


def dynamic_slice(instr):
    dims, sizes = instr.operand(0).shape.dims, instr.attrs["dynamic_slice_sizes"]

    def run(out, x, *starts):
        begin = _starts(dims, sizes, starts)
        out[...] = x[tuple(slice(s, s + n) for s, n in zip(begin, sizes))]

    return run


def dynamic_update_slice(instr, in_place: bool):
    dims, sizes = instr.operand(0).shape.dims, instr.operand(1).shape.dims

    def run(out, x, update, *starts):
        if not in_place:
            out[...] = x
        begin = _starts(dims, sizes, starts)
        out[tuple(slice(s, s + n) for s, n in zip(begin, sizes))] = update

    return run


def custom_call(instr):
    from ...ir.attrs import backend_config_string
    from ...reference.ops_control import check_result

    from ...reference.custom_call import registered_targets
    from ..codegen.scalar import NotEmittable
    from . import libcalls

    target = instr.attrs["custom_call_target"]
    native = None
    if target not in registered_targets("cpu"):
        try:
            native = libcalls.lapack_ffi(instr)
        except NotEmittable:  # no SciPy: the reference's code (NumPy), as before
            native = None
    fn = native or lookup_custom_call(target, "cpu")
    config = backend_config_string(instr.attrs.get("backend_config"))

    def run(out, *operands):
        result = fn(out, *operands, backend_config=config)
        if result is None:
            return
        checked = check_result(result, instr.shape, f"custom-call {target!r}")
        for dst, value in zip(_leaves(out), _leaves(checked)):
            dst[...] = value

    return run


def _leaves(value):
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def fallback(instr, evaluator):
    """Runs `instr` as the interpreter does (its reference implementation, mixed precision
    included). A result that shares memory with an operand is copied: the operand's storage
    may be reused."""
    from ...errors import UnsupportedError
    from ...reference.evaluator import handlers

    handler = handlers().get(instr.opcode)
    if handler is None:
        raise UnsupportedError(
            f"the cpu backend does not implement {instr.opcode} (instruction %{instr.name})"
        )

    def run(*operands):
        result = evaluator.apply(instr, list(operands))
        return _unshared(result, [leaf for op in operands for leaf in _leaves(op)])

    return run


def _unshared(value, operands):
    if isinstance(value, tuple):
        return tuple(_unshared(v, operands) for v in value)
    if isinstance(value, np.ndarray) and any(
        isinstance(op, np.ndarray) and np.may_share_memory(value, op) for op in operands
    ):
        return value.copy()
    return value


MOVEMENT = {
    "broadcast": broadcast,
    "slice": slice_,
    "concatenate": concatenate,
    "pad": pad,
    "reverse": reverse,
    "copy": copy,
    "dynamic-slice": dynamic_slice,
}
