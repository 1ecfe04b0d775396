"""`minixla graph`: DOT structure, SVG, self-contained HTML, --pass, dumps (the built-in
layout itself: test_tools_graph_layout.py)."""

import html
import re
import shutil
from pathlib import Path

import pytest

import minixla
from minixla import backends
from minixla.cli import main
from minixla.passes import DumpOptions, Pass, Pipeline, run_pipeline
from minixla.text import graph
from minixla.text.graph import module_to_dot, module_to_html

MLP = Path(__file__).resolve().parents[1] / "examples" / "mlp.hlo"

# Two fusions (one inside a while body), a while with condition and body: 4 called computations.
FUSED = """
HloModule fused

%fused_add (p0: f32[4], p1: f32[4]) -> f32[4] {
  %p0 = f32[4] parameter(0)
  %p1 = f32[4] parameter(1)
  %a = f32[4] add(%p0, %p1)
  ROOT %n = f32[4] negate(%a)
}

%fused_mul (q0: f32[4]) -> f32[4] {
  %q0 = f32[4] parameter(0)
  %two = f32[] constant(2)
  %twos = f32[4] broadcast(%two), dimensions={}
  ROOT %m = f32[4] multiply(%q0, %twos)
}

%cond (s: (s32[], f32[4])) -> pred[] {
  %s = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%s), index=0
  %ten = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %ten), direction=LT
}

%body (t: (s32[], f32[4])) -> (s32[], f32[4]) {
  %t = (s32[], f32[4]) parameter(0)
  %j = s32[] get-tuple-element(%t), index=0
  %one = s32[] constant(1)
  %j1 = s32[] add(%j, %one)
  %v = f32[4] get-tuple-element(%t), index=1
  %f2 = f32[4] fusion(%v), kind=kLoop, calls=%fused_mul
  ROOT %r = (s32[], f32[4]) tuple(%j1, %f2)
}

ENTRY %main (x: f32[4], y: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %y = f32[4] parameter(1)
  %f1 = f32[4] fusion(%x, %y), kind=kLoop, calls=%fused_add
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %f1)
  %w = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %out = f32[4] get-tuple-element(%w), index=1
}
"""
NODE = re.compile(r'^\s*"((?:[^"\\]|\\.)*)" \[label=', re.M)
needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None, reason="Graphviz's dot is not installed (CI installs graphviz)"
)


@pytest.fixture
def fused_file(tmp_path):
    path = tmp_path / "fused.hlo"
    path.write_text(FUSED)
    return path


def parse(text=FUSED):
    return minixla.parse_hlo_module(text)


def collapsible(instr) -> bool:
    return instr.opcode in ("parameter", "constant") and bool(instr.users) and not instr.is_root()


@pytest.mark.parametrize("text", [FUSED, MLP.read_text()], ids=["fused", "mlp"])
def test_one_node_per_instruction_except_folded_leaves(text):
    module = parse(text)
    instrs = [i for comp in module.computations for i in comp.instructions]
    dot = module_to_dot(module)
    assert len(NODE.findall(dot)) == len([i for i in instrs if not collapsible(i)])
    assert len(NODE.findall(module_to_dot(module, expand=True))) == len(instrs)


def test_one_cluster_per_called_computation():
    dot = module_to_dot(parse())
    assert dot.count("subgraph cluster_") == 4
    for label in (
        "fused_add: fusion %f1",
        "fused_mul: fusion %f2",
        "cond: condition of %w",
        "body: body of %w",
    ):
        assert f'label="{label}"' in dot
    # the fusion inside the while body is drawn inside the body's cluster (one level deeper)
    assert re.search(r'\n    subgraph cluster_\d+ \{\n      label="fused_mul: fusion %f2"', dot)
    assert re.search(r'\n  subgraph cluster_\d+ \{\n    label="body: body of %w"', dot)


def test_nodes_are_coloured_by_kind_and_edges_carry_shapes():
    dot = module_to_dot(parse())
    fill = {kind: colour for kind, (colour, _) in graph.KIND_STYLE.items()}
    assert re.search(rf'"f1" \[label="f1\\nfusion.*fillcolor="{fill["fusion"]}"', dot)
    assert re.search(rf'"w" \[label="w\\nwhile.*fillcolor="{fill["control"]}"', dot)
    assert re.search(rf'"a" \[label="a\\nadd.*fillcolor="{fill["elementwise"]}"', dot)
    assert '"f1" -> "init" [label="f32[4]"];' in dot
    assert '"init" -> "w" [label="(s32[], f32[4])"];' in dot


def test_folded_leaves_appear_in_their_users_labels():
    dot = module_to_dot(parse())
    assert "operand 0: %x = param 0 f32[4]" in dot
    assert "operand 1: constant(10) s32[]" in dot
    assert '"zero" [' not in dot and '"zero" [' in module_to_dot(parse(), expand=True)


