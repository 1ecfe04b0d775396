"""copy-insertion, scheduling and buffer assignment: in-place loops, reuse, aliasing, the report,
and a memory-level simulation of every conformance case under its assignment."""

import numpy as np
import pytest

import minixla
from buffer_simulator import BufferSimulator
from conformance_reference import (
    assert_bit_identical,
    case_dirs,
    case_inputs,
    flatten,
    reference,
    requires_corpus,
)
from minixla.errors import MinixlaError
from minixla.passes import make_pipeline
from minixla.passes.buffer_assignment import (
    BufferAssignmentError,
    InputOutputAliasError,
    assign_buffers,
)
from minixla.passes.pipelines import cpu_pipeline


def prepared(text: str):
    module = minixla.parse_hlo_module(text)
    make_pipeline(["copy-insertion", "scheduling"]).run(module)
    return module, assign_buffers(module)


def simulate_matches_interpreter(text: str, args) -> None:
    want = flatten(minixla.compile(minixla.parse_hlo_module(text), backend="interpreter")(*args))
    module, assignment = prepared(text)
    assert_bit_identical(BufferSimulator(module, assignment).run(args), want, "buffers")


BIG_LOOP = """
HloModule dus_loop
cond {
  st = (s32[], f32[16384,1024]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  n = s32[] constant(8)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  st = (s32[], f32[16384,1024]) parameter(0)
  i = s32[] get-tuple-element(st), index=0
  buf = f32[16384,1024] get-tuple-element(st), index=1
  one = f32[] constant(1)
  row = f32[1,1024] broadcast(one), dimensions={}
  zero = s32[] constant(0)
  upd = f32[16384,1024] dynamic-update-slice(buf, row, i, zero)
  c1 = s32[] constant(1)
  next = s32[] add(i, c1)
  ROOT out = (s32[], f32[16384,1024]) tuple(next, upd)
}
ENTRY main {
  z = f32[] constant(0)
  init_buf = f32[16384,1024] broadcast(z), dimensions={}
  i0 = s32[] constant(0)
  init = (s32[], f32[16384,1024]) tuple(i0, init_buf)
  w = (s32[], f32[16384,1024]) while(init), condition=cond, body=body
  ROOT r = f32[16384,1024] get-tuple-element(w), index=1
}
"""


def test_loop_updating_a_64mib_buffer_in_place_copies_nothing():
    module, assignment = prepared(BIG_LOOP)
    big = 16384 * 1024 * 4
    copies = [
        i
        for c in module.computations
        for i in c.instructions
        if i.opcode == "copy" and i.shape.byte_size() == big
    ]
    assert copies == []
    body = module.computation("body")
    param, upd = body.parameter(0), body.instruction("upd")
    assert assignment.shares(upd, param, (), (1,))  # the update writes the state's storage
    w = module.entry.instruction("w")
    assert assignment.shares(w, module.entry.instruction("init_buf"), (1,))
    big_allocations = [a for a in assignment.allocations if a.size >= big]
    assert len(big_allocations) == 1 and assignment.arena_size < big + 64 * 1024
    report = assignment.report()
    header = next(
        line
        for line in report.splitlines()
        if line.startswith(f"allocation {big_allocations[0].index}:")
    )
    assert f"size {big}" in header and "maybe-live-out" in header
    block = report.split(header)[1].split("allocation ")[0]
    for name in ("upd>", "init_buf>", "w{1} (phi)>", "st.1{1} (phi)>"):
        assert name in block, f"{name} is not in the loop buffer's allocation:\n{block}"


