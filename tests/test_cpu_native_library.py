"""A program's kernels linked into one shared library (cpu/native_library.py): a warm process
runs them without importing Numba, bit for bit what Numba's own entry points compute; a
damaged library is a warning and a rebuild; kernels that need Numba's runtime still come
from Numba; without a toolchain everything goes through Numba."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import minixla
from minixla.backends.cpu import cache as cpu_cache
from minixla.backends.cpu import jit, native_library
from minixla.backends.cpu.kernels import KernelSpec

pytestmark = pytest.mark.skipif(
    native_library.unavailable() is not None, reason=str(native_library.unavailable())
)

# A row reduction, a tiled transpose, multi-output fusions, a small dot, a bf16 kernel and a
# sort (its scratch on the kernel's stack).
MODULE = """
HloModule kinds
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY main {
  x = f32[64,48] parameter(0)
  w = f32[48,8] parameter(1)
  t = f32[64,48] tanh(x)
  e = f32[64,48] exponential(t)
  r = f32[64] reduce(e, f32[] constant(0)), dimensions={1}, to_apply=add
  tr = f32[48,64] transpose(e), dimensions={1,0}
  d = f32[64,8] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h = bf16[64,8] convert(d)
  g = bf16[64,8] multiply(h, h)
  s = f32[64,48] sort(x), dimensions={1}, to_apply=less
  y = f32[3072] parameter(2)
  u = f32[3072] tanh(y)
  v = f32[3072] exponential(u)
  ROOT o = (f32[64], f32[48,64], f32[64,8], bf16[64,8], f32[64,48], f32[3072], f32[3072]) tuple(r, tr, d, g, s, u, v)
}
"""

# A while loop run natively: its state copies and reshapes need nothing of Numba's runtime.
LOOP = """
HloModule looped
cond {
  s = (s32[], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  s = (s32[], f32[8,8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8,8] get-tuple-element(s), index=1
  w = f32[8,8] transpose(tanh(v)), dimensions={1,0}
  ROOT t = (s32[], f32[8,8]) tuple(add(i, s32[] constant(1)), w)
}
ENTRY main {
  x = f32[8,8] parameter(0)
  y = f32[8,8] sine(x)
  l = (s32[], f32[8,8]) while((s32[], f32[8,8]) tuple(s32[] constant(0), y)), condition=cond, body=body
  ROOT r = f32[8,8] get-tuple-element(l), index=1
}
"""

CHILD = textwrap.dedent("""
    import hashlib, json, sys, warnings
    import numpy as np
    import minixla
    from minixla.runtime.inputs import random_arguments
    text = sys.stdin.read()
    options = json.loads(sys.argv[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = minixla.compile(text, backend="cpu", **options)
    result = exe(*random_arguments(minixla.parse_hlo_module(text), 0))
    leaves = result if isinstance(result, tuple) else (result,)
    digest = hashlib.sha256(b"".join(np.asarray(r).tobytes() for r in leaves)).hexdigest()
    metrics = minixla.metrics()
    print(json.dumps({
        "bits": digest,
        "numba": "numba" in sys.modules,
        "library": metrics.get("cpu.cache.library_hit", {}).get("count", 0),
        "outcomes": exe.kernel_outcomes,
        "warnings": [str(w.message) for w in caught if "minixla" in str(w.message)],
    }))
""")


def run_child(text: str, **options) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(options)],
        input=text,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "MINIXLA_CACHE"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_warm_process_runs_the_library_without_numba_and_gets_numbas_bits(tmp_path):
    numba_only = run_child(MODULE, cache=False)
    cold = run_child(MODULE, cache_dir=str(tmp_path))
    warm = run_child(MODULE, cache_dir=str(tmp_path))
    assert "compiled" in cold["outcomes"] and cold["library"] == 0
    assert warm["library"] == 1 and not warm["numba"] and set(warm["outcomes"]) == {"disk"}
    assert numba_only["bits"] == cold["bits"] == warm["bits"]
    (manifest,) = (tmp_path / "libraries").glob("*.json")
    assert not json.loads(manifest.read_text())["body"]["numba"]  # every kernel linked
    assert not cold["warnings"] and not warm["warnings"]


def test_a_stored_whole_program_gets_the_same_bits_from_the_library(tmp_path):
    from pathlib import Path

    text = (Path(__file__).parents[1] / "bench" / "programs" / "layernorm_mlp.hlo").read_text()
    for options in ({"parallel_threshold": 1 << 62}, {"parallel_threshold": 1}):
        # serial, then every kernel it can split split: both link every kernel
        numba_only = run_child(text, cache=False, **options)
        run_child(text, cache_dir=str(tmp_path), **options)
        warm = run_child(text, cache_dir=str(tmp_path), **options)
        assert warm["library"] == 1 and not warm["numba"]
        assert warm["bits"] == numba_only["bits"]


def test_a_native_while_loop_links_into_the_library(tmp_path):
    # its state copies are loops and its reshapes h.as_shape: nothing of Numba's runtime
    numba_only = run_child(LOOP, cache=False)
    cold = run_child(LOOP, cache_dir=str(tmp_path))
    warm = run_child(LOOP, cache_dir=str(tmp_path))
    (manifest,) = (tmp_path / "libraries").glob("*.json")
    body = json.loads(manifest.read_text())["body"]
    assert not body["numba"] and len(body["functions"]) >= 3  # the loop and its kernels
    assert warm["library"] == 1 and not warm["numba"]
    assert warm["bits"] == cold["bits"] == numba_only["bits"] and not warm["warnings"]


def compile_here(root, text=MODULE):
    """Compiles in this process as a new process would (nothing kept in memory)."""
    jit.forget_in_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = minixla.compile(text, backend="cpu", cache_dir=str(root))
    from minixla.runtime.inputs import random_arguments

    result = exe(*random_arguments(minixla.parse_hlo_module(text), 0))
    bits = b"".join(np.asarray(r).tobytes() for r in result)
    return exe, bits, [str(w.message) for w in caught if "minixla" in str(w.message)]


def library_hits() -> int:
    return minixla.metrics().get("cpu.cache.library_hit", {}).get("count", 0)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "swapped", "manifest", "planted"])
def test_a_damaged_library_warns_once_and_is_rebuilt(tmp_path, damage):
    _, bits, _ = compile_here(tmp_path)
    other = MODULE.replace("tanh(x)", "sine(x)")
    compile_here(tmp_path, other)
    libraries = sorted((tmp_path / "libraries").glob("*.so"))
    assert len(libraries) == 2
    exe, _, _ = compile_here(tmp_path)  # which library is this module's
    mine = next(p for p in libraries if p.stem in {native_library.library_key(exe.program.kernels)})
    theirs = next(p for p in libraries if p != mine)
    if damage == "garbage":
        mine.write_bytes(b"\x7fELF" + b"\x80garbage" * 64)
    elif damage == "truncated":
        mine.write_bytes(mine.read_bytes()[:4096])
    elif damage == "swapped":
        mine.write_bytes(theirs.read_bytes())
    elif damage == "manifest":
        mine.with_suffix(".json").write_text('{"sha256": "0", "body": {"functions": []}}')
    else:  # a library nobody recorded: the manifest is gone, a stray file left behind
        mine.with_suffix(".json").unlink()
        mine.write_bytes(b"\x7fELF planted")
    hits = library_hits()
    exe, again, warned = compile_here(tmp_path)
    if damage == "planted":
        assert not warned  # nothing recorded it: linked again, the stray file replaced
    else:
        assert len(warned) == 1 and "corrupt compilation cache entry library" in warned[0]
    assert again == bits and library_hits() == hits + 1
    exe, healed, warned = compile_here(tmp_path)
    assert healed == bits and not warned and library_hits() == hits + 2


def test_a_library_changed_on_disk_after_loading_does_not_reach_running_code(tmp_path):
    exe, bits, _ = compile_here(tmp_path)
    (library,) = (tmp_path / "libraries").glob("*.so")
    library.write_bytes(b"\0" * library.stat().st_size)  # in place, while it is loaded
    from minixla.runtime.inputs import random_arguments

    result = exe(*random_arguments(minixla.parse_hlo_module(MODULE), 0))
    assert b"".join(np.asarray(r).tobytes() for r in result) == bits


def test_entry_points_check_their_arguments(tmp_path):
    exe, _, _ = compile_here(tmp_path)
    name = next(n for n, s in exe.program.kernels.items() if s.flat and len(s.ndims) == 3)
    entry = exe.program.namespace[name]
    assert type(entry).__name__ == "builtin_function_or_method"
    x, y, z = (np.zeros(3072, np.float32) for _ in range(3))
    entry(np.linspace(-1, 1, 3072, dtype=np.float32), y, z)
    assert np.allclose(z, np.tanh(np.linspace(-1, 1, 3072)), atol=1e-6)
    for bad in (
        [x, y],  # too few
        [np.zeros(6144, np.float32)[::2], y, z],  # not contiguous
        [x.reshape(64, 48), y, z],  # the wrong rank
        [x.tolist(), y, z],  # not an array
    ):
        with pytest.raises(TypeError, match=f"kernel {name}: wrong arguments"):
            entry(*bad)


def test_without_a_toolchain_kernels_come_from_numba(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    native_library._NOTED.clear()
    with caplog.at_level(logging.INFO, logger="minixla.cache"):
        exe, bits, warned = compile_here(tmp_path)
    assert not warned and "compiled" in exe.kernel_outcomes
    assert not list((tmp_path / "libraries").glob("*.so"))
    assert any("no cc" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    _, again, _ = compile_here(tmp_path)  # the library now, from the stored object code
    assert again == bits and list((tmp_path / "libraries").glob("*.so"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    hits = library_hits()
    _, loaded, _ = compile_here(tmp_path)  # loading a library needs no toolchain
    assert loaded == bits and library_hits() == hits + 1


def test_entry_source_passes_each_array_as_numbas_fields():
    spec = KernelSpec(
        "kernel", "", [("param", 0), ("out", 0)], [2, 1], ["f32", "bf16"], False, False
    )
    source = native_library.entry_source({"k7": spec}, {"k7": (b"", "_ZN7kernel")})
    assert (
        "extern int k7_native(void *, void **, void *, void *, intptr_t, intptr_t, void *, "
        in source
    )
    assert '__asm__("_ZN7kernel");' in source
    assert 'arrays_ok(a, n, 2, "\\2\\1", "kernel k7: wrong arguments")' in source
    # meminfo, parent, size, item size, data, dims, strides: f32[2d] then bf16 bits[1d]
    assert (
        "k7_native(result, &exception, 0, 0, a[0]->dims[0] * a[0]->dims[1], 4, a[0]->data, "
        "a[0]->dims[0], a[0]->dims[1], a[0]->strides[0], a[0]->strides[1], 0, 0, a[1]->dims[0], "
        "2, a[1]->data, a[1]->dims[0], a[1]->strides[0]);" in source
    )
    assert '{"k7", (void *)k7, 0x0080 /* METH_FASTCALL */, NULL},' in source
    for name in native_library.UNREACHED:
        assert f"void {name}(void) {{ abort(); }}" in source


def test_libraries_are_private_and_listed_by_cache_info(tmp_path):
    compile_here(tmp_path)
    folder = tmp_path / "libraries"
    assert folder.stat().st_mode & 0o077 == 0
    for path in folder.iterdir():
        assert path.stat().st_mode & 0o077 == 0, path
    assert not list(folder.glob(".load-*"))  # the private copies loaded are gone
    names = [name for _, _, name, _ in cpu_cache.DiskCache(tmp_path).entries()]
    assert sum(name.startswith("library:") for name in names) == 1


def test_a_long_compile_says_which_kernel_it_is_on(caplog):
    import io

    from minixla.backends import cpu

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    ticks = iter([0.0, 0.4, 1.5, 2.5])
    stream = Terminal()
    progress = cpu.KernelProgress(
        3, "    # h = dot f32[8]\n    k0(p0, a1)\n", stream, lambda: next(ticks)
    )
    spec = KernelSpec("kernel", "", [], [], [], True, False)
    with caplog.at_level(logging.INFO, logger="minixla.compile"):
        progress.kernel("k0", spec, "compiled", 0.4)  # 0.4 s in: nothing shown yet
        assert stream.getvalue() == ""
        progress.kernel("k1", spec, "disk", 0.0)
        progress.kernel("k2", spec, "compiled", 1.0)
    progress.finish()
    assert stream.getvalue() == (
        "\r\x1b[Kminixla: 2/3 kernels (1.5 s)\r\x1b[Kminixla: 3/3 kernels (2.5 s)\r\x1b[K"
    )
    assert [r.getMessage() for r in caplog.records] == [
        "kernel 1/3 k0 for %h compiled in 0.40 s",
        "kernel 3/3 k2 for a native loop compiled in 1.00 s",
    ]


def test_scratch_too_big_for_the_stack_comes_from_malloc_and_is_linked(tmp_path):
    text = """HloModule big_topk
ENTRY e {
  x = f32[2,9000] parameter(0)
  ROOT t = (f32[2,5], s32[2,5]) topk(x), k=5, largest=true
}"""
    exe, _, warned = compile_here(tmp_path, text)
    (source,) = [s.source for s in exe.program.kernels.values()]
    assert "keys = h.heap_array(9000, np.int64)" in source and "h.free_array(keys)" in source
    (manifest,) = (tmp_path / "libraries").glob("*.json")
    assert not json.loads(manifest.read_text())["body"]["numba"] and not warned
    x = np.random.default_rng(1).standard_normal((2, 9000)).astype(np.float32)
    values, indices = exe(x)
    want = np.argsort(-x, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(indices, want)
    np.testing.assert_array_equal(values, np.take_along_axis(x, want, axis=1))


# Rows split across threads: a flat loop, a row reduction and a column reduction, large
# enough (2^22 of estimated work) for the pool to wake its workers.
SPLIT = """
HloModule split
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[373,1000] parameter(0)
  rows = f32[373] reduce(tanh(x), f32[] constant(0)), dimensions={1}, to_apply=add
  columns = f32[1000] reduce(x, f32[] constant(0)), dimensions={0}, to_apply=add
  ROOT out = (f32[373], f32[1000], f32[373,1000]) tuple(rows, columns, exponential(x))
}
"""


def split_here(tmp_path, monkeypatch, parts):
    from minixla.backends.cpu import blas_threads

    monkeypatch.setattr(blas_threads, "kernel_threads", lambda work, pooled=False: parts)
    exe = minixla.compile(SPLIT, backend="cpu", cache_dir=str(tmp_path), parallel_threshold=1)
    split = [name for name, spec in exe.program.kernels.items() if spec.parallel]
    pooled = {exe.program.namespace[name] for name in split} & set(blas_threads._pooled)
    return exe, split, pooled


@pytest.mark.parametrize("parts", [2, 3, 9])
def test_split_kernels_run_their_parts_in_the_librarys_pool(tmp_path, monkeypatch, parts):
    exe, split, pooled = split_here(tmp_path, monkeypatch, parts)
    assert split and len(pooled) == len(split)  # every split kernel is pooled
    x = np.random.default_rng(3).standard_normal((373, 1000)).astype(np.float32)
    want = minixla.compile(SPLIT, backend="interpreter")(x)
    for _ in range(50):  # parts handed over back to back, and after the workers slept
        for got, expected in zip(exe(x), want):
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    import time

    time.sleep(0.01)
    for got, expected in zip(exe(x), want):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    assert len(os.listdir("/proc/self/task")) >= parts  # the pool's workers are running


def test_a_forked_child_starts_a_pool_of_its_own(tmp_path, monkeypatch):
    exe, _, pooled = split_here(tmp_path, monkeypatch, 2)
    assert pooled
    x = np.random.default_rng(4).standard_normal((373, 1000)).astype(np.float32)
    want = [np.asarray(r) for r in exe(x)]  # the parent's workers are running now
    child = os.fork()
    if child == 0:  # the child has none of the parent's threads: its first split starts one
        status = 0 if all(np.array_equal(a, b) for a, b in zip(exe(x), want)) else 1
        grandchild = os.fork()  # and forks again with its own pool running
        if grandchild == 0:
            os._exit(0 if all(np.array_equal(a, b) for a, b in zip(exe(x), want)) else 1)
        _, grand_status = os.waitpid(grandchild, 0)
        os._exit(status or os.waitstatus_to_exitcode(grand_status))
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid:
            break
        time.sleep(0.01)
    else:
        os.kill(child, 9)
        pytest.fail("the forked child hung in a split kernel")
    assert os.waitstatus_to_exitcode(status) == 0
