"""minixla.pallas on cpu: the whole grid compiled into one Numba function (pallas/native.py),
its parallel grid axes, its fallback to the step-by-step runner, and its errors."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from pallas_kernels import F32, KERNELS

import minixla
import minixla.numpy as mnp
import minixla.pallas as pl
from minixla.runtime.metrics import metrics


def _runner(call, args, backend="cpu"):
    return call.runner([np.asarray(a) for a in args], backend)


def _count(name: str) -> int:
    return metrics().get(name, {}).get("count", 0)


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_runs_as_one_native_grid_function(name):
    call, args, want = KERNELS[name](np.random.default_rng(0), backend="cpu")
    before = _count("pallas.native.cpu")
    np.testing.assert_allclose(call(*args), want, rtol=1e-5, atol=1e-5)
    runner = _runner(call, args)
    assert runner.lowering == "native-cpu" and runner.fallback_reason == ""
    assert runner.executable is None  # no step module was compiled
    assert _count("pallas.native.cpu") == before + 1
    assert "def grid_kernel(" in runner.native.source


def test_parallel_axes_default_to_those_with_disjoint_output_blocks():
    matmul, args, _ = KERNELS["blocked_matmul"](np.random.default_rng(1), backend="cpu")
    matmul(*args)
    assert _runner(matmul, args).native.plan.parallel_axes == 2
    rowsum, args, _ = KERNELS["sum_with_scratch"](np.random.default_rng(1), backend="cpu")
    rowsum(*args)
    assert _runner(rowsum, args).native.plan.parallel_axes == 0  # scratch carries a value
    tail, args, _ = KERNELS["masked_tail"](np.random.default_rng(1), backend="cpu")
    tail(*args)
    assert _runner(tail, args).native.plan.parallel_axes == 0  # every step writes one block


def _accumulate_call(rows=8, cols=24, bm=4, bk=8, **options):
    """Output block i is revisited by every step (i, k): only axis 0 may run in parallel."""

    def accumulate_kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = mnp.zeros((bm,), F32)

        o_ref[...] += mnp.sum(x_ref[...], axis=1)

    return pl.pallas_call(
        accumulate_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows,), F32),
        grid=(rows // bm, cols // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((bm,), lambda i, k: (i,)),
        **options,
    )


def test_a_reduction_over_the_last_grid_axis_leaves_the_first_axis_parallel():
    call = _accumulate_call(rows=16, cols=32)
    x = np.random.default_rng(2).standard_normal((16, 32)).astype(F32)
    np.testing.assert_allclose(call(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)
    native = _runner(call, [x]).native
    assert native.plan.parallel_axes == 1
    assert not native.threads  # too few elements for threads (and too few cores here)
    assert "for t in range(1):" in native.source and "for u in range(16):" in native.source


def test_declared_parallel_axes_that_write_one_block_are_an_error():
    call = _accumulate_call(compiler_params={"dimension_semantics": ("parallel", "parallel")})
    with pytest.raises(
        pl.PallasError,
        match=r"kernel accumulate_kernel \(test_pallas_native.py:"
        r"\d+\): the grid axes \[0, 1\] are declared "
        r"parallel.*same output block",
    ):
        call(np.zeros((8, 24), F32))
    declared = _accumulate_call(compiler_params={"dimension_semantics": ("arbitrary", "arbitrary")})
    x = np.random.default_rng(3).standard_normal((8, 24)).astype(F32)
    np.testing.assert_allclose(declared(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)
    assert _runner(declared, [x]).native.plan.parallel_axes == 0


def test_bad_compiler_params_are_errors():
    with pytest.raises(
        pl.PallasError,
        match=r"dimension_semantics must give 'parallel' or "
        r"'arbitrary' for each of the 2 grid axes",
    ):
        _accumulate_call(compiler_params={"dimension_semantics": ("parallel",)})
    with pytest.raises(pl.PallasError, match=r"unknown compiler_params \['mosaic'\]"):
        _accumulate_call(compiler_params={"mosaic": {}})


def test_an_op_without_native_code_falls_back_to_the_step_runner_with_a_reason(caplog):
    def sort_kernel(x_ref, o_ref):
        o_ref[...] = mnp.sort(x_ref[...], axis=1)

    spec = pl.BlockSpec((2, 8), lambda i: (i, 0))
    call = pl.pallas_call(
        sort_kernel,
        out_shape=minixla.ShapeDtypeStruct((4, 8), F32),
        grid=(2,),
        in_specs=[spec],
        out_specs=spec,
        backend="cpu",
    )
    x = np.random.default_rng(4).standard_normal((4, 8)).astype(F32)
    with caplog.at_level(logging.WARNING, logger="minixla.pallas"):
        np.testing.assert_array_equal(call(x), np.sort(x, axis=1))
    runner = _runner(call, [x])
    assert runner.lowering == "step" and "sort" in runner.fallback_reason
    assert "kernel sort_kernel" in caplog.text and "step by step" in caplog.text


def test_dump_holds_the_grid_kernel_source(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_FLAGS", f"--dump_to={tmp_path}")
    call, args, want = KERNELS["row_softmax"](np.random.default_rng(5), backend="cpu")
    np.testing.assert_allclose(call(*args), want, rtol=1e-5, atol=1e-6)
    grid = (tmp_path / "pallas_softmax_kernel.grid.py").read_text()
    assert "def grid_kernel(in0, out0, offsets, failed):" in grid
    assert "for u in range(3):" in grid and "exponential_f32(" in grid


def test_int_and_scalar_blocks_and_a_kernel_reading_its_output():
    n, block = 12, 4

    def kernel(x_ref, k_ref, o_ref, total_ref):
        o_ref[...] = x_ref[...] * k_ref[0]
        o_ref[...] = o_ref[...][::-1] + 1  # reads its own output block, reversed
        total_ref[...] = total_ref[...] + mnp.sum(x_ref[...])

    call = pl.pallas_call(
        kernel,
        out_shape=(
            minixla.ShapeDtypeStruct((n,), np.int32),
            minixla.ShapeDtypeStruct((), np.int32),
        ),
        grid=(n // block,),
        in_specs=[pl.BlockSpec((block,), lambda i: (i,)), None],
        out_specs=[pl.BlockSpec((block,), lambda i: (i,)), None],
        backend="cpu",
    )
    x = np.arange(n, dtype=np.int32)
    out, total = call(x, np.array([3], np.int32))
    want = (x * 3).reshape(-1, block)[:, ::-1].reshape(-1) + 1
    np.testing.assert_array_equal(out, want)
    assert int(total) == x.sum()
    assert _runner(call, [x, np.array([3], np.int32)]).lowering == "native-cpu"


def test_a_masked_store_through_ds_writes_only_its_window():
    """Whole-array refs (no BlockSpec): each step stores one window, so the grid kernel
    writes that window, not the whole array, and the tail past the end is skipped."""
    call, args, want = KERNELS["masked_tail"](
        np.random.default_rng(6), n=45, block=8, backend="cpu"
    )
    np.testing.assert_allclose(call(*args), want, rtol=1e-6)
    lines = [line.strip() for line in _runner(call, args).native.source.splitlines()]
    guard = next(k for k, line in enumerate(lines) if re.fullmatch(r"if s\d+ \+ i\d+ < 45:", line))
    assert re.fullmatch(r"out0\[s\d+ \+ i\d+\] = a\d+\[i\d+\]", lines[guard + 1])
    assert lines[guard - 1] == f"for {lines[guard + 1].split('+ ')[1].split(']')[0]} in range(8):"


def test_threaded_grid_runs_parallel_rows_under_prange_with_a_scratch_buffer_each():
    rows, cols, bm, bk = 8, 32, 2, 8

    def rowsum_kernel(x_ref, o_ref, acc_ref):
        k = pl.program_id(1)

        @pl.when(k == 0)
        def _():
            acc_ref[...] = mnp.zeros((bm,), F32)

        acc_ref[...] += mnp.sum(x_ref[...], axis=1)

        @pl.when(k == pl.num_programs(1) - 1)
        def _():
            o_ref[...] = acc_ref[...]

    call = pl.pallas_call(
        rowsum_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows,), F32),
        grid=(rows // bm, cols // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((bm,), lambda i, k: (i,)),
        scratch_shapes=[pl.VMEM((bm,), F32)],
        compiler_params={"dimension_semantics": ("parallel", "arbitrary"), "parallel_threshold": 0},
    )
    x = np.random.default_rng(7).standard_normal((rows, cols)).astype(F32)
    np.testing.assert_allclose(call(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)
    native = _runner(call, [x]).native
    assert native.threads and native.plan.parallel_axes == 1
    assert "for t in prange(4):" in native.source and "for u in range(4):" in native.source
    assert "local0 = np.zeros((2,), np.float32)" in native.source


def test_native_grid_reports_an_unmasked_window_past_the_end_at_its_step():
    n, block = 20, 8

    def unmasked_store(x_ref, o_ref):
        start = pl.program_id(0) * block
        o_ref[pl.ds(start, block)] = mnp.ones((block,), F32)

    call = pl.pallas_call(
        unmasked_store,
        out_shape=minixla.ShapeDtypeStruct((n,), F32),
        grid=(pl.cdiv(n, block),),
        backend="cpu",
    )
    x = np.zeros(n, F32)
    with pytest.raises(
        pl.PallasError,
        match=r"test_pallas_native.py:\d+: store of output 0 "
        r"\(shape \(20,\)\).*reaches outside the ref.*"
        r"grid step \(2,\); kernel unmasked_store",
    ):
        call(x)
    assert _runner(call, [x]).lowering == "native-cpu"


def test_bf16_blocks_travel_as_bits_and_compute_like_the_interpreter():
    import ml_dtypes
    from types import SimpleNamespace

    bf16 = ml_dtypes.bfloat16

    def scale_kernel(x_ref, o_ref):
        v = x_ref[...]
        o_ref[...] = (v * 3 + mnp.max(v, axis=1, keepdims=True)).astype(bf16)

    spec = pl.BlockSpec((2, 8), lambda i: (i, 0))
    options = dict(
        out_shape=minixla.ShapeDtypeStruct((4, 8), bf16), grid=(2,), in_specs=[spec], out_specs=spec
    )
    native = pl.pallas_call(
        scale_kernel,
        backend="cpu",
        **options,
        compiler_params=SimpleNamespace(dimension_semantics=("parallel",)),
    )
    x = np.random.default_rng(8).standard_normal((4, 8)).astype(bf16)
    got = native(x)
    want = pl.pallas_call(scale_kernel, interpret=True, **options)(x)
    assert got.dtype == bf16
    np.testing.assert_array_equal(got.astype(F32), want.astype(F32))
    runner = _runner(native, [x])
    assert runner.lowering == "native-cpu" and runner.native.plan.parallel_axes == 1
