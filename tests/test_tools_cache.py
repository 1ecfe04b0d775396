"""`minixla cache info|clear` on a temporary $MINIXLA_CACHE_DIR."""

import sys

import pytest

from minixla.cli import main

cache = pytest.importorskip(
    "minixla.backends.cpu.cache", reason="the CPU backend's compilation cache is not in this build"
)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("MINIXLA_CACHE_DIR", str(root))
    return root


def fill(root) -> None:
    """One kernel and one compiled module, written through the cache's own API."""
    disk = cache.DiskCache(root)
    source = "def kernel(out):\n    pass\n"
    disk.write_source("ab12", source)
    disk.write_manifest("ab12", source, [])
    disk.store_module("k1", {"kernels": ["ab12"]})


def test_info_on_a_cache_not_created_yet(cache_dir, capsys):
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert f"location  {cache_dir} ($MINIXLA_CACHE_DIR, not created yet)" in out
    assert "entries   0 (0 kernels, 0 modules)" in out
    assert "size      0 B" in out
    assert "compiles  0 hits, 0 misses" in out


def test_info_counts_entries_and_clear_removes_them(cache_dir, capsys):
    fill(cache_dir)
    assert main(["cache", "info"]) == 0
    out = capsys.readouterr().out
    assert "entries   2 (1 kernels, 1 modules)" in out
    size = sum(p.stat().st_size for p in cache_dir.rglob("*") if p.is_file())
    assert f"size      {size} B" in out
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"cleared 2 entries from {cache_dir}\n"
    assert not cache_dir.exists()
    assert main(["cache", "info"]) == 0
    assert "entries   0" in capsys.readouterr().out


def test_clear_refuses_a_directory_that_is_not_only_the_cache(cache_dir, capsys):
    fill(cache_dir)
    (cache_dir / "notes.txt").write_text("mine")
    assert main(["cache", "clear"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not clearing" in err and "notes.txt" in err
    assert (cache_dir / "notes.txt").exists() and (cache_dir / "modules").exists()


def test_a_build_without_the_cache_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "minixla.backends.cpu.cache", None)
    assert main(["cache", "info"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("minixla cache: the compilation cache is not available")
    assert err.count("\n") == 1


def test_an_unknown_action_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "purge"])
    assert exit_.value.code == 2
    assert "invalid choice: 'purge'" in capsys.readouterr().err
