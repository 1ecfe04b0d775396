"""The shared conformance corpus: real JAX-recorded programs, run on each backend and compared with
XLA's outputs under the case's tolerances (the corpus's own comparison rules from run.py)."""

import importlib.util
import json

import ml_dtypes
import numpy as np
import pytest

import minixla
from conformance_paths import CONFORMANCE, case_dirs, requires_corpus


def _runner():
    spec = importlib.util.spec_from_file_location("conformance_run", CONFORMANCE / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def backends() -> list[str]:
    status = minixla.backends.available()
    return [name for name in ("interpreter", "cpu") if status.get(name) is True]


def run_case(case, backend: str) -> None:
    runner = _runner()
    meta = json.loads((case / "meta.json").read_text())
    data = np.load(case / "data.npz")
    args = [data[f"arg{i}"] for i in range(meta["num_args"])]
    args = [
        a.view(ml_dtypes.bfloat16) if f"arg{i}" in meta.get("bf16_args", []) else a
        for i, a in enumerate(args)
    ]
    module = minixla.parse_hlo_module((case / "module.hlo").read_text())
    outputs = runner.flatten_result(minixla.compile(module, backend=backend)(*args))
    assert len(outputs) == meta["num_outputs"]
    for i, got in enumerate(outputs):
        name = f"out{i}"
        problem = runner.compare_output(
            name, got, data[name], name in meta.get("bf16_outs", []), meta["rtol"], meta["atol"]
        )
        assert problem is None, problem


@requires_corpus
@pytest.mark.parametrize("backend", backends())
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_case(case, backend):
    run_case(case, backend)


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_optimized_module_parses_and_verifies(case):
    minixla.parse_hlo_module((case / "optimized.hlo").read_text())
