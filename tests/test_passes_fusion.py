"""fusion: loop, reduction and multi-output fusion, the cost model's refusals, and values.

More cases are HLO text tests in tests/hlo/fusion/."""

import pytest

import minixla
from conformance_reference import case_dirs, check_passes_keep_values, requires_corpus
from minixla.passes.fusion import InstructionFusion
from minixla.passes.fusion_cost import MAX_FUSED_OPS, MAX_RECOMPUTED_OPS, read_part, reads_apart
from minixla.testing import check_pass


def fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def test_elementwise_chain_becomes_one_loop_fusion():
    # tanh(x*a + b) * 0.5 + c*c
    module = check_pass(
        "fusion",
        """
    HloModule chain
    ENTRY main {
      x = f32[16] parameter(0)
      a = f32[16] parameter(1)
      b = f32[16] parameter(2)
      c = f32[16] parameter(3)
      xa = f32[16] multiply(x, a)
      xab = f32[16] add(xa, b)
      t = f32[16] tanh(xab)
      half = f32[] constant(0.5)
      halves = f32[16] broadcast(half), dimensions={}
      th = f32[16] multiply(t, halves)
      cc = f32[16] multiply(c, c)
      ROOT out = f32[16] add(th, cc)
    }""",
        """
    // CHECK: %fused_computation ({{.*}}) -> f32[16] {
    // CHECK-DAG: tanh(
    // CHECK-DAG: f32[] constant(0.5)
    // CHECK: ROOT %out = f32[16]{0} add(
    // CHECK: ENTRY %main
    // CHECK: ROOT %fusion = f32[16]{0} fusion({{.*}}), kind=kLoop, calls=%fused_computation
    """,
    )
    assert len(fusions(module)) == 1
    assert len(module.entry.instructions) == 5  # four parameters and the fusion


def test_fused_parameters_are_numbered_like_operands():
    module = check_pass(
        "fusion",
        """
    HloModule params
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8] parameter(1)
      n = f32[8] negate(x)
      ROOT m = f32[8] multiply(n, y)
    }""",
        """
    // CHECK: %fused_computation (param_0: f32[8], param_1: f32[8]) -> f32[8]
    """,
    )
    fusion = module.entry.root
    fused = fusion.attrs["calls"]
    for i, operand in enumerate(fusion.operands):
        assert fused.parameter(i).name.startswith(f"param_{i}")
        assert fused.parameter(i).shape == operand.shape


def test_a_lone_op_is_not_fused():
    check_pass(
        "fusion",
        """
    HloModule lone
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8] parameter(1)
      ROOT s = f32[8] add(x, y)
    }""",
        expected=None,
    )


def test_expensive_producer_is_never_duplicated():
    text = """
    HloModule nodup
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8] parameter(1)
      e = f32[8] exponential(x)
      a = f32[8] add(e, y)
      d = f32[8,8] dot(a, y), lhs_contracting_dims={}, rhs_contracting_dims={}
      m = f32[8] multiply(e, y)
      ROOT r = (f32[8,8], f32[8]) tuple(d, m)
    }"""
    module = minixla.parse_hlo_module(text)
    fusion = InstructionFusion()
    fusion.run(module)
    exps = [i for c in module.computations for i in c.instructions if i.opcode == "exponential"]
    assert len(exps) == 1
    assert any("expensive" in d.reason for _, _, d in fusion.decisions)


def test_expensive_producer_is_not_recomputed_per_broadcast_element():
    module = minixla.parse_hlo_module("""
    HloModule reuse
    ENTRY main {
      x = f32[8] parameter(0)
      y = f32[8,8] parameter(1)
      e = f32[8] exponential(x)
      b = f32[8,8] broadcast(e), dimensions={1}
      ROOT s = f32[8,8] add(b, y)
    }""")
    fusion = InstructionFusion()
    fusion.run(module)
    assert module.entry.instruction("e").opcode == "exponential"  # stays outside
    assert any("several times" in d.reason for _, _, d in fusion.decisions)


def test_non_scalar_constants_stay_outside():
    module = minixla.parse_hlo_module("""
    HloModule consts
    ENTRY main {
      x = f32[4] parameter(0)
      c = f32[4] constant({1, 2, 3, 4})
      n = f32[4] negate(x)
      ROOT m = f32[4] multiply(n, c)
    }""")
    fusion = InstructionFusion()
    fusion.run(module)
    assert module.entry.root.opcode == "fusion"
    assert module.entry.instruction("c").opcode == "constant"
    assert ("c", module.entry.root.name) in {(p, c) for p, c, _ in fusion.decisions}


