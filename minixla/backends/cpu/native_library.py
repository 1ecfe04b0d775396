"""A program's kernels as one shared library, loaded without Numba.

Every kernel compiled into the disk cache leaves its object code there (`kernels/ab/<kid>.o`,
cache.py) with the symbol of its compiled function, whose calling convention is Numba's: a
status code returned, then a result pointer, an exception pointer and every array argument
as its fields (meminfo, parent, size, item size, data, dims, strides). The kernels of a
program are linked into one shared library with a generated C file that gives each one a
Python entry point:

    static void *k0(void *self, array_t *const *a, ptrdiff_t n)
    {
        if (!arrays_ok(a, n, 3, "\\2\\2\\2", "kernel k0: wrong arguments"))
            return NULL;                                 // three C-contiguous 2-d ndarrays
        void *result[2], *exception = NULL;
        void *gil = PyEval_SaveThread();                 // kernels run without the GIL
        int status = k0_native(result, &exception, ARRAY(a[0]), ARRAY(a[1]), ARRAY(a[2]));
        PyEval_RestoreThread(gil);
        return finished(status, "k0");                    // None, or a RuntimeError
    }

A split kernel (loops.py) also gets a `k0_parts` entry taking the same arguments, its part
argument `[0, parts, threads]`: it runs every part on that many threads, the calling one and
worker threads of the process's one pool (the C in _PRELUDE; blas_threads.run_split calls it).
Threads claim parts from a ticket, so the caller runs whatever a waking worker has not claimed
yet, and a part is handed over in microseconds where Python threads take tens.

`METH_FASTCALL` builtins made from the library's method table with `PyCFunction_NewEx`: a call
costs about what calling any builtin does, less than a Numba dispatcher's. The C needs no
Python headers (it declares the few C-API functions it calls and reads NumPy's stable
`PyArrayObject_fields` layout, checked once per process), only a C compiler and binutils:

    ar rcs kernels.a k0.o k1.o ...
    objcopy --keep-global-symbols=entries kernels.a     # one call for every kernel
    nm -u kernels.a                                     # what each kernel imports
    cc -shared entries.c -Wl,--whole-archive kernels.a ... -o <lkey>.so

Localizing matters: Numba names the helpers it links into each kernel with a per-process
counter, so two kernels compiled by different processes may define the same helper name with
different bodies, and the linker would keep one of them for both. GEMM kernels (gemm.py) call
NumPy's OpenBLAS by names registered with LLVM; a second objcopy (`--redefine-syms`) gives
them the library's own names, and the library is linked in (it is loaded with NumPy already).

A kernel that imports Numba's runtime (allocation through NRT) stays out of the library (the
backend's kernels avoid it: native_loop.py, loops.py); the manifest names it and a compile that
uses the library gets it (and the kernels its native loop calls) through Numba, importing
Numba only then. The object code is MCJIT's (static relocations, large code model): the
library has text relocations, which the dynamic loader applies once at load. Where no
toolchain is found, the loader refuses the library, or the platform is not Linux, compiles
keep the Numba path and say why once in the `minixla.cache` log.
"""

from __future__ import annotations

import ctypes
import logging
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from .blas_threads import in_pool
from .cache import CorruptEntry, DiskCache, digest, locked
from .kernels import storage_dtype

FORMAT = 2  # 2: split kernels' parts entries and the thread pool
_log = logging.getLogger("minixla.cache")
_LOADED: dict[str, dict] = {}  # library key -> {global name: builtin}, this process
_NOTED: set[str] = set()

