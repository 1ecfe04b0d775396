"""Every opcode the package spells out as a string names a row of the opcode table.

A comparison such as `instr.opcode == "dynamic-update-slce"` never matches and fails silently;
this test reads the source of every module and checks each string that is compared with an
`opcode` (==, !=, in, not in, against a literal or a literal tuple/list/set) or looked up with
`opdef(...)` / `OPCODES[...]`."""

from __future__ import annotations

import ast
from pathlib import Path

from minixla.ir.opcodes import OPCODES

PACKAGE = Path(__file__).resolve().parent.parent / "minixla"


def _is_opcode(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "opcode"
        or isinstance(node, ast.Name)
        and node.id == "opcode"
    )


def _strings(node: ast.AST) -> list[ast.Constant]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("frozenset", "set")
        and node.args
    ):
        return _strings(node.args[0])
    return []


def opcode_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string used as an opcode in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_opcode(side) for side in sides):
                for side in sides:
                    found += [(c.lineno, c.value) for c in _strings(side)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "opdef"
            and node.args
        ):
            found += [(c.lineno, c.value) for c in _strings(node.args[0])]
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name)
            and node.value.id == "OPCODES"
        ):
            found += [(c.lineno, c.value) for c in _strings(node.slice)]
    return found


def test_every_opcode_literal_names_a_row_of_the_table():
    unknown, seen = [], 0
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, text in opcode_literals(path.read_text()):
            seen += 1
            if text not in OPCODES:
                unknown.append(f"{path.relative_to(PACKAGE)}:{line}: {text!r}")
    assert unknown == []
    assert seen > 100  # the scan finds the package's opcode comparisons


def test_the_scan_catches_a_misspelt_opcode():
    source = (
        "def f(instr):\n"
        "    if instr.opcode == 'dynamic-update-slce':\n"
        "        return instr.opcode in ('add', 'multiplyy')\n"
        "    return opdef('reduce')\n"
    )
    assert [text for _, text in opcode_literals(source) if text not in OPCODES] == [
        "dynamic-update-slce",
        "multiplyy",
    ]
