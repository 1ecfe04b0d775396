"""Generates docs/ops.md from the opcode table: `python -m minixla.tools.docgen > docs/ops.md`.

A test checks the committed file matches, so the table in the docs cannot drift from the code.
"""

from __future__ import annotations

from ..ir.opcodes import ELEMENTWISE, OPCODES


def _arity(arity) -> str:
    if arity is None:
        return "*"
    if isinstance(arity, tuple):
        return f"{arity[0]}-{'*' if arity[1] is None else arity[1]}"
    return str(arity)


def _partials(partials) -> str:
    if partials is None:
        return "-"
    if all(formula == "0" for formula in partials):
        return "none"
    return "; ".join(f"`{formula}`" for formula in partials)


def ops_markdown() -> str:
    from ..reference.evaluator import handlers

    interpreted = handlers()
    lines = [
        "# HLO opcodes",
        "",
        "Generated from `minixla/ir/opcodes.py` by `python -m minixla.tools.docgen`; do not edit.",
        "Attributes marked `!` are required; `*` arity means variadic. *Interpreter* says whether",
        "the reference interpreter evaluates the op (the parser, printer and verifier accept all).",
        "*Element kinds* are what an elementwise op accepts; *partials* are its derivatives with",
        "respect to each operand (`x`, `y`, ...; `out` is the result), as autodiff reads them;",
        "`none` means the result carries no tangent.",
        "",
        "| opcode | arity | kind | attributes | calls | shape may be omitted | interpreter "
        "| element kinds | partials |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in sorted(OPCODES.items()):
        attrs = ", ".join(f"`{a}`" for a in row.attrs) or "-"
        calls = ", ".join(f"`{c}`" for c in row.calls) or "-"
        evaluated = "yes" if name in interpreted or name == "parameter" else "no"
        kinds = ", ".join(sorted(row.kinds)) if row.kind == ELEMENTWISE else "-"
        lines.append(
            f"| `{name}` | {_arity(row.arity)} | {row.kind} | {attrs} | {calls} | "
            f"{'yes' if row.shape_optional else 'no'} | {evaluated} | {kinds} | "
            f"{_partials(row.partials)} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(ops_markdown(), end="")