# Imports of the wrappers Numba emits beside each compiled function (for calls from Python
# and from C), and NRT's destructor call: never reached here, where the compiled function is
# called directly with arrays that carry no meminfo. The library defines them as aborts.
UNREACHED = (
    "NRT_MemInfo_call_dtor",
    "NRT_adapt_ndarray_from_python",
    "NRT_adapt_ndarray_to_python_acqref",
    "numba_do_raise",
    "numba_gil_ensure",
    "numba_gil_release",
)
# Imports of the paths that describe an exception: the compiled function may reach the first
# when it raises one whose message is built at run time, then returns an error status, which
# the entry point turns into a RuntimeError whatever the description; the others rebuild
# the exception in the wrappers. The library defines them as doing nothing.
DESCRIBING = {
    "numba_runtime_build_excinfo_struct": "void *{}(void *a, void *b) {{ return NULL; }}",
    "numba_unpickle": "void *{}(void *a, int b, void *c) {{ return NULL; }}",
    "NRT_Free": "void {}(void *pointer) {{ }}",
}
_LOOP_CALLEE = re.compile(r"sys\.modules\['(minixla_kernel_\w+)'\]")


def unavailable() -> str | None:
    """Why no library can be built or loaded here, or None."""
    if not sys.platform.startswith("linux"):
        return f"shared libraries of kernels are built on Linux only, not {sys.platform}"
    missing = [tool for tool in ("cc", "ar", "objcopy", "nm") if shutil.which(tool) is None]
    if missing:
        return f"no {', '.join(missing)} on PATH"
    return None


def note_once(reason: str) -> None:
    if reason not in _NOTED:
        _NOTED.add(reason)
        _log.info("kernels load through Numba: %s", reason)


def library_key(kernels: dict) -> str:
    """The library of `kernels` (global name -> KernelSpec): their names, ids and signatures."""
    from .jit import kernel_id

    return digest(
        "library",
        FORMAT,
        _PRELUDE,  # a change to the C that every library holds builds them afresh
        [(name, kernel_id(s), s.signature_text()) for name, s in kernels.items()],
    )


def bind(program, disk: DiskCache) -> tuple[set[str], list[str]] | None:
    """Binds the kernels of `program` (driver.Program) from its library, loaded or first
    linked from the kernels' stored object code. Returns (the names bound, the names to load
    through Numba in this order: the kernels kept out of the library and the kernels their
    native loops call). None when the library cannot be had (no toolchain, a kernel without
    stored object code, a damaged library): the caller goes through Numba for all."""
    if not program.kernels:
        return None
    if not sys.platform.startswith("linux"):
        note_once(f"shared libraries of kernels are built on Linux only, not {sys.platform}")
        return None
    lkey = library_key(program.kernels)
    functions = _LOADED.get(lkey)
    if functions is None:
        library, _ = disk.library_paths(lkey)
        try:
            with locked(library.with_suffix(".lock")):  # one builder; no half-replaced pair
                functions = _load_or_build(program.kernels, disk, lkey)
        except OSError as exc:
            note_once(f"the library folder cannot be used: {exc}")
            return None
        if functions is None:
            return None
    bound = {name for name in program.kernels if name in functions}
    for name in bound:
        program.namespace[name] = functions[name]
        if name + PARTS in functions:
            in_pool(functions[name], functions[name + PARTS])
    rest = [name for name in program.kernels if name not in bound]
    return bound, through_numba(program.kernels, rest)


def through_numba(kernels: dict, names: list[str]) -> list[str]:
    """`names` and, before each native loop among them, the kernels it calls (it finds them
    by module name when Numba loads it), in the program's order."""
    from .cache import module_name
    from .jit import kernel_id

    by_module = {module_name(kernel_id(spec)): name for name, spec in kernels.items()}
    wanted, pending = set(), list(names)
    while pending:
        name = pending.pop()
        if name not in wanted:
            wanted.add(name)
            callees = _LOOP_CALLEE.findall(kernels[name].source)
            pending += [by_module[m] for m in callees if m in by_module]
    return [name for name in kernels if name in wanted]


def _load_or_build(kernels: dict, disk: DiskCache, lkey: str) -> dict | None:
    try:
        found = disk.library_entry(lkey)
    except CorruptEntry as exc:
        disk.discard_library(lkey, str(exc))
        found = None
    if found is None:
        if _build_from_cache(kernels, disk, lkey) is None:
            return None
        found = disk.library_entry(lkey)
    return None if found is None else _load(disk, lkey, *found)


