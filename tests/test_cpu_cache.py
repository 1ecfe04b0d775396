"""The persistent compilation cache: hits across processes, eviction, corruption, concurrency.

Each scenario compiles in child processes (the in-process memo would hide the disk cache) with
MINIXLA_CACHE_DIR pointing at a fresh temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.backends.cpu import cache as cpu_cache
from minixla.backends.cpu import jit

MODULE = """
HloModule cached
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[64,32] parameter(0)
  t = f32[64,32] tanh(x)
  e = f32[64,32] exponential(t)
  r = f32[64] reduce(e, f32[] constant(0)), dimensions={1}, to_apply=add
  ROOT o = (f32[64], f32[32,64]) tuple(r, transpose(e), dimensions={1,0})
}
"""

CHILD = textwrap.dedent("""
    import json, sys, time, warnings
    import numpy as np
    import minixla
    from minixla.backends import cpu          # imports Numba
    from numba.core.registry import cpu_target
    cpu_target.target_context.refresh()       # Numba's one-time start-up, not this module's
    text = sys.stdin.read()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        exe = minixla.compile(text, backend="cpu")
        seconds = time.perf_counter() - start
    x = np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32)
    r, t = exe(x)
    m = minixla.metrics()
    print(json.dumps({"seconds": seconds, "outcomes": exe.kernel_outcomes,
                      "hit": m.get("cpu.cache.hit", {}).get("count", 0),
                      "warnings": [str(w.message) for w in caught],
                      "sum": float(r.sum()), "t": float(t[3, 5])}))
