"""The differential fuzzer: random modules from the opcode table agree on the interpreter, on
the interpreter after the cpu pipeline, and on the cpu backend.

CI runs a sample; `pytest tests/test_fuzz.py --fuzz-full` runs 10,000 random modules and
10,000 mutants on the interpreter and the pipeline, and 10,000 of each on cpu too (hours on two
cores: the cpu backend compiles every new kernel). A mismatch it finds becomes a one-op
regression test in the file of the op's family.
"""

import numpy as np

from minixla.ir.opcodes import OPCODES
from minixla.testing import fuzz


def seeds(request, sample: int, full: int):
    return range(full if request.config.getoption("--fuzz-full") else sample)


def test_every_opcode_is_generated_or_excused():
    generated, excused = set(fuzz.GENERATORS), set(fuzz.NOT_GENERATED)
    assert not generated & excused
    assert generated | excused == set(OPCODES), sorted(set(OPCODES) - generated - excused)
    assert all(fuzz.NOT_GENERATED[op] for op in excused)


def test_the_same_seed_gives_the_same_module():
    assert fuzz.random_module(7).to_text() == fuzz.random_module(7).to_text()
    assert fuzz.random_module(7).to_text() != fuzz.random_module(8).to_text()


def test_generated_modules_cover_most_generators():
    made = {i.opcode for seed in range(300) for i in fuzz.random_module(seed).entry.instructions}
    assert len(set(fuzz.GENERATORS) & made) >= 0.9 * len(fuzz.GENERATORS), sorted(
        set(fuzz.GENERATORS) - made
    )


def test_special_values_include_the_corner_cases():
    rng = np.random.default_rng(0)
    floats = fuzz.special_values(rng, "f32", (4000,))
    assert np.isnan(floats).any() and np.isinf(floats).any()
    assert (np.signbit(floats) & (floats == 0)).any()
    assert ((floats != 0) & (np.abs(floats) < np.finfo(np.float32).tiny)).any()  # subnormals
    ints = fuzz.special_values(rng, "s32", (4000,))
    assert ints.min() == np.iinfo(np.int32).min and (ints == 32).any()


def test_interpreter_and_pipeline_agree(request):
    for seed in seeds(request, 400, 10_000):
        module = fuzz.random_module(seed)
        problems = fuzz.check_module(module, fuzz.random_inputs(module, seed), backends=())
        assert not problems, f"seed {seed}:\n" + "\n".join(problems) + "\n" + module.to_text()


def test_cpu_agrees_with_the_interpreter(request):
    for seed in seeds(request, 12, 10_000):
        module = fuzz.random_module(10_000 + seed)
        problems = fuzz.check_module(module, fuzz.random_inputs(module, seed))
        assert not problems, (
            f"seed {10_000 + seed}:\n" + "\n".join(problems) + "\n" + module.to_text()
        )


def test_a_planted_wrong_kernel_is_caught(monkeypatch):
    from minixla.backends.codegen import scalar
    from minixla.backends.cpu import jit

    wrong = scalar.SCALAR["add"]

    def subtract_instead(ctx, instr, args):
        return wrong(ctx, instr, args).replace("+", "-")

    monkeypatch.setitem(scalar.SCALAR, "add", subtract_instead)
    jit.forget_in_memory()
    text = (
        "HloModule m\nENTRY e {\n  x = f32[8] parameter(0)\n  y = f32[8] exponential(x)\n"
        "  ROOT a = f32[8] add(x, y)\n}"
    )
    import minixla

    module = minixla.parse_hlo_module(text)
    problems = fuzz.check_module(module, fuzz.random_inputs(module, 0))
    jit.forget_in_memory()
    assert problems and problems[0].startswith("cpu output 0")


def test_a_path_refusing_what_the_interpreter_runs_is_a_difference(monkeypatch):
    from minixla.errors import UnsupportedError
    from minixla.passes import pipelines

    def refusing():
        raise UnsupportedError("planted")

    monkeypatch.setattr(pipelines, "cpu_pipeline", refusing)
    module = fuzz.random_module(3)
    problems = fuzz.check_module(module, fuzz.random_inputs(module, 3), backends=())
    assert problems == ["the cpu pipeline or its result refused: UnsupportedError: planted"]


