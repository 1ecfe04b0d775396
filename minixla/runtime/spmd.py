"""Multi-device executables: one per-device (SPMD) program run on N devices at once.

`compile_spmd` takes a module that is already partitioned (its parameters have per-device
shapes; collectives and partition-id say how the devices cooperate, as in the text XLA prints
after SPMD partitioning) or one with `sharding=` annotations that the SPMD partitioner turns
into such a program. `SpmdExecutable` runs the program on one thread per device, splitting
global arguments by the parameters' shardings and assembling the global result by the ROOT's
sharding (or the `out_shardings` option); `execute_sharded` takes and returns per-device
shards instead. Device d is replica d // num_partitions, partition d % num_partitions.

In a job of P > 1 processes (`minixla.distributed.initialize()` under `mpiexec`), each
process runs only its own N/P device threads (distributed/placement.py), which meet the
other processes' devices in a ProcessRendezvous; `execute_sharded` takes and returns the
local devices' shards, and a call with global arrays gathers every process's output shards,
so all processes get the same global outputs.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from ..distributed import process as distributed_process
from ..distributed.placement import local_devices
from ..distributed.rendezvous import DeviceFailedError, ProcessRendezvous
from ..distributed.transport import RankFailedError
from ..errors import ExecutionError, MinixlaError
from ..ir.module import HloModule
from ..ir.sharding import HloSharding, leaf_shapes, parse_sharding
from ..ir.shapes import Shape
from ..ir.verifier import verify_distribution
from .devices import device_count
from .executable import check_arguments
from .metrics import record_execution
from ..reference.rendezvous import (
    DEFAULT_TIMEOUT_SECONDS,
    CollectiveAbortedError,
    DeviceContext,
    Rendezvous,
    running_on,
)

# Opcodes that only appear in a program that is already partitioned.
_PARTITIONED_MARKERS = ("partition-id", "replica-id")


class ShardingError(MinixlaError):
    """Arrays that cannot be split or assembled by the shardings at hand."""


# Errors a device raises because another device (of this process or another) failed first;
# the root cause is reported instead.
_SECONDARY_ERRORS = (CollectiveAbortedError, DeviceFailedError, RankFailedError)


def process_job():
    """The transport of this process's multi-process job, or None when it runs alone."""
    if not distributed_process.is_initialized():
        return None
    transport = distributed_process.transport()
    return transport if transport.size > 1 else None


def devices_here(num_devices: int, job=None) -> list[int]:
    """The global ids of the devices this process runs: all of them, or in a multi-process
    job its N/P share (N must be a multiple of P)."""
    if job is None:
        return list(range(num_devices))
    try:
        return local_devices(job.rank, num_devices, job.size)
    except MinixlaError as exc:
        raise ExecutionError(
            f"a program on {num_devices} devices cannot run in a job of {job.size} processes: {exc}"
        ) from None


