"""Whole programs in the cpu cache (cpu/programs.py) and the in-process compile memo
(runtime/compile_memo.py): keys cover every option, hits skip the passes and give the same bits
as misses, and a damaged or swapped entry is a warning and a recompile."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import minixla
from minixla.backends import compile as compile_api
from minixla.backends import cpu
from minixla.backends.cpu import cache as cpu_cache
from minixla.backends.cpu import jit, programs
from minixla.runtime import compile_memo

LOOP = """
HloModule looped
cond {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  s = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[64] get-tuple-element(s), index=1
  w = f32[64] tanh(v)
  u = f32[64] multiply(w, f32[64] broadcast(f32[] constant(1.5)), dimensions={})
  ROOT t = (s32[], f32[64]) tuple(add(i, s32[] constant(1)), u)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64] exponential(x)
  z = f32[64] sine(y)
  l = (s32[], f32[64]) while((s32[], f32[64]) tuple(s32[] constant(0), z)), condition=cond, body=body
  r = f32[64] get-tuple-element(l), index=1
  ROOT o = (f32[64], f32[]) tuple(r, reduce(add(r, y), f32[] constant(0)), dimensions={0}, to_apply=add)
}
"""
X = np.linspace(-3, 1, 64, dtype=np.float32)
OPTION_SETS = [
    {},
    {"memory_limit_bytes": 1 << 20, "max_while_iterations": 10},
    {"flush_denormals": True, "strict": True, "parallel_threshold": 1},
]


def fresh_compile(tmp_path, text=LOOP, **options):
    """Compiles as a new process would: no kernels or executables kept in memory."""
    jit.forget_in_memory()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exe = minixla.compile(text, backend="cpu", cache_dir=str(tmp_path), **options)
    return exe, [str(w.message) for w in caught if "minixla" in str(w.message)]


def program_hits() -> int:
    return minixla.metrics().get("cpu.cache.program_hit", {}).get("count", 0)


def bits(result) -> list[bytes]:
    return [np.asarray(r).tobytes() for r in result]


def test_every_compile_option_is_part_of_the_key():
    base = compile_memo.key(LOOP, "cpu", {})
    names = compile_api.COMPILE_OPTIONS + cpu.BACKEND.options
    for name in names:
        keyed = compile_memo.key(LOOP, "cpu", {name: 7})
        if name in compile_api.DUMP_OPTIONS:
            assert keyed is None, name  # dumps are side effects: never served from a cache
        else:
            assert keyed is not None and keyed.digest != base.digest, name
            assert programs.program_key(keyed) != programs.program_key(base), name


def test_key_covers_program_backend_and_flags(monkeypatch):
    base = compile_memo.key(LOOP, "cpu", {})
    assert compile_memo.key(LOOP.replace("1.5", "2.5"), "cpu", {}).digest != base.digest
    assert compile_memo.key(LOOP, "interpreter", {}).digest != base.digest
    monkeypatch.setenv("MINIXLA_FLAGS", "--flush_denormals")
    assert compile_memo.key(LOOP, "cpu", {}).digest != base.digest
    assert compile_memo.key(LOOP, "cpu", {"passes": [object()]}) is None  # no faithful text


def test_second_compile_in_a_process_shares_the_first(tmp_path):
    first, _ = fresh_compile(tmp_path)
    before = minixla.metrics().get("compile.memo.hit", {}).get("count", 0)
    second = minixla.compile(LOOP, backend="cpu", cache_dir=str(tmp_path))
    assert minixla.metrics()["compile.memo.hit"]["count"] == before + 1
    assert second is not first and second.program is first.program
    assert bits(second(X)) == bits(first(X)) and second.executions == 1
    other = minixla.compile(LOOP, backend="cpu", cache_dir=str(tmp_path), strict=True)
    assert other.program is not first.program


RNG = """HloModule draws
ENTRY e {
  lo = f32[] parameter(0)
  ROOT r = f32[4] rng(lo, f32[] constant(1)), distribution=rng_uniform
}"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_a_memo_hit_starts_its_own_random_stream(tmp_path, backend):
    # as a fresh compile does: the twin's first draw is the first executable's first draw
    first = (
        minixla.compile(RNG, backend=backend, cache_dir=str(tmp_path))
        if backend == "cpu"
        else minixla.compile(RNG, backend=backend)
    )
    draws = [first(np.float32(0)) for _ in range(3)]
    assert not np.array_equal(draws[0], draws[1])
    twin = (
        minixla.compile(RNG, backend=backend, cache_dir=str(tmp_path))
        if backend == "cpu"
        else minixla.compile(RNG, backend=backend)
    )
    assert twin is not first and twin._run is first._run  # shared compiled code
    assert [bits(twin(np.float32(0))) for _ in range(3)] == [bits(d) for d in draws]
    assert bits(first(np.float32(0))) != bits(draws[0])  # the first one goes on with its own


