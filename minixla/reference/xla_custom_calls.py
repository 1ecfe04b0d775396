"""XLA:CPU's own custom-call targets, so modules XLA optimized (and JAX's linalg lowerings) run.

`TARGETS` maps a target (after dropping a `__cpu$` prefix) to a NumPy implementation with the
meaning XLA:CPU gives it: `TopK`, the LAPACK FFI family `lapack_{s,d,c,z}<routine>_ffi`, and
XlaBuilder's `xla_builder.math.*` functions that minixla has (`BUILDER_MATH`, NextAfter).
Each implementation takes the operands, the (dims, dtype) of each result and the FFI attributes
parsed from the backend_config (`{uplo = 76 : ui8}`: characters as their ASCII codes), and
returns the results as LAPACK leaves them. Leading dimensions are batch dimensions.
minixla.reference.custom_call falls back on this table for every backend, with each backend's
calling convention; a registration by the user wins.
"""

from __future__ import annotations

import re
from typing import Callable

import numpy as np

from ..errors import UnsupportedError
from .elementwise import UNARY
from .lapack_ffi import LAPACK


def ffi_attributes(config: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(-?\d+)", config or "")}


def _top_k(operands, outs, attrs):
    from .ops_sort import total_order_key

    (x,) = operands
    k = outs[0][0][-1]
    key = total_order_key(x).astype(np.int64)
    order = np.argsort(-key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, order, -1), order.astype(outs[1][1])


# XlaBuilder's math library emits some functions as `xla_builder.math.<Name>` custom calls
# that XLA expands before compiling; the ones minixla has as elementwise ops are those ops (the
# algebraic simplifier rewrites them so, for backends that compile them natively).
BUILDER_MATH: dict[str, str] = {
    f"xla_builder.math.{name}": opcode
    for name, opcode in (
        ("Acos", "acos"),
        ("Acosh", "acosh"),
        ("Asin", "asin"),
        ("Asinh", "asinh"),
        ("Atan", "atan"),
        ("Atanh", "atanh"),
        ("Cosh", "cosh"),
        ("Sinh", "sinh"),
        ("Tan", "tan"),
        ("Erf", "erf"),
    )
}


def _builder_math(opcode: str) -> Callable:
    def run(operands, outs, attrs):
        return np.asarray(UNARY[opcode](operands[0])).astype(outs[0][1], copy=False)

    return run


def _next_after(operands, outs, attrs):
    x, toward = (np.asarray(o) for o in operands)
    if x.dtype not in (np.float32, np.float64):
        raise UnsupportedError(f"xla_builder.math.NextAfter of {x.dtype}: f32 and f64 only")
    return np.nextafter(x, toward)  # C's nextafter: XLA's bit stepping gives the same


TARGETS: dict[str, Callable] = {
    "TopK": _top_k,
    **{f"lapack_{t}{routine}_ffi": fn for routine, fn in LAPACK.items() for t in "sdcz"},
    **{target: _builder_math(opcode) for target, opcode in BUILDER_MATH.items()},
    "xla_builder.math.NextAfter": _next_after,
}


def _unprefixed(target: str) -> str:
    return target.removeprefix("__cpu$").removeprefix("xla.cpu.")


def builtin_target(target: str) -> Callable | None:
    return TARGETS.get(_unprefixed(target))


def lapack_routine(target: str) -> tuple[str, str] | None:
    """("s", "getrf") for `lapack_sgetrf_ffi`: the type letter and the routine, or None."""
    found = re.fullmatch(r"lapack_([sdcz])(\w+)_ffi", _unprefixed(target))
    return (found[1], found[2]) if found and found[2] in LAPACK else None


def _specs(shape) -> list[tuple[tuple[int, ...], np.dtype]]:
    leaves = shape.tuple_shapes if shape.is_tuple else (shape,)
    return [(leaf.dims, leaf.numpy_dtype) for leaf in leaves]


def adapt(fn: Callable, backend: str) -> Callable:
    """`fn` with the calling convention of `backend` (see minixla.reference.custom_call)."""
    if backend == "interpreter":

        def interpreter(*operands, result_shape, backend_config=""):
            return fn(operands, _specs(result_shape), ffi_attributes(backend_config))

        return interpreter

    def buffers(out, *operands, backend_config=""):
        leaves = out if isinstance(out, tuple) else (out,)
        host = [np.asarray(o.copy_to_host() if hasattr(o, "copy_to_host") else o) for o in operands]
        specs = [(tuple(leaf.shape), np.dtype(leaf.dtype)) for leaf in leaves]
        result = fn(tuple(host), specs, ffi_attributes(backend_config))
        return result

    return buffers


__all__ = [
    "BUILDER_MATH",
    "TARGETS",
    "adapt",
    "builtin_target",
    "ffi_attributes",
    "lapack_routine",
]
