"""The CUDA backend: fused kernels generated as numba.cuda source, driven by generated Python.

compile_module(module, options) -> Executable:
  emit    driver.build_program: one kernel source per fusion / lone op (kernels.py with the shared
          elemental emitter of codegen/; reduce.py, tiles.py, matmul.py, indexing.py for the GPU
          shapes of work), one driver function per control computation, a buffer plan whose
          temporaries are views of one device arena. Needs no GPU and no numba.cuda.
  compile runtime.load: numba.cuda compiles every kernel, constants are uploaded.
  run     the entry driver function, under a lock (the arena is per executable).

Runs on an NVIDIA GPU, or on numba's CUDA simulator when NUMBA_ENABLE_CUDASIM=1 (kernels run as
Python on the CPU: slow, for tests). Options: `device_results` (return numba device arrays
instead of NumPy arrays; arguments may then be device arrays too), `threads_per_block`,
`max_blocks`, `geometry` (target.py). docs/cuda-backend.md has the design.
"""

from __future__ import annotations

import threading
import time

from ...errors import ExecutionError, MinixlaError, at_instruction
from ...ir.module import HloModule
from ...reference.custom_call import lookup_custom_call
from ...runtime.executable import Executable, _check_one
from ...runtime.metrics import count, record_execution, record_phase
from .. import Backend
from ..codegen.driver import report_fallbacks
from .target import status


def available() -> tuple[bool, str]:
    return status()


def pipeline():
    """The CPU backend's pass pipeline: the same optimized module (fusion, layouts, schedule),
    less row fusion (a GPU kernel computes each output element on its own thread, so a row
    reduction fused into its reader would be recomputed per element) and less the Winograd
    rewrite of convolutions (not yet measured against this backend's convolution kernel).
    The GPU-specific choices (how a fusion is run) are made when kernels are generated."""
    from ...passes.pipelines import cpu_pipeline

    return cpu_pipeline(row_fusion=False, winograd=False, window_taps=False)


class CudaExecutable(Executable):
    """An Executable whose array arguments may also be device arrays (checked, not copied)."""

    def __call__(self, *args):
        from .runtime import check_device_array, is_device_array

        if not any(is_device_array(a) for a in args):
            return super().__call__(*args)
        if len(args) != len(self.parameter_shapes):
            raise ExecutionError(
                f"{self.module.name} takes {len(self.parameter_shapes)} "
                f"argument(s), got {len(args)}"
            )
        checked = [
            check_device_array(a, s, f"argument {i}")
            if is_device_array(a)
            else _check_one(a, s, f"argument {i}")
            for i, (a, s) in enumerate(zip(args, self.parameter_shapes))
        ]
        start = time.perf_counter()
        result = self._run(checked)
        self.executions += 1
        self.execution_seconds += time.perf_counter() - start
        record_execution(self.backend, time.perf_counter() - start)
        return result


def compile_module(module: HloModule, options: dict) -> Executable:
    from . import driver

    for instr in module.all_instructions():
        if instr.opcode == "custom-call":
            try:
                lookup_custom_call(instr.attrs["custom_call_target"], "cuda")
            except MinixlaError as exc:
                at_instruction(exc, instr)
                raise
    start = time.perf_counter()
    program = driver.build_program(module, options)
    record_phase("codegen.cuda.emit", time.perf_counter() - start)
    report_fallbacks("cuda", program.fallback_reasons, bool(options.get("strict", False)))
    from . import runtime

    start = time.perf_counter()
    entry, outcomes = runtime.load(program, options)
    record_phase("codegen.cuda.native", time.perf_counter() - start)
    for how in outcomes:
        count(f"cuda.kernel.{how}")
    for opcode, n in program.fallbacks.items():
        count(f"fallback.{opcode}", n)
    result_shape = module.program_shape().result
    device_results = bool(options.get("device_results"))
    lock = threading.Lock()

    def run(args):
        with lock:
            result = entry(*args)
            return result if device_results else runtime.to_host(result, result_shape)

    executable = CudaExecutable(module, "cuda", run, options=options)
    executable.program = program
    executable.kernel_outcomes = outcomes
    executable.own_arena_bytes = program.arena_bytes  # its own plan, not the module's assignment
    executable.generated_code_size = len(program.source.encode()) + sum(
        len(getattr(spec, "source", "").encode()) for spec in program.kernels.values()
    )
    return executable


BACKEND = Backend(
    "cuda",
    compile_module,
    available,
    pipeline,
    options=(
        "device_results",
        "threads_per_block",
        "max_blocks",
        "geometry",
        "max_while_iterations",
        "strict",
    ),
)
