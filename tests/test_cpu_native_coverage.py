"""Every instruction of the conformance corpus and of the whole-program benchmark gets native
code on cpu: the driver is emitted (no Numba compile needed) and reports no fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

import minixla
from conformance_paths import case_dirs, requires_corpus
from minixla.backends import get as get_backend
from minixla.backends.cpu import driver
from minixla.passes.base import run_pipeline

PROGRAMS = sorted((Path(__file__).resolve().parents[1] / "bench" / "programs").glob("*.hlo"))


def fallbacks(text: str) -> list[str]:
    module = minixla.parse_hlo_module(text)
    run_pipeline(get_backend("cpu").pipeline(), module)
    program = driver.build_program(module, {})
    return [f"{i.opcode} %{i.name}: {why}" for i, why in program.fallback_reasons]


@requires_corpus
def test_the_conformance_corpus_has_no_fallback():
    found = {d.name: fallbacks((d / "module.hlo").read_text()) for d in case_dirs()}
    assert not {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_benchmark_programs_have_no_fallback(path):
    assert len(PROGRAMS) >= 20
    assert not fallbacks(path.read_text())
