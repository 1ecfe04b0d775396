"""Native compilation of kernel sources: in-process memo, then the disk cache, then Numba.

`obtain(spec, disk)` returns the compiled kernel for a KernelSpec:
1. a kernel with the same id compiled earlier in this process (kept in `_COMPILED`);
2. otherwise, with a disk cache, the kernel's module is written (or found) under the cache
   root and imported; `dispatcher.compile(signature)` then loads Numba's cached machine code
   or compiles and stores it;
3. without a disk cache the source is executed in a fresh module and compiled in memory.
The result says which of "memory", "disk" or "compiled" happened, for metrics and tests.

A kernel compiled into the disk cache also leaves its object code there (`<kid>.o`, with the
symbol of its compiled function), from which native_library.py links whole programs.
"""

from __future__ import annotations

import contextlib
import linecache
import sys
import threading
import types as pytypes
import warnings
from pathlib import Path

from .cache import CorruptEntry, DiskCache, digest, locked, module_name

_COMPILED: dict[str, object] = {}
_LOCK = threading.RLock()

# LLVM's cost model interleaves a vectorized loop with a large body once (one vector chain in
# flight); a fused chain of transcendentals is then latency-bound. Forcing four interleaved
# vectors keeps the core busy (3x on a chain of 8 tanh). It is an LLVM-wide option, so it is
# set only while our kernels compile.
INTERLEAVE = 4


@contextlib.contextmanager
def _kernel_codegen_options():
    import llvmlite.binding as llvm

    llvm.set_option("", f"-force-vector-interleave={INTERLEAVE}")
    try:
        yield
    finally:
        llvm.set_option("", "-force-vector-interleave=0")


def kernel_id(spec) -> str:
    return digest("kernel", spec.source, spec.signature_text())


def entry_point(dispatcher, spec):
    """The compiled function itself: calling it skips the dispatcher's type resolution and
    raises on mismatched arguments instead of compiling another specialization."""
    return dispatcher.overloads[spec.numba_signature().args].entry_point


def obtain(spec, disk: DiskCache | None):
    """(compiled dispatcher, how) for `spec`; how is "memory", "disk" or "compiled"."""
    kid = kernel_id(spec)
    with _LOCK:
        found = _COMPILED.get(kid)
        if found is not None:
            return found, "memory"
        dispatcher = None
        if disk is not None:
            try:
                dispatcher, how = _through_disk(spec, kid, disk)
            except OSError as exc:  # a lock or folder we cannot use: this kernel goes without
                warn_unusable(disk, f"{exc.strerror or exc}: {getattr(exc, 'filename', '')}")
        if dispatcher is None:
            dispatcher, how = _compile_in_memory(spec, kid), "compiled"
        _COMPILED[kid] = dispatcher
        return dispatcher, how


_WARNED: set[str] = set()


def warn_unusable(disk: DiskCache, reason: str) -> None:
    """One warning per cache root and process: the compile goes on without the cache."""
    key = str(disk.root)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(
            f"minixla: not using the compilation cache at {disk.root} ({reason}); "
            f"compiling without it",
            RuntimeWarning,
            stacklevel=4,
        )


def _compile_in_memory(spec, kid: str):
    name = module_name(kid)
    filename = f"<minixla kernel {kid}>"
    linecache.cache[filename] = (len(spec.source), None, spec.source.splitlines(True), filename)
    module = pytypes.ModuleType(name)
    module.CACHE = False
    sys.modules[name] = module  # Numba looks the module up by name for its globals
    exec(compile(spec.source, filename, "exec"), module.__dict__)
    dispatcher = getattr(module, spec.name)
    with _kernel_codegen_options():
        dispatcher.compile(spec.numba_signature())
    return dispatcher


def _load(path: Path, kid: str, source: str):
    """The kernel module, executed from `source` (the verified text of `path`): Numba finds
    its cache beside `path`, and no `.pyc` is written or read."""
    name = module_name(kid)
    module = pytypes.ModuleType(name)
    module.__file__ = str(path)
    module.CACHE = True
    sys.modules[name] = module  # must be importable by name when Numba rebuilds its globals
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def _numba_files(dispatcher) -> list[Path]:
    impl = dispatcher._cache
    index = Path(impl._cache_file._index_path)
    prefix = index.name[: -len(".nbi")]
    folder = Path(impl._cache_path)
    return sorted(p for p in folder.glob(prefix + ".*") if p.is_file()) if folder.exists() else []


