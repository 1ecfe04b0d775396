"""Inputs and interpreter results of the conformance cases, computed once per test session,
for differential tests of passes: run passes, interpret again, compare bit for bit."""

from __future__ import annotations

import functools
import json

import ml_dtypes
import numpy as np
import pytest

import minixla
from conformance_paths import case_dirs, requires_corpus  # noqa: F401 (re-exported)
from minixla.errors import UnsupportedError


def flatten(value) -> list[np.ndarray]:
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [np.asarray(value)]


@functools.lru_cache(maxsize=None)
def case_inputs(case) -> tuple[str, list]:
    meta = json.loads((case / "meta.json").read_text())
    data = np.load(case / "data.npz")
    args = [data[f"arg{i}"] for i in range(meta["num_args"])]
    args = [
        a.view(ml_dtypes.bfloat16) if f"arg{i}" in meta.get("bf16_args", []) else a
        for i, a in enumerate(args)
    ]
    return (case / "module.hlo").read_text(), args


@functools.lru_cache(maxsize=None)
def reference(case) -> list[np.ndarray]:
    text, args = case_inputs(case)
    try:
        return flatten(
            minixla.compile(minixla.parse_hlo_module(text), backend="interpreter")(*args)
        )
    except UnsupportedError as exc:
        pytest.skip(f"the interpreter cannot run the original: {exc}")


def assert_bit_identical(got, want, what: str) -> None:
    got = flatten(got)
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (
            f"{what}: output {i} is {g.dtype}{g.shape}, expected {w.dtype}{w.shape}"
        )
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(w).tobytes(), (
            f"{what}: output {i} differs"
        )


def check_passes_keep_values(case, pass_lists) -> None:
    """Each list of passes, run on the case's module, leaves the interpreter's results bit
    for bit unchanged; the optimized module also survives printing and parsing."""
    text, args = case_inputs(case)
    want = reference(case)
    from minixla.passes.base import make_pipeline, run_pipeline

    for names in pass_lists:
        module = minixla.parse_hlo_module(text)
        run_pipeline(make_pipeline(names), module, verify=True)
        module = minixla.parse_hlo_module(module.to_text())
        got = minixla.compile(module, backend="interpreter")(*args)
        assert_bit_identical(got, want, ",".join(names))