def _build_from_cache(kernels: dict, disk: DiskCache, lkey: str) -> dict | None:
    from .jit import native_object

    reason = unavailable()  # only building needs the tools: a library found loads without
    if reason is not None:
        note_once(reason)
        return None

    objects = {}
    for name, spec in kernels.items():
        found = native_object(spec, disk)
        if found is None:
            return None
        objects[name] = found
    return build(disk, kernels, objects, lkey)


# ---- building -----------------------------------------------------------------------------


def build(disk: DiskCache, kernels: dict, objects: dict, lkey: str) -> dict | None:
    """Links `kernels` (global name -> spec) from `objects` (global name -> (object code,
    symbol)) into the library stored under `lkey`; returns its manifest (`functions` in the
    library, `numba` the kernels kept out), or None with the reason logged."""
    import subprocess

    with tempfile.TemporaryDirectory(dir=disk.root, prefix=".link-") as folder:
        work = Path(folder)
        for name, (code, _) in objects.items():
            (work / f"{name}.o").write_bytes(code)
        (work / "entries").write_text("".join(f"{symbol}\n" for _, symbol in objects.values()))
        try:
            _run(["ar", "rcs", "kernels.a", *(f"{name}.o" for name in objects)], work)
            _run(["objcopy", "--keep-global-symbols=entries", "kernels.a"], work)
            imports = imports_by_member(_run(["nm", "-u", "kernels.a"], work))
            blas, lapack = _blas_exports(imports), _lapack_exports(imports)
            exports = _linked_exports(blas, lapack)
            if exports:  # GEMM and LAPACK kernels call the libraries by their own names
                names = "".join(f"{ours} {theirs}\n" for ours, theirs in exports.items())
                (work / "blas").write_text(names)
                _run(["objcopy", "--redefine-syms=blas", "kernels.a"], work)
                imports = imports_by_member(_run(["nm", "-u", "kernels.a"], work))
            # a native loop calls the kernels of its body by their symbols (native_loop.py)
            linked = set(exports.values()) | {symbol for _, symbol in objects.values()}
            numba = [
                name for name in kernels if numba_imports(imports.get(f"{name}.o", set()) - linked)
            ]
            own = {name: spec for name, spec in kernels.items() if name not in numba}
            body = {"functions": list(own), "numba": numba}
            if blas is not None and blas.large is not None:
                body["large_gemm"] = blas.large.core
            if not own:
                disk.store_library(lkey, None, body)
                return body
            if numba:
                _run(["ar", "d", "kernels.a", *(f"{name}.o" for name in numba)], work)
            (work / "entries.c").write_text(entry_source(own, objects))
            _run(
                [
                    *("cc", "-shared", "-fPIC", "-O2", "-o", "library.so", "entries.c"),
                    *("-Wl,--whole-archive", "kernels.a", "-Wl,--no-whole-archive"),
                    "-Wl,-z,notext",  # MCJIT's static relocations in text
                    "-Wl,-z,noexecstack",  # MCJIT's objects carry no .note.GNU-stack
                    "-lm",
                    *(_link_arguments(blas, lapack)),
                ],
                work,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            note_once(f"linking the kernels failed: {_why(exc)}")
            return None
        disk.store_library(lkey, work / "library.so", body)
    return body


def _run(command: list[str], folder: Path) -> str:
    import subprocess

    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=True)
    return done.stdout


def _why(exc: Exception) -> str:
    stderr = getattr(exc, "stderr", None)
    if stderr is not None:
        lines = stderr.strip().splitlines()
        return f"{exc.cmd[0]}: {lines[-1] if lines else f'exit status {exc.returncode}'}"
    return str(exc)


def _linked_exports(blas, lapack=None) -> dict:
    """{registered name: the library's own name} of every BLAS and LAPACK library the kernels
    call."""
    found = {}
    if blas is not None:
        found.update(blas.exports)
        found.update(blas.large.exports if blas.large is not None else {})
    if lapack is not None:
        found.update(lapack.exports)
    return found