def _through_disk(spec, kid: str, disk: DiskCache):
    py, _, lock = disk.kernel_paths(kid)
    signature = spec.numba_signature()
    with locked(lock):
        try:
            manifest = disk.check_source(kid, spec.source)
        except CorruptEntry as exc:
            disk.discard_kernel(kid, [], str(exc))
            manifest = None
        if manifest is None:
            _remove(disk.numba_files(kid))  # never let Numba read files nobody vouched for
            disk.write_source(kid, spec.source)
        dispatcher = getattr(_load(py, kid, spec.source), spec.name)
        if manifest is not None:
            files = _numba_files(dispatcher)
            try:
                disk.check_numba_files(manifest, files)
            except CorruptEntry as exc:
                disk.discard_kernel(kid, files, str(exc))
                disk.write_source(kid, spec.source)
                dispatcher = getattr(_load(py, kid, spec.source), spec.name)
                manifest = None
        try:
            hit = manifest is not None and _load_stored(dispatcher, signature)
            if not hit:
                with _kernel_codegen_options():
                    dispatcher.compile(signature)
        except Exception as exc:  # Numba could not load what it stored (a foreign format)
            if manifest is None:
                raise
            disk.discard_kernel(kid, _numba_files(dispatcher), f"{type(exc).__name__}: {exc}")
            return _compile_in_memory(spec, kid), "compiled"
        if manifest is None or not hit:
            native = _native(dispatcher, spec)
            disk.write_manifest(kid, spec.source, _numba_files(dispatcher), native)
        disk.touch(kid)
    return dispatcher, "disk" if hit else "compiled"


def _native(dispatcher, spec) -> tuple[bytes, str] | None:
    """(object code, symbol of the compiled function) of a kernel this process compiled
    (Numba keeps the machine code of what it compiled, not of what it loaded from its
    cache)."""
    cres = dispatcher.overloads.get(spec.numba_signature().args)
    if cres is None:
        return None
    try:
        code = cres.library._get_compiled_object()
    except (ValueError, RuntimeError):
        return None
    return bytes(code), cres.fndesc.llvm_func_name


def native_object(spec, disk: DiskCache) -> tuple[bytes, str] | None:
    """The kernel's object code and entry symbol: compiled in this process, else from its
    checked cache entry (needs no Numba); None when neither has it."""
    kid = kernel_id(spec)
    dispatcher = _COMPILED.get(kid)
    if dispatcher is not None:
        found = _native(dispatcher, spec)
        if found is not None:
            return found
    try:
        with locked(disk.kernel_paths(kid)[2]):
            manifest = disk.check_source(kid, spec.source)
            return None if manifest is None else disk.native_object(kid, manifest)
    except (CorruptEntry, OSError):  # the Numba path reports and rebuilds a damaged entry
        return None


def _load_stored(dispatcher, signature) -> bool:
    """Loads Numba's stored machine code for `signature` into `dispatcher`, as
    `dispatcher.compile` does on a cache hit but without refreshing Numba's typing and lowering
    registries first: that refresh imports most of Numba (and SciPy) once per process, about
    half a second, and only compiling needs it. False when nothing is stored."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys

    context = dispatcher.targetctx
    with global_compiler_lock:
        rtsys.initialize(context)  # kernels allocate through Numba's runtime
        cres = dispatcher._cache._load_overload(signature, context)
        if cres is None:
            return False
        dispatcher._cache_hits[signature] += 1
        if not cres.objectmode:
            context.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
        dispatcher.add_overload(cres)
    return True


def _remove(paths) -> None:
    for path in paths:
        with contextlib.suppress(OSError):
            path.unlink()


def forget_in_memory() -> None:
    """Drops the in-process kernel memo, loaded libraries and compile memo (tests use it to
    exercise the disk cache)."""
    from ...runtime import compile_memo
    from . import native_library

    with _LOCK:
        _COMPILED.clear()
    native_library.forget()
    compile_memo.clear()
