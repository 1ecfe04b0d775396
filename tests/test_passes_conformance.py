"""Differential test of the cleanup passes over the conformance corpus: every module.hlo gives
the same values on the interpreter before and after each pass, and after all of them."""

import json

import ml_dtypes
import numpy as np
import pytest

import minixla
from conformance_paths import case_dirs, requires_corpus
from minixla.errors import UnsupportedError
from minixla.passes.base import make_pipeline, run_pipeline
from minixla.testing import compare_values

ALL = ["dce", "cse", "algsimp", "constant-folding", "tuple-simplifier", "call-inliner"]
PIPELINES = [[name] for name in ALL] + [
    ALL,
    ["call-inliner", "tuple-simplifier", "algsimp", "cse", "constant-folding", "algsimp", "dce"],
]


def load_args(case):
    meta = json.loads((case / "meta.json").read_text())
    data = np.load(case / "data.npz")
    args = [data[f"arg{i}"] for i in range(meta["num_args"])]
    return meta, [
        a.view(ml_dtypes.bfloat16) if f"arg{i}" in meta.get("bf16_args", []) else a
        for i, a in enumerate(args)
    ]


@requires_corpus
@pytest.mark.parametrize("case", case_dirs(), ids=lambda p: p.name)
def test_passes_keep_values(case):
    meta, args = load_args(case)
    original = minixla.parse_hlo_module((case / "module.hlo").read_text())
    try:
        want = minixla.compile(original, backend="interpreter")(*args)
    except UnsupportedError as exc:
        pytest.skip(f"the interpreter cannot run the original: {exc}")
    problems = []
    for names in PIPELINES:
        module = original.clone()
        run_pipeline(make_pipeline(names), module, verify=True)
        got = minixla.compile(module, backend="interpreter")(*args)
        problems += compare_values(
            got, want, rtol=meta["rtol"], atol=meta["atol"], what=",".join(names)
        )
    assert not problems, "\n".join(problems)
