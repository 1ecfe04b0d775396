"""rematerialization under memory_limit_bytes: limits met, values bit-identical, errors clear,
opt-barriers honoured, and a differential run over a sample of the conformance corpus."""

import json
import os

import numpy as np
import pytest

import minixla
import minixla.numpy as mnp
from conformance_reference import (
    assert_bit_identical,
    case_dirs,
    case_inputs,
    flatten,
    reference,
    requires_corpus,
)
from minixla.errors import MinixlaError, UnsupportedError
from minixla.passes import RematerializationError
from minixla.testing import compare_values

SUM = """
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
"""
HELD = (
    SUM
    + """
ENTRY main {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] sine(a)
  c = f32[256] cosine(p)
  d = f32[256] multiply(b, c)
  e = f32[256] add(a, d)
  ROOT r = f32[] reduce(e, f32[] constant(0)), dimensions={0}, to_apply=sum
}"""
)
BEHIND_BARRIER = (
    SUM
    + """
ENTRY main {
  p = f32[256] parameter(0)
  a = f32[256] exponential(p)
  b = f32[256] sine(a)
  c = f32[256] cosine(p)
  d = f32[256] multiply(b, c)
  t = (f32[256], f32[256]) tuple(a, d)
  ob = (f32[256], f32[256]) opt-barrier(t)
  kept = f32[256] get-tuple-element(ob), index=0
  d2 = f32[256] get-tuple-element(ob), index=1
  e = f32[256] add(kept, d2)
  ROOT r = f32[] reduce(e, f32[] constant(0)), dimensions={0}, to_apply=sum
}"""
)


def module(body: str):
    return minixla.parse_hlo_module("HloModule m\n" + body)


def test_limit_is_met_and_values_do_not_change():
    backend = "interpreter"  # the cpu pipeline fuses HELD into one kernel: no temporaries
    x = np.linspace(-2, 2, 256, dtype=np.float32)
    plain = minixla.compile(module(HELD), backend=backend)
    limited = minixla.compile(module(HELD), backend=backend, memory_limit_bytes=2048)
    assert plain.memory_analysis().temp_peak_in_bytes == 3072
    assert limited.memory_analysis().temp_peak_in_bytes <= 2048
    assert_bit_identical(limited(x), flatten(plain(x)), backend)
    assert (
        limited.cost_analysis()["transcendentals"] == plain.cost_analysis()["transcendentals"] + 256
    )  # one exponential recomputed
    assert [r.original for r in limited.rematerialization.remats] == ["a"]


def test_unreachable_limit_reports_the_lowest_peak():
    with pytest.raises(RematerializationError, match="lowest peak reached is 2048 bytes") as err:
        minixla.compile(module(HELD), backend="interpreter", memory_limit_bytes=1024)
    assert err.value.lowest_peak_bytes == 2048


def test_values_behind_an_opt_barrier_are_kept():
    # The same program as HELD, but %a reaches %e through an opt-barrier: a checkpoint the
    # program asked to keep, so nothing may recompute it.
    with pytest.raises(RematerializationError, match="lowest peak reached is 3072"):
        minixla.compile(module(BEHIND_BARRIER), backend="interpreter", memory_limit_bytes=2048)
    exe = minixla.compile(module(BEHIND_BARRIER), backend="cpu")  # nor CSE across it
    assert exe.module.to_text().count("opt-barrier(") == 1


@pytest.mark.parametrize("limit", [-1, "1kB", 1.5, True])
def test_bad_limits_are_errors(limit):
    with pytest.raises(MinixlaError, match="memory_limit_bytes"):
        minixla.compile(module(HELD), memory_limit_bytes=limit)


def mlp_gradient(ws, x):
    """Hand-written backward of a ReLU MLP with loss sum(out**2)/2: the weight gradients."""
    acts = [x]
    for w in ws:
        acts.append(mnp.maximum(acts[-1] @ w, 0.0))
    g, grads = acts[-1], []
    for i in reversed(range(len(ws))):
        dh = mnp.where(acts[i + 1] > 0, g, 0.0)
        grads.append(acts[i].T @ dh)
        if i:
            g = dh @ ws[i].T
    return tuple(reversed(grads))


def test_jit_memory_limit_on_an_mlp_gradient():
    rng = np.random.default_rng(0)
    ws = [(rng.standard_normal((8, 8)) / 3).astype(np.float32) for _ in range(8)]
    x = rng.standard_normal((4, 8)).astype(np.float32)
    plain = minixla.jit(mlp_gradient).lower(ws, x).compile()
    peak = plain.memory_analysis().temp_peak_in_bytes
    limited_fn = minixla.jit(mlp_gradient, memory_limit_bytes=peak // 2)
    limited = limited_fn.lower(ws, x).compile()
    assert limited.memory_analysis().temp_peak_in_bytes <= peak // 2
    assert limited.cost_analysis()["flops"] > plain.cost_analysis()["flops"]
    assert_bit_identical(limited_fn(ws, x), flatten(plain(*ws, x)), "jit")
    # Recomputed fusions get fused computations of their own; the module still round-trips.
    text = limited.module.to_text()
    assert ".remat = " in text and "calls=%fused_computation" in text
    assert minixla.parse_hlo_module(text).to_text() == text


def compile_tightly(text: str, backend: str, peak: int):
    """Compiled under half its peak, or under the lowest peak the pass reaches."""
    try:
        return minixla.compile(text, backend=backend, memory_limit_bytes=peak // 2), peak // 2
    except RematerializationError as exc:
        limit = exc.lowest_peak_bytes
        return minixla.compile(text, backend=backend, memory_limit_bytes=limit), limit


def sample(cases):
    """Every eighth case; MINIXLA_REMAT_SWEEP=all runs them all."""
    return cases if os.environ.get("MINIXLA_REMAT_SWEEP") == "all" else cases[::8]


@requires_corpus
@pytest.mark.parametrize("case", sample(case_dirs()), ids=lambda p: p.name)
def test_tight_limit_keeps_conformance_values(case):
    """Half the scheduled peak (or the lowest the pass reaches): the cpu backend and the
    interpreter give the same values as without a limit, bit for bit."""
    text, args = case_inputs(case)
    want = reference(case)
    plain = minixla.compile(text, backend="cpu")
    limited, limit = compile_tightly(text, "cpu", plain.memory_analysis().temp_peak_in_bytes)
    assert limited.memory_analysis().temp_peak_in_bytes <= limit
    got = limited(*args)
    assert_bit_identical(got, flatten(plain(*args)), "cpu")
    meta = json.loads((case / "meta.json").read_text())
    problems = compare_values(got, want, rtol=meta["rtol"], atol=meta["atol"], what="cpu")
    assert not problems, "\n".join(problems)  # cpu and interpreter agree as without a limit
    try:
        interpreter_peak = minixla.compile(text).memory_analysis().temp_peak_in_bytes
        interpreted, _ = compile_tightly(text, "interpreter", interpreter_peak)
    except UnsupportedError as exc:
        pytest.skip(f"the interpreter cannot run it: {exc}")
    assert_bit_identical(interpreted(*args), want, "interpreter")


def test_dumps_list_each_recomputed_instruction(tmp_path):
    minixla.compile(
        module(HELD), backend="interpreter", memory_limit_bytes=2048, dump_to=str(tmp_path)
    )
    (dumped,) = tmp_path.glob("*.rematerialization.txt")
    text = dumped.read_text()
    assert "temporary peak 3072 -> 2048 bytes" in text
    assert "%a.remat (recomputes %a): saves 1024 bytes, adds 256 flops" in text
