"""StableHLO/MHLO text in: the JAX corpus in tests/stablehlo/ and the MLIR syntax it uses.

Each corpus case was exported from one JAX function as StableHLO (NAME.mlir) and as HLO
(NAME.hlo), with JAX's results (NAME.npz); both texts must parse and give JAX's values on the
interpreter. tests/stablehlo/generate.py rebuilds the corpus (it needs jax; these tests do not).
"""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

import minixla
from minixla.cli import main
from minixla.errors import HloParseError

CORPUS = Path(__file__).parent / "stablehlo"
CASES = sorted(p.stem for p in CORPUS.glob("*.mlir"))


def _load_case(name):
    data = np.load(CORPUS / f"{name}.npz")
    count = sum(k.startswith("arg") for k in data)
    outs = sum(k.startswith("out") for k in data)
    return [data[f"arg{i}"] for i in range(count)], [data[f"out{i}"] for i in range(outs)]


def _leaves(result):
    return list(result) if isinstance(result, tuple) else [result]


def _close(got, want, name, rtol=2e-3):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, name
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=name)
    else:
        np.testing.assert_allclose(
            got.astype(want.dtype), want, rtol=rtol, atol=2e-5, equal_nan=True, err_msg=name
        )


def test_the_corpus_covers_what_jax_users_write():
    assert len(CASES) >= 40
    text = "".join((CORPUS / f"{c}.mlir").read_text() for c in CASES)
    for op in (
        "stablehlo.while",
        '"stablehlo.case"',
        '"stablehlo.sort"',
        "stablehlo.scatter",
        "stablehlo.gather",
        "stablehlo.convolution",
        "stablehlo.dot_general",
        "stablehlo.reduce(",
        '"stablehlo.reduce_window"',
        "stablehlo.custom_call",
        "chlo.top_k",
        "bf16",
        "complex",
        "func.call",
        "dense<0x",
    ):
        assert op in text, op


@pytest.mark.parametrize("name", CASES)
def test_stablehlo_and_hlo_exports_give_jax_results(name):
    args, want = _load_case(name)
    from_mlir = minixla.parse_module((CORPUS / f"{name}.mlir").read_text())
    from_hlo = minixla.parse_module((CORPUS / f"{name}.hlo").read_text())
    got_mlir = _leaves(minixla.compile(from_mlir)(*args))
    got_hlo = _leaves(minixla.compile(from_hlo)(*args))
    assert len(got_mlir) == len(got_hlo) == len(want)
    # XLA:CPU computes bf16 arithmetic in f32 and rounds once; the interpreter rounds each op
    rtol = 1e-2 if name == "bf16" else 2e-3
    for i, (a, b, w) in enumerate(zip(got_mlir, got_hlo, want)):
        _close(a, b, f"{name} out{i}: StableHLO vs HLO", rtol=1e-5)
        _close(a, w, f"{name}.mlir out{i} vs JAX", rtol)
    assert from_mlir.entry.parameter_shapes == [p.shape for p in from_hlo.entry.parameters]


def test_parse_module_tells_mlir_from_hlo():
    module = minixla.parse_module(
        "// a comment\nmodule @m {\n  func.func @main(%a: tensor<2xf32>)"
        " -> tensor<2xf32> {\n    %0 = stablehlo.negate %a : "
        "tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}\n"
    )
    assert module.entry.root.opcode == "negate"
    hlo = minixla.parse_module("HloModule m\nENTRY e {\n  ROOT p = f32[2] parameter(0)\n}\n")
    assert hlo.entry.root.opcode == "parameter"


def _run(text, *args):
    return minixla.compile(minixla.parse_module(text))(*args)


def _func(body: str, args: str = "%a: tensor<4xf32>", result: str = "tensor<4xf32>") -> str:
    return f"func.func @main({args}) -> {result} {{\n{body}\n}}\n"


def test_types_with_dynamic_dims_and_bounds():
    text = _func(
        "  return %a : tensor<?x3xf32, #stablehlo.bounds<8, ?>>",
        "%a: tensor<?x3xf32, #stablehlo.bounds<8, ?>>",
        "tensor<?x3xf32, #stablehlo.bounds<8, ?>>",
    )
    shape = minixla.parse_module(text, verify=False).entry.parameter(0).shape
    assert (shape.dims, shape.dynamic) == ((8, 3), (True, False))
    assert str(shape).startswith("f32[<=8,3]")


