"""compile/Executable argument checking, the backend registry and the custom-call registry."""

import numpy as np
import pytest

import minixla
from minixla import backends
from minixla.reference.custom_call import CustomCallError, unregister_custom_call

NEG = """HloModule neg
ENTRY e {
  p = f32[2,3] parameter(0)
  s = s32[] parameter(1)
  ROOT t = (f32[2,3], s32[]) tuple(negate(p), s)
}
"""


def test_compile_from_text_and_call():
    exe = minixla.compile(NEG, backend="interpreter")
    out, scalar = exe(np.ones((2, 3), np.float32), np.int32(4))
    np.testing.assert_array_equal(out, -np.ones((2, 3)))
    assert scalar.dtype == np.int32 and scalar == 4
    assert exe.module.name == "neg"


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.ones((2, 3), np.float32),), "takes 2 argument"),
        ((np.ones((3, 2), np.float32), 1), r"argument 0 \(p\): expected shape \(2, 3\)"),
        ((np.ones((2, 3), np.float64), 1), "expected dtype float32"),
        ((np.ones((2, 3), np.float32), 1.5), "Python float does not match s32"),
        ((np.ones((2, 3), np.float32), 2**40), "out of range for s32"),
        (([[1.0] * 3] * 2, 1), "expected a NumPy array"),
    ],
)
def test_bad_arguments_are_clear_errors(args, message):
    exe = minixla.compile(NEG, backend="interpreter")
    with pytest.raises(minixla.ExecutionError, match=message):
        exe(*args)


def test_python_scalars_are_accepted_for_scalar_parameters():
    exe = minixla.compile(NEG, backend="interpreter")
    _, scalar = exe(np.zeros((2, 3), np.float32), 7)
    assert scalar == 7 and scalar.dtype == np.int32


def test_unknown_backend_lists_known_ones():
    with pytest.raises(minixla.MinixlaError, match="unknown backend 'tpu'.*interpreter"):
        minixla.compile(NEG, backend="tpu")


def test_available_reports_each_backend():
    status = backends.available()
    assert status["interpreter"] is True
    assert set(status) >= {"interpreter", "cpu", "cuda"}
    assert all(value is True or isinstance(value, str) for value in status.values())


def test_register_a_third_party_backend():
    calls = []

    def factory(module, options):
        calls.append(module.name)
        return minixla.Executable(module, "mine", lambda args: args[0] * 2)

    backends.register("mine", factory)
    try:
        exe = minixla.compile(
            "HloModule x\nENTRY e {\n ROOT p = f32[2] parameter(0)\n}", backend="mine"
        )
        np.testing.assert_array_equal(exe(np.array([1, 2], np.float32)), [2, 4])
        assert calls == ["x"]
        assert backends.available()["mine"] is True
    finally:
        backends.unregister("mine")


def test_unsupported_opcode_is_a_compile_error_naming_it(monkeypatch):
    from minixla.reference import evaluator

    table = dict(evaluator.handlers())
    del table["negate"]
    monkeypatch.setattr(evaluator, "handlers", lambda: table)
    with pytest.raises(minixla.UnsupportedError, match="negate"):
        minixla.compile(NEG, backend="interpreter")


CUSTOM = """HloModule cc
ENTRY e {
  p = f32[3] parameter(0)
  ROOT c = f32[3] custom-call(p), custom_call_target="{target}", backend_config="scale=3"
}
"""


def test_custom_call_through_the_registry():
    def scale(x, *, result_shape, backend_config):
        factor = float(backend_config.split("=")[1])
        return (x * factor).astype(result_shape.numpy_dtype)

    minixla.register_custom_call("my.scale", "interpreter", scale)
    try:
        exe = minixla.compile(CUSTOM.replace("{target}", "my.scale"), backend="interpreter")
        np.testing.assert_array_equal(exe(np.array([1, 2, 3], np.float32)), [3, 6, 9])
    finally:
        unregister_custom_call("my.scale", "interpreter")


def test_custom_call_never_resolves_python_names():
    with pytest.raises(CustomCallError, match="'os.system' is not registered"):
        minixla.compile(CUSTOM.replace("{target}", "os.system"), backend="interpreter")


