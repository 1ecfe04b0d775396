"""Compile and run: kernel sources through numba.cuda, device buffers, host<->device copies.

`load(program, options)` compiles every kernel (eagerly, with its signature, so a kernel that
does not compile is an error at compile time, naming the computation it came from), uploads the
constants, allocates the arena and binds the device-side names the driver source uses. Under
numba's simulator the same source runs as Python: kernels are `FakeCUDAKernel`s and device
arrays wrap NumPy arrays.

Compiled kernels are memoized per process by source hash (a GPU compile is 0.1-1 s); there is
no persistent cache yet. Simulated kernels are not shared between executables: the simulator
keeps the launch configuration on the kernel object itself.
"""

from __future__ import annotations

import linecache
import sys
import threading
import types as pytypes

import numpy as np

from ...errors import ExecutionError, MinixlaError
from .kernels import storage_dtype
from .target import load_numba_cuda, simulating

cuda = load_numba_cuda()

_COMPILED: dict[str, object] = {}
_LOCK = threading.RLock()


class CudaCompileError(MinixlaError):
    """Numba could not compile a generated kernel."""


def compile_kernel(spec) -> tuple[object, str]:
    """(kernel, "memory" | "compiled")."""
    with _LOCK:
        found = _COMPILED.get(spec.kid)
        if found is not None:
            return found, "memory"
        filename = f"<minixla cuda kernel {spec.kid}>"
        linecache.cache[filename] = (len(spec.source), None, spec.source.splitlines(True), filename)
        name = f"minixla_cuda_kernel_{spec.kid}"
        module = pytypes.ModuleType(name)
        sys.modules[name] = module  # Numba finds a function's globals through its module
        exec(compile(spec.source, filename, "exec"), module.__dict__)
        fn = module.__dict__[spec.name]
        if simulating():
            return cuda.jit(fn), "compiled"
        try:
            kernel = cuda.jit(spec.numba_signature())(fn)
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CudaCompileError(
                f"CUDA kernel {spec.kind} ({spec.signature_text()}) does "
                f"not compile: {first}\n{spec.source}"
            ) from exc
        _COMPILED[spec.kid] = kernel
        return kernel, "compiled"


# ---- host <-> device ----------------------------------------------------------------------------


def is_device_array(value) -> bool:
    return hasattr(value, "copy_to_host")


def to_device(value, shape):
    """Host values (arrays, nested tuples) as device arrays of the shape's storage type."""
    if shape.is_tuple:
        return tuple(to_device(v, s) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token or value is None:
        return None
    if is_device_array(value):
        return value
    # order="C", not np.ascontiguousarray, which turns a scalar into a 1-element array
    array = np.asarray(value, dtype=shape.numpy_dtype, order="C")
    return cuda.to_device(array.view(storage_dtype(shape.dtype)))


def to_host(value, shape):
    if shape.is_tuple:
        return tuple(to_host(v, s) for v, s in zip(value, shape.tuple_shapes))
    if shape.is_token or value is None:
        return None
    array = value.copy_to_host() if is_device_array(value) else np.asarray(value)
    return array.view(shape.numpy_dtype) if array.dtype != shape.numpy_dtype else array


def fill(out, value) -> None:
    """Copies device `value` into device storage `out` (nested tuples alike)."""
    if isinstance(out, tuple):
        for o, v in zip(out, value):
            fill(o, v)
    elif out is not None:
        out.copy_to_device(value)


def device_copy(array):
    copy = cuda.device_array(array.shape, array.dtype)
    if array.size:
        copy.copy_to_device(array)
    return copy


def check_device_array(value, shape, what: str):
    storage = storage_dtype(shape.dtype) if shape.is_array else None
    if storage is None or value.dtype != storage or tuple(value.shape) != tuple(shape.dims):
        raise ExecutionError(
            f"{what}: device array {value.dtype}{list(value.shape)} does not match {shape}"
        )
    if not value.is_c_contiguous():
        raise ExecutionError(f"{what}: device arrays must be C-contiguous")
    return value


def _param(shape):
    def convert(value):
        return value if is_device_array(value) else to_device(value, shape)

    return convert


def _fresh(key, dims, dtype):
    return cuda.device_array(dims, dtype)


def _kept(buffers: dict):
    """Results that are copied to the host before the next call (under the executable's lock)
    can live in the same device buffers every call: no allocation per call."""

    def result(key, dims, dtype):
        array = buffers.get(key)
        if array is None:
            array = buffers[key] = cuda.device_array(dims, dtype)
        return array

    return result


def load(program, options: dict) -> tuple[object, list[str]]:
    """(entry function, how each kernel was obtained)."""
    ns: dict = {"np": np}
    outcomes = []
    for name, spec in program.kernels.items():
        ns[name], how = compile_kernel(spec)
        outcomes.append(how)
    ns.update(program.host)
    ns.update(program.dtypes)
    for name, (value, shape) in program.constants.items():
        ns[name] = to_device(value, shape)
    for name, shape in program.params.items():
        ns[name] = _param(shape)
    arena = cuda.device_array(max(program.arena_bytes, 1), np.uint8)
    for name, offset, shape in program.views:
        storage = storage_dtype(shape.dtype)
        if shape.numel() == 0:  # no bytes to point at
            ns[name] = cuda.device_array(tuple(shape.dims), storage)
            continue
        raw = arena[offset : offset + shape.numel() * storage.itemsize]
        ns[name] = raw.view(storage).reshape(tuple(shape.dims))
    ns["_arena"] = arena
    ns["_empty"] = lambda dims, dtype: cuda.device_array(dims, dtype)
    ns["_result"] = _fresh if options.get("device_results") else _kept({})
    ns["_dcopy"] = device_copy
    ns["_own"] = device_copy if options.get("device_results") else (lambda array: array)
    ns["_truth"] = lambda x: bool(x.copy_to_host())
    ns["_scalar"] = lambda x: int(x.copy_to_host())
    exec(compile(program.source, "<minixla cuda driver>", "exec"), ns)
    return ns[program.entry], outcomes