def test_dense_constants_splat_nested_hex_and_complex():
    text = _func(
        """  %0 = stablehlo.constant dense<[[1.5, 0x7F800000], [-2.0, 0xFFC00000]]> : tensor<2x2xf32>
  %1 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
  %2 = stablehlo.constant dense<7> : tensor<3xi32>
  %3 = stablehlo.constant dense<[(1.0, 2.0), (3.0, -4.0)]> : tensor<2xcomplex<f32>>
  %4 = stablehlo.constant dense<[true, false]> : tensor<2xi1>
  return %0, %1, %2, %3, %4 : tensor<2x2xf32>, tensor<2xf32>, tensor<3xi32>, tensor<2xcomplex<f32>>, tensor<2xi1>""",
        "",
        "(tensor<2x2xf32>, tensor<2xf32>, tensor<3xi32>, tensor<2xcomplex<f32>>, tensor<2xi1>)",
    )
    a, b, c, d, e = _run(text)
    assert a[0, 0] == 1.5 and np.isposinf(a[0, 1]) and np.isnan(a[1, 1]) and a[1, 0] == -2
    np.testing.assert_array_equal(b, [1.0, 2.0])
    np.testing.assert_array_equal(c, [7, 7, 7])
    np.testing.assert_array_equal(d, np.array([1 + 2j, 3 - 4j], np.complex64))
    np.testing.assert_array_equal(e, [True, False])


def test_dense_resource_blobs_at_the_end_of_the_file():
    text = (
        "module {\n"
        + _func(
            "  %0 = stablehlo.constant dense_resource<blob1> : "
            "tensor<2xf32>\n  return %0 : tensor<2xf32>",
            "",
            "tensor<2xf32>",
        )
        + "}\n{-#\n  dialect_resources: {\n    builtin: {\n      blob1: "
        '"0x040000000000803F00004040"\n    }\n  }\n#-}\n'
    )
    np.testing.assert_array_equal(_run(text), [1.0, 3.0])


def test_bf16_bitcast_convert_and_reduce_precision():
    text = _func(
        """  %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xbf16>
  %1 = stablehlo.reduce_precision %a, format = e5m2 : tensor<4xf32>
  %2 = stablehlo.bitcast_convert %a : (tensor<4xf32>) -> tensor<4xui32>
  return %0, %1, %2 : tensor<4xbf16>, tensor<4xf32>, tensor<4xui32>""",
        result="(tensor<4xbf16>, tensor<4xf32>, tensor<4xui32>)",
    )
    x = np.array([1.0, 1.3, -2.7, 1e-3], np.float32)
    rounded, low, bits = _run(text, x)
    np.testing.assert_allclose(rounded.astype(np.float32), x, rtol=1e-2)
    assert low[1] == 1.25  # 2 mantissa bits
    np.testing.assert_array_equal(bits, x.view(np.uint32))


def test_case_branches_capture_outer_values():
    text = _func(
        """  %c = stablehlo.constant dense<1> : tensor<i32>
  %b = stablehlo.multiply %a, %a : tensor<4xf32>
  %0 = "stablehlo.case"(%i) ({
    stablehlo.return %a : tensor<4xf32>
  }, {
    %1 = stablehlo.add %a, %b : tensor<4xf32>
    stablehlo.return %1 : tensor<4xf32>
  }) : (tensor<i32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>""",
        "%i: tensor<i32>, %a: tensor<4xf32>",
    )
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run(text, np.int32(0), x), x)
    np.testing.assert_array_equal(_run(text, np.int32(1), x), x + x * x)
    np.testing.assert_array_equal(_run(text, np.int32(7), x), x + x * x)  # clamps, as HLO


def test_if_and_while_with_captures():
    text = _func(
        """  %k = stablehlo.constant dense<3.0> : tensor<f32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %0:2 = stablehlo.while(%i = %z, %v = %a) : tensor<i32>, tensor<f32>
  cond {
    %n = stablehlo.constant dense<4> : tensor<i32>
    %c = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %c : tensor<i1>
  } do {
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
    %w = stablehlo.add %v, %k : tensor<f32>
    stablehlo.return %j, %w : tensor<i32>, tensor<f32>
  }
  %p = stablehlo.compare GT, %0#1, %k, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %r = "stablehlo.if"(%p) ({
    stablehlo.return %0#1 : tensor<f32>
  }, {
    %n = stablehlo.negate %k : tensor<f32>
    stablehlo.return %n : tensor<f32>
  }) : (tensor<i1>) -> tensor<f32>
  return %r : tensor<f32>""",
        "%a: tensor<f32>",
        "tensor<f32>",
    )
    assert _run(text, np.float32(1.0)) == 13.0
    assert _run(text, np.float32(-20.0)) == -3.0


