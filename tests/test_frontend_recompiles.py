"""`jit` says why it traced again: shape, dtype, weak type, static value, pytree, x64."""

import logging

import numpy as np
import pytest

import minixla
from minixla.frontend.recompiles import explain_flag

A3 = np.ones(3, np.float32)
A4 = np.ones(4, np.float32)


def scale(x, y, n):
    return x * n + y


def traces(f) -> list[str]:
    return [str(t) for t in f.recompile_log.traces]


def test_each_trace_names_what_changed():
    f = minixla.jit(scale, static_argnums=2, backend="interpreter")
    f(A3, A3, 2)
    f(A3, A3, 2)  # a cache hit: no trace
    f(A4, A4, 2)
    f(A3, 1.0, 2)
    f(A3, A3, 3)
    f(A3.astype(np.int32), A3, 3)
    assert f.compile_count == 5
    assert traces(f) == [
        "trace 1: first call",
        "trace 2: argument x: shape (3,) -> (4,); argument y: shape (3,) -> (4,)",
        "trace 3: argument y: shape (3,) -> (); argument y: weak type False -> True "
        "(an array became a Python scalar)",
        "trace 4: static argument 2: 2 -> 3",
        "trace 5: argument x: dtype float32 -> int32",
    ]
    assert f.explain_recompiles().splitlines()[0] == "scale: 5 trace(s)"


def test_pytree_structure_x64_and_a_cleared_cache():
    f = minixla.jit(lambda t: t["a"] + t["b"][0], backend="interpreter")
    f({"a": A3, "b": [A3]})
    f({"a": A3, "b": (A3,)})
    with minixla.config.x64():
        f({"a": A3, "b": [A3]})
    f.clear_cache()
    f({"a": A3, "b": [A3]})
    reasons = traces(f)
    assert reasons[1].startswith("trace 2: pytree structure changed: ") and "[*]" in reasons[1]
    assert reasons[2] == "trace 3: enable_x64: False -> True"
    assert reasons[3] == "trace 4: the cache was cleared"


def test_the_flag_logs_each_recompile(monkeypatch, caplog):
    f = minixla.jit(scale, static_argnums=2, backend="interpreter")
    monkeypatch.setenv("MINIXLA_FLAGS", "--explain_recompiles")
    with caplog.at_level(logging.WARNING, logger="minixla.jit"):
        f(A3, A3, 2)
        f(A4, A4, 2)
    messages = [r.getMessage() for r in caplog.records if r.name == "minixla.jit"]
    assert messages == [
        "minixla.jit: scale recompiled (argument x: shape (3,) -> (4,); "
        "argument y: shape (3,) -> (4,))"
    ]


def test_without_the_flag_nothing_is_logged(monkeypatch, caplog):
    monkeypatch.delenv("MINIXLA_FLAGS", raising=False)
    f = minixla.jit(scale, static_argnums=2, backend="interpreter")
    with caplog.at_level(logging.WARNING, logger="minixla.jit"):
        f(A3, A3, 2)
        f(A4, A4, 2)
    assert not [r for r in caplog.records if r.name == "minixla.jit"]


@pytest.mark.parametrize(
    "text, on",
    [
        ("--explain_recompiles", True),
        ("--dump_to=d --explain_recompiles=false", False),
        ("", False),
    ],
)
def test_the_flag_is_read_from_minixla_flags(text, on):
    assert explain_flag(text) is on


def test_the_dump_flags_parser_accepts_the_flag():
    from minixla.passes.base import DumpOptions
    from minixla.passes.flags import FlagError

    assert DumpOptions.from_flags("--explain_recompiles --dump_to=out").dump_to == "out"
    with pytest.raises(FlagError, match="--explain_recompiles"):
        DumpOptions.from_flags("--bogus")


def test_a_backend_change_is_named():
    from minixla.frontend.recompiles import differences

    spec = (((3,), np.dtype("float32"), False),)
    old = ("tree", spec, (), False, "cpu")
    new = ("tree", spec, (), False, "interpreter")
    assert differences(old, new, ["x"]) == ["backend: cpu -> interpreter"]