def _link_arguments(blas, lapack=None) -> list[str]:
    """The linker's arguments for the BLAS and LAPACK libraries (their own names never clash:
    NumPy's ILP64 names end in 64_, the large GEMM library's and SciPy's do not, and share
    no routine)."""
    paths = [] if blas is None else [blas.path]
    if blas is not None and blas.large is not None:
        paths.append(blas.large.path)
    if lapack is not None and lapack.path not in paths:
        paths.append(lapack.path)
    return [arg for path in paths for arg in (path, f"-Wl,-rpath,{Path(path).parent}")]


def _wanted(imports: dict, prefix: str) -> set[str]:
    return {name for names in imports.values() for name in names if name.startswith(prefix)}


def _blas_exports(imports: dict):
    """gemm.locate()'s answer when a kernel calls the BLAS routines gemm.py registers with
    LLVM under names of its own (minixla_cblas_...), else None. The library calls them by the
    BLAS library's own names and links that library (already loaded, with NumPy)."""
    wanted = _wanted(imports, "minixla_cblas_")
    if not wanted:
        return None
    from .gemm import locate

    blas = locate()
    return blas if blas is not None and wanted <= set(_linked_exports(blas)) else None


def _lapack_exports(imports: dict):
    """gemm.lapack_locate()'s answer when a kernel calls the LAPACK routines registered as
    minixla_lapack_..., else None."""
    wanted = _wanted(imports, "minixla_lapack_")
    if not wanted:
        return None
    from .gemm import lapack_locate

    lapack = lapack_locate()
    return lapack if lapack is not None and wanted <= set(lapack.exports) else None


def imports_by_member(nm_output: str) -> dict[str, set[str]]:
    """{archive member: names it imports} from `nm -u` over an archive."""
    out: dict[str, set[str]] = {}
    member = ""
    for line in nm_output.splitlines():
        fields = line.split()
        if len(fields) == 1 and fields[0].endswith(":"):
            member = fields[0][:-1]
            out.setdefault(member, set())
        elif len(fields) == 2 and fields[0] in ("U", "w"):
            out.setdefault(member, set()).add(fields[1])
    return out


def numba_imports(imports: set[str]) -> set[str]:
    """The imported names that neither the C library nor the interpreter provides."""
    libm = _libm()
    return {
        name
        for name in imports
        if name not in UNREACHED
        and name not in DESCRIBING
        and not (name.startswith(("Py", "_Py")) and hasattr(ctypes.pythonapi, name))
        and not hasattr(libm, name)
    }


def _libm():
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")


# ---- the entry points ---------------------------------------------------------------------