def test_memo_hits_raise_the_first_compiles_warnings_again(tmp_path):
    first, _ = fresh_compile(tmp_path)
    key = compile_memo.key(LOOP, "cpu", {"cache_dir": str(tmp_path), "strict": False})
    with warnings.catch_warnings(record=True) as recorded:
        warnings.simplefilter("always")
        warnings.warn("minixla: a compile-time warning", UserWarning, stacklevel=1)
    compile_memo.remember(key, first, recorded)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = minixla.compile(LOOP, backend="cpu", cache_dir=str(tmp_path), strict=False)
    assert again.program is first.program
    assert [str(w.message) for w in caught] == ["minixla: a compile-time warning"]


@pytest.mark.parametrize("options", OPTION_SETS, ids=lambda o: ",".join(o) or "defaults")
def test_program_hits_give_the_same_bits_as_misses(tmp_path, options):
    cold, _ = fresh_compile(tmp_path, **options)
    hits = program_hits()
    warm, warned = fresh_compile(tmp_path, **options)
    assert program_hits() == hits + 1 and not warned
    assert set(warm.kernel_outcomes) <= {"disk"}
    assert bits(warm(X)) == bits(cold(X))
    assert warm.module.to_text() == cold.module.to_text()
    if "memory_limit_bytes" in options:
        assert warm.rematerialization == cold.rematerialization is not None


def test_options_that_change_the_program_do_not_share_entries(tmp_path):
    fresh_compile(tmp_path)
    hits = program_hits()
    limited, _ = fresh_compile(tmp_path, max_while_iterations=3)
    assert program_hits() == hits
    with pytest.raises(minixla.MinixlaError, match="max_while_iterations"):
        limited(X)


def entry_path(tmp_path, text=LOOP):
    key = compile_memo.key(text, "cpu", {"cache_dir": str(tmp_path)})
    return cpu_cache.DiskCache(tmp_path).program_path(programs.program_key(key))


@pytest.mark.parametrize("damage", ["garbage", "swapped", "empty body"])
def test_a_damaged_entry_warns_once_and_recompiles(tmp_path, damage):
    cold, _ = fresh_compile(tmp_path)
    other_text = LOOP.replace("1.5", "0.5")
    fresh_compile(tmp_path, other_text)
    mine, other = entry_path(tmp_path), entry_path(tmp_path, other_text)
    assert mine.exists() and other.exists()
    if damage == "garbage":
        mine.write_bytes(mine.read_bytes()[:-20] + b"\x80garbage")
    elif damage == "swapped":
        mine.write_bytes(other.read_bytes())
    else:
        mine.write_text(json.dumps({"sha256": "0", "body": {}}))
    hits = program_hits()
    again, warned = fresh_compile(tmp_path)
    assert program_hits() == hits
    assert len(warned) == 1 and "corrupt compilation cache entry program" in warned[0]
    assert bits(again(X)) == bits(cold(X))
    healed, warned = fresh_compile(tmp_path)
    assert program_hits() == hits + 1 and not warned


def test_an_entry_naming_other_kernels_is_dropped(tmp_path):
    cold, _ = fresh_compile(tmp_path)
    path = entry_path(tmp_path)
    disk = cpu_cache.DiskCache(tmp_path)
    body = json.loads(path.read_text())["body"]
    body["kernels"] = body["kernels"][::-1] + ["0" * 32]
    disk.store_program(path.stem, body)  # a sound checksum, a stale body
    again, warned = fresh_compile(tmp_path)
    assert len(warned) == 1 and "not the ones the module needs" in warned[0]
    assert bits(again(X)) == bits(cold(X))


def test_a_changed_source_stamp_is_a_miss(tmp_path, monkeypatch):
    fresh_compile(tmp_path)
    monkeypatch.setattr(programs, "source_stamp", lambda: "edited")
    hits = program_hits()
    fresh_compile(tmp_path)
    assert program_hits() == hits


def test_entries_are_private_and_counted_by_cache_info(tmp_path):
    fresh_compile(tmp_path)
    path = entry_path(tmp_path)
    assert path.stat().st_mode & 0o077 == 0 and path.parent.stat().st_mode & 0o077 == 0
    assert any(
        name.startswith("program:") for _, _, name, _ in cpu_cache.DiskCache(tmp_path).entries()
    )


WIDE = """
HloModule wide
ENTRY main {
  x = f32[262144] parameter(0)
  ROOT t = f32[262144] tanh(add(x, x))
}
"""


def test_programs_generated_for_other_core_counts_are_other_entries(tmp_path, monkeypatch):
    """A process limited to one core (taskset) generates serial kernels; it must not find the
    threaded program of a process with every core, or each would drop the other's entry."""
    threaded, _ = fresh_compile(tmp_path, WIDE)
    assert "run_split" in threaded.program.source
    monkeypatch.setattr(programs.driver, "PARALLEL_WORK", 1 << 62)
    hits = program_hits()
    serial, warned = fresh_compile(tmp_path, WIDE)
    assert not warned and program_hits() == hits
    assert "run_split" not in serial.program.source
    x = np.linspace(-2, 2, 262144, dtype=np.float32)
    assert bits([serial(x)]) == bits([threaded(x)])
    monkeypatch.undo()
    again, warned = fresh_compile(tmp_path, WIDE)
    assert not warned and program_hits() == hits + 1 and "run_split" in again.program.source