""")


def run_child(cache_dir: Path, text: str = MODULE, **env) -> dict:
    environ = dict(os.environ, MINIXLA_CACHE_DIR=str(cache_dir), **env)
    environ.pop("MINIXLA_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=text,
        capture_output=True,
        text=True,
        env=environ,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected() -> tuple[float, float]:
    x = np.linspace(-1, 1, 64 * 32, dtype=np.float32).reshape(64, 32)
    e = np.exp(np.tanh(x))
    return float(e.sum()), float(e.T[3, 5])


def test_second_process_hits_the_disk_cache(tmp_path):
    cold = run_child(tmp_path)
    warm = run_child(tmp_path)
    assert "compiled" in cold["outcomes"] and cold["hit"] == 0
    assert set(warm["outcomes"]) == {"disk"} and warm["hit"] == 1
    assert warm["sum"] == cold["sum"] and np.isclose(warm["sum"], expected()[0], rtol=1e-5)
    # The documented target is 20x; leave room for a loaded CI machine.


def test_corrupt_entries_are_detected_warned_about_and_recompiled(tmp_path):
    run_child(tmp_path)
    kernels = tmp_path / "kernels"
    objects = sorted(kernels.rglob("*.nbc")) + sorted(tmp_path.rglob("*.so"))
    sources = sorted(kernels.rglob("*.py"))
    assert objects and sources
    for path in objects:
        path.write_bytes(path.read_bytes()[:40])  # truncated machine code
    sources[-1].write_text(sources[-1].read_text()[:-30])  # truncated source
    again = run_child(tmp_path)
    assert any("corrupt compilation cache entry" in w for w in again["warnings"])
    assert "compiled" in again["outcomes"]
    assert np.isclose(again["sum"], expected()[0], rtol=1e-5)
    clean = run_child(tmp_path)  # the recompiled entries are sound again
    assert set(clean["outcomes"]) == {"disk"} and not clean["warnings"]


def test_concurrent_writers_share_one_cache(tmp_path):
    environ = dict(os.environ, MINIXLA_CACHE_DIR=str(tmp_path))
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environ,
        )
        for _ in range(4)
    ]
    results = []
    for child in children:
        out, err = child.communicate(MODULE, timeout=300)
        assert child.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(np.isclose(r["sum"], expected()[0], rtol=1e-5) for r in results)
    assert all(not r["warnings"] for r in results)
    after = run_child(tmp_path)
    assert set(after["outcomes"]) == {"disk"} and not after["warnings"]
    (library,) = (tmp_path / "libraries").glob("*.json")  # one entry, and a sound one
    assert cpu_cache.DiskCache(tmp_path).library_entry(library.stem) is not None


def test_least_recently_used_entries_are_evicted_over_the_size_cap(tmp_path):
    disk = cpu_cache.DiskCache(tmp_path, max_bytes=1 << 40)
    texts = [MODULE.replace("tanh(x)", op + "(x)") for op in ("tanh", "negate", "abs")]
    for text in texts:
        jit.forget_in_memory()
        minixla.compile(text, backend="cpu", cache_dir=str(tmp_path))
        os.utime(tmp_path)  # distinct modification times, oldest first
    entries = sorted(disk.entries())
    total = sum(e[1] for e in entries)
    oldest = entries[0][2]
    disk.max_bytes = total - entries[0][1]
    assert disk.evict() >= 1
    names = {e[2] for e in disk.entries()}
    assert oldest not in names and disk.size() <= disk.max_bytes


def test_in_memory_memo_skips_the_disk(tmp_path):
    text = MODULE.replace("tanh(x)", "sine(x)")
    jit.forget_in_memory()
    first = minixla.compile(text, backend="cpu", cache_dir=str(tmp_path))
    second = minixla.compile(text, backend="cpu", cache_dir=str(tmp_path))
    assert "memory" not in first.kernel_outcomes
    assert set(second.kernel_outcomes) == {"memory"}


def test_key_covers_environment_and_cache_can_be_disabled(tmp_path):
    env = cpu_cache.environment()
    for field in ("minixla", "codegen", "numba", "llvmlite", "cpu", "cpu_features"):
        assert env[field]
    text = MODULE.replace("tanh(x)", "cosine(x)")
    jit.forget_in_memory()
    exe = minixla.compile(text, backend="cpu", cache=False, cache_dir=str(tmp_path))
    assert "compiled" in exe.kernel_outcomes
    assert not (tmp_path / "kernels").exists()


@pytest.mark.parametrize("name", ["default"])
def test_default_location_is_under_the_user_cache_dir(monkeypatch, name):
    monkeypatch.delenv("MINIXLA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/tmp/xdg-test")
    assert cpu_cache.default_root() == Path("/tmp/xdg-test/minixla")


# -- faults: every one gives the right result and a warning, never a crash ------------------
SMALL = MODULE.replace("tanh(x)", "log-plus-one(x)")


def compile_small(tmp_path, **options):
    """Compiles SMALL in this process as a new process would (no in-process memo)."""
    jit.forget_in_memory()
    jit._WARNED.clear()
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = minixla.compile(SMALL, backend="cpu", cache_dir=str(tmp_path), **options)
    x = np.linspace(-0.5, 1, 64 * 32, dtype=np.float32).reshape(64, 32)
    r, _ = exe(x)
    np.testing.assert_allclose(r, np.exp(np.log1p(x)).sum(axis=1), rtol=1e-5)
    return exe, [str(w.message) for w in caught if "minixla" in str(w.message)]


def kernel_files(tmp_path, pattern):
    return sorted(p for p in (tmp_path / "kernels").rglob(pattern) if p.is_file())


def drop_libraries(root):
    """Deletes the programs' shared libraries, so the next compile reads the kernel entries
    (to link the library again, or through Numba)."""
    shutil.rmtree(root / "libraries", ignore_errors=True)


def test_every_file_overwritten_with_garbage_recompiles(tmp_path):
    compile_small(tmp_path)
    for path in [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".lock"]:
        path.write_bytes(b"\x80garbage" * 3)
    exe, warned = compile_small(tmp_path)
    assert "compiled" in exe.kernel_outcomes and warned
    assert all("corrupt compilation cache entry" in w for w in warned)
    exe, warned = compile_small(tmp_path)  # healed
    assert set(exe.kernel_outcomes) == {"disk"} and not warned


@pytest.mark.parametrize("manifest", ['{"files": null}', "[]", '{"kid": 1}', ""])
def test_malformed_manifests_are_corrupt_entries(tmp_path, manifest):
    compile_small(tmp_path)
    for path in kernel_files(tmp_path, "*.json"):
        path.write_text(manifest)
    drop_libraries(tmp_path)
    exe, warned = compile_small(tmp_path)
    assert "compiled" in exe.kernel_outcomes
    assert warned and all("corrupt" in w for w in warned)


def test_numba_files_without_a_manifest_are_never_loaded(tmp_path):
    """A half-written entry (no manifest) or planted files: Numba must not unpickle them."""
    compile_small(tmp_path)
    marker = tmp_path / "pwned"
    planted = b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR."
    for path in kernel_files(tmp_path, "*.nbi"):
        path.write_bytes(planted)
    for path in kernel_files(tmp_path, "*.json"):
        path.unlink()
    for py in kernel_files(tmp_path, "*.py"):  # a planted .pyc beside the kernel
        cache_dir = py.parent / "__pycache__"
        code = compile(f"open({str(marker)!r}, 'w')\n", str(py), "exec")
        import importlib.util
        import marshal

        pyc = cache_dir / f"{py.stem}.cpython-{sys.version_info[0]}{sys.version_info[1]}.pyc"
        pyc.write_bytes(importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code))
    drop_libraries(tmp_path)
    exe, _ = compile_small(tmp_path)
    assert "compiled" in exe.kernel_outcomes
    assert not marker.exists()
    assert not kernel_files(tmp_path, "*.pyc")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="giving a file to another user needs root",
)
def test_files_owned_by_another_user_are_refused(tmp_path):
    compile_small(tmp_path)
    for path in kernel_files(tmp_path, "*.nbi") + kernel_files(tmp_path, "*.o"):
        os.chown(path, 4321, 4321)
    drop_libraries(tmp_path)
    exe, warned = compile_small(tmp_path)
    assert "compiled" in exe.kernel_outcomes and any("corrupt" in w for w in warned)
    assert all(p.stat().st_uid == os.getuid() for p in kernel_files(tmp_path, "*"))


def test_directories_are_private_and_files_not_readable_by_others(tmp_path):
    root = tmp_path / "fresh"
    compile_small(root)
    for path in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        assert path.stat().st_mode & 0o077 == 0, path
    for path in [p for p in root.rglob("*") if p.is_file()]:
        assert path.stat().st_mode & 0o077 == 0, path


def test_a_directory_others_can_write_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    exe, warned = compile_small(root)
    assert len(warned) == 1 and "writable by others" in warned[0]
    assert not (root / "kernels").exists()


@pytest.mark.parametrize("fault", ["root is a file", "lock is a directory"])
def test_an_unusable_cache_warns_once_and_compiles_without_it(tmp_path, fault):
    root = tmp_path / "cache"
    if fault == "root is a file":
        root.write_text("not a directory")
    else:
        compile_small(root)
        for lock in kernel_files(root, "*.lock"):
            lock.unlink()
            lock.mkdir()
        for path in kernel_files(root, "*.json"):
            path.unlink()  # so the kernels need their locks again
        drop_libraries(root)
    exe, warned = compile_small(root)
    assert len(warned) == 1 and "not using the compilation cache" in warned[0]
    assert "compiled" in exe.kernel_outcomes


def test_a_changed_environment_is_a_miss_not_a_stale_hit(tmp_path, monkeypatch):
    compile_small(tmp_path)
    changed = dict(cpu_cache.environment(), numba="0.0.0")
    monkeypatch.setattr(cpu_cache, "environment", lambda: changed)
    exe, warned = compile_small(tmp_path)
    assert set(exe.kernel_outcomes) == {"compiled"} and not warned


def test_explain_cache_misses_says_what_changed(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("MINIXLA_FLAGS", "--explain_cache_misses")
    with caplog.at_level("WARNING", logger="minixla.cache"):
        compile_small(tmp_path)
        compile_small(tmp_path, parallel_threshold=12345)
        changed = dict(cpu_cache.environment(), llvmlite="9.9")
        monkeypatch.setattr(cpu_cache, "environment", lambda: changed)
        compile_small(tmp_path)
    messages = [r.getMessage() for r in caplog.records if r.name == "minixla.cache"]
    assert len(messages) == 3, messages
    assert "no earlier entry for a module named 'cached'" in messages[0]
    assert "options.parallel_threshold changed from None to 12345" in messages[1]
    assert "environment.llvmlite changed from" in messages[2] and "'9.9'" in messages[2]


def test_hits_and_misses_are_counted_across_compiles(tmp_path):
    compile_small(tmp_path)
    compile_small(tmp_path)
    compile_small(tmp_path)
    assert cpu_cache.DiskCache(tmp_path).stats() == {"hits": 2, "misses": 1}


def test_a_cache_well_under_its_cap_is_measured_again_only_when_due(tmp_path, monkeypatch):
    # measuring stats every file; doing it after every compile cost a third of a second
    # with 8,000 entries
    scans = []
    sizes = {"bytes": 10}

    def entries(self):
        scans.append(1)
        return [(0.0, sizes["bytes"], "k", [])]

    monkeypatch.setattr(cpu_cache.DiskCache, "entries", entries)
    disk = cpu_cache.DiskCache(tmp_path, max_bytes=100)
    disk.evict()
    disk.evict()
    assert len(scans) == 1
    monkeypatch.setattr(cpu_cache, "RESCAN_SECONDS", 0.0)
    sizes["bytes"] = 60  # over half the cap: measured on every call from now on
    disk.evict()
    monkeypatch.setattr(cpu_cache, "RESCAN_SECONDS", 1e9)
    disk.evict()
    assert len(scans) == 3


@pytest.mark.parametrize("damage", ["garbage", "another probe's", "edited"])
def test_the_environment_is_recalled_and_a_damaged_record_measured_again(tmp_path, damage):
    """A process recalls environment() from the record an earlier one left (so a hit needs no
    Numba to learn its version); a record that does not check out is measured again."""
    compile_small(tmp_path)
    (record,) = (tmp_path / "environment").glob("*.json")
    measured = cpu_cache.environment()
    entry = json.loads(record.read_text())
    assert entry["body"] == measured
    if damage == "garbage":
        record.write_text("\x80garbage")
    elif damage == "another probe's":
        record.write_text(
            json.dumps(
                {"sha256": cpu_cache._body_sha("0" * 32, entry["body"]), "body": entry["body"]}
            )
        )
    else:
        record.write_text(
            json.dumps({"sha256": entry["sha256"], "body": dict(entry["body"], numba="0.0.0")})
        )
    cpu_cache._ENVIRONMENT.clear()
    cpu_cache._RECORDED.clear()  # as in a new process
    try:
        cpu_cache.recall_environment(tmp_path)
        assert cpu_cache.environment() == measured
        assert json.loads(record.read_text())["body"] == measured  # written again
    finally:
        cpu_cache._ENVIRONMENT[:] = [measured]
