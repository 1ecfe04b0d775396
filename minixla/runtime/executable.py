"""Executable: a compiled module behind a call that checks its arguments against the entry.

Arguments are NumPy arrays (or Python scalars for 0-d parameters) in logical order whatever the
entry layout; results come back the same way: an array, or a tuple nested like the result shape.
A result never shares memory with the caller's arrays (a pass-through result, or a view of an
argument, is copied), on every backend, unless the argument was donated (runtime/donation.py).
With CHECK_RESULTS (tests set it; $MINIXLA_CHECK_RESULTS=1 at run time) every result must have
exactly the declared shape and dtype, so a backend that returns the wrong shape fails loudly
instead of passing for the right one.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

import numpy as np

from ..errors import ExecutionError
from ..ir.module import HloModule
from ..ir.shapes import Shape
from ..reference.random_stream import RandomStream, activate, deactivate
from .donation import Donations, settle, take
from .metrics import record_execution


CHECK_RESULTS = os.environ.get("MINIXLA_CHECK_RESULTS", "") not in ("", "0", "false")


class Executable:
    def __init__(
        self,
        module: HloModule,
        backend: str,
        run: Callable[[list], Any],
        *,
        options: dict | None = None,
    ):
        self.module = module
        self.backend = backend
        self.options = dict(options or {})
        self._run = run
        self.parameter_shapes: list[Shape] = list(module.program_shape().parameters)
        self.result_shape: Shape = module.program_shape().result
        self.executions = 0
        self.execution_seconds = 0.0
        # Set by the backend: the BufferAssignment it runs (None: derived on demand), the bytes
        # of generated code, temporary bytes it allocates beyond the assignment, or instead of
        # it (a backend that plans its own arena).
        self.buffer_assignment = None
        self.generated_code_size = 0
        self.extra_temp_bytes = 0
        self.own_arena_bytes: int | None = None
        self.rematerialization = None  # the pass's report when compiled with a memory limit
        self.donations = Donations.of(module)
        self.writes_donated_buffers = False  # set by a backend that reuses donated arguments
        self.random_stream = RandomStream()  # what `rng` draws from while this one runs
        # (dtype, dims) per parameter when every parameter is an array: a call whose arguments
        # are exactly such NumPy arrays needs no further checks (the common case, ~1 us)
        self._fast_checks = (
            tuple((s.numpy_dtype, s.dims) for s in self.parameter_shapes)
            if all(s.is_array for s in self.parameter_shapes)
            else None
        )

    def __call__(self, *args):
        arrays = self._checked(args)
        arrays, accepted = take(
            self.donations, args, arrays, module=self.module, writes=self.writes_donated_buffers
        )
        start = time.perf_counter()
        token = activate(self.random_stream)
        try:
            result = settle(self.donations, accepted, self._run(arrays), arrays, self.result_shape)
        finally:
            deactivate(token)
        if CHECK_RESULTS:
            check_results(result, self.result_shape, f"{self.module.name} on {self.backend}")
        elapsed = time.perf_counter() - start
        self.execution_seconds += elapsed
        self.executions += 1
        record_execution(self.backend, elapsed)
        return result

    def _checked(self, args) -> list:
        fast = self._fast_checks
        if (
            fast is not None
            and len(args) == len(fast)
            and all(
                type(a) is np.ndarray and a.dtype == dtype and a.shape == dims
                for a, (dtype, dims) in zip(args, fast)
            )
        ):
            return list(args)
        return check_arguments(args, self.parameter_shapes, self.module)

    def memory_analysis(self):
        """Sizes of arguments, outputs, aliases, temporaries and generated code, and the
        scheduled peaks (runtime/analysis.py says how each is measured)."""
        from .analysis import memory_analysis, scheduled_copy

        if self.buffer_assignment is None:
            from ..passes.buffer_assignment import assign_buffers

            module = self.module if self.module.is_scheduled else scheduled_copy(self.module)
            self.buffer_assignment = assign_buffers(module)
        return memory_analysis(
            self.buffer_assignment,
            generated_code_size=self.generated_code_size,
            extra_temp_bytes=self.extra_temp_bytes,
            own_arena_bytes=self.own_arena_bytes,
        )

    def cost_analysis(self) -> dict[str, float]:
        """flops, transcendentals and bytes accessed of the module this executable runs."""
        from ..passes.cost_analysis import module_cost

        return module_cost(self.module)

    def __repr__(self) -> str:
        return f"<Executable {self.module.name} on {self.backend}>"


def check_arguments(args, shapes: list[Shape], module: HloModule) -> list:
    if len(args) != len(shapes):
        raise ExecutionError(f"{module.name} takes {len(shapes)} argument(s), got {len(args)}")
    checked = []
    for i, (arg, shape) in enumerate(zip(args, shapes)):
        dtype = shape.element_type.numpy
        if (
            type(arg) is np.ndarray
            and shape.is_array
            and dtype is not None
            and arg.dtype == dtype
            and arg.shape == shape.dims
        ):
            checked.append(arg)  # the common case; the message below is built only when needed
        else:
            checked.append(_check_one(arg, shape, _argument(module, i)))
    return checked


def _argument(module: HloModule, number: int) -> str:
    names = {p.parameter_number: p.name for p in module.entry.parameters}
    return f"argument {number} ({names.get(number, '?')})"


def _check_one(arg, shape: Shape, what: str):
    if shape.is_tuple:
        if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.tuple_shapes):
            raise ExecutionError(
                f"{what}: expected a tuple of {len(shape.tuple_shapes)} for {shape}"
            )
        return tuple(
            _check_one(a, s, f"{what}[{i}]")
            for i, (a, s) in enumerate(zip(arg, shape.tuple_shapes))
        )
    if shape.is_token:
        return None
    dtype = shape.numpy_dtype
    if isinstance(arg, (bool, int, float, complex)) and not isinstance(arg, np.generic):
        return _python_scalar(arg, shape, dtype, what)
    if not isinstance(arg, (np.ndarray, np.generic)):
        raise ExecutionError(
            f"{what}: expected a NumPy array for {shape}, got {type(arg).__name__}"
        )
    if isinstance(arg, np.ma.MaskedArray):
        raise ExecutionError(
            f"{what}: masked arrays are not supported (the mask would be "
            f"ignored); pass arg.filled(value) or arg.data"
        )
    array = np.asarray(arg)
    if array.dtype != dtype:
        raise ExecutionError(
            f"{what}: expected dtype {dtype} ({shape.dtype}) for {shape}, got {array.dtype}"
        )
    if array.shape != shape.dims:
        raise ExecutionError(f"{what}: expected shape {shape.dims} for {shape}, got {array.shape}")
    return array


def check_results(result, shape: Shape, where: str, path: str = "result") -> None:
    """Raises ExecutionError unless `result` has exactly the declared shape and dtype."""
    if shape.is_tuple:
        if not isinstance(result, tuple) or len(result) != len(shape.tuple_shapes):
            raise ExecutionError(
                f"{where}: {path} should be a tuple of "
                f"{len(shape.tuple_shapes)}, got {type(result).__name__}"
            )
        for i, (r, s) in enumerate(zip(result, shape.tuple_shapes)):
            check_results(r, s, where, f"{path}[{i}]")
        return
    if shape.is_token:
        return
    array_like = hasattr(result, "shape") and hasattr(result, "dtype")  # device arrays too
    if (
        not array_like
        or tuple(result.shape) != shape.dims
        or np.dtype(result.dtype) != shape.numpy_dtype
    ):
        got = f"{result.dtype}{list(result.shape)}" if array_like else type(result).__name__
        raise ExecutionError(
            f"{where}: {path} should be {shape.without_layout()} ({shape.numpy_dtype}), got {got}"
        )


def _python_scalar(arg, shape: Shape, dtype, what: str):
    if shape.rank != 0:
        raise ExecutionError(f"{what}: a Python scalar was given for {shape}")
    kind = shape.element_type.kind
    ok = (
        isinstance(arg, bool)
        if kind == "pred"
        else isinstance(arg, int) and not isinstance(arg, bool)
        if shape.element_type.is_integer
        else isinstance(arg, (int, float)) and not isinstance(arg, bool)
        if kind == "float"
        else isinstance(arg, (int, float, complex)) and not isinstance(arg, bool)
    )
    if not ok:
        raise ExecutionError(f"{what}: a Python {type(arg).__name__} does not match {shape}")
    if shape.element_type.is_integer:
        info = np.iinfo(dtype)
        if not info.min <= arg <= info.max:
            raise ExecutionError(f"{what}: {arg} is out of range for {shape.dtype}")
    return np.array(arg, dtype)
