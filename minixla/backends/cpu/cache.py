"""The persistent compilation cache: generated kernel modules plus Numba's compiled code.

Layout under the cache root ($MINIXLA_CACHE_DIR, default ~/.cache/minixla, or
$XDG_CACHE_HOME/minixla):

    kernels/ab/<kid>.py        a generated kernel module (Numba needs functions in files to
                               cache them: `cache=True` stores the machine code beside them)
    kernels/ab/__pycache__/    Numba's index and object code for that kernel
    kernels/ab/<kid>.json      manifest: sha256 of the .py, of every Numba cache file and of
                               the kernel's object code
    kernels/ab/<kid>.o         the kernel's machine code as an object file (native_library.py)
    libraries/<lkey>.so        a program's kernels linked into one shared library, loaded
                               without Numba (native_library.py); <lkey>.json: its checksum
    environment/<probe>.json   environment() as last measured for a cheap probe of it
    modules/<key>.json         a compiled module: the kernels it needs, and what its key
                               was made of (to explain later misses)
    programs/<key>.json        a whole program (programs.py): the optimized module and its
                               kernels' ids, keyed on the module as given, before the passes
    stats.json                 hit and miss counts, for `minixla cache info`

`kid` hashes the kernel's source and signature; `key` hashes the optimized module's
fingerprint, the compile options and `environment()` (minixla version, a hash of the code
generator's sources, Numba/llvmlite/Python versions, host CPU name and features), so a change
to any of them is a miss rather than a stale hit. Both are mixed with `environment()`.

Safety: every write is a temporary file plus os.replace; a kernel is compiled and stored under
an exclusive per-kernel lock (fcntl.flock), so concurrent processes wait for each other rather
than race; a manifest whose checksums do not match the files (truncated, corrupted, tampered)
is reported with warnings.warn, deleted and recompiled, never loaded.

Trust: the cache holds machine code and Numba's pickled indexes, which run when loaded, so only
the user's own files are read. Directories are created 0700 and files made 0600; a root (or
sub-directory) that is not a directory, is owned by someone else or is writable by group or
others is refused with one warning and the compile runs without the cache, as does a cache
that cannot be written. Every file of a kernel entry must be owned by the user and match the
manifest's checksums (which bind them to the kernel id, itself a hash of the source and
signature) before Numba is allowed to read it. Kernel modules are executed from the verified
bytes (no `.pyc` is written or read). A shared library is checked against its manifest's
sha256 (bound to its key) before it is loaded. Size is capped ($MINIXLA_CACHE_MAX_BYTES, default
2 GiB); the least recently used entries go first (use touches the manifest's mtime). Measuring
the size stats every file (a third of a second at 8,000 entries), so while a process's last
measurement found the cache under half its cap it measures again only after RESCAN_SECONDS
(the cap can be passed by what is written meanwhile).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import platform
import shutil
import stat
import sys
import tempfile
import time
import warnings
from functools import lru_cache
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process locking
    fcntl = None

DEFAULT_MAX_BYTES = 2 << 30
RESCAN_SECONDS = 30.0
# (root, cap) -> (when, bytes) of this process's last measurement of a cache's size
_MEASURED: dict[tuple[str, int], tuple[float, int]] = {}
# Relative to backends/: the shared codegen layer and the CPU's own kernel code.
_CODEGEN_FILES = (
    "codegen/helpers.py",
    "codegen/scalar.py",
    "codegen/elemental.py",
    "codegen/kernels.py",
    "cpu/helpers.py",
    "cpu/kernels.py",
    "cpu/loops.py",
    "cpu/mathlib.py",
    "cpu/jit.py",
    "cpu/cache.py",
)


def default_root() -> Path:
    configured = os.environ.get("MINIXLA_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minixla"


def default_max_bytes() -> int:
    return int(os.environ.get("MINIXLA_CACHE_MAX_BYTES", DEFAULT_MAX_BYTES))


_ENVIRONMENT: list[dict] = []  # this process's environment(), once known


def environment() -> dict:
    """Everything besides the module that decides what code gets generated and compiled."""
    if not _ENVIRONMENT:
        _ENVIRONMENT.append(_measure_environment())
    return _ENVIRONMENT[0]


def _measure_environment() -> dict:
    """Asks Numba and LLVM themselves (importing them: a quarter of a second)."""
    import llvmlite
    import llvmlite.binding as llvm
    import numba

    features = llvm.get_host_cpu_features()
    return {
        **_cheap_environment(),
        "numba": numba.__version__,
        "llvmlite": llvmlite.__version__,
        "cpu": llvm.get_host_cpu_name(),
        "cpu_features": features.flatten() if hasattr(features, "flatten") else str(features),
    }


def _cheap_environment() -> dict:
    import numpy

    from ...version import __version__

    here = Path(__file__).parent.parent
    codegen = hashlib.sha256()
    for name in _CODEGEN_FILES:
        path = here / name
        if path.exists():
            codegen.update(path.read_bytes())
    return {
        "minixla": __version__,
        "codegen": codegen.hexdigest()[:16],
        "python": platform.python_version(),
        "python_abi": f"{sys.implementation.cache_tag}{sys.abiflags} {object.__basicsize__}",
        "numpy": numpy.__version__,
    }


def environment_probe() -> str | None:
    """A hash of what environment() depends on that is cheap to read: the files of the
    installed Numba and llvmlite (size, mtime, inode) and the CPU's identity and feature flags
    in /proc/cpuinfo. None where there is no such file (the environment is then measured)."""
    import importlib.util

    parts = [sys.version, platform.machine(), json.dumps(_cheap_environment(), sort_keys=True)]
    for package in ("numba", "llvmlite"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.origin:
            return None
        folder = Path(spec.origin).parent
        for name in ("__init__.py", "_version.py"):
            try:
                info = (folder / name).stat()
            except OSError:
                return None
            parts.append(f"{folder / name}:{info.st_size}:{info.st_mtime_ns}:{info.st_ino}")
    try:
        with open("/proc/cpuinfo", "rb") as handle:
            first = handle.read(1 << 16).split(b"\n\n")[0]
    except OSError:
        return None
    wanted = (b"vendor_id", b"cpu family", b"model", b"stepping", b"flags", b"Features", b"CPU ")
    parts += sorted(line.decode() for line in first.splitlines() if line.startswith(wanted))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def recall_environment(root: Path) -> None:
    """Sets environment() from what an earlier process measured for the same probe (kept
    under `root`), so a process that finds everything in the cache never imports Numba; or
    measures it and keeps it there."""
    if str(root) in _RECORDED:
        return
    probe = _probe()
    if probe is None:
        return
    path = root / "environment" / f"{probe}.json"
    if not _ENVIRONMENT and owned_by_us(path):
        try:
            entry = json.loads(path.read_bytes())
            if entry.get("sha256") == _body_sha(probe, entry["body"]):
                _ENVIRONMENT.append(entry["body"])
                _RECORDED.add(str(root))
                return
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
    elif _ENVIRONMENT and owned_by_us(path):  # known here, and recorded there
        _RECORDED.add(str(root))
        return
    body = environment()
    with contextlib.suppress(OSError):
        entry = {"sha256": _body_sha(probe, body), "body": body}
        atomic_write(path, json.dumps(entry).encode())
        _RECORDED.add(str(root))


_RECORDED: set[str] = set()  # cache roots whose record of environment() this process checked


@lru_cache(maxsize=1)
def _probe() -> str | None:
    return environment_probe()


def digest(*parts) -> str:
    text = json.dumps([environment(), *parts], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class CacheUnusable(Exception):
    """The cache directory cannot be trusted or written; compile without it."""


def make_private_dir(path: Path) -> None:
    """Creates `path` (and missing parents) with mode 0700."""
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)


def check_trusted(path: Path) -> None:
    """Raises CacheUnusable unless `path` is a directory of ours that nobody else can write."""
    try:
        info = path.stat()
    except OSError as exc:
        raise CacheUnusable(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise CacheUnusable(f"{path} is not a directory")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise CacheUnusable(f"{path} is owned by another user (uid {info.st_uid})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise CacheUnusable(f"{path} is writable by others (mode {stat.S_IMODE(info.st_mode):o})")


def owned_by_us(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and (not hasattr(os, "getuid") or info.st_uid == os.getuid())


def atomic_write(path: Path, data: bytes) -> None:
    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def locked(path: Path, *, blocking: bool = True):
    """An exclusive inter-process lock on `path`; yields False when non-blocking and busy."""
    make_private_dir(path.parent)
    with open(os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600), "a+b") as handle:
        if fcntl is None:
            yield True
            return
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class CorruptEntry(Exception):
    pass


class DiskCache:
    def __init__(self, root: Path | None = None, max_bytes: int | None = None):
        self.root = Path(root) if root is not None else default_root()
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    def prepare(self) -> None:
        """Creates the root (0700) and checks it and its sub-directories can be trusted;
        raises CacheUnusable otherwise."""
        try:
            make_private_dir(self.root)
        except OSError as exc:
            raise CacheUnusable(f"cannot create {self.root}: {exc.strerror or exc}") from None
        check_trusted(self.root)
        for sub in ("kernels", "modules", "programs", "libraries", "environment"):
            if (self.root / sub).exists() or (self.root / sub).is_symlink():
                check_trusted(self.root / sub)
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise CacheUnusable(f"{self.root} is not writable")
        recall_environment(self.root)

    # -- kernels -----------------------------------------------------------------------------
    def kernel_paths(self, kid: str) -> tuple[Path, Path, Path]:
        folder = self.root / "kernels" / kid[:2]
        return folder / f"{kid}.py", folder / f"{kid}.json", folder / f"{kid}.lock"

    def check_source(self, kid: str, source: str) -> dict | None:
        """The kernel's manifest when its source file is intact; None when absent. A manifest
        that does not match its files raises CorruptEntry."""
        py, manifest_path, _ = self.kernel_paths(kid)
        if not manifest_path.exists() and not manifest_path.is_symlink():
            return None
        if not owned_by_us(manifest_path):
            raise CorruptEntry(f"manifest {manifest_path} is not a file of this user")
        try:
            manifest = json.loads(manifest_path.read_text())
            files, numba = manifest["files"], manifest["numba"]
            if (
                not isinstance(files, dict)
                or not isinstance(numba, dict)
                or manifest.get("kid") != kid
            ):
                raise TypeError("fields of the wrong type or another kernel's id")
        except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError) as exc:
            raise CorruptEntry(f"unreadable manifest {manifest_path}: {exc}") from None
        expected = hashlib.sha256(source.encode()).hexdigest()
        if not owned_by_us(py) or files.get(py.name) != expected or _sha(py) != expected:
            raise CorruptEntry(f"kernel source {py} does not match its manifest")
        return manifest

    def check_numba_files(self, manifest: dict, numba_files: list[Path]) -> None:
        recorded = manifest.get("numba", {})
        present = {p.name: p for p in numba_files}
        if set(recorded) != set(present):
            raise CorruptEntry(
                f"Numba cache files changed: {sorted(recorded)} vs {sorted(present)}"
            )
        for name, sha in recorded.items():
            if not owned_by_us(present[name]) or _sha(present[name]) != sha:
                raise CorruptEntry(f"Numba cache file {present[name]} fails its checksum")

    def write_source(self, kid: str, source: str) -> Path:
        py, _, _ = self.kernel_paths(kid)
        if not owned_by_us(py) or py.read_bytes() != source.encode():
            atomic_write(py, source.encode())
        make_private_dir(py.parent / "__pycache__")  # before Numba makes it 0755
        return py

    def write_manifest(
        self, kid: str, source: str, numba_files: list[Path], native: tuple | None = None
    ) -> None:
        """Records the kernel's files; `native` is (object code, symbol of its function) when
        Numba handed the machine code out (stored as `<kid>.o` for native_library.py)."""
        py, manifest_path, _ = self.kernel_paths(kid)
        for path in numba_files:  # Numba writes 0644; nothing here is for others to read
            with contextlib.suppress(OSError):
                path.chmod(0o600)
        manifest = {
            "kid": kid,
            "files": {py.name: hashlib.sha256(source.encode()).hexdigest()},
            "numba": {p.name: _sha(p) for p in numba_files},
        }
        if native is not None:
            code, symbol = native
            atomic_write(self.object_path(kid), code)
            manifest["native"] = {"sha256": hashlib.sha256(code).hexdigest(), "symbol": symbol}
        atomic_write(manifest_path, json.dumps(manifest, indent=1).encode())

    def object_path(self, kid: str) -> Path:
        return self.kernel_paths(kid)[0].with_suffix(".o")

    def native_object(self, kid: str, manifest: dict) -> tuple[bytes, str] | None:
        """(object code, entry symbol) of a checked kernel entry; None when it has none. Object
        code that does not match the manifest raises CorruptEntry."""
        native = manifest.get("native")
        if native is None:
            return None
        path = self.object_path(kid)
        try:
            sha, symbol = native["sha256"], native["symbol"]
            if not isinstance(symbol, str) or not owned_by_us(path):
                raise ValueError("not a file of this user")
            code = path.read_bytes()
            if hashlib.sha256(code).hexdigest() != sha:
                raise ValueError("checksum mismatch")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptEntry(f"object code {path}: {exc}") from None
        return code, symbol

    def numba_files(self, kid: str) -> list[Path]:
        """Whatever Numba keeps for the kernel's module (`__pycache__/<kid>.*`)."""
        folder = self.kernel_paths(kid)[0].parent / "__pycache__"
        return sorted(folder.glob(f"{kid}.*")) if folder.is_dir() else []

    def discard_kernel(self, kid: str, numba_files: list[Path], reason: str) -> None:
        warnings.warn(
            f"minixla: corrupt compilation cache entry {kid} ({reason}); recompiling",
            RuntimeWarning,
            stacklevel=3,
        )
        py, manifest_path, _ = self.kernel_paths(kid)
        for path in [
            py,
            manifest_path,
            self.object_path(kid),
            *numba_files,
            *self.numba_files(kid),
        ]:
            with contextlib.suppress(OSError):
                path.unlink()

    def touch(self, kid: str) -> None:
        with contextlib.suppress(OSError):
            os.utime(self.kernel_paths(kid)[1])

    # -- modules -----------------------------------------------------------------------------
    def module_entry(self, key: str) -> dict | None:
        path = self.root / "modules" / f"{key}.json"
        if not owned_by_us(path):
            return None
        try:
            entry = json.loads(path.read_text())
            os.utime(path)
            return entry if isinstance(entry, dict) else None
        except (OSError, ValueError):
            return None

    def store_module(self, key: str, entry: dict) -> None:
        atomic_write(self.root / "modules" / f"{key}.json", json.dumps(entry).encode())

    def explain_miss(self, name: str, parts: dict) -> str:
        """Why a module named `name` with key `parts` (see `key_parts`) missed: what differs
        from the most recently used entry of the same name."""
        modules = self.root / "modules"
        latest, stamp = None, -1.0
        for path in modules.glob("*.json") if modules.is_dir() else ():
            if not owned_by_us(path):
                continue
            try:
                entry = json.loads(path.read_text())
            except (OSError, ValueError, UnicodeDecodeError):
                continue
            if isinstance(entry, dict) and entry.get("name") == name and _mtime(path) > stamp:
                latest, stamp = entry, _mtime(path)
        if latest is None or not isinstance(latest.get("parts"), dict):
            return f"no earlier entry for a module named {name!r}"
        changes = _differences("", latest["parts"], parts)
        if not changes:
            return f"the entry for {name!r} is missing kernels (evicted or corrupt)"
        return f"{name!r}: " + "; ".join(changes)

    # -- whole programs ----------------------------------------------------------------------
    def program_path(self, key: str) -> Path:
        return self.root / "programs" / f"{key}.json"

    def program_entry(self, key: str) -> dict | None:
        """The program entry stored under `key`, None when there is none; raises CorruptEntry
        unless it is ours, complete and its checksum (bound to `key`) matches."""
        path = self.program_path(key)
        if not path.exists() and not path.is_symlink():
            return None
        if not owned_by_us(path):
            raise CorruptEntry(f"program entry {path} is not a file of this user")
        try:
            entry = json.loads(path.read_bytes())
            body, sha = entry["body"], entry["sha256"]
            if not isinstance(body, dict) or _body_sha(key, body) != sha:
                raise ValueError("checksum mismatch (truncated, corrupted or another key's)")
        except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError) as exc:
            raise CorruptEntry(f"program entry {path}: {exc}") from None
        with contextlib.suppress(OSError):
            os.utime(path)
        return body

    def store_program(self, key: str, body: dict) -> None:
        entry = {"sha256": _body_sha(key, body), "body": body}
        atomic_write(self.program_path(key), json.dumps(entry).encode())

    def discard_program(self, key: str, reason: str) -> None:
        warnings.warn(
            f"minixla: corrupt compilation cache entry program {key} ({reason}); recompiling",
            RuntimeWarning,
            stacklevel=3,
        )
        with contextlib.suppress(OSError):
            self.program_path(key).unlink()

    # -- shared libraries of whole programs (native_library.py) ----------------------------
    def library_paths(self, lkey: str) -> tuple[Path, Path]:
        folder = self.root / "libraries"
        return folder / f"{lkey}.so", folder / f"{lkey}.json"

    def library_entry(self, lkey: str) -> tuple[dict, bytes] | None:
        """(manifest, bytes of the library) of library `lkey`, None when there is none;
        raises CorruptEntry unless the manifest is ours and bound to `lkey`, and the bytes
        match its sha256. The bytes are what gets loaded (from a private copy), so what was
        checked is what runs even if the file changes later."""
        library, path = self.library_paths(lkey)
        if not path.exists() and not path.is_symlink():
            return None
        data = b""
        try:
            if not owned_by_us(path):
                raise ValueError("not a file of this user")
            entry = json.loads(path.read_bytes())
            body = entry["body"]
            if not isinstance(body, dict) or _body_sha(lkey, body) != entry["sha256"]:
                raise ValueError("checksum mismatch (truncated, corrupted or another key's)")
            if not isinstance(body["functions"], list):
                raise ValueError("no list of functions")
            if body["functions"]:
                data = library.read_bytes() if owned_by_us(library) else b""
                if hashlib.sha256(data).hexdigest() != body["sha256"]:
                    raise ValueError(f"{library.name} does not match its checksum")
        except (ValueError, KeyError, TypeError, OSError, UnicodeDecodeError) as exc:
            raise CorruptEntry(f"library {path}: {exc}") from None
        with contextlib.suppress(OSError):
            os.utime(path)
        return body, data

    def store_library(self, lkey: str, built: Path | None, body: dict) -> None:
        """Moves the shared library `built` (a file under the root) into place, then writes
        its manifest: a reader that finds the manifest finds the library it describes. With
        `built` None only the manifest is written (the kernels need Numba: no library)."""
        library, path = self.library_paths(lkey)
        make_private_dir(library.parent)
        if built is not None:
            built.chmod(0o600)
            body = {**body, "sha256": _sha(built)}
            os.replace(built, library)
        atomic_write(path, json.dumps({"sha256": _body_sha(lkey, body), "body": body}).encode())

    def discard_library(self, lkey: str, reason: str) -> None:
        warnings.warn(
            f"minixla: corrupt compilation cache entry library {lkey} ({reason}); rebuilding",
            RuntimeWarning,
            stacklevel=3,
        )
        for path in self.library_paths(lkey):
            with contextlib.suppress(OSError):
                path.unlink()

    # -- hit and miss counts, across processes ------------------------------------------------
    def record(self, hit: bool) -> None:
        path = self.root / "stats.json"
        with locked(self.root / "stats.lock"):
            counts = self.stats()
            counts["hits" if hit else "misses"] += 1
            atomic_write(path, json.dumps(counts).encode())

    def stats(self) -> dict:
        path = self.root / "stats.json"
        try:
            counts = json.loads(path.read_text()) if owned_by_us(path) else {}
        except (OSError, ValueError, UnicodeDecodeError):
            counts = {}
        if not isinstance(counts, dict):
            counts = {}
        return {
            k: counts.get(k) if isinstance(counts.get(k), int) else 0 for k in ("hits", "misses")
        }

    # -- size cap ----------------------------------------------------------------------------
    def entries(self) -> list[tuple[float, int, str, list[Path]]]:
        """(last use, bytes, id, files) for every kernel and module entry."""
        groups: dict[str, list[Path]] = {}
        kernels = self.root / "kernels"
        for path in kernels.rglob("*") if kernels.exists() else ():
            if path.is_file() and not path.name.startswith("."):
                groups.setdefault(path.name.split(".")[0], []).append(path)
        out = []
        for kid, files in groups.items():
            manifest = [p for p in files if p.suffix == ".json"]
            stamp = _mtime(manifest[0]) if manifest else min(_mtime(p) for p in files)
            out.append((stamp, sum(_size(p) for p in files), kid, files))
        for sub in ("modules", "programs"):
            folder = self.root / sub
            for path in folder.glob("*.json") if folder.exists() else ():
                out.append((_mtime(path), _size(path), f"{sub[:-1]}:" + path.stem, [path]))
        folder = self.root / "libraries"
        for path in folder.glob("*.json") if folder.exists() else ():
            files = [path, path.with_suffix(".so")]
            out.append((_mtime(path), sum(map(_size, files)), "library:" + path.stem, files))
        return out

    def size(self) -> int:
        return sum(entry[1] for entry in self.entries())

    def evict(self, keep: set[str] = frozenset()) -> int:
        """Deletes least recently used entries until the cache fits its cap; returns how many.
        Entries in `keep` (just used) and kernels another process holds locked stay."""
        ledger = (str(self.root), self.max_bytes)
        when, measured = _MEASURED.get(ledger, (-math.inf, 0))
        if time.monotonic() - when < RESCAN_SECONDS and 2 * measured <= self.max_bytes:
            return 0
        entries = sorted(self.entries())
        total = sum(e[1] for e in entries)
        removed = 0
        for _, size, name, files in entries:
            if total <= self.max_bytes:
                break
            if name in keep:
                continue
            lock = self.kernel_paths(name)[2] if ":" not in name else None
            with locked(lock, blocking=False) if lock else contextlib.nullcontext(True) as ok:
                if not ok:
                    continue
                for path in files:
                    with contextlib.suppress(OSError):
                        path.unlink()
            total -= size
            removed += 1
        _MEASURED[ledger] = (time.monotonic(), total)
        return removed

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def key_parts(fingerprint: str, options: dict) -> dict:
    """What a module's key is made of, kept in its entry so a later miss can say what
    changed."""
    return {
        "module": hashlib.sha256(fingerprint.encode()).hexdigest()[:16],
        "options": dict(options),
        "environment": environment(),
    }


def _differences(where: str, old, new) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for k in sorted(set(old) | set(new), key=str):
            out += _differences(f"{where}.{k}" if where else str(k), old.get(k), new.get(k))
        return out
    if old == new:
        return []
    if where == "module":
        return ["the optimized module changed (its fingerprint differs)"]
    return [f"{where} changed from {old!r} to {new!r}"]


def explain_requested() -> bool:
    """`--explain_cache_misses` in $MINIXLA_FLAGS (as JAX's jax_explain_cache_misses)."""
    from ...passes.flags import read_flags

    return bool(read_flags(None, "").get("explain_cache_misses", False))


def _body_sha(key: str, body: dict) -> str:
    return hashlib.sha256(json.dumps([key, body], sort_keys=True).encode()).hexdigest()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def module_name(kid: str) -> str:
    return f"minixla_kernel_{kid}"


def is_enabled(options: dict) -> bool:
    if "cache" in options:
        return bool(options["cache"])
    return (
        os.environ.get("MINIXLA_CACHE", "1") not in ("0", "false", "")
        and sys.platform != "emscripten"
    )
