"""Whole programs in the persistent cache: a compile that finds one skips the pass pipeline.

The key is the module as given (before any pass), every compile option and $MINIXLA_*/
$XLA_FLAGS (runtime/compile_memo.py makes that part), plus `cache.environment()`, the kernels'
default split size (it depends on the usable cores) and a stamp of minixla's own sources (the
passes decide the optimized module, so any edit to them is a miss).
The entry (programs/<key>.json, checksummed with its key) holds the optimized module's text, its
kernels' ids and the rematerialization report. A hit parses that text, emits the driver again
(milliseconds) and loads each kernel through the kernel cache, whose own checks still apply;
kernels whose ids differ from the entry's mean a stale entry, which is dropped.

An entry is stored only when the optimized module survives printing: the text parses back to
the same text, the same constants bit for bit, and the same driver and kernel sources.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

import numpy as np

from ...errors import MinixlaError
from ...runtime.metrics import count
from . import cache, driver, gemm, jit

FORMAT = 1
_log = logging.getLogger("minixla.cache")


@lru_cache(maxsize=1)
def source_stamp() -> str:
    """Size and modification time of every source file of minixla: a stat per file, where
    hashing their contents would cost a new process several milliseconds."""
    root = Path(__file__).resolve().parents[2]
    stamp = hashlib.sha256()
    for relative, info in sorted(_sources(root, "")):
        stamp.update(f"{relative}:{info.st_size}:{info.st_mtime_ns}\n".encode())
    return stamp.hexdigest()[:16]


def _sources(folder: Path, prefix: str):
    """(path relative to the package, stat) of every .py file below `folder`."""
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.endswith(".py") and entry.is_file():
                yield prefix + entry.name, entry.stat()
            elif entry.is_dir() and entry.name != "__pycache__":
                yield from _sources(Path(entry.path), f"{prefix}{entry.name}/")


def program_key(compile_key) -> str:
    # The default split size follows the cores this process may use (one core never threads),
    # so a program generated under `taskset -c 0` is not the one generated on every core.
    large_gemm = gemm.large_gemm_core()  # which OpenBLAS kernels a program library links
    lapack = os.path.basename(gemm.scipy_openblas() or "")  # which library LAPACK kernels call
    return cache.digest(
        "program",
        FORMAT,
        compile_key.parts,
        source_stamp(),
        driver.PARALLEL_WORK,
        large_gemm,
        lapack,
    )


class ProgramCache:
    """The cpu backend's `programs` (see backends.Backend)."""

    def load(self, compile_key, module, options: dict):
        from . import _open_cache

        disk = _open_cache(options)
        if disk is None:
            return None
        key = program_key(compile_key)
        try:
            body = disk.program_entry(key)
            if body is None:
                return None
            optimized, kernels = _parse(body["module"]), body["kernels"]
        except (cache.CorruptEntry, MinixlaError, KeyError, TypeError) as exc:
            disk.discard_program(key, str(exc))
            return None
        program = driver.build_program(optimized, options)
        if [jit.kernel_id(spec) for spec in program.kernels.values()] != kernels:
            disk.discard_program(key, "its kernels are not the ones the module needs now")
            return None
        return _executable(optimized, program, options, disk, body.get("rematerialization"))

    def store(self, compile_key, executable, options: dict) -> None:
        from . import _open_cache

        program = getattr(executable, "program", None)
        if program is None or not cache.is_enabled(options):
            return
        disk = _open_cache(options)
        if disk is None:
            return
        text = executable.module.to_text()
        if not _round_trips(executable.module, text, program, options):
            _log.info(
                "not storing %s as a whole program: its text does not round-trip",
                executable.module.name,
            )
            return
        remat = executable.rematerialization
        body = {
            "name": executable.module.name,
            "module": text,
            "kernels": [jit.kernel_id(spec) for spec in program.kernels.values()],
            "rematerialization": asdict(remat) if remat is not None else None,
            "parts": compile_key.parts,
        }
        with contextlib.suppress(OSError):
            disk.store_program(program_key(compile_key), body)


def _parse(text: str):
    from ...text import parse_hlo_module  # an entry holds HLO text, never MLIR

    return parse_hlo_module(text)


def _executable(optimized, program, options: dict, disk, remat):
    from ...passes.base import PassReport
    from ..codegen.driver import report_fallbacks
    from . import _check_custom_calls, bind_kernels, executable_of

    _check_custom_calls(optimized)
    report_fallbacks("cpu", program.fallback_reasons, bool(options.get("strict", False)))
    outcomes = bind_kernels(program, disk)
    hit = "compiled" not in outcomes
    count("cpu.cache.hit" if hit else "cpu.cache.miss")
    count("cpu.cache.program_hit")
    with contextlib.suppress(OSError):
        disk.record(hit)
    executable = executable_of(optimized, program, options, outcomes)
    executable.pass_report = PassReport()  # no pass ran in this compile
    executable.rematerialization = _remat_report(remat)
    return executable


def _remat_report(fields):
    if fields is None:
        return None
    from ...passes.rematerialization import Remat, RematReport

    return RematReport(**{**fields, "remats": [Remat(**r) for r in fields["remats"]]})


def _round_trips(module, text: str, program, options: dict) -> bool:
    """Whether compiling `text` again gives `program`: same text, constants and sources."""
    try:
        again = _parse(text)
    except MinixlaError:
        return False
    if again.to_text() != text or not _same_constants(module, again):
        return False
    replay = driver.build_program(again, options)
    return replay.source == program.source and [s.source for s in replay.kernels.values()] == [
        s.source for s in program.kernels.values()
    ]


def _same_constants(a, b) -> bool:
    def constants(module):
        return {
            (comp.name, instr.name): _bits(instr.literal)
            for comp in module.computations
            for instr in comp.instructions
            if instr.opcode == "constant"
        }

    return constants(a) == constants(b)


def _bits(literal):
    if isinstance(literal, (tuple, list)):
        return tuple(_bits(part) for part in literal)
    array = np.asarray(literal)
    return array.dtype.str, array.shape, array.tobytes()
