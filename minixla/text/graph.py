"""Drawing a module as a graph: DOT, SVG and self-contained HTML, as XLA's --xla_dump_as_dot.

Every instruction is a node coloured by its kind (elementwise, data movement, reduction,
dot/convolution, control flow, fusion, ...); every computation other than the entry (a fusion's
fused computation, a reduce's `to_apply`, a while body) is one cluster, nested inside the
computation of its first caller, with a dashed edge from its root to that caller (the
others name it in their labels, e.g. `to_apply=%add`). Edges run operand -> user and carry the
operand's shape. Constants and parameters are folded into their users' labels unless
`expand=True`, which keeps long graphs readable.

SVG and HTML are drawn with a layered (Sugiyama-style) layout of our own (graph_layout.py):
long edges get routed through slots of their own instead of behind other nodes, and the drawing
is the same on every machine; `use_dot=True` uses Graphviz's `dot` instead. HTML is one
self-contained file, an inline SVG where clicking a node shows its HLO text. The built-in
drawing puts each called computation in a box of its own under the entry's nodes.
`module_to_dot(module)` is what `--dump_as_dot` writes. The dumps of the pass pipeline draw
through this module, so it sits on the text floor, below the passes.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from itertools import pairwise

from ..errors import MinixlaError
from ..ir.instruction import HloInstruction
from .graph_layout import Layout, layered_layout


class GraphvizError(MinixlaError):
    """Graphviz's `dot` is missing or failed."""


KIND_STYLE = {
    "elementwise": ("#dbeafe", "elementwise"),
    "movement": ("#dcfce7", "data movement"),
    "reduction": ("#fde68a", "reduction"),
    "contraction": ("#fca5a5", "dot / convolution"),
    "control": ("#e9d5ff", "control flow"),
    "fusion": ("#a5b4fc", "fusion"),
    "collective": ("#fbcfe8", "collective"),
    "leaf": ("#f3f4f6", "parameter / constant"),
    "other": ("#e5e7eb", "other"),
}
_FOLDED = ("parameter", "constant")
_MAX_ATTR = 28  # longer attribute values stay out of labels (click the node for the full text)


@dataclass
class Node:
    id: str
    instr: HloInstruction
    lines: list[str]
    kind: str
    folded: list = field(default_factory=list)  # operands drawn inside this node's label


@dataclass
class Cluster:
    id: str
    comp: object
    label: str
    nodes: list[Node] = field(default_factory=list)
    children: list["Cluster"] = field(default_factory=list)


@dataclass
class Graph:
    """What both renderers draw: clusters of nodes, data edges and call edges."""

    name: str
    top: Cluster  # the entry computation's nodes, drawn outside any cluster
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # (from, to, shape)
    calls: list[tuple[str, str, str]] = field(default_factory=list)  # (callee root, caller, cl.)

    def clusters(self):
        stack = list(reversed(self.top.children))
        while stack:
            cluster = stack.pop()
            yield cluster
            stack.extend(reversed(cluster.children))

    def nodes(self) -> list[Node]:
        return self.top.nodes + [n for c in self.clusters() for n in c.nodes]


def kind_of(instr) -> str:
    return "fusion" if instr.opcode == "fusion" else instr.opdef.kind


def is_folded(instr, expand: bool = False) -> bool:
    """Constants and parameters that feed something are drawn inside their users' labels."""
    return (
        not expand
        and instr.opcode in _FOLDED
        and bool(instr.users)
        and not instr.is_root()
        and not instr.control_successors
    )


