"""The built-in layered layout of `minixla graph`: geometry checked on real modules, optimal
crossings on small graphs (against brute force), the standalone SVG, and the CLI's formats."""

import itertools
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import minixla
from minixla.cli import main
from minixla.text import graph
from minixla.text.graph import build_graph, layout_blocks, module_to_html, module_to_svg
from minixla.text.graph_layout import count_crossings, layered_layout

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT.parent / "shared" / "xla-suite" / "modules"
SVG = "{http://www.w3.org/2000/svg}"

# A residual block: %x feeds the last add across three layers, %c across two, and %w's
# two users sit in different layers.
RESIDUAL = """
HloModule residual

ENTRY %main (x: f32[4], w: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %w = f32[4] parameter(1)
  %a = f32[4] multiply(%x, %w)
  %b = f32[4] tanh(%a)
  %c = f32[4] negate(%b)
  %d = f32[4] exponential(%c)
  %e = f32[4] add(%d, %w)
  %f = f32[4] add(%e, %c)
  ROOT %out = f32[4] add(%f, %x)
}
"""

# Three producers and three consumers wired so that the order the text gives them in
# (p0 p1 p2 over q0 q1 q2) crosses, while some order has no crossing at all.
CROSSED = """
HloModule crossed

ENTRY %main (x: f32[4]) -> (f32[4], f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %p0 = f32[4] negate(%x)
  %p1 = f32[4] exponential(%x)
  %p2 = f32[4] tanh(%x)
  %q0 = f32[4] add(%p2, %p2)
  %q1 = f32[4] add(%p0, %p0)
  %q2 = f32[4] add(%p1, %p0)
  ROOT %t = (f32[4], f32[4], f32[4]) tuple(%q0, %q1, %q2)
}
"""

# K(2,2) between two layers plus a third: one crossing cannot be avoided.
KNOT = """
HloModule knot

ENTRY %main (x: f32[4]) -> (f32[4], f32[4]) {
  %x = f32[4] parameter(0)
  %a = f32[4] negate(%x)
  %b = f32[4] tanh(%x)
  %c = f32[4] add(%a, %b)
  %d = f32[4] multiply(%b, %a)
  %e = f32[4] subtract(%a, %d)
  ROOT %t = (f32[4], f32[4]) tuple(%c, %e)
}
"""

# Long edges (%a to %s, %c to %abc's user) whose dummies are ordered with the nodes.
FAN = """
HloModule fan

ENTRY %main (a: f32[4], b: f32[4], c: f32[4]) -> (f32[4], (f32[4], f32[4], f32[4])) {
  %a = f32[4] parameter(0)
  %b = f32[4] parameter(1)
  %c = f32[4] parameter(2)
  %nb = f32[4] negate(%b)
  %abc = (f32[4], f32[4], f32[4]) tuple(%a, %b, %c)
  %s = f32[4] add(%a, %nb)
  ROOT %t = (f32[4], (f32[4], f32[4], f32[4])) tuple(%s, %abc)
}
"""


def suite_sample() -> list[Path]:
    """Every 300th module of XLA's own test HLO (by name), the same ones on every run."""
    return sorted(SUITE.glob("*.hlo"))[::300] if SUITE.is_dir() else []


def real_modules():
    cases = [pytest.param(RESIDUAL, id="residual"), pytest.param(CROSSED, id="crossed")]
    cases += [
        pytest.param((ROOT / "examples" / name).read_text(), id=name)
        for name in ("mlp.hlo", "layer.hlo")
    ]
    from test_tools_graph import FUSED

    cases.append(pytest.param(FUSED, id="fused"))
    cases += [pytest.param(path.read_text(), id=path.stem) for path in suite_sample()]
    return cases


def hits(p, q, box) -> bool:
    """Whether segment p-q enters the inside of `box` (Liang-Barsky clipping)."""
    eps = 1e-6
    low, high = 0.0, 1.0
    dx, dy = q[0] - p[0], q[1] - p[1]
    for step, distance in (
        (-dx, p[0] - box.x - eps),
        (dx, box.right - eps - p[0]),
        (-dy, p[1] - box.y - eps),
        (dy, box.bottom - eps - p[1]),
    ):
        if step == 0:
            if distance < 0:
                return False
            continue
        t = distance / step
        if step < 0:
            low = max(low, t)
        else:
            high = min(high, t)
        if low > high:
            return False
    return True