def test_composite_is_inlined_and_func_call_becomes_call():
    text = """module @m {
  func.func public @main(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.composite "my.double" %a {composite_attributes = {scale = 2 : i64}, decomposition = @my.double.impl} : (tensor<3xf32>) -> tensor<3xf32>
    %1 = call @plus_one(%0) : (tensor<3xf32>) -> tensor<3xf32>
    return %1 : tensor<3xf32>
  }
  func.func private @my.double.impl(%x: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %x, %x : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func private @plus_one(%x: tensor<3xf32>) -> tensor<3xf32> {
    %c = stablehlo.constant dense<1.0> : tensor<f32>
    %b = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<3xf32>
    %0 = stablehlo.add %x, %b : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
}
"""
    module = minixla.parse_module(text)
    opcodes = [i.opcode for i in module.entry.instructions]
    assert "call" in opcodes and "add" in opcodes
    assert [c.name for c in module.computations] == ["plus_one", "main"]
    np.testing.assert_array_equal(
        minixla.compile(module)(np.arange(3, dtype=np.float32)), [1, 3, 5]
    )


def test_custom_call_keeps_target_api_version_config_and_sharding():
    text = _func(
        "  %0 = stablehlo.custom_call @my_target(%a) {api_version = 4 : i32, "
        'backend_config = {alpha = 1 : i32}, mhlo.sharding = "{replicated}"} : '
        "(tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>",
        '%a: tensor<4xf32> {mhlo.sharding = "{devices=[2]0,1}"}',
    )
    module = minixla.parse_module(text)
    call = module.entry.root
    assert call.attrs["custom_call_target"] == "my_target"
    assert call.attrs["api_version"] == "API_VERSION_TYPED_FFI"
    assert str(call.attrs["backend_config"]) == "{alpha = 1 : i32}"
    assert str(call.attrs["sharding"]) == "{replicated}"
    assert str(module.entry.parameter(0).attrs["sharding"]) == "{devices=[2]0,1}"
    again = minixla.parse_module(module.to_text())  # the HLO text round-trips
    assert str(again.entry.root.attrs["sharding"]) == "{replicated}"


def test_mhlo_and_chlo_ops():
    text = _func(
        """  %0 = mhlo.add %a, %a : tensor<4xf32>
  %1 = chlo.is_inf %0 : tensor<4xf32> -> tensor<4xi1>
  %2 = chlo.sinh %a : tensor<4xf32> -> tensor<4xf32>
  return %1, %2 : tensor<4xi1>, tensor<4xf32>""",
        result="(tensor<4xi1>, tensor<4xf32>)",
    )
    x = np.array([1.0, np.inf, -np.inf, 0.0], np.float32)
    inf, sinh = _run(text, x)
    np.testing.assert_array_equal(inf, [False, True, True, False])
    np.testing.assert_allclose(sinh[[0, 3]], np.sinh(x[[0, 3]]), rtol=1e-6)


def test_unsupported_op_names_it_with_line_and_column():
    text = _func("  %0 = stablehlo.frobnicate %a : tensor<4xf32>\n  return %0 : tensor<4xf32>")
    with pytest.raises(HloParseError) as info:
        minixla.parse_module(text)
    assert (info.value.line, info.value.column) == (2, 8)
    assert "stablehlo.frobnicate" in info.value.reason


@pytest.mark.parametrize(
    "text, message",
    [
        (_func("  return %b : tensor<4xf32>"), "undefined value %b"),
        (_func("  %0 = stablehlo.add %a, %a : tensor<4xf32"), "unclosed"),
        (
            "module {\n  func.func @main(%a: tensor<4xq9>) -> tensor<4xf32> {\n  }\n}",
            "unsupported element type q9",
        ),
    ],
)
def test_bad_mlir_is_a_parse_error(text, message):
    with pytest.raises(HloParseError, match=message) as info:
        minixla.parse_module(text)
    assert info.value.line > 0


def test_cli_runs_mlir_files_and_stdin(tmp_path, capsys, monkeypatch):
    path = CORPUS / "softmax.mlir"
    assert main(["run", str(path), "--backend", "interpreter", "--quiet"]) == 0
    assert "out0: float32[3, 10]" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO(path.read_text()))
    assert main(["run", "-", "--backend", "interpreter", "--quiet"]) == 0
    assert "out0: float32[3, 10]" in capsys.readouterr().out
    assert main(["opt", str(CORPUS / "mlp.mlir"), "-p", "dce"]) == 0
    assert "dot(" in capsys.readouterr().out


def test_jax_lowered_objects_compile_directly():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    lowered = jax.jit(lambda v: jnp.tanh(v) * 3).lower(x)
    want = np.tanh(x) * 3
    for program in (
        lowered,
        lowered.compile(),
        lowered.compiler_ir("hlo"),
        lowered.compiler_ir("stablehlo"),
    ):
        np.testing.assert_allclose(minixla.compile(program)(x), want, rtol=1e-6)