_PRELUDE = """\
/* Python entry points of a program's kernels (minixla, cpu/native_library.py). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct { /* NumPy's PyArrayObject_fields */
    char head[HEAD_BYTES]; /* PyObject_HEAD; ob_type is its last pointer */
    char *data;
    int nd;
    intptr_t *dims;
    intptr_t *strides;
    void *base;
    void *descr;
    int flags;
} array_t;
typedef struct { const char *name; void *method; int flags; const char *doc; } method_t;

extern void *PyEval_SaveThread(void);
extern void PyEval_RestoreThread(void *);
extern void Py_IncRef(void *);
extern char _Py_NoneStruct;
extern void *PyExc_TypeError, *PyExc_RuntimeError;
extern void PyErr_SetString(void *, const char *);
extern int PyType_IsSubtype(void *, void *);

UNREACHED_STUBS
static void *ndarray;
void minixla_bind_ndarray(void *type) { ndarray = type; }

/* n C-contiguous ndarrays of the given ranks, or a TypeError. */
static int arrays_ok(array_t *const *a, ptrdiff_t n, ptrdiff_t want, const char *ranks,
                     const char *message)
{
    if (n != want)
        goto bad;
    for (ptrdiff_t i = 0; i < n; i++) {
        void *type = *(void **)(a[i]->head + sizeof a[i]->head - sizeof(void *));
        if (type != ndarray && !PyType_IsSubtype(type, ndarray))
            goto bad;
        if (a[i]->nd != ranks[i] || !(a[i]->flags & 1 /* NPY_ARRAY_C_CONTIGUOUS */))
            goto bad;
    }
    return 1;
bad:
    PyErr_SetString(PyExc_TypeError, message);
    return 0;
}

/* The parts of a split kernel (loops.py: its last argument is [part, parts]) run on the
   calling thread and on worker threads of the process's one pool (the first library loaded
   owns it; minixla_use_pool points later ones at it). Threads claim parts from a ticket, so
   the caller runs every part no worker has claimed: a worker still waking up (tens of
   microseconds) or without a core costs nothing but the wake. A worker spins a while after
   each kernel before it sleeps, as OpenMP's do, so kernels split back to back find it awake.
   The caller has released the GIL; workers never touch Python. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

typedef int (*part_fn)(array_t *const *a, int64_t *part);
typedef int (*run_parts_fn)(part_fn, array_t *const *, int64_t, int64_t);
/* A kernel of fewer parts (blas_threads.POOL_PART_WORK each: under 2^21 of work, about 80 us
   on one core) wakes no sleeping worker: waking one cost 15-20 us more than the split saved
   (an in-place elementwise kernel of 2^20 work, alone in its program). */
enum { MAX_PARTS = 64, WAKE_PARTS = 32 };
static const double SPIN_SECONDS = 1e-4;

static struct {
    pthread_mutex_t serial; /* one split kernel at a time */
    pthread_mutex_t sleep, done_lock;
    pthread_cond_t wake, done;
    int64_t workers; /* started */
    atomic_ulong generation; /* bumped for every split kernel: wakes the workers */
    atomic_int sleepers;
    /* job << 16 | parts << 8 | next unclaimed part: a claim names its job, so a worker late
       for one kernel can never take a part of the next */
    atomic_ullong ticket;
    unsigned long long job;
    atomic_int finished; /* parts of the current job run to the end */
    atomic_int caller_sleeps; /* the caller waits on `done` for the last part */
    atomic_int status; /* the first nonzero status of a part */
    part_fn fn;
    array_t *const *args;
    int64_t threads; /* of the current job: the caller and workers 1 .. threads - 1 */
} pool = {.serial = PTHREAD_MUTEX_INITIALIZER,
          .sleep = PTHREAD_MUTEX_INITIALIZER,
          .done_lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER};

static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Claims and runs parts of the current job until none is left unclaimed. */
static void run_claimed(int caller)
{
    unsigned long long t = atomic_load(&pool.ticket);
    for (;;) {
        int64_t next = (int64_t)(t & 0xff), parts = (int64_t)((t >> 8) & 0xff);
        if (next >= parts)
            return;
        if (!atomic_compare_exchange_weak(&pool.ticket, &t, t + 1))
            continue; /* t now holds the ticket's value: try again */
        int64_t part[2] = {next, parts};
        int status = pool.fn(pool.args, part);
        int none = 0;
        if (status != 0 && status != -2)
            atomic_compare_exchange_strong(&pool.status, &none, status);
        if (atomic_fetch_add(&pool.finished, 1) + 1 == parts && !caller
            && atomic_load(&pool.caller_sleeps)) {
            pthread_mutex_lock(&pool.done_lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.done_lock);
        }
        t = atomic_load(&pool.ticket);
    }
}

typedef struct { int64_t index; unsigned long started_in; } worker_t;
static worker_t worker_args[MAX_PARTS];

static void *worker(void *arg)
{
    const worker_t *me = arg;
    unsigned long seen = me->started_in; /* the generation it started in */
    for (;;) {
        if (me->index < pool.threads) /* helpers beyond the kernel's threads stay out */
            run_claimed(0);
        unsigned long next = atomic_load(&pool.generation);
        double until = now_seconds() + SPIN_SECONDS;
        while (next == seen && now_seconds() < until)
            next = atomic_load(&pool.generation);
        if (next == seen) {
            pthread_mutex_lock(&pool.sleep);
            atomic_fetch_add(&pool.sleepers, 1);
            while ((next = atomic_load(&pool.generation)) == seen)
                pthread_cond_wait(&pool.wake, &pool.sleep);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.sleep);
        }
        seen = next;
    }
    return NULL;
}

static void pool_prepare(void) { pthread_mutex_lock(&pool.serial); }
static void pool_parent(void) { pthread_mutex_unlock(&pool.serial); }
static void pool_child(void) /* a forked child has none of the workers */
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t fresh_cond = PTHREAD_COND_INITIALIZER;
    pool.serial = fresh;
    pool.sleep = fresh;
    pool.done_lock = fresh;
    pool.wake = fresh_cond;
    pool.done = fresh_cond;
    pool.workers = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.caller_sleeps, 0);
}

/* Runs parts 0 .. parts - 1 of `fn` over `a` on `threads` threads (the caller's included);
   0, or the first failing part's status. More parts than threads let the caller go on with
   the parts a waking worker has not claimed yet. */
int minixla_run_parts(part_fn fn, array_t *const *a, int64_t parts, int64_t threads)
{
    if (parts < 1 || parts > MAX_PARTS)
        parts = 1;
    if (threads < 1 || threads > parts)
        threads = parts;
    pthread_mutex_lock(&pool.serial);
    static int watching_forks; /* kept in a forked child: its handlers are inherited */
    if (!watching_forks && parts > 1)
        watching_forks = !pthread_atfork(pool_prepare, pool_parent, pool_child);
    while (pool.workers < threads - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        worker_t *slot = &worker_args[pool.workers + 1];
        slot->index = pool.workers + 1;
        slot->started_in = atomic_load(&pool.generation);
        int failed = pthread_create(&thread, &attr, worker, slot);
        pthread_attr_destroy(&attr);
        if (failed)
            break; /* fewer helpers: the caller claims what they would have */
        pool.workers++;
    }
    if (threads > 1 && parts < WAKE_PARTS && atomic_load(&pool.sleepers) >= pool.workers)
        threads = 1; /* every worker sleeps: waking one costs more than this kernel saves */
    pool.fn = fn;
    pool.args = a;
    pool.threads = threads;
    atomic_store(&pool.status, 0);
    atomic_store(&pool.finished, 0);
    pool.job = (pool.job + 1) & 0xffffffffffffULL;
    atomic_store(&pool.ticket, pool.job << 16 | (unsigned long long)parts << 8);
    if (threads > 1 && pool.workers > 0) {
        atomic_fetch_add(&pool.generation, 1);
        if (atomic_load(&pool.sleepers) > 0) {
            pthread_mutex_lock(&pool.sleep);
            pthread_cond_broadcast(&pool.wake);
            pthread_mutex_unlock(&pool.sleep);
        }
    }
    run_claimed(1);
    double until = now_seconds() + SPIN_SECONDS; /* for the parts workers are running */
    while (atomic_load(&pool.finished) < parts && now_seconds() < until)
        ;
    if (atomic_load(&pool.finished) < parts) { /* a worker lost its core: give ours up */
        pthread_mutex_lock(&pool.done_lock);
        atomic_store(&pool.caller_sleeps, 1);
        while (atomic_load(&pool.finished) < parts)
            pthread_cond_wait(&pool.done, &pool.done_lock);
        atomic_store(&pool.caller_sleeps, 0);
        pthread_mutex_unlock(&pool.done_lock);
    }
    int status = atomic_load(&pool.status);
    pthread_mutex_unlock(&pool.serial);
    return status;
}

static run_parts_fn run_parts = minixla_run_parts;
void minixla_use_pool(void *owner) { run_parts = (run_parts_fn)owner; }

/* None, or a RuntimeError when the kernel reported an exception (Numba's status codes: 0
   and -2 are returns). */
static void *finished(int status, const char *message)
{
    if (status != 0 && status != -2) {
        PyErr_SetString(PyExc_RuntimeError, message);
        return NULL;
    }
    Py_IncRef(&_Py_NoneStruct);
    return &_Py_NoneStruct;
}
"""