def overlap(a, b) -> bool:
    return a.x < b.right and b.x < a.right and a.y < b.bottom and b.y < a.bottom


def check_layout(layout, edges) -> None:
    boxes = layout.boxes
    dummies = range(len(layout.names), len(layout.x))
    slots = {d: layout.slot(d) for d in dummies}
    everything = [*boxes.items(), *slots.items()]
    for (first, a), (second, b) in itertools.combinations(everything, 2):
        assert not overlap(a, b), f"{first} and {second} overlap"
    for a, b in edges:
        # layers respect edge direction: operands strictly above their users
        assert layout.layer[a] < layout.layer[b], (a, b)
        route, path = layout.route(a, b), layout.path(a, b)
        assert len(path) - 2 == layout.layer[b] - layout.layer[a] - 1
        assert [layout.ranks[v] for v in path] == list(range(layout.layer[a], layout.layer[b] + 1))
        assert route[0][1] == boxes[a].bottom and boxes[a].x <= route[0][0] <= boxes[a].right
        assert route[-1][1] == boxes[b].y and boxes[b].x <= route[-1][0] <= boxes[b].right
        for d in path[1:-1]:  # straight down through each of its own slots
            middle = slots[d].x + slots[d].width / 2
            assert (middle, slots[d].y) in route and (middle, slots[d].bottom) in route
        for p, q in itertools.pairwise(route):
            for name, box in boxes.items():
                assert name in (a, b) or not hits(p, q, box), f"{a}->{b} crosses {name}"
            for d, slot in slots.items():
                assert d in path or not hits(p, q, slot), f"{a}->{b} crosses dummy {d}"


@pytest.mark.parametrize("text", real_modules())
@pytest.mark.parametrize("expand", [False, True], ids=["folded", "expanded"])
def test_layout_geometry_on_real_modules(text, expand):
    g = build_graph(minixla.parse_hlo_module(text), expand=expand)
    blocks = layout_blocks(g)
    assert sorted(n for _, layout in blocks for n in layout.boxes) == sorted(
        node.id for node in g.nodes()
    )
    for cluster, layout in blocks:
        names = {node.id for node in cluster.nodes}
        check_layout(layout, {(a, b) for a, b, _ in g.edges if a in names})


def test_long_edges_go_around_the_nodes_in_between():
    layout = layout_blocks(build_graph(minixla.parse_hlo_module(RESIDUAL), expand=True))[0][1]
    assert layout.layer["out"] - layout.layer["x"] >= 3
    assert len(layout.slots("x", "out")) == layout.layer["out"] - layout.layer["x"] - 1
    between = {
        n for n, rank in layout.layer.items() if layout.layer["x"] < rank < layout.layer["out"]
    }
    assert {"a", "b", "c", "d", "e", "f"} <= between
    check_layout(layout, [("x", "out")])  # it passes beside them, through its own slots


def test_a_leaf_sits_right_above_its_only_user():
    """Layering shortens edges: a constant feeding only the last add moves down next to it,
    while %x, which also feeds the first multiply, stays on top."""
    text = RESIDUAL.replace(
        "ROOT %out = f32[4] add(%f, %x)",
        "%k = f32[4] constant({1, 2, 3, 4})\n  ROOT %out = f32[4] add(%f, %k)",
    )
    layout = layout_blocks(build_graph(minixla.parse_hlo_module(text), expand=True))[0][1]
    assert layout.layer["k"] == layout.layer["out"] - 1
    assert layout.layer["x"] == 0


