"""The floors of the package, checked from its imports: a module imports only from its own
floor or the floors below it, at module level or inside a function alike (a function-level
import does not make a climb legal). docs/architecture.md draws the same picture."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "minixla"

# Lowest first. A top-level package or module of minixla belongs to exactly one floor.
FLOORS = [
    ("ir", {"ir", "errors", "version"}),
    ("reference", {"reference"}),
    ("text", {"text"}),
    ("passes", {"passes"}),
    ("runtime", {"runtime", "distributed"}),
    ("backends", {"backends"}),
    ("frontend", {"frontend", "transforms", "pallas", "torch",
                  "lax", "numpy", "nn", "random", "tree_util", "sharding"}),
    ("tools", {"tools"}),
    ("cli", {"cli", "__main__"}),
    ("facade", {"__init__", "testing"}),
]
LEVEL = {part: level for level, (_, parts) in enumerate(FLOORS) for part in parts}
NAME = {part: name for name, parts in FLOORS for part in parts}


def _part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE).parts
    return relative[0].removesuffix(".py")


def _imported_parts(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, top-level part of minixla) for every import of a minixla module in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = package.split(".")
                base = here[:len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "minixla":
                continue
            part = parts[1] if len(parts) > 1 else "__init__"
            if not ((PACKAGE / part).is_dir() or (PACKAGE / f"{part}.py").exists()):
                part = "__init__"  # `from minixla import name`: a name of the facade
            found.append((node.lineno, part))
    return found


def _package_name(path: Path) -> str:
    """The dotted name of the package that a relative import in `path` starts from."""
    parts = ("minixla",) + path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1])


def climbs() -> list[str]:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _part_of(path)
        if source not in LEVEL:
            problems.append(f"{path.relative_to(PACKAGE)}: on no floor; add it to FLOORS")
            continue
        tree = ast.parse(path.read_text(), str(path))
        for line, target in _imported_parts(tree, _package_name(path)):
            if target not in LEVEL:
                problems.append(f"{path.relative_to(PACKAGE)}:{line}: imports minixla.{target},"
                                f" which is on no floor")
            elif LEVEL[target] > LEVEL[source]:
                problems.append(f"{path.relative_to(PACKAGE)}:{line}: {NAME[source]} imports "
                                f"minixla.{target} from the {NAME[target]} floor above it")
    return problems


def test_no_module_imports_from_a_floor_above_its_own():
    assert climbs() == []


def test_the_checker_sees_a_climb(tmp_path, monkeypatch):
    fake = tmp_path / "minixla"
    (fake / "ir").mkdir(parents=True)
    (fake / "ir" / "__init__.py").write_text("")
    (fake / "ir" / "bad.py").write_text("def f():\n    from ..backends import get\n")
    (fake / "backends").mkdir()
    (fake / "backends" / "__init__.py").write_text("from ..ir import bad\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    assert climbs() == ["ir/bad.py:2: ir imports minixla.backends from the backends floor "
                        "above it"]


@pytest.mark.parametrize("part", sorted({p.relative_to(PACKAGE).parts[0].removesuffix(".py")
                                         for p in PACKAGE.iterdir()
                                         if p.suffix == ".py" or (p / "__init__.py").exists()}))
def test_every_part_of_the_package_is_on_a_floor(part):
    assert part in LEVEL