def build_graph(module, *, expand: bool = False) -> Graph:
    order = list(reversed(module.computation_post_order()))  # callers before callees
    callers: dict[int, list] = {}
    for comp in order:
        for instr in comp.instructions:
            for callee in instr.called_computations:
                callers.setdefault(id(callee), []).append((comp, instr))
    ids = _node_ids(module)
    graph = Graph(module.name, Cluster("", module.entry, module.name))
    by_comp = {id(module.entry): graph.top} if module.has_entry else {}
    for comp in order:
        if id(comp) in by_comp:
            continue
        home = callers.get(id(comp), [])
        cluster = Cluster(f"cluster_{len(by_comp)}", comp, _cluster_label(comp, home))
        by_comp[id(comp)] = cluster
        parent = by_comp.get(id(home[0][0])) if home else None
        (parent or graph.top).children.append(cluster)
    for comp in order:
        cluster = by_comp[id(comp)]
        for instr in comp.post_order():
            if is_folded(instr, expand):
                continue
            node = Node(ids[id(instr)], instr, _label(instr, expand), kind_of(instr))
            node.folded = [o for o in instr.operands if is_folded(o, expand)]
            cluster.nodes.append(node)
            graph.edges.extend(
                (ids[id(o)], node.id, str(o.shape.without_layout()))
                for o in instr.operands
                if not is_folded(o, expand)
            )
            for callee in instr.called_computations:
                # Only the first caller gets an edge: edges from many far-apart callers into
                # one shared cluster (a reducer) make dot's layout slow and tangled.
                first = callers[id(callee)][0][1] is instr
                if first and callee.has_root and id(callee) in by_comp:
                    graph.calls.append((ids[id(callee.root)], node.id, by_comp[id(callee)].id))
    return graph


def _node_ids(module) -> dict[int, str]:
    """Instruction names when unique in the module (the parser makes them so), else qualified."""
    ids: dict[int, str] = {}
    taken: set[str] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            name = instr.name if instr.name not in taken else f"{comp.name}/{instr.name}"
            while name in taken:
                name += "'"
            taken.add(name)
            ids[id(instr)] = name
    return ids


def _cluster_label(comp, callers) -> str:
    if not callers:
        return f"{comp.name} (not called)"
    comp_caller, instr = callers[0]
    attr = next((a for a in instr.opdef.calls if _calls(instr.attrs.get(a), comp)), "calls")
    what = f"fusion %{instr.name}" if instr.opcode == "fusion" else f"{attr} of %{instr.name}"
    more = f" (+{len(callers) - 1} more)" if len(callers) > 1 else ""
    return f"{comp.name}: {what}{more}"


def _calls(value, comp) -> bool:
    return value is comp or (isinstance(value, (list, tuple)) and any(v is comp for v in value))


def _label(instr, expand: bool) -> list[str]:
    from ..ir.printer import format_attrs

    head = instr.opcode
    if instr.opcode == "parameter":
        head = f"parameter({instr.parameter_number})"
    elif instr.opcode == "constant":
        head = f"constant {_short_literal(instr)}"
    lines = [("ROOT " if instr.is_root() else "") + instr.name, head]
    for attr in format_attrs(instr, print_metadata=False):
        if len(attr) <= _MAX_ATTR:
            lines.append(attr)
    for i, operand in enumerate(instr.operands):
        if is_folded(operand, expand):
            lines.append(f"operand {i}: {_folded_text(operand)}")
    return lines + [str(instr.shape.without_layout())]


def _folded_text(instr) -> str:
    if instr.opcode == "parameter":
        return f"%{instr.name} = param {instr.parameter_number} {instr.shape.without_layout()}"
    return f"constant({_short_literal(instr)}) {instr.shape.without_layout()}"


def _short_literal(instr) -> str:
    from ..ir.printer import instruction_to_text

    if instr.shape.is_array and instr.shape.numel() > 12:  # over 24 characters for sure, and
        return "{...}"  # printing millions of them is slow
    text = instruction_to_text(instr, print_metadata=False)
    inside = text[text.index("constant(") + len("constant(") :].rsplit(")", 1)[0]
    return inside if len(inside) <= 24 else "{...}"


