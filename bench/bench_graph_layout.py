"""How long `minixla graph`'s built-in layout takes on big modules.

    chain:  N adds in a row, each 50th also taking the value 50 back (a residual edge spanning
            50 layers, so 49 dummies each), drawn with its parameter folded
    wide:   N/4 independent chains of four elementwise ops over one parameter, joined by one
            tuple (the parameter drawn as a node with N/4 users, --expand)

Prints seconds for the layout alone and for the whole SVG text (median of REPS runs), as CPU
time of this process (what a shared, loaded machine still measures fairly) and wall time.
Then, for GRAPHS random DAGs of 5-10 nodes small enough to try every order of every layer,
how often the layout's crossings are more than the fewest possible.
Run: python bench/bench_graph_layout.py [N]
"""

import itertools
import math
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import minixla  # noqa: E402
from minixla.text.graph import build_graph, layout_blocks, module_to_svg  # noqa: E402
from minixla.text.graph_layout import count_crossings, layered_layout  # noqa: E402

REPS, GRAPHS = 3, 400


def chain(n: int) -> str:
    lines = [
        "HloModule chain",
        "ENTRY %main (p: f32[4]) -> f32[4] {",
        "  %v0 = f32[4] parameter(0)",
    ]
    for i in range(1, n):
        other = f"%v{i - 50}" if i % 50 == 0 else f"%v{i - 1}"
        lines.append(f"  %v{i} = f32[4] add(%v{i - 1}, {other})")
    return "\n".join(lines + [f"  ROOT %r = f32[4] negate(%v{n - 1})", "}"])


def wide(n: int) -> str:
    lanes = n // 4
    lines = ["HloModule wide", "ENTRY %main (p: f32[4]) -> f32[4] {", "  %p = f32[4] parameter(0)"]
    for k in range(lanes):
        lines += [
            f"  %a{k} = f32[4] negate(%p)",
            f"  %b{k} = f32[4] exponential(%a{k})",
            f"  %c{k} = f32[4] tanh(%b{k})",
            f"  %d{k} = f32[4] add(%c{k}, %p)",
        ]
    shape = "(" + ", ".join(["f32[4]"] * lanes) + ")"
    operands = ", ".join(f"%d{k}" for k in range(lanes))
    return "\n".join(lines + [f"  ROOT %t = {shape} tuple({operands})", "}"])


def median_seconds(fn) -> str:
    cpu, wall = [], []
    for _ in range(REPS):
        start_cpu, start_wall = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - start_cpu)
        wall.append(time.perf_counter() - start_wall)
    return f"{statistics.median(cpu):.2f} s cpu ({statistics.median(wall):.2f} s wall)"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    for name, text, expand in (("chain", chain(n), False), ("wide", wide(n), True)):
        module = minixla.parse_hlo_module(text)
        graph = build_graph(module, expand=expand)
        blocks = layout_blocks(graph)
        layout = blocks[0][1]
        dummies = sum(len(row) for row in layout.order) - len(layout.boxes)
        print(
            f"{name}: {len(graph.nodes())} nodes, {len(graph.edges)} edges, "
            f"{len(layout.order)} layers, {dummies} dummies, {layout.crossings()} crossings"
        )
        print(
            f"  layout {median_seconds(lambda: layout_blocks(graph))}, "
            f"svg {median_seconds(lambda: module_to_svg(module, expand=expand))}"
        )

    tried = above = 0
    rng = random.Random(1)
    for _ in range(GRAPHS):
        count = rng.randint(5, 10)
        sizes = {f"n{i}": (rng.choice([30.0, 60.0, 90.0]), 20.0) for i in range(count)}
        edges = set()
        for _ in range(rng.randint(count, 2 * count)):
            a, b = sorted(rng.sample(range(count), 2))
            edges.add((f"n{a}", f"n{b}"))
        layout = layered_layout(sizes, sorted(edges))
        if math.prod(math.factorial(len(row)) for row in layout.order) > 20000:
            continue
        fewest = min(
            count_crossings([list(row) for row in rows], layout.down)
            for rows in itertools.product(*(itertools.permutations(r) for r in layout.order))
        )
        tried += 1
        above += layout.crossings() > fewest
    print(f"crossings: above the minimum on {above} of {tried} small random graphs")


if __name__ == "__main__":
    main()