def entry_source(kernels: dict, objects: dict) -> str:
    """The C file of entry points for `kernels` (global name -> spec), calling each one's
    compiled function (`objects[name][1]`)."""
    stubs = "".join(f"void {name}(void) {{ abort(); }}\n" for name in UNREACHED)
    stubs += "".join(f"{text.format(name)}\n" for name, text in DESCRIBING.items())
    lines = [
        _PRELUDE.replace("HEAD_BYTES", str(object.__basicsize__)).replace("UNREACHED_STUBS", stubs)
    ]
    table, parts_table = [], []
    for name, spec in kernels.items():
        params, args = [], []
        for k, (rank, dtype) in enumerate(zip(spec.ndims, spec.dtypes, strict=True)):
            params += ["void *", "void *", "intptr_t", "intptr_t", "void *"]
            params += ["intptr_t"] * (2 * rank)
            dims = [f"a[{k}]->dims[{d}]" for d in range(rank)]
            args += ["0", "0", " * ".join(dims) or "1", str(storage_dtype(dtype).itemsize)]
            args += [f"a[{k}]->data", *dims, *(f"a[{k}]->strides[{d}]" for d in range(rank))]
        lines += [
            f"extern int {name}_native(void *, void **, {', '.join(params)})"
            f' __asm__("{objects[name][1]}");',
            *_python_entry(
                name,
                name,
                spec,
                ["void *result[2], *exception = NULL;"],
                f"{name}_native(result, &exception, {', '.join(args)})",
            ),
        ]
        table.append(_method_row(name))
        if spec.parallel:
            lines += _parts_entry(name, spec, args)
            parts_table.append(_method_row(name + PARTS))
    table += parts_table
    lines += ["method_t minixla_methods[] = {", *table, "    {NULL, NULL, 0, NULL},", "};", ""]
    return "\n".join(lines)