def run_on_devices(
    programs,
    per_device_args,
    *,
    replicas: int,
    partitions: int,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> list:
    """Runs `programs[d](args)` for every device d this process runs, concurrently; their
    results in device order. `programs` has one entry per device of the whole run;
    `per_device_args` one per device of this process (every device, unless a multi-process
    job is running: then this process's `devices_here`).

    A device that raises fails the call with its own error (the others stop at their next
    collective with an error that only says another device failed, which is not reported
    when this process has the failing device; otherwise the error naming the other process's
    failure is)."""
    count = len(programs)
    job = process_job()
    devices = devices_here(count, job)
    if len(per_device_args) != len(devices):
        raise ExecutionError(
            f"{len(devices)} devices run in this process, got arguments for {len(per_device_args)}"
        )
    meeting = Rendezvous(count, timeout) if job is None else ProcessRendezvous(count, job, timeout)
    results: list = [None] * len(devices)
    errors: list = [None] * len(devices)

    def work(index: int) -> None:
        device = devices[index]
        context = DeviceContext(device, replicas, partitions, meeting)
        try:
            with running_on(context):
                results[index] = programs[device](per_device_args[index])
        except BaseException as exc:  # reported below, after every device stopped
            errors[index] = exc
            meeting.fail(device, exc)

    if count == 1:
        work(0)
    else:
        threads = [
            threading.Thread(target=work, args=(i,), name=f"minixla-device-{d}", daemon=True)
            for i, d in enumerate(devices)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    failures = [(devices[i], e) for i, e in enumerate(errors) if e is not None]
    if failures:
        # the root cause: this process's own failure, else the other rank's that it names
        device, error = next(
            ((d, e) for d, e in failures if not isinstance(e, _SECONDARY_ERRORS)),
            next(((d, e) for d, e in failures if isinstance(e, RankFailedError)), failures[0]),
        )
        if isinstance(error, Exception) and count > 1:
            where = "" if job is None else f", on process {job.rank} of {job.size}"
            error.add_note(f"(raised on device {device} of {count}{where})")
        raise error
    return results


# -- splitting and assembling global arrays ---------------------------------------------------
def global_dims(sharding: HloSharding | None, shard_dims) -> tuple[int, ...]:
    if sharding is None or not sharding.is_tiled:
        return tuple(shard_dims)
    return tuple(d * t for d, t in zip(shard_dims, sharding.tile_dims))


def shard_of(
    array: np.ndarray, sharding: HloSharding | None, partition: int, shard_shape: Shape
) -> np.ndarray:
    """The piece of a global `array` that `partition` holds (zero-padded at uneven ends)."""
    if sharding is None or sharding.kind in ("replicated", "maximal", "unknown"):
        return array
    if not sharding.is_tiled:
        raise ShardingError(
            f"a {sharding} argument has no global value to split; use execute_sharded"
        )
    bounds = sharding.shard_bounds(array.shape, partition)
    piece = array[tuple(slice(lo, hi) for lo, hi in bounds)]
    if piece.shape != shard_shape.dims:
        padded = np.zeros(shard_shape.dims, array.dtype)
        padded[tuple(slice(0, n) for n in piece.shape)] = piece
        piece = padded
    return piece


def assemble(shards: list, sharding: HloSharding, dims, partitions: int) -> np.ndarray:
    """The global array of `dims` from the per-partition `shards` of replica 0."""
    if sharding.kind in ("replicated", "unknown"):
        return shards[0]
    if sharding.kind == "maximal":
        return shards[sharding.device]
    if not sharding.is_tiled:
        raise ShardingError(f"a {sharding} result has no global value; use execute_sharded")
    out = np.empty(dims, shards[0].dtype)
    for partition in range(partitions):  # replicated copies write the same values
        bounds = sharding.shard_bounds(dims, partition)
        region = tuple(slice(lo, hi) for lo, hi in bounds)
        out[region] = shards[partition][tuple(slice(0, hi - lo) for lo, hi in bounds)]
    return out


def _assembled_from(sharding: HloSharding, partition: int) -> bool:
    """Whether `assemble` reads the shard of `partition` for a result of `sharding`."""
    if sharding.kind in ("replicated", "unknown"):
        return partition == 0
    if sharding.kind == "maximal":
        return partition == sharding.device
    return True


def _leaf_shardings(sharding: HloSharding | None, shape: Shape) -> list:
    leaves = leaf_shapes(shape)
    if sharding is None:
        return [None] * len(leaves)
    if sharding.is_tuple:
        return list(sharding.elements)
    return [sharding] * len(leaves)


def _flatten(value) -> list:
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in _flatten(v)]
    return [value]


def _unflatten(leaves: list, shape: Shape):
    iterator = iter(leaves)

    def build(s: Shape):
        if s.is_tuple:
            return tuple(build(t) for t in s.tuple_shapes)
        return next(iterator)

    return build(shape)


class SpmdExecutable:
    """A program compiled for `replicas * partitions` devices (see the module docstring)."""

    def __init__(
        self,
        module: HloModule,
        programs: list,
        backend: str,
        *,
        replicas: int,
        partitions: int,
        global_parameter_shapes: list[Shape],
        global_result_shape: Shape,
        parameter_shardings: list,
        result_sharding: HloSharding | None,
        timeout: float,
        options: dict,
    ):
        self.partitioned_module = module
        self.module = module
        self.backend = backend
        self.replicas = replicas
        self.num_partitions = partitions
        self.num_devices = replicas * partitions
        self._programs = programs
        self.global_parameter_shapes = global_parameter_shapes
        self.global_result_shape = global_result_shape
        self.parameter_shardings = parameter_shardings
        self.result_sharding = result_sharding
        self.timeout = timeout
        self.options = options
        self.parameter_shapes = list(module.program_shape().parameters)
        self.result_shape = module.program_shape().result
        self.executions = 0
        self.execution_seconds = 0.0

    def local_devices(self) -> list[int]:
        """The global ids of the devices this process runs: every device, or in a
        multi-process job this process's share."""
        return devices_here(self.num_devices, process_job())

    def execute_sharded(self, per_device_args) -> list:
        """Per-device arguments in (one list per device), per-device results out. In a
        multi-process job: only this process's devices (`local_devices()`), in order."""
        per_device_args = list(per_device_args)
        job = process_job()
        here = devices_here(self.num_devices, job)
        if len(per_device_args) != len(here):
            where = (
                ""
                if job is None
                else f" ({len(here)} of them, devices {here}, on process {job.rank})"
            )
            raise ExecutionError(
                f"{self.module.name} runs on {self.num_devices} devices"
                f"{where}, got arguments for {len(per_device_args)}"
            )
        checked = [
            check_arguments(list(args), self.parameter_shapes, self.module)
            for args in per_device_args
        ]
        start = time.perf_counter()
        results = run_on_devices(
            self._programs,
            checked,
            replicas=self.replicas,
            partitions=self.num_partitions,
            timeout=self.timeout,
        )
        seconds = time.perf_counter() - start
        self.executions += 1
        self.execution_seconds += seconds
        record_execution(f"{self.backend}.spmd", seconds)
        return results

    def __call__(self, *args):
        if self.result_sharding is None:
            raise ShardingError(
                f"{self.module.name}: the result's sharding is unknown (the ROOT of "
                f"%{self.module.entry.name} has no sharding=): pass out_shardings=... (HLO "
                f"sharding text per output, e.g. '{{replicated}}') to minixla.compile, or "
                f"call execute_sharded(per_device_args) for per-device results"
            )
        arrays = check_arguments(args, self.global_parameter_shapes, self.module)
        job = process_job()
        here = devices_here(self.num_devices, job)
        per_device = []
        for device in here:
            partition = device % self.num_partitions
            device_args = []
            for value, sharding, shape in zip(
                arrays, self.parameter_shardings, self.parameter_shapes
            ):
                leaves = [
                    shard_of(leaf, s, partition, ls)
                    for leaf, s, ls in zip(
                        _flatten(value), _leaf_shardings(sharding, shape), leaf_shapes(shape)
                    )
                ]
                device_args.append(_unflatten(leaves, shape))
            per_device.append(device_args)
        results = self.execute_sharded(per_device)
        shardings = _leaf_shardings(self.result_sharding, self.global_result_shape)
        # replica 0's shards assemble the result: devices 0..num_partitions-1
        replica0 = {d: _flatten(r) for d, r in zip(here, results) if d < self.num_partitions}
        if job is not None:  # every process gets the shards `assemble` reads, so all agree
            needed = {
                d: {i: leaf for i, leaf in enumerate(r) if _assembled_from(shardings[i], d)}
                for d, r in replica0.items()
            }
            replica0 = {}
            for shards in job.allgather_objects(needed, name=f"{self.module.name} outputs"):
                for d, r in shards.items():
                    replica0[d] = [r.get(i) for i in range(len(shardings))]
        leaves = []
        for i, (sharding, shape) in enumerate(
            zip(shardings, leaf_shapes(self.global_result_shape))
        ):
            leaves.append(
                assemble(
                    [replica0[d][i] for d in range(self.num_partitions)],
                    sharding,
                    shape.dims,
                    self.num_partitions,
                )
            )
        return _unflatten(leaves, self.global_result_shape)

    def __repr__(self) -> str:
        return f"<SpmdExecutable {self.module.name} on {self.num_devices} x {self.backend} devices>"


# -- compiling --------------------------------------------------------------------------------
def is_multi_device(module: HloModule, num_partitions: int | None) -> bool:
    header = module.header_attrs
    partitions = (
        num_partitions if num_partitions is not None else int(header.get("num_partitions", 1))
    )
    return partitions > 1 or int(header.get("replica_count", 1)) > 1


def is_partitioned(module: HloModule) -> bool:
    """Already a per-device program: XLA's SPMD partitioner named its entry `*_spmd`, or the
    program talks to other devices or asks which one it is."""
    instrs = list(module.all_instructions())
    if any(
        i.opcode == "custom-call"
        and i.attrs.get("custom_call_target") == "xla.sdy.GlobalToLocalShape"
        for i in instrs
    ):
        return False  # a shard_map inside a global program: its collectives are the body's
    return module.entry.name.endswith("_spmd") or any(
        i.opdef.kind == "collective" or i.opcode in _PARTITIONED_MARKERS for i in instrs
    )


def _as_sharding(value) -> HloSharding:
    if isinstance(value, HloSharding):
        return value
    try:
        return parse_sharding(str(value))
    except ValueError as exc:
        raise ShardingError(f"out_shardings: {exc}") from None


def _result_sharding(module: HloModule, out_shardings) -> HloSharding | None:
    if out_shardings is not None:
        if isinstance(out_shardings, (list, tuple)):
            return HloSharding.tuple_of(_as_sharding(s) for s in out_shardings)
        return _as_sharding(out_shardings)
    sharding = module.entry.root.attrs.get("sharding")
    return sharding if isinstance(sharding, HloSharding) else None


def compile_spmd(
    module: HloModule,
    backend_name: str,
    target,
    options: dict,
    optimize,
    *,
    num_partitions: int | None,
    out_shardings=None,
) -> SpmdExecutable:
    header = module.header_attrs
    partitions = (
        num_partitions if num_partitions is not None else int(header.get("num_partitions", 1))
    )
    replicas = int(header.get("replica_count", 1))
    timeout = float(options.pop("collective_timeout", DEFAULT_TIMEOUT_SECONDS))
    available = device_count()
    job = process_job()
    needed = len(devices_here(replicas * partitions, job))  # this process's share
    if needed > available:
        share = "" if job is None else f", {needed} on each of {job.size} processes"
        raise ExecutionError(
            f"{module.name} needs {replicas * partitions} devices ({replicas} replica(s) x "
            f"{partitions} partition(s){share}), but minixla.devices() has {available}; set "
            f"MINIXLA_NUM_CPU_DEVICES={needed}"
        )
    verify_distribution(module, partitions)
    auto = _auto_shard(module, partitions, options) if options.get("auto_sharding") else None
    options.pop("auto_sharding", None)
    if auto is not None:
        module = auto.module
    partitioned = options.pop("already_partitioned", None)
    if partitioned is None:
        partitioned = is_partitioned(module)
    if not partitioned and _has_partitionable_shardings(module):
        from ..passes.spmd_partitioner import partition_module

        original, module = module, partition_module(module, partitions)
        global_params = [p.shape for p in original.entry.parameters]
        global_result = original.entry.root.shape
        result_sharding = _result_sharding(module, out_shardings)
    else:
        result_sharding = _result_sharding(module, out_shardings)
        if result_sharding is None and not partitioned:  # every device runs the whole program
            result_sharding = HloSharding.replicate()
        global_params = [_global_shape(p.shape, _sharding_of(p)) for p in module.entry.parameters]
        global_result = _global_shape(module.entry.root.shape, result_sharding)
    param_shardings = [_sharding_of(p) for p in module.entry.parameters]
    if backend_name == "cpu":  # devices already run in parallel: one thread each
        options.setdefault("parallel_threshold", 1 << 62)
    optimized, report, _, _ = optimize(module, target, options)
    count = 1 if backend_name == "interpreter" else replicas * partitions
    compiled = [target.compile(optimized, dict(options)) for _ in range(count)]
    programs = [compiled[d % count]._run for d in range(replicas * partitions)]
    executable = SpmdExecutable(
        module,
        programs,
        backend_name,
        replicas=replicas,
        partitions=partitions,
        global_parameter_shapes=global_params,
        global_result_shape=global_result,
        parameter_shardings=param_shardings,
        result_sharding=result_sharding,
        timeout=timeout,
        options=options,
    )
    executable.pass_report = report
    executable.optimized_module = optimized
    executable.auto_sharding = auto
    return executable


def _auto_shard(module: HloModule, partitions: int, options: dict):
    """The module with shardings chosen by auto-sharding; the annotated module and the
    report go to the dump (`auto_sharding.txt`, `auto_sharding_report.txt`)."""
    from ..passes.auto_sharding import AutoShardingOptions, auto_shard
    from ..passes.base import DUMP_OPTIONS, DumpOptions, Dumper

    if is_partitioned(module):
        raise ShardingError(
            f"{module.name} is already partitioned; auto_sharding chooses "
            f"shardings for a global program"
        )
    chosen = options["auto_sharding"]
    result = auto_shard(
        module, partitions, chosen if isinstance(chosen, AutoShardingOptions) else None
    )
    dump = DumpOptions.from_flags()
    for key, attr in DUMP_OPTIONS.items():
        if key in options:
            setattr(dump, attr, options[key])
    if dump.dump_to:
        dumper = Dumper(dump, result.module)
        dumper.module(result.module, "auto_sharding")
        dumper.write("auto_sharding_report.txt", str(result) + "\n")
    return result


def _sharding_of(instr) -> HloSharding | None:
    sharding = instr.attrs.get("sharding")
    return sharding if isinstance(sharding, HloSharding) else None


def _global_shape(shape: Shape, sharding: HloSharding | None) -> Shape:
    if sharding is None:
        return shape
    if shape.is_tuple:
        leaves = _leaf_shardings(sharding, shape)
        it = iter(leaves)

        def build(s: Shape) -> Shape:
            if s.is_tuple:
                return Shape.tuple_of([build(t) for t in s.tuple_shapes])
            return _global_shape(s, next(it))

        return build(shape)
    if not sharding.is_tiled or not shape.is_array:
        return shape
    return Shape.array(shape.dtype, global_dims(sharding, shape.dims))


def _has_partitionable_shardings(module: HloModule) -> bool:
    for instr in module.all_instructions():
        sharding = instr.attrs.get("sharding")
        if isinstance(sharding, HloSharding) and any(
            leaf.is_tiled or leaf.kind == "maximal" for leaf in sharding.leaves()
        ):
            return True
    return any(
        i.opcode == "custom-call" and i.attrs.get("custom_call_target") in _ANNOTATIONS
        for i in module.all_instructions()
    )


# Custom calls that carry shardings (with_sharding_constraint's and Shardy's).
_ANNOTATIONS = ("Sharding", "xla.sdy.FuncResultSharding", "xla.sdy.GlobalToLocalShape")
