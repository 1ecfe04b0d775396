"""The floors of the package, checked from its imports: a module imports only from its own
floor or the floors below it, at module level or inside a function alike (a function-level
import does not make a climb legal). docs/architecture.md draws the same picture."""

from __future__ import annotations

import ast
import re
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
    (
        "frontend",
        {
            "frontend",
            "transforms",
            "pallas",
            "torch",
            "lax",
            "numpy",
            "nn",
            "random",
            "tree_util",
            "sharding",
        },
    ),
    ("tools", {"tools"}),
    ("cli", {"cli", "__main__"}),
    ("facade", {"__init__", "testing"}),
]
LEVEL = {part: level for level, (_, parts) in enumerate(FLOORS) for part in parts}
NAME = {part: name for name, parts in FLOORS for part in parts}


def _part_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE).parts
    return relative[0].removesuffix(".py")


def _imported_names(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, dotted name) for every import in `tree`, relative ones resolved from `package`
    (`from .x import y` names the module `package.x.y` may be)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                here = package.split(".")
                base = here[: len(here) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
        else:
            continue
        found += [(node.lineno, name) for name in names]
    return found


def _imported_parts(tree: ast.Module, package: str) -> list[tuple[int, str]]:
    """(line, top-level part of minixla) for every import of a minixla module in `tree`."""
    found = []
    for line, name in _imported_names(tree, package):
        parts = name.split(".")
        if parts[0] != "minixla":
            continue
        part = parts[1] if len(parts) > 1 else "__init__"
        if not ((PACKAGE / part).is_dir() or (PACKAGE / f"{part}.py").exists()):
            part = "__init__"  # `from minixla import name`: a name of the facade
        found.append((line, part))
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
                problems.append(
                    f"{path.relative_to(PACKAGE)}:{line}: imports minixla.{target},"
                    f" which is on no floor"
                )
            elif LEVEL[target] > LEVEL[source]:
                problems.append(
                    f"{path.relative_to(PACKAGE)}:{line}: {NAME[source]} imports "
                    f"minixla.{target} from the {NAME[target]} floor above it"
                )
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
    assert climbs() == ["ir/bad.py:2: ir imports minixla.backends from the backends floor above it"]


@pytest.mark.parametrize(
    "part",
    sorted(
        {
            p.relative_to(PACKAGE).parts[0].removesuffix(".py")
            for p in PACKAGE.iterdir()
            if p.suffix == ".py" or (p / "__init__.py").exists()
        }
    ),
)
def test_every_part_of_the_package_is_on_a_floor(part):
    assert part in LEVEL


# The native backends share backends/codegen/ and are otherwise independent of each other.
BACKEND_PACKAGES = ("cpu", "cuda")


def sideways_imports() -> list[str]:
    """Imports of one backend package's modules from another's, or from the shared codegen
    package, which is below both (the backends' registry is not a backend)."""
    problems = []
    for backend in (*BACKEND_PACKAGES, "codegen"):
        others = [f"minixla.backends.{b}" for b in BACKEND_PACKAGES if b != backend]
        for path in sorted((PACKAGE / "backends" / backend).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for line, name in _imported_names(tree, _package_name(path)):
                hit = [o for o in others if name == o or name.startswith(o + ".")]
                if hit:
                    problems.append(
                        f"{path.relative_to(PACKAGE)}:{line}: {backend} imports "
                        f"{name}; shared code belongs in backends/codegen"
                    )
    return problems


def test_backends_import_only_codegen_not_each_other():
    """cpu and cuda share backends/codegen/ and nothing else; codegen imports neither."""
    assert sideways_imports() == []


def test_the_checker_sees_a_sideways_import(tmp_path, monkeypatch):
    fake = tmp_path / "minixla" / "backends"
    for backend in BACKEND_PACKAGES:
        (fake / backend).mkdir(parents=True)
        (fake / backend / "__init__.py").write_text("")
    (fake / "cuda" / "driver.py").write_text(
        "from ..codegen import plan\ndef f():\n    from ..cpu.thunks import dot\n"
    )
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path / "minixla")
    assert sideways_imports() == [
        "backends/cuda/driver.py:3: cuda imports "
        "minixla.backends.cpu.thunks; shared code belongs in "
        "backends/codegen"
    ]


def test_backends_reuse_code_by_calling_it_not_by_rebinding_it():
    """Helpers shared between targets are built by plain functions (codegen/helpers.py), not by
    copying code objects into another namespace or writing into a module's globals()."""
    # (llvmlite's ir.FunctionType is an LLVM function type, not a Python function)
    rebinding = re.compile(r"(?<!ir\.)FunctionType\(|\.__code__\b|globals\(\)\.update")
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in sorted((PACKAGE / "backends").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if rebinding.search(line)
    ]
    assert found == []