def test_custom_call_result_is_checked():
    minixla.register_custom_call("bad.shape", "interpreter", lambda x, **_: np.zeros(4, np.float32))
    try:
        exe = minixla.compile(CUSTOM.replace("{target}", "bad.shape"), backend="interpreter")
        with pytest.raises(CustomCallError, match="returned float32\\[4\\]"):
            exe(np.zeros(3, np.float32))
    finally:
        unregister_custom_call("bad.shape", "interpreter")


def test_entry_layouts_do_not_change_values():
    text = """HloModule t, entry_computation_layout={(f32[2,3]{0,1})->f32[3,2]{0,1}}
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT t = f32[3,2]{0,1} transpose(p), dimensions={1,0}
}
"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(minixla.compile(text, backend="interpreter")(x), x.T)


def test_metrics_count_executions():
    minixla.runtime.metrics.reset()
    exe = minixla.compile(NEG, backend="interpreter")
    exe(np.zeros((2, 3), np.float32), 1)
    exe(np.zeros((2, 3), np.float32), 1)
    assert minixla.metrics()["execute.interpreter"]["count"] == 2


def test_ops_doc_is_generated_from_the_opcode_table():
    from pathlib import Path

    from minixla.tools.docgen import ops_markdown

    committed = (Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    assert committed == ops_markdown(), "run: python -m minixla.tools.docgen > docs/ops.md"


@pytest.mark.skipif(backends.available().get("cpu") is not True, reason="cpu backend unavailable")
def test_cpu_custom_call_gets_the_same_config_string_and_rejects_interpreter_only_targets():
    seen = []

    def scale(out, x, *, backend_config):
        seen.append(backend_config)
        out[...] = x * float(backend_config.split("=")[1])

    minixla.register_custom_call("my.scale", "cpu", scale)
    minixla.register_custom_call("only.interp", "interpreter", lambda x, **_: x)
    try:
        exe = minixla.compile(CUSTOM.replace("{target}", "my.scale"), backend="cpu")
        np.testing.assert_array_equal(exe(np.array([1, 2, 3], np.float32)), [3, 6, 9])
        assert seen == ["scale=3"]
        with pytest.raises(CustomCallError, match="registered only for: interpreter"):
            minixla.compile(CUSTOM.replace("{target}", "only.interp"), backend="cpu")
    finally:
        unregister_custom_call("my.scale", "cpu")
        unregister_custom_call("only.interp", "interpreter")


@pytest.mark.skipif(backends.available().get("cpu") is not True, reason="cpu backend unavailable")
def test_dumps_hold_passes_kernels_and_the_buffer_assignment(tmp_path):
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "examples" / "mlp.hlo").read_text()
    minixla.compile(text, backend="cpu", dump_to=str(tmp_path), dump_pass_re="fusion")
    names = sorted(p.name for p in tmp_path.iterdir())
    prefix = names[0].split(".mlp_forward.")[0] + ".mlp_forward."
    assert prefix + "before_optimizations.txt" in names
    assert prefix + "after_optimizations.txt" in names
    assert any(n.startswith(prefix) and n.endswith(".after_fusion.txt") for n in names)
    kernels = (tmp_path / (prefix + "cpu.kernels.py")).read_text()
    assert "def " in kernels
    report = (tmp_path / (prefix + "buffer-assignment.txt")).read_text()
    assert "allocation 0:" in report
    fused = (tmp_path / (prefix + "after_optimizations.txt")).read_text()
    assert "fusion(" in fused and minixla.parse_hlo_module(fused)


def test_random_arguments_for_four_bit_integers_stay_in_range():
    from minixla.runtime.inputs import random_arguments

    text = (
        "HloModule m\nENTRY e {\n p = s4[64] parameter(0)\n q = u4[64] parameter(1)\n"
        " ROOT t = (s4[64], u4[64]) tuple(p, q)\n}\n"
    )
    signed, unsigned = random_arguments(minixla.parse_hlo_module(text), seed=0)
    assert signed.dtype.name == "int4" and unsigned.dtype.name == "uint4"
    assert -8 <= int(signed.astype(np.int8).min()) and int(signed.astype(np.int8).max()) <= 7
    assert 0 <= int(unsigned.astype(np.int8).min()) and int(unsigned.astype(np.int8).max()) <= 15
    out = minixla.compile(text, backend="interpreter")(signed, unsigned)
    np.testing.assert_array_equal(out[0].astype(np.int8), signed.astype(np.int8))