def test_reduction_root_with_elementwise_producers_is_kinput():
    check_pass(
        "fusion",
        """
    HloModule red
    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    ENTRY main {
      x = f32[8,32] parameter(0)
      e = f32[8,32] exponential(x)
      zero = f32[] constant(0)
      ROOT r = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
    }""",
        """
    // CHECK: %fused_computation (param_0: f32[8,32]) -> f32[8] {
    // CHECK: exponential(%param_0)
    // CHECK: f32[] constant(0)
    // CHECK: ROOT %r = f32[8]{0} reduce(
    // CHECK: ROOT %fusion = f32[8]{0} fusion(%x), kind=kInput, calls=%fused_computation
    """,
    )


SOFTMAX = """
HloModule softmax
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  x = f32[8,32] parameter(0)
  e = f32[8,32] exponential(x)
  zero = f32[] constant(0)
  s = f32[8] reduce(e, zero), dimensions={1}, to_apply=add
  bs = f32[8,32] broadcast(s), dimensions={0}
  ROOT d = f32[8,32] divide(e, bs)
}"""


def test_producer_consumer_multi_output_fusion_exports_the_shared_value():
    module = check_pass(
        "fusion",
        SOFTMAX,
        """
    // CHECK: ROOT %{{.*}} = (f32[8]{0}, f32[8,32]{1,0}) tuple(
    // CHECK: ENTRY %main
    // CHECK: %[[MOF:.*]] = (f32[8]{0}, f32[8,32]{1,0}) fusion(%x), kind=kInput
    // CHECK-DAG: get-tuple-element(%[[MOF]]), index=0
    // CHECK-DAG: get-tuple-element(%[[MOF]]), index=1
    // CHECK: ROOT {{.*}} fusion({{.*}}), kind=kLoop
    """,
    )
    exps = [i for c in module.computations for i in c.instructions if i.opcode == "exponential"]
    assert len(exps) == 1


def test_sibling_multi_output_fusion_reads_the_operand_once():
    module = check_pass(
        "fusion",
        """
    HloModule siblings
    ENTRY main {
      y = f32[8,32] parameter(0)
      n = f32[8,32] negate(y)
      m = f32[8,32] multiply(y, y)
      ROOT t = (f32[8,32], f32[8,32]) tuple(n, m)
    }""",
        """
    // CHECK: ROOT %{{.*}} = (f32[8,32]{1,0}, f32[8,32]{1,0}) tuple(%n, %m
    // CHECK: fusion(%y), kind=kLoop
    """,
    )
    assert len(fusions(module)) == 1


def test_sibling_fusion_whose_root_is_a_variadic_reduce_keeps_each_output():
    """XLA prints argmax as a fusion whose root is a (value, index) reduce, not a tuple op; merged
    with a sibling, its index output must stay the s32 element (it became the sibling's f32)."""
    module = check_pass(
        "fusion",
        """
    HloModule argmax_and_sum
    pick {
      a = f32[] parameter(0)
      i = s32[] parameter(1)
      b = f32[] parameter(2)
      j = s32[] parameter(3)
      gt = pred[] compare(a, b), direction=GT
      ROOT r = (f32[], s32[]) tuple(select(gt, a, b), select(gt, i, j))
    }
    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    argmax_computation {
      x = f32[4,6] parameter(0)
      iota = s32[4,6] iota(), iota_dimension=1
      ROOT r = (f32[4], s32[4]) reduce(x, iota, f32[] constant(-inf), s32[] constant(0)),
          dimensions={1}, to_apply=pick
    }
    sum_computation {
      x = f32[4,6] parameter(0)
      ROOT r = f32[4] reduce(x, f32[] constant(0)), dimensions={1}, to_apply=add
    }
    ENTRY main {
      x = f32[4,6] parameter(0)
      argmax = (f32[4], s32[4]) fusion(x), kind=kLoop, calls=argmax_computation
      sum = f32[4] fusion(x), kind=kLoop, calls=sum_computation
      index = s32[4] get-tuple-element(argmax), index=1
      ROOT t = (s32[4], f32[4]) tuple(index, sum)
    }""",
        """
    // CHECK: ROOT %{{.*}} = (s32[4]{0}, f32[4]{0}) tuple(
    """,
    )
    assert len(fusions(module)) == 1