def test_mutants_are_refused_cleanly_or_agree(request):
    outcomes = set()
    for seed in seeds(request, 150, 10_000):
        text = fuzz.mutate(fuzz.random_module(seed).to_text(), seed)
        outcome, detail = fuzz.run_case(text, seed, backends=())
        assert outcome in ("agree", "rejected"), f"seed {seed} {outcome}: {detail}\n{text}"
        outcomes.add(outcome)
    assert outcomes == {"agree", "rejected"}  # the mutator makes both valid and invalid text


def test_cpu_refuses_mutants_cleanly_or_agrees(request):
    for seed in seeds(request, 20, 10_000):
        text = fuzz.mutate(fuzz.random_module(20_000 + seed).to_text(), seed)
        outcome, detail = fuzz.run_case(text, seed)
        assert outcome in ("agree", "rejected"), f"seed {seed} {outcome}: {detail}\n{text}"


def test_a_mutant_differs_from_its_module():
    text = fuzz.random_module(5).to_text()
    assert any(fuzz.mutate(text, seed) != text for seed in range(5))


def _module(body: str):
    import minixla

    return minixla.parse_hlo_module(f"HloModule m\nENTRY e {{\n{body}\n}}")


def test_a_difference_the_reference_spans_when_its_math_moves_an_ulp_is_no_mismatch():
    # atanh(x) - x cancels: a 1-ulp atanh is a 2e-4 relative difference in the result
    module = _module("  x = f32[3] parameter(0)\n  ROOT d = f32[3] subtract(atanh(x), x)")
    x = np.array([0.03, 0.031, 0.5], np.float32)
    want = np.arctanh(x.astype(np.float64)).astype(np.float32) - x
    (spread,) = fuzz._spreads(module, [x], [want])
    assert spread[0] > 1e-4 * abs(want[0])
    off_by_an_ulp = want.copy()
    off_by_an_ulp[0] = np.nextafter(want[0] + 2 * np.spacing(x[0]), np.float32(1))
    assert fuzz._within_spread(off_by_an_ulp, want, spread, 2e-5, 0.0)
    wrong = want.copy()
    wrong[2] *= 1.01
    assert not fuzz._within_spread(wrong, want, spread, 2e-5, 0.0)


def test_without_math_functions_there_is_no_spread():
    module = _module("  x = f32[4] parameter(0)\n  ROOT d = f32[4] subtract(add(x, x), x)")
    x = np.array([1.0, -2.5, 3e-3, np.nan], np.float32)
    (spread,) = fuzz._spreads(module, [x], [x + x - x])
    assert np.array_equal(spread[:3], np.zeros(3))


def test_an_output_is_compared_at_the_precision_it_was_computed_in():
    module = _module(
        "  x = f32[2] parameter(0)\n  a = f32[2] atan(x)\n  ROOT c = f64[2] convert(a)"
    )
    root = module.entry.root
    assert fuzz._tolerance(root.shape, root) == (fuzz.RTOL["f32"], float(np.finfo(np.float32).tiny))


def test_ill_conditioned_ops_read_only_exact_values():
    for seed in range(300):
        for comp in fuzz.random_module(seed).computations:
            for instr in comp.instructions:
                if instr.opcode in fuzz.ILL_CONDITIONED:
                    assert all(
                        op.opcode in ("parameter", "constant", "iota") for op in instr.operands
                    ), f"seed {seed}: {instr.to_text() if hasattr(instr, 'to_text') else instr}"
    assert not any(fuzz.ILL_CONDITIONED & set(family) for family in fuzz.SWAPPABLE)


ENDLESS = """
HloModule endless
cond {
  s = s32[] parameter(0)
  ROOT keep = pred[] compare(s, s), direction=EQ
}
body {
  s = s32[] parameter(0)
  ROOT next = s32[] add(s, s32[] constant(1))
}
ENTRY e {
  x = s32[] parameter(0)
  ROOT w = s32[] while(x), condition=cond, body=body
}
"""


def test_a_loop_that_never_ends_is_refused_not_run_forever():
    outcome, detail = fuzz.run_case(ENDLESS, seed=0, backends=("cpu",))
    assert outcome == "rejected" and "max_while_iterations" in detail