def test_swapping_loop_state_gets_the_copies_it_needs():
    text = """
    HloModule swap
    cond {
      st = (s32[], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(st), index=0
      n = s32[] constant(3)
      ROOT lt = pred[] compare(i, n), direction=LT
    }
    body {
      st = (s32[], f32[4], f32[4]) parameter(0)
      i = s32[] get-tuple-element(st), index=0
      a = f32[4] get-tuple-element(st), index=1
      b = f32[4] get-tuple-element(st), index=2
      one = s32[] constant(1)
      j = s32[] add(i, one)
      na = f32[4] negate(a)
      ROOT out = (s32[], f32[4], f32[4]) tuple(j, b, na)
    }
    ENTRY main {
      x = f32[4] parameter(0)
      y = f32[4] parameter(1)
      zero = s32[] constant(0)
      init = (s32[], f32[4], f32[4]) tuple(zero, x, y)
      w = (s32[], f32[4], f32[4]) while(init), condition=cond, body=body
      a = f32[4] get-tuple-element(w), index=1
      ROOT s = f32[4] add(a, x)
    }"""
    simulate_matches_interpreter(
        text, [np.arange(4, dtype=np.float32), np.arange(4, 8, dtype=np.float32)]
    )


def test_elementwise_chain_reuses_one_buffer():
    module, assignment = prepared("""
    HloModule chain
    ENTRY main {
      x = f32[1024] parameter(0)
      e = f32[1024] exponential(x)
      n = f32[1024] negate(e)
      a = f32[1024] abs(n)
      ROOT s = f32[1024] sqrt(a)
    }""")
    entry = module.entry
    e, n, a = (entry.instruction(name) for name in ("e", "n", "a"))
    assert assignment.shares(e, n) and assignment.shares(n, a)
    assert assignment.peak_bytes <= 2 * 4096


def test_scheduler_finishes_one_chain_before_starting_the_next():
    lines = [
        "HloModule chains",
        "add {",
        "a = f32[] parameter(0)",
        "b = f32[] parameter(1)",
        "ROOT s = f32[] add(a, b)",
        "}",
        "ENTRY main {",
        "x = f32[4096] parameter(0)",
        "zero = f32[] constant(0)",
    ]
    sums = []
    for k in range(6):
        lines += [
            f"e{k} = f32[4096] exponential(x)",
            f"m{k} = f32[4096] multiply(e{k}, x)",
            f"r{k} = f32[] reduce(m{k}, zero), dimensions={{0}}, to_apply=add",
        ]
        sums.append(f"r{k}")
    lines += [f"ROOT t = ({', '.join(['f32[]'] * 6)}) tuple({', '.join(sums)})", "}"]
    module, assignment = prepared("\n".join(lines))
    assert module.is_scheduled
    assert assignment.peak_bytes <= 2 * 4 * 4096 + 64 * 8


def test_must_alias_that_cannot_hold_is_an_error():
    text = """
    HloModule must, input_output_alias={ {0}: (0, {}, must-alias) }
    ENTRY main {
      x = f32[8] parameter(0)
      n = f32[8] negate(x)
      r = f32[8,8] broadcast(x), dimensions={1}
      ROOT t = (f32[8], f32[8,8]) tuple(n, r)
    }"""
    module = minixla.parse_hlo_module(text)
    make_pipeline(["copy-insertion", "scheduling"]).run(module)
    # Make the schedule read x after n is written: the alias can no longer hold.
    entry = module.entry
    order = entry.instructions
    n, r = entry.instruction("n"), entry.instruction("r")
    order.remove(r)
    order.insert(order.index(n) + 1, r)
    with pytest.raises(InputOutputAliasError, match="must alias parameter 0") as info:
        assign_buffers(module)
    assert isinstance(info.value, MinixlaError)


def test_may_alias_and_donors_reuse_the_parameter_buffer():
    module, assignment = prepared("""
    HloModule donate, input_output_alias={ {0}: (0, {}, may-alias) }, buffer_donor={ (1, {}) }
    ENTRY main {
      x = f32[8] parameter(0)
      y = s32[6] parameter(1)
      n = f32[8] negate(x)
      one = s32[] constant(1)
      ones = s32[6] broadcast(one), dimensions={}
      a = s32[6] add(y, ones)
      ROOT t = (f32[8], s32[6]) tuple(n, a)
    }""")
    params = assignment.parameter_allocations()
    assert all(p.is_aliased for p in params)
    assert {(e.output_index, e.param_number) for e in assignment.aliases} == {((0,), 0), ((1,), 1)}
    assert (
        "parameter 0, shape |f32[8]| at ShapeIndex {}, output shape is |f32[8]|"
        in assignment.report()
    )