def test_without_multi_output_the_shared_producer_stays_alone():
    module = minixla.parse_hlo_module(SOFTMAX)
    InstructionFusion(multi_output=False).run(module)
    assert all(not i.shape.is_tuple for i in fusions(module))


def test_fusions_are_capped_in_size():
    lines = ["x = f32[8] parameter(0)", "v0 = f32[8] negate(x)"]
    for i in range(1, 150):
        lines.append(f"v{i} = f32[8] add(v{i - 1}, x)")
    lines.append("ROOT out = f32[8] negate(v149)")
    module = minixla.parse_hlo_module("HloModule big\nENTRY main {\n" + "\n".join(lines) + "\n}")
    InstructionFusion().run(module)
    sizes = [
        sum(1 for i in f.attrs["calls"].instructions if i.opcode != "parameter")
        for f in fusions(module)
    ]
    assert len(sizes) >= 3 and max(sizes) <= MAX_FUSED_OPS


def _recurrence(steps: int) -> str:
    """h_t = h_(t-1) * a + x_t, unrolled; every step's h_t * w is an output (the shape of an
    unrolled RNN's cell state and its per-step consumers)."""
    lines = ["a = f32[64] parameter(0)", "w = f32[64] parameter(1)", "h0 = f32[64] parameter(2)"]
    for t in range(1, steps + 1):
        lines += [
            f"x{t} = f32[64] parameter({t + 2})",
            f"s{t} = f32[64] multiply(h{t - 1}, a)",
            f"h{t} = f32[64] add(s{t}, x{t})",
            f"y{t} = f32[64] multiply(h{t}, w)",
        ]
    return _unrolled("recurrence", lines, [f"y{t}" for t in range(1, steps + 1)])


def _unrolled(name: str, lines: list[str], outputs: list[str]) -> str:
    """A module of `lines` whose root is the tuple of the f32[64] `outputs`."""
    root = f"ROOT out = ({', '.join(['f32[64]'] * len(outputs))}) tuple({', '.join(outputs)})"
    return f"HloModule {name}\nENTRY main {{\n" + "\n".join([*lines, root]) + "\n}"


def test_an_unrolled_recurrence_is_not_recomputed_by_every_step():
    steps = 24  # without the limits the steps' fusions hold 24 * 25 / 2 links of the chain
    fusion = InstructionFusion(multi_output=False)
    module = check_pass(
        fusion,
        _recurrence(steps),
        """
    // CHECK: ENTRY %main
    // CHECK: fusion(
    """,
    )
    fused_ops = sum(
        1
        for f in fusions(module)
        for i in f.attrs["calls"].instructions
        if i.opcode in ("multiply", "add")
    )
    assert fused_ops <= 3 * steps + steps * MAX_RECOMPUTED_OPS // 2
    assert any("recompute" in d.reason for _, _, d in fusion.decisions)


def _cell_states(steps: int) -> str:
    """An LSTM's cell state unrolled: c_t = f_t * c_(t-1) + i_t * g_t from gates that are
    transcendentals of per-step inputs; every step's h_t = o_t * tanh(c_t) is an output."""
    lines = ["c0 = f32[64] parameter(0)"]
    for t in range(1, steps + 1):
        for k, gate in enumerate("fio g".replace(" ", "")):
            lines.append(f"z{gate}{t} = f32[64] parameter({4 * t - 3 + k})")
        lines += [
            f"f{t} = f32[64] logistic(zf{t})",
            f"i{t} = f32[64] logistic(zi{t})",
            f"o{t} = f32[64] logistic(zo{t})",
            f"g{t} = f32[64] tanh(zg{t})",
            f"m{t} = f32[64] multiply(f{t}, c{t - 1})",
            f"n{t} = f32[64] multiply(i{t}, g{t})",
            f"c{t} = f32[64] add(m{t}, n{t})",
            f"tc{t} = f32[64] tanh(c{t})",
            f"h{t} = f32[64] multiply(o{t}, tc{t})",
        ]
    return _unrolled("cells", lines, [f"h{t}" for t in range(1, steps + 1)])


