"""minixla with one deliberately broken rewrite rule, for docs/debugging.md.

    python examples/broken_rule.py COMMAND ARGS...   # any `minixla` command, with the rule

The rule rewrites x - (-y) to x - y (right would be x + y) and is tried before the
algebraic simplifier's own rules, so every compile that runs algsimp miscompiles such code.
"""

import sys

from minixla.passes.algsimp import ALGSIMP
from minixla.passes.patterns import Rule, m, new


def subtract_negate_fast(root, x, y):
    return new("subtract", root.shape, x, y)  # wrong on purpose: x - (-y) is x + y


BROKEN = Rule(
    "subtract_negate_fast",
    m.Subtract(m.Any("x"), m.Negate(m.Any("y"))),
    subtract_negate_fast,
    ("root", "x", "y"),
)


def plant() -> None:
    if BROKEN not in ALGSIMP.rules:
        ALGSIMP.rules.insert(0, BROKEN)


if __name__ == "__main__":
    plant()
    from minixla.cli import main

    sys.exit(main(sys.argv[1:]))