def test_may_alias_that_cannot_hold_is_skipped_with_a_reason():
    module, assignment = prepared("""
    HloModule may, input_output_alias={ {0}: (0, {}, may-alias) }
    ENTRY main {
      x = f32[8] parameter(0)
      r = f32[8] reverse(x), dimensions={0}
      ROOT t = (f32[8], f32[8]) tuple(r, x)
    }""")
    assert assignment.aliases == []
    ((entry, reason),) = assignment.skipped_aliases
    assert entry.param_number == 0 and "still read when %r writes" in reason


def test_outputs_never_share_read_only_storage():
    module, assignment = prepared("""
    HloModule ro
    ENTRY main {
      x = f32[8] parameter(0)
      c = f32[8] constant({1, 2, 3, 4, 5, 6, 7, 8})
      ROOT t = (f32[8], f32[8], f32[8]) tuple(x, c, x)
    }""")
    slices = [s.allocation for _, s in assignment.output_slices()]
    assert len({id(a) for a in slices}) == 3
    assert not any(a.is_read_only for a in slices)


def test_unscheduled_modules_are_rejected():
    module = minixla.parse_hlo_module("""
    HloModule u
    ENTRY main {
      x = f32[8] parameter(0)
      ROOT n = f32[8] negate(x)
    }""")
    with pytest.raises(BufferAssignmentError, match="not scheduled"):
        assign_buffers(module)


def test_report_lists_allocations_like_xla():
    _, assignment = prepared("""
    HloModule r
    ENTRY main {
      x = f32[8] parameter(0)
      c = f32[] constant(2)
      b = f32[8] broadcast(c), dimensions={}
      ROOT m = f32[8] multiply(x, b)
    }""")
    report = assignment.report()
    assert report.startswith(
        "BufferAssignment:\nallocation 0: size 32, parameter 0, shape |f32[8]|"
        " at ShapeIndex {}:\n value: <"
    )
    assert ", constant:" in report and "maybe-live-out" in report
    assert "Total bytes used:" in report and "Live ranges:" in report


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_cpu_pipeline_buffers_keep_conformance_values(case):
    text, args = case_inputs(case)
    want = reference(case)
    module = minixla.parse_hlo_module(text)
    cpu_pipeline().run(module)
    assignment = assign_buffers(module)
    assert_bit_identical(BufferSimulator(module, assignment).run(args), want, "buffers")
    reparsed = minixla.parse_hlo_module(module.to_text())
    assert_bit_identical(
        minixla.compile(reparsed, backend="interpreter")(*args), want, "cpu_pipeline"
    )


def _fibonacci_fusion(steps: int) -> str:
    lines = ["  f0 = f32[5] parameter(0)", "  f1 = f32[5] parameter(1)"]
    lines += [f"  f{k} = f32[5] add(f{k - 1}, f{k - 2})" for k in range(2, steps)]
    lines[-1] = lines[-1].replace(f"  f{steps - 1} =", f"  ROOT f{steps - 1} =")
    body = "\n".join(lines)
    return f"""HloModule fib
fused {{
{body}
}}
ENTRY main {{
  a = f32[5] parameter(0)
  b = f32[5] parameter(1)
  ROOT f = f32[5] fusion(a, b), kind=kLoop, calls=fused
}}"""


def test_in_place_checks_visit_each_fused_instruction_once(monkeypatch):
    # each value of a Fibonacci chain feeds the next two: the paths from a parameter to the
    # root number fib(steps) (17711 here; at 40 steps a search along paths took 40 s)
    from minixla.ir.instruction import HloInstruction
    from minixla.passes.dataflow import can_share_operand_buffer

    module = minixla.parse_hlo_module(_fibonacci_fusion(22))
    fusion = module.entry.root
    seen = {"opdef": 0}
    opdef = HloInstruction.opdef

    def counted(self):
        seen["opdef"] += 1
        return opdef.fget(self)

    monkeypatch.setattr(HloInstruction, "opdef", property(counted))
    assert can_share_operand_buffer(fusion, 0) and can_share_operand_buffer(fusion, 1)
    assert seen["opdef"] < 4 * 22