def test_a_recurrence_through_gates_computes_each_state_once():
    # copying c_(t-1) into step t's fusion would read the earlier steps' gates instead of
    # one state, so they would be stored (transcendentals are never copied) and every step
    # would recompute the chain: each state is computed once instead
    steps = 6
    module = check_pass(InstructionFusion(), _cell_states(steps), "// CHECK: fusion(")
    body = [i.opcode for f in fusions(module) for i in f.attrs["calls"].instructions]
    assert body.count("add") == steps
    assert body.count("logistic") == 3 * steps


def test_a_short_recurrence_is_fused_whole_without_copies():
    # each step's state feeds the next step and that step's output: the outputs join one
    # multi-output fusion that computes every step once, rather than each output's fusion
    # recomputing the chain before it
    steps = 3
    module, _ = minixla.testing.run_pass(InstructionFusion(), _recurrence(steps))
    entry_ops = {i.opcode for i in module.entry.instructions}
    assert entry_ops == {"parameter", "fusion", "get-tuple-element", "tuple"}
    (fusion,) = fusions(module)
    ops = [i.opcode for i in fusion.attrs["calls"].instructions]
    assert ops.count("add") == steps and ops.count("multiply") == 2 * steps


def test_slices_of_a_shared_value_are_copied_freely():
    # a slice reads only the elements it writes: copying it into a fusion recomputes nothing,
    # however many such copies the fusion holds (Winograd's transforms sum 16 slices of one
    # product, each also read elsewhere)
    count = MAX_RECOMPUTED_OPS + 4
    slices = "\n".join(
        f"  s{i} = f32[1,64] slice(p), slice={{[{i}:{i + 1}], [0:64]}}" for i in range(count)
    )
    sums = "\n".join(f"  a{i} = f32[1,64] add(a{i - 1}, s{i})" for i in range(1, count))
    # the other readers are dots, which no fusion absorbs: each slice keeps a user outside
    dots = "\n".join(
        f"  d{i} = f32[1,8] dot(s{i}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
        for i in range(count)
    )
    text = f"""
HloModule slices
ENTRY main {{
  p = f32[{count},64] parameter(0)
  w = f32[64,8] parameter(1)
{slices}
  a0 = f32[1,64] negate(s0)
{sums}
{dots}
  ROOT t = tuple(a{count - 1}, {", ".join(f"d{i}" for i in range(count))})
}}"""
    module = check_pass(InstructionFusion(multi_output=False), text, "// CHECK: fusion(")
    (total,) = [f for f in fusions(module) if f.users[0].opcode == "tuple"]
    body = total.attrs["calls"].instructions
    assert sum(i.opcode == "slice" for i in body) == count


# An LSTM step: the recurrent dot plus its bias, given a leading dim of 1 and added to the
# step's input projection, then sliced into four gates, each its own fusion.
_GATES = """
HloModule gates
ENTRY main {
  d = f32[4,32] parameter(0)
  bias = f32[32] parameter(1)
  xs = f32[1,4,32] parameter(2)
  b = f32[4,32] broadcast(bias), dimensions={1}
  pre = f32[4,32] add(d, b)
  pre3 = f32[1,4,32] reshape(pre)
  z = f32[1,4,32] add(pre3, xs)
  zi = f32[1,4,8] slice(z), slice={[0:1], [0:4], [0:8]}
  zf = f32[1,4,8] slice(z), slice={[0:1], [0:4], [%s]}
  zg = f32[1,4,8] slice(z), slice={[0:1], [0:4], [16:24]}
  zo = f32[1,4,8] slice(z), slice={[0:1], [0:4], [24:32]}
  i = f32[1,4,8] logistic(zi)
  f = f32[1,4,8] logistic(zf)
  g = f32[1,4,8] tanh(zg)
  o = f32[1,4,8] logistic(zo)
  ROOT t = tuple(i, f, g, o)
}"""


def test_disjoint_slices_of_a_chain_are_read_apart():
    # each gate's fusion computes only its own quarter of the pre-activation: copying the
    # adds into all four recomputes nothing, so neither is stored (as a copy of a value
    # read whole, the dot's add would be stored after two copies)
    module = check_pass(InstructionFusion(multi_output=False), _GATES % "8:16", "// CHECK: fusion(")
    assert {o.opcode for f in fusions(module) for o in f.operands} == {"parameter"}
    adds = [i for f in fusions(module) for i in f.attrs["calls"].instructions if i.opcode == "add"]
    assert len(adds) == 2 * 4  # the pre-activation's two adds in each gate's fusion