# -- DOT ---------------------------------------------------------------------------------------
def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_node(node: Node, indent: str) -> str:
    fill = KIND_STYLE[node.kind][0]
    label = "\\n".join(_q(line)[1:-1] for line in node.lines)
    tooltip = "\n".join([node.instr.to_text()] + [o.to_text() for o in node.folded])
    bold = ", penwidth=2" if node.instr.is_root() else ""
    return (
        f'{indent}{_q(node.id)} [label="{label}", fillcolor="{fill}", tooltip={_q(tooltip)}{bold}];'
    )


def _dot_cluster(cluster: Cluster, depth: int) -> list[str]:
    pad = "  " * depth
    lines = [
        f"{pad}subgraph {cluster.id} {{",
        f'{pad}  label={_q(cluster.label)}; style="rounded,dashed"; color="#6b7280";',
    ]
    lines += [_dot_node(node, pad + "  ") for node in cluster.nodes]
    for child in cluster.children:
        lines += _dot_cluster(child, depth + 1)
    return lines + [pad + "}"]


def module_to_dot(module, *, expand: bool = False) -> str:
    """The module as a Graphviz digraph (one cluster per non-entry computation)."""
    graph = build_graph(module, expand=expand)
    lines = [
        f"digraph {_q(graph.name)} {{",
        '  graph [rankdir=TB, compound=true, fontname="Helvetica", fontsize=11, '
        "nodesep=0.25, ranksep=0.35, labeljust=l];",
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, '
        "penwidth=0.8];",
        '  edge [fontname="Helvetica", fontsize=8, color="#4b5563", arrowsize=0.6];',
    ]
    lines += [_dot_node(node, "  ") for node in graph.top.nodes]
    for cluster in graph.top.children:
        lines += _dot_cluster(cluster, 1)
    lines += [f"  {_q(a)} -> {_q(b)} [label={_q(shape)}];" for a, b, shape in graph.edges]
    lines += [
        f'  {_q(root)} -> {_q(caller)} [style=dashed, color="#7c3aed", ltail={cl}];'
        for root, caller, cl in graph.calls
    ]
    return "\n".join(lines + ["}"]) + "\n"


def dot_to_svg(dot: str) -> str:
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizError(
            "SVG needs Graphviz's `dot`, which is not installed (apt-get install "
            "graphviz); write .dot or .html instead"
        )
    done = subprocess.run([exe, "-Tsvg"], input=dot, capture_output=True, text=True)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["no message"])[0]
        raise GraphvizError(f"dot failed: {first}")
    return done.stdout


# -- HTML --------------------------------------------------------------------------------------
def module_to_svg(module, *, expand: bool = False, use_dot: bool = False) -> str:
    """A standalone SVG file: the built-in layered layout, or Graphviz's with `use_dot`."""
    if use_dot:
        return dot_to_svg(module_to_dot(module, expand=expand))
    return layout_svg(build_graph(module, expand=expand), standalone=True)


def module_to_html(module, *, expand: bool = False, use_dot: bool = False) -> str:
    """One self-contained page: the graph as inline SVG; clicking a node shows its HLO text.

    The drawing is the built-in layout's (the same on every machine), or Graphviz's with
    `use_dot`."""
    graph = build_graph(module, expand=expand)
    svg = (
        _inline(dot_to_svg(module_to_dot(module, expand=expand))) if use_dot else layout_svg(graph)
    )
    texts = []
    for node in graph.nodes():
        text = "\n".join([node.instr.to_text()] + [o.to_text() for o in node.folded])
        where = f"in computation {node.instr.parent.name}" if node.instr.parent else ""
        texts.append(
            f'<pre class="hlo" data-node="{html.escape(node.id)}" hidden>'
            f"{html.escape(text, quote=False)}\n\n{html.escape(where)}</pre>"
        )
    legend = "".join(
        f'<span class="key" style="background:{fill}">{html.escape(text)}</span>'
        for fill, text in KIND_STYLE.values()
    )
    return _PAGE.format(
        title=html.escape(module.name), legend=legend, svg=svg, texts="\n".join(texts)
    )


