"""`minixla cache info` / `minixla cache clear`: the CPU backend's compilation cache.

The cache lives in $MINIXLA_CACHE_DIR (default ~/.cache/minixla; see
minixla/backends/cpu/cache.py for its layout). `info` prints the location, the number of
entries (kernels and compiled modules), their size and the hit and miss counts; `clear`
deletes them.
"""

from __future__ import annotations

import argparse
import importlib
import os

from .common import ToolError

# What the cache itself keeps under its root; anything else means the root is not (only) ours.
_OWN = ("kernels", "modules", "programs", "libraries", "environment", "stats.json", "stats.lock")


def _cache_module():
    try:
        return importlib.import_module("minixla.backends.cpu.cache")
    except ImportError as exc:
        raise ToolError(f"the compilation cache is not available in this build ({exc})") from None


def human_size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return ""  # unreachable


def info_lines(disk, cache) -> list[str]:
    entries = disk.entries()
    modules = sum(1 for entry in entries if entry[2].startswith("module:"))
    programs = sum(1 for entry in entries if entry[2].startswith("program:"))
    libraries = sum(1 for entry in entries if entry[2].startswith("library:"))
    source = "$MINIXLA_CACHE_DIR" if os.environ.get("MINIXLA_CACHE_DIR") else "default"
    enabled = "yes" if cache.is_enabled({}) else "no ($MINIXLA_CACHE is off)"
    size = sum(entry[1] for entry in entries)
    stats = disk.stats()
    return [
        f"location  {disk.root} ({source}{'' if disk.root.exists() else ', not created yet'})",
        f"entries   {len(entries)} ({len(entries) - modules - programs - libraries} kernels, "
        f"{modules} modules{f', {programs} programs' if programs else ''}"
        f"{f', {libraries} libraries' if libraries else ''})",
        f"size      {human_size(size)} (limit {human_size(disk.max_bytes)})",
        f"compiles  {stats['hits']} hits, {stats['misses']} misses",
        f"enabled   {enabled}",
    ]


def clear(disk) -> int:
    """Deletes every entry; refuses a root that holds files the cache did not write."""
    if not disk.root.exists():
        return 0
    if not disk.root.is_dir():
        raise ToolError(f"{disk.root} is not a directory")
    foreign = sorted(
        p.name for p in disk.root.iterdir() if p.name not in _OWN and not p.name.startswith(".")
    )
    if foreign:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise ToolError(
            f"not clearing {disk.root}: it holds files that are not the cache's "
            f"({shown}); check $MINIXLA_CACHE_DIR"
        )
    count = len(disk.entries())
    disk.clear()
    return count


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=("info", "clear"),
        help="info: location, entries, size; clear: delete every entry",
    )


def main(args) -> int:
    cache = _cache_module()
    disk = cache.DiskCache()
    if args.action == "info":
        print("\n".join(info_lines(disk, cache)))
        return 0
    count = clear(disk)
    print(f"cleared {count} entries from {disk.root}")
    return 0