@pytest.mark.parametrize("forget, apart", [("8:16", True), ("4:12", False)])
def test_read_parts_follow_slices_through_adds_and_unit_reshapes(forget, apart):
    # with the forget gate's slice overlapping the input gate's, a copy of the adds in both
    # fusions would compute the shared elements twice: that counts against the limits
    module = minixla.parse_hlo_module(_GATES % forget)
    named = {i.name: i for i in module.entry.instructions}
    start, stop = map(int, forget.split(":"))
    quarters = [((0, 4), (0, 8)), ((0, 4), (start, stop)), ((0, 4), (16, 24)), ((0, 4), (24, 32))]
    # the reshape only adds a dim of 1: what it reads maps back onto pre's two dims
    assert sorted(read_part(named["pre3"], named["pre"])) == sorted(quarters)
    assert read_part(named["zi"], named["z"]) == [((0, 1), (0, 4), (0, 8))]
    assert read_part(named["t"], named["i"]) is None  # the root reads all of it
    assert reads_apart(named["z"], named["zi"]) is apart
    assert reads_apart(named["z"], named["zg"]) is True


def test_a_producer_read_at_many_indices_is_stored_once():
    # a sum of 16 shifted slices of one value (a stencil; Winograd's input transform) would
    # evaluate the value's chain 16 times per output element: the chain gets its own fusion
    slices = "\n".join(
        f"  s{i} = f32[1,64] slice(y), slice={{[{i}:{i + 1}], [0:64]}}" for i in range(16)
    )
    sums = "\n".join(f"  a{i} = f32[1,64] add(a{i - 1}, s{i})" for i in range(1, 16))
    text = f"""
HloModule stencil
ENTRY main {{
  x = f32[16,64] parameter(0)
  e = f32[16,64] exponential(x)
  y = f32[16,64] multiply(e, x)
{slices}
  a0 = f32[1,64] negate(s0)
{sums}
  ROOT r = f32[1,64] sqrt(a15)
}}"""
    fusion = InstructionFusion(multi_output=False)
    module = check_pass(fusion, text, "// CHECK: fusion(")
    chain, total = sorted(fusions(module), key=lambda f: f.shape.dims[0], reverse=True)
    assert chain.shape.dims == (16, 64)  # exponential and multiply, computed once per element
    assert {i.opcode for i in chain.attrs["calls"].instructions} >= {"exponential", "multiply"}
    assert sum(i.opcode == "slice" for i in total.attrs["calls"].instructions) == 16
    assert any("indices per output element" in d.reason for _, _, d in fusion.decisions)


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_fusion_keeps_conformance_values(case):
    check_passes_keep_values(case, [["fusion"], ["layout-assignment", "fusion"]])


def test_multi_output_fusion_judges_each_pair_once(monkeypatch):
    """After each merge the sibling scan restarts; pairs it refused before (an unrolled
    loop's steps all read its input, and each step depends on the last) are not judged
    again: at 64 LSTM steps judging them again took 80 s of a 100 s compile."""
    from test_cpu_parameter_windows import unrolled

    from minixla.passes import fusion as fusion_module
    from minixla.passes.base import run_pipeline
    from minixla.passes.pipelines import cpu_pipeline
    from minixla.text import parse_module

    steps = 12
    readers = [  # siblings of the last state, merged one by one: a restart each
        f"  e{k} = f32[4,32] exponential(f32[4,32] add(h{steps}, "
        f"f32[4,32] broadcast(f32[] constant({k})), dimensions={{}}))"
        for k in range(steps)
    ]
    text = unrolled(steps).replace(
        f"  ROOT out = f32[4,32] copy(h{steps})",
        "\n".join(readers)
        + "\n  ROOT out = tuple("
        + ", ".join(f"e{k}" for k in range(steps))
        + ")",
    )
    judged, repeats = [], []
    real = fusion_module.can_multi_output_fuse

    def judge(a, b):
        if any(p[0] is a and p[1] is b for p in judged):
            repeats.append((a.name, b.name))
        judged.append((a, b))
        return real(a, b)

    monkeypatch.setattr(fusion_module, "can_multi_output_fuse", judge)
    module = parse_module(text)
    run_pipeline(cpu_pipeline(), module)
    assert judged and not repeats, repeats[:5]
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert any(f.shape.is_tuple for f in fusions)  # the readers were merged