def _inline(svg: str) -> str:
    """dot's SVG, made fit to sit in HTML: no XML prolog, doctype or namespace URLs."""
    svg = svg[svg.index("<svg") :]
    return re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)


_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ margin: 0; font: 13px Helvetica, Arial, sans-serif; display: flex; height: 100vh; }}
#graph {{ flex: 1; overflow: auto; }} #side {{ width: 34em; overflow: auto; padding: 0 1em;
border-left: 1px solid #ccc; }} pre {{ white-space: pre-wrap; font-size: 12px; }}
.key {{ display: inline-block; padding: 2px 6px; margin: 2px; border-radius: 4px; }}
g.node {{ cursor: pointer; }} g.node.selected path, g.node.selected polygon,
g.node.selected rect {{ stroke: #dc2626; stroke-width: 3; }}
</style></head><body>
<div id="graph">{svg}</div>
<div id="side"><h3>{title}</h3><div>{legend}</div>
<p id="hint">Click a node to see its HLO text.</p>
{texts}
</div>
<script>
document.querySelectorAll("g.node").forEach(function (node) {{
  node.addEventListener("click", function () {{
    var id = node.querySelector("title").textContent;
    document.querySelectorAll("g.node.selected").forEach(function (n) {{
      n.classList.remove("selected"); }});
    node.classList.add("selected");
    document.querySelectorAll("pre.hlo").forEach(function (pre) {{
      pre.hidden = pre.getAttribute("data-node") !== id; }});
    document.getElementById("hint").hidden = true;
  }});
}});
</script></body></html>
"""


# -- the built-in drawing: layout.py's layered layout, one block per computation -------------
_CHAR_W, _LINE_H, _PAD, _CLUSTER_HEAD = 6.6, 14, 14, 24


def node_size(node: Node) -> tuple[float, float]:
    return max(len(t) for t in node.lines) * _CHAR_W + 16, len(node.lines) * _LINE_H + 10


def layout_blocks(graph: Graph) -> list[tuple[Cluster, Layout]]:
    """The entry's nodes, then each called computation's, laid out on their own (data edges
    never leave a computation; calls are named in the cluster labels)."""
    clusters = [c for c in [graph.top, *graph.clusters()] if c.nodes]
    home = {node.id: k for k, c in enumerate(clusters) for node in c.nodes}
    edges: list[list[tuple[str, str]]] = [[] for _ in clusters]
    for a, b, _ in graph.edges:
        if home[a] == home[b]:
            edges[home[a]].append((a, b))
    return [
        (c, layered_layout({n.id: node_size(n) for n in c.nodes}, own))
        for c, own in zip(clusters, edges)
    ]


def layout_svg(graph: Graph, *, standalone: bool = False) -> str:
    """The graph as SVG, computation blocks one under the other, a dashed box round each
    called one. `standalone` makes a .svg file: XML prolog, SVG namespace and each node's HLO
    text as its <desc> (HTML pages show that text beside the drawing and want no namespace)."""
    shapes: dict = {}
    for a, _, shape in graph.edges:
        shapes.setdefault(a, shape)  # an edge carries its operand's shape: one label per node
    parts, y, width = [], float(_PAD), 0.0
    for cluster, layout in layout_blocks(graph):
        top = y + (_CLUSTER_HEAD if cluster.id else 0)
        if cluster.id:
            parts.append(
                f'<rect x="{_PAD / 2:.0f}" y="{y:.0f}" width="{layout.width + _PAD:.0f}"'
                f' height="{layout.height + _CLUSTER_HEAD + 6:.0f}" rx="8" '
                f'fill="none" stroke="#6b7280" stroke-dasharray="4 3"/><text '
                f'x="{_PAD}" y="{y + 16:.0f}" font-size="11">'
                f"{html.escape(cluster.label)}</text>"
            )
        parts += _svg_block(cluster, layout, shapes, _PAD, top, standalone)
        y = top + layout.height + (6 if cluster.id else 0) + 2 * _PAD
        width = max(width, layout.width + 2 * _PAD)
    head = (
        f'<svg width="{width:.0f}" height="{y:.0f}" viewBox="0 0 {width:.0f} {y:.0f}" '
        f'font-family="Helvetica, Arial, sans-serif"><defs><marker id="arrow" '
        f'viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
        f'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#4b5563"/></marker></defs>'
    )
    if standalone:
        head = '<?xml version="1.0" encoding="UTF-8"?>\n' + head.replace(
            "<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1
        )
    return head + "\n".join(parts) + "</svg>\n"


def _svg_block(
    cluster: Cluster, layout: Layout, shapes, dx: float, dy: float, standalone: bool
) -> list[str]:
    """Each node's trunk once, then every edge from where it leaves its trunk (or from its
    source) to its target, then the nodes over them."""
    out = [
        f'<path d="{_svg_path(layout.polyline([u, *trunk]), dx, dy)}" fill="none" '
        f'stroke="#4b5563"/>'
        for u, trunk in layout.trunks.items()
    ]
    for a, b in layout.edges:
        path = layout.path(a, b)
        if layout.index[a] < layout.index[b]:
            points = layout.polyline(path[-2:])
        else:  # drawn upwards, all the way (never the case for HLO in post-order)
            points = layout.route(a, b)
        out.append(
            f'<path d="{_svg_path(points, dx, dy)}" fill="none" stroke="#4b5563" '
            f'marker-end="url(#arrow)"/>'
        )
    sources = {a for a, _ in layout.edges}
    for node in cluster.nodes:
        box = layout.boxes[node.id]
        if node.id in sources:
            out.append(
                f'<text x="{box.x + box.width / 2 + dx + 4:.1f}" '
                f'y="{box.bottom + dy + 11:.1f}" font-size="9" fill="#374151">'
                f"{html.escape(shapes[node.id])}</text>"
            )
        out.append(_svg_node(node, box.x + dx, box.y + dy, box.width, box.height, standalone))
    return out


def _svg_path(points, dx: float, dy: float) -> str:
    """Straight down through a layer, an S-curve across a gap (its control points stay
    inside the gap, so the curve does too)."""
    x0, y0 = points[0]
    d = [f"M{x0 + dx:.1f},{y0 + dy:.1f}"]
    for (x1, y1), (x2, y2) in pairwise(points):
        end = f"{x2 + dx:.1f},{y2 + dy:.1f}"
        if x1 == x2:
            d.append(f"L{end}")
        else:
            middle = (y1 + y2) / 2 + dy
            d.append(f"C{x1 + dx:.1f},{middle:.1f} {x2 + dx:.1f},{middle:.1f} {end}")
    return " ".join(d)


def _svg_node(
    node: Node, left: float, top: float, w: float, h: float, standalone: bool = False
) -> str:
    fill = KIND_STYLE[node.kind][0]
    stroke = 2 if node.instr.is_root() else 0.8
    spans = "".join(
        f'<tspan x="{left + w / 2:.1f}" dy="{_LINE_H if k else 0}">{html.escape(line)}</tspan>'
        for k, line in enumerate(node.lines)
    )
    desc = ""
    if standalone:
        text = "\n".join([node.instr.to_text()] + [o.to_text() for o in node.folded])
        desc = f"<desc>{html.escape(text, quote=False)}</desc>"
    return (
        f'<g class="node"><title>{html.escape(node.id)}</title>{desc}<rect '
        f'x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5" '
        f'fill="{fill}" stroke="#111827" stroke-width="{stroke}"/><text '
        f'text-anchor="middle" y="{top + 16:.1f}" font-size="10">{spans}</text></g>'
    )


# -- --pass: the module as it stands after one pass of a pipeline -----------------------------