PARTS = "_parts"  # the entry of a split kernel that runs all its parts in the pool


def _method_row(entry: str) -> str:
    return f'    {{"{entry}", (void *){entry}, 0x0080 /* METH_FASTCALL */, NULL}},'


def _python_entry(entry: str, name: str, spec, setup: list[str], call: str) -> list[str]:
    """C of a METH_FASTCALL entry point `entry` of kernel `name`: its arguments checked (a
    TypeError), `setup` lines, then `call` (returning a kernel status) without the GIL."""
    ranks = "".join(f"\\{rank:o}" for rank in spec.ndims)
    return [
        f"static void *{entry}(void *self, array_t *const *a, ptrdiff_t n)",
        "{",
        f'    if (!arrays_ok(a, n, {len(spec.ndims)}, "{ranks}", '
        f'"kernel {name}: wrong arguments"))',
        "        return NULL;",
        *(f"    {line}" for line in setup),
        "    void *gil = PyEval_SaveThread();",
        f"    int status = {call};",
        "    PyEval_RestoreThread(gil);",
        f'    return finished(status, "kernel {name} raised an exception in native code");',
        "}",
        "",
    ]


def _parts_entry(name: str, spec, args: list[str]) -> list[str]:
    """C of `<name>_parts`: the same arguments as `<name>`, the last one [0, parts, threads];
    runs every part on that many of the pool's threads (`args`: the native call's arguments
    of `<name>`)."""
    last = len(spec.ndims) - 1
    fields = 5 + 2 * spec.ndims[last]  # the part array's fields come last
    own = [*args[: len(args) - fields], "0", "0", "2", "8", "(char *)part", "2", "8"]
    return [
        f"static int {name}_part(array_t *const *a, int64_t *part)",
        "{",
        "    void *result[2], *exception = NULL;",
        f"    return {name}_native(result, &exception, {', '.join(own)});",
        "}",
        *_python_entry(
            name + PARTS,
            name,
            spec,
            [
                f"const int64_t *split = (const int64_t *)a[{last}]->data;",
                f"int64_t parts = split[1], threads = a[{last}]->dims[0] > 2 ? split[2] : parts;",
            ],
            f"run_parts({name}_part, a, parts, threads)",
        ),
    ]