def test_edges_out_of_one_value_share_one_trunk():
    """%k feeds an add in each of 40 layers: one dummy per layer it passes, not one per edge
    and layer (which would grow with the square of the depth)."""
    lines = [
        "HloModule uses",
        "ENTRY %main (p: f32[4]) -> f32[4] {",
        "  %p = f32[4] parameter(0)",
        "  %z = f32[] constant(1)",
        "  %k = f32[4] broadcast(%z), dimensions={}",
        "  %v0 = f32[4] negate(%p)",
    ]
    lines += [f"  %v{i} = f32[4] add(%v{i - 1}, %k)" for i in range(1, 41)]
    lines += ["  ROOT %r = f32[4] negate(%v40)", "}"]
    g = build_graph(minixla.parse_hlo_module("\n".join(lines)))
    layout = layout_blocks(g)[0][1]
    spans = [layout.layer[f"v{i}"] - layout.layer["k"] for i in range(1, 41)]
    assert max(spans) >= 39
    assert len(layout.x) - len(layout.names) == max(spans) - 1  # the trunk's dummies
    assert sum(span - 1 for span in spans) > 700  # what an own chain per edge would take
    check_layout(layout, [(a, b) for a, b, _ in g.edges])


def brute_force_fewest(layout) -> int:
    """The fewest crossings over every order of every layer (dummies included)."""
    rows = layout.order
    return min(
        count_crossings(list(choice), layout.down)
        for choice in itertools.product(*(itertools.permutations(r) for r in rows))
    )


SMALL = [
    pytest.param(CROSSED, True, id="crossed"),
    pytest.param(KNOT, True, id="knot"),
    pytest.param(FAN, True, id="fan"),
]
SMALL += [
    pytest.param((ROOT / "examples" / name).read_text(), False, id=name)
    for name in ("mlp.hlo", "layer.hlo")
]


@pytest.mark.parametrize("text, expand", SMALL)
def test_crossings_are_the_fewest_possible(text, expand):
    layout = layout_blocks(build_graph(minixla.parse_hlo_module(text), expand=expand))[0][1]
    assert math.prod(math.factorial(len(row)) for row in layout.order) < 10**4  # try them all
    fewest = brute_force_fewest(layout)
    assert layout.crossings() == fewest
    if text is CROSSED:  # the order the text gives the instructions in does cross
        written = [instr.name for instr in minixla.parse_hlo_module(text).entry.instructions]
        names = list(layout.boxes)
        as_written = [sorted(row, key=lambda v: written.index(names[v])) for row in layout.order]
        assert count_crossings(as_written, layout.down) > 0 == fewest
    if text is KNOT or text is FAN:
        assert fewest == 1


def test_count_crossings_counts_each_pair_of_crossing_edges():
    # 0,1,2 above 3,4,5: edges 0-5, 1-4, 2-3 pairwise cross (3); 0-3 crosses none of them
    down = [[5, 3], [4], [3], [], [], []]
    assert count_crossings([[0, 1, 2], [3, 4, 5]], down) == 3
    # mirrored above: 0-3 now crosses 1-4 only (it shares an end with 2-3), 0-5 nothing
    assert count_crossings([[2, 1, 0], [3, 4, 5]], down) == 1


def test_layout_is_deterministic_and_ignores_edge_repeats():
    sizes = {name: (40.0 + 7 * i, 30.0) for i, name in enumerate("abcdefg")}
    edges = [
        ("a", "c"),
        ("b", "c"),
        ("a", "g"),
        ("c", "d"),
        ("c", "e"),
        ("b", "f"),
        ("d", "g"),
        ("e", "g"),
        ("f", "g"),
        ("a", "c"),
    ]
    first, second = layered_layout(sizes, edges), layered_layout(dict(sizes), edges[:-1])
    assert first.boxes == second.boxes and first.x == second.x
    assert all(first.route(a, b) == second.route(a, b) for a, b in edges)
    check_layout(first, set(edges))


def test_an_edge_against_the_node_order_is_drawn_upwards():
    layout = layered_layout(
        {"a": (30.0, 20.0), "b": (30.0, 20.0), "c": (30.0, 20.0)},
        [("b", "a"), ("a", "c"), ("b", "c")],
    )
    route = layout.route("b", "a")
    assert layout.layer["a"] < layout.layer["b"]
    assert route[0][1] == layout.boxes["b"].y and route[-1][1] == layout.boxes["a"].bottom