def test_cli_writes_dot_to_a_file_or_stdout(fused_file, tmp_path, capsys):
    out = tmp_path / "g.dot"
    assert main(["graph", str(fused_file), "-o", str(out)]) == 0
    assert out.read_text() == module_to_dot(parse())
    assert main(["graph", str(fused_file)]) == 0
    assert capsys.readouterr().out == module_to_dot(parse())


@pytest.mark.parametrize(
    "argv", [pytest.param(["--graphviz"], marks=needs_dot), []], ids=["graphviz", "builtin-layout"]
)
def test_svg_is_real_svg_with_a_title_per_node(fused_file, tmp_path, argv):
    out = tmp_path / "g.svg"
    assert main(["graph", str(fused_file), "-o", str(out), *argv]) == 0
    svg = out.read_text()
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    for name in NODE.findall(module_to_dot(parse())):
        assert f"<title>{name}</title>" in svg


def test_svg_needs_no_graphviz(fused_file, tmp_path, monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    assert main(["graph", str(fused_file), "-o", str(tmp_path / "g.svg")]) == 0
    assert (tmp_path / "g.svg").read_text().count('<g class="node">') == len(
        NODE.findall(module_to_dot(parse()))
    )


@pytest.mark.parametrize(
    "use_dot", [pytest.param(True, marks=needs_dot), False], ids=["graphviz", "builtin-layout"]
)
def test_html_is_self_contained_and_holds_each_nodes_text(use_dot):
    module = parse()
    page = module_to_html(module, use_dot=use_dot)
    assert not re.search(r"https?://", page)
    assert "<script src" not in page and "<link" not in page
    fusion = module.entry.instruction("f1")
    assert "<title>f1</title>" in page  # what the click handler reads
    assert f'data-node="f1" hidden>{html.escape(fusion.to_text(), quote=False)}' in page
    # a folded parameter's text is shown with its user
    assert html.escape(module.entry.instruction("x").to_text(), quote=False) in page


def test_html_from_the_cli_uses_the_builtin_layout(fused_file, tmp_path, monkeypatch):
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    out = tmp_path / "g.html"
    assert main(["graph", str(fused_file), "-o", str(out)]) == 0
    page = out.read_text()
    assert page.count('<g class="node">') == len(NODE.findall(module_to_dot(parse())))
    assert not re.search(r"https?://", page)


def test_unknown_output_format_is_an_error(fused_file, capsys):
    assert main(["graph", str(fused_file), "-o", "g.png"]) == 1
    assert "use a .dot, .svg or .html name" in capsys.readouterr().err


class Rename(Pass):
    """Renames the module, so the drawing shows which passes ran."""

    def __init__(self, name):
        self.name = name

    def run(self, module) -> bool:
        module.name = f"after_{self.name.replace('-', '_')}"
        return True


@pytest.fixture
def toy_backend():
    def pipeline():
        return Pipeline(
            "toy", [Rename("first"), Pipeline("inner", [Rename("second")]), Rename("third")]
        )

    backends.register("toy", lambda module, options: None, pipeline=pipeline)
    yield "toy"
    backends.unregister("toy")


@pytest.mark.parametrize("name", ["first", "second", "inner", "third"])
def test_pass_draws_the_module_after_that_pass(fused_file, toy_backend, capsys, name):
    assert main(["graph", str(fused_file), "--backend", "toy", "--pass", name]) == 0
    want = {"first": "first", "second": "second", "inner": "second", "third": "third"}[name]
    assert capsys.readouterr().out.startswith(f'digraph "after_{want}"')


def test_pass_errors_name_what_exists(fused_file, toy_backend, capsys):
    assert main(["graph", str(fused_file), "--backend", "toy", "--pass", "nope"]) == 1
    assert (
        "no pass 'nope' in the toy pipeline; its passes: first, second, third"
        in capsys.readouterr().err
    )
    backends.register("bare", lambda module, options: None)
    try:
        assert main(["graph", str(fused_file), "--backend", "bare", "--pass", "dce"]) == 1
        assert "backend 'bare' has none" in capsys.readouterr().err
    finally:
        backends.unregister("bare")


def test_dump_as_dot_writes_a_dot_file_per_dump(tmp_path):
    module = parse()
    run_pipeline(
        Pipeline("p", [Rename("first")]),
        module,
        dump=DumpOptions(dump_to=str(tmp_path), pass_re=".*", as_dot=True),
    )
    dots = sorted(p.name for p in tmp_path.glob("*.dot"))
    assert len(dots) == 3 and any("after_first" in name for name in dots)
    assert all(p.read_text().startswith("digraph") for p in tmp_path.glob("*.dot"))