# ---- loading ------------------------------------------------------------------------------


class _Method(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("method", ctypes.c_void_p),
        ("flags", ctypes.c_int),
        ("doc", ctypes.c_char_p),
    ]


def _load(disk: DiskCache, lkey: str, body: dict, data: bytes) -> dict | None:
    """{global name: builtin} of library `lkey` from its checked bytes `data` (none for a
    library of no functions); None when it cannot be used."""
    names = body["functions"]
    if not names:
        _LOADED[lkey] = {}
        return _LOADED[lkey]
    if not _layout_is_numpys():
        note_once("NumPy's array object does not have the layout the entry points read")
        return None
    if body.get("large_gemm"):
        from .gemm import large_library

        large_library()  # loaded with its kernel set before the loader starts it as a dependency
    # The loader maps the file it opens: it opens a private copy of the checked bytes, so a
    # later change to the cache file can neither reach the code that runs nor fault it.
    folder = disk.library_paths(lkey)[0].parent
    try:
        handle, copy = tempfile.mkstemp(dir=folder, prefix=f".load-{lkey}-", suffix=".so")
        with open(handle, "wb") as out:
            out.write(data)
        try:
            library = ctypes.CDLL(copy)
        finally:
            Path(copy).unlink()
    except OSError as exc:  # a loader that refuses text relocations, say
        note_once(f"the library could not be loaded: {exc}")
        return None
    library.minixla_bind_ndarray(ctypes.c_void_p(id(np.ndarray)))
    _share_pool(library)
    # the kernels' entries in `names` order, then the parts entries of the split ones
    table = (_Method * (2 * len(names) + 1)).in_dll(library, "minixla_methods")
    new = ctypes.pythonapi.PyCFunction_NewEx
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p]
    functions: dict = {}
    for i, name in enumerate(names):
        if table[i].name is None or table[i].name.decode() != name:
            disk.discard_library(lkey, f"its method table does not name {name}")
            return None
        functions[name] = new(ctypes.addressof(table[i]), None, None)
    wanted = {name + PARTS for name in names}
    for i in range(len(names), 2 * len(names)):
        entry = table[i].name.decode() if table[i].name is not None else None
        if entry not in wanted:
            break
        functions[entry] = new(ctypes.addressof(table[i]), None, None)
    _LOADED[lkey] = functions
    _HANDLES.append(library)  # the method table lives as long as the process
    return functions


_HANDLES: list = []
_POOL: list = []  # the address of the pool's runner: the first library loaded owns it


def _share_pool(library) -> None:
    """One pool of threads per process: later libraries run their parts in the first's."""
    if not _POOL:
        _POOL.append(ctypes.cast(library.minixla_run_parts, ctypes.c_void_p).value)
    else:
        library.minixla_use_pool(ctypes.c_void_p(_POOL[0]))


def _layout_is_numpys() -> bool:
    probe = np.empty((2, 3), np.float64)
    base = id(probe) + object.__basicsize__
    dims = ctypes.c_void_p.from_address(base + 16).value
    strides = ctypes.c_void_p.from_address(base + 24).value
    return (
        ctypes.c_void_p.from_address(base).value == probe.__array_interface__["data"][0]
        and ctypes.c_int.from_address(base + 8).value == 2
        and (ctypes.c_ssize_t * 2).from_address(dims)[:] == [2, 3]
        and (ctypes.c_ssize_t * 2).from_address(strides)[:] == [24, 8]
        and ctypes.c_int.from_address(base + 48).value & 1 == 1
    )


def forget() -> None:
    _LOADED.clear()