def test_a_chain_of_a_thousand_instructions_lays_out():
    """bench/bench_graph_layout.py times a few thousand; this only checks the shape."""
    lines = [
        "HloModule chain",
        "ENTRY %main (p: f32[4]) -> f32[4] {",
        "  %v0 = f32[4] parameter(0)",
    ]
    for i in range(1, 1000):
        skip = f"%v{i - 1}" if i % 50 else f"%v{i - 50}"  # a residual edge every 50
        lines.append(f"  %v{i} = f32[4] add(%v{i - 1}, {skip})")
    lines += ["  ROOT %r = f32[4] negate(%v999)", "}"]
    layout = layout_blocks(build_graph(minixla.parse_hlo_module("\n".join(lines))))[0][1]
    assert len(layout.boxes) == 1000 and layout.crossings() == 0  # %v0 is folded into %v1
    assert layout.layer["r"] == 999 and len(layout.slots("v998", "v999")) == 0
    assert all(len(layout.slots(f"v{i - 50}", f"v{i}")) == 49 for i in range(100, 1000, 50))


# -- SVG ---------------------------------------------------------------------------------------
def test_svg_is_well_formed_and_holds_every_instruction(tmp_path):
    from test_tools_graph import FUSED

    module = minixla.parse_hlo_module(FUSED)
    svg = module_to_svg(module)
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    nodes = {
        g.find(f"{SVG}title").text: g.find(f"{SVG}desc").text
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "node"
    }
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.name in nodes:
                assert nodes[instr.name].startswith(instr.to_text())
            else:  # folded into each of its users
                assert graph.is_folded(instr)
                for user in instr.users:
                    assert instr.to_text() in nodes[user.name]
    paths = [p for p in root.iter(f"{SVG}path") if p.get("marker-end")]
    assert len(paths) == len({(a, b) for a, b, _ in build_graph(module).edges})
    boxes = [r for r in root.iter(f"{SVG}rect") if r.get("stroke-dasharray")]
    assert len(boxes) == 4  # one per called computation, as in the DOT drawing


def test_svg_and_html_draw_the_same_layout():
    module = minixla.parse_hlo_module(RESIDUAL)
    svg, page = module_to_svg(module), module_to_html(module)
    inline = page[page.index("<svg") : page.index("</svg>")]
    standalone = svg[svg.index("<svg") : svg.index("</svg>")]
    assert (
        re.sub(r"<desc>.*?</desc>", "", standalone, flags=re.S).replace(
            ' xmlns="http://www.w3.org/2000/svg"', ""
        )
        == inline
    )
    assert "http://" not in page


# -- the command -------------------------------------------------------------------------------
@pytest.fixture
def residual_file(tmp_path):
    path = tmp_path / "residual.hlo"
    path.write_text(RESIDUAL)
    return path


def test_format_flag_chooses_the_output(residual_file, tmp_path, capsys):
    module = minixla.parse_hlo_module(RESIDUAL)
    assert main(["graph", str(residual_file), "--format", "svg"]) == 0
    assert capsys.readouterr().out == module_to_svg(module)
    out = tmp_path / "graph.txt"  # --format wins over a name that says nothing
    assert main(["graph", str(residual_file), "--format", "HTML", "-o", str(out)]) == 0
    assert out.read_text() == module_to_html(module)
    assert main(["graph", str(residual_file), "-o", str(tmp_path / "g.svg")]) == 0
    ET.parse(tmp_path / "g.svg")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--format", "png"], "unknown format 'png': choose one of dot, svg, html"),
        (["--format", ""], "unknown format ''"),
        (
            ["-o", "g.pdf"],
            "cannot tell the format of g.pdf: use a .dot, .svg or .html name, or --format",
        ),
        (["-o", "noext"], "cannot tell the format of noext"),
    ],
)
def test_bad_formats_are_one_line_errors(
    residual_file, tmp_path, capsys, monkeypatch, argv, message
):
    monkeypatch.chdir(tmp_path)
    assert main(["graph", str(residual_file), *argv]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and message in captured.err
    assert list(tmp_path.iterdir()) == [residual_file]


def test_graphviz_layout_without_dot_is_a_one_line_error(
    residual_file, tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    for suffix in ("svg", "html"):
        out = tmp_path / f"g.{suffix}"
        assert main(["graph", str(residual_file), "--graphviz", "-o", str(out)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Graphviz" in err and not out.exists()
