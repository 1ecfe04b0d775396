"""minixla.pallas: kernels over blocks against NumPy on the interpreter and cpu, inside and
outside jit, and the errors for bad kernels and specs."""

from __future__ import annotations

import numpy as np
import pytest
from pallas_kernels import KERNELS, F32

import minixla
import minixla.lax as lax
import minixla.numpy as mnp
import minixla.pallas as pl

MODES = [{"interpret": True}, {"backend": "cpu"}, {"backend": "cpu", "lowering": "loop"}]
MODE_IDS = ["interpret", "cpu", "cpu-loop"]


@pytest.mark.parametrize("options", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_matches_numpy(name, options):
    call, args, want = KERNELS[name](np.random.default_rng(0), **options)
    got = call(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(KERNELS))
def test_kernel_inside_jit_matches_eager_call(name):
    call, args, want = KERNELS[name](np.random.default_rng(1), backend="cpu")
    twice = minixla.jit(lambda *xs: call(*xs) * 2.0)
    np.testing.assert_allclose(twice(*args), want * 2, rtol=1e-5, atol=1e-5)
    text = twice.lower(*args).as_text()
    assert text.count("custom-call(") == 1 and 'custom_call_target="pallas.' in text


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_kernel_inside_jit_on_each_backend_and_interpret_inside_jit(backend):
    for options in ({"backend": backend}, {"interpret": True}):
        call, args, want = KERNELS["masked_tail"](np.random.default_rng(5), **options)
        fn = minixla.jit(lambda x: call(x) + 1.0, backend=backend)  # noqa: B023 - called now
        np.testing.assert_allclose(fn(*args), want + 1, rtol=1e-6)


def test_the_grid_step_is_traced_once_into_one_module():
    call, args, _ = KERNELS["blocked_matmul"](np.random.default_rng(2), backend="cpu")
    call(*args)
    call(*args)
    assert len(call._runners) == 1
    step = call.lower(*args)
    params = [p.name.split(".")[0] for p in step.entry.parameters]
    assert params[:2] == ["program_id_0", "program_id_1"]
    assert str(step.entry.parameter(2).shape.without_layout()) == "f32[16,40]"


def test_dump_to_writes_the_kernel_source_next_to_the_step_module(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIXLA_FLAGS", f"--dump_to={tmp_path}")
    call, args, want = KERNELS["vector_add"](np.random.default_rng(7), backend="cpu")
    np.testing.assert_array_equal(call(*args), want)
    source = (tmp_path / "pallas_add_kernel.kernel.py").read_text()
    assert "def add_kernel(x_ref, y_ref, o_ref):" in source
    assert "input 0: shape (64,), block (16,), float32" in source
    assert any(
        p.name.endswith("pallas_add_kernel.before_optimizations.txt") for p in tmp_path.iterdir()
    )


def test_loop_lowering_is_one_while_loop_in_the_hlo():
    call, args, _ = KERNELS["vector_add"](np.random.default_rng(2), lowering="loop")
    text = call.lower(*args).to_text()
    assert text.count(" while(") == 1
    assert "dynamic-update-slice" in text


def test_ragged_blocks_with_masks_two_dims():
    rows, cols, bm, bn = 10, 13, 4, 8

    def copy_kernel(x_ref, o_ref):
        i, j = pl.program_id(0), pl.program_id(1)
        r = i * bm + mnp.arange(bm)[:, None]
        c = j * bn + mnp.arange(bn)[None, :]
        mask = (r < rows) & (c < cols)
        x = pl.load(x_ref, (slice(None), slice(None)), mask=mask, other=-1.0)
        pl.store(o_ref, ..., x + 1.0, mask=mask)

    spec = pl.BlockSpec((bm, bn), lambda i, j: (i, j))
    x = np.random.default_rng(3).standard_normal((rows, cols)).astype(F32)
    for options in MODES:
        call = pl.pallas_call(
            copy_kernel,
            out_shape=minixla.ShapeDtypeStruct(x.shape, F32),
            grid=(pl.cdiv(rows, bm), pl.cdiv(cols, bn)),
            in_specs=[spec],
            out_specs=spec,
            **options,
        )
        np.testing.assert_allclose(call(x), x + 1, rtol=1e-6)


def test_multiple_outputs_and_int_program_ids():
    n, block = 24, 8

    def kernel(x_ref, s_ref, ids_ref):
        s_ref[...] = x_ref[...] * x_ref[...]
        ids_ref[...] = mnp.full((block,), pl.program_id(0), np.int32)

    spec = pl.BlockSpec((block,), lambda i: (i,))
    call = pl.pallas_call(
        kernel,
        out_shape=(minixla.ShapeDtypeStruct((n,), F32), minixla.ShapeDtypeStruct((n,), np.int32)),
        grid=(n // block,),
        in_specs=[spec],
        out_specs=[spec, spec],
    )
    x = np.arange(n, dtype=F32)
    squares, ids = call(x)
    np.testing.assert_array_equal(squares, x * x)
    np.testing.assert_array_equal(ids, np.arange(n) // block)


def test_squeezed_block_dims_and_reduction_over_a_grid_axis():
    rows, cols = 6, 10

    def row_max_kernel(x_ref, o_ref):
        o_ref[0] = mnp.max(x_ref[...])  # block (None, cols): one row, squeezed

    call = pl.pallas_call(
        row_max_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows, 1), F32),
        grid=(rows,),
        in_specs=[pl.BlockSpec((None, cols), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((None, 1), lambda i: (i, 0)),
    )
    x = np.random.default_rng(4).standard_normal((rows, cols)).astype(F32)
    np.testing.assert_array_equal(call(x)[:, 0], x.max(axis=1))


@pytest.mark.parametrize("lowering", ["custom_call", "loop"])
def test_output_block_revisited_over_the_last_grid_axis_accumulates(lowering):
    """The K axis of the grid walks column blocks; the output block stays the same, so the
    kernel adds into it (zeroed at k == 0), as a Pallas matmul over a K grid axis does."""
    rows, cols, bm, bk = 8, 24, 4, 8

    def accumulate_kernel(x_ref, o_ref):
        @pl.when(pl.program_id(1) == 0)
        def _():
            o_ref[...] = mnp.zeros((bm,), F32)

        o_ref[...] += mnp.sum(x_ref[...], axis=1)

    call = pl.pallas_call(
        accumulate_kernel,
        out_shape=minixla.ShapeDtypeStruct((rows,), F32),
        grid=(rows // bm, cols // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, k: (i, k))],
        out_specs=pl.BlockSpec((bm,), lambda i, k: (i,)),
        lowering=lowering,
    )
    x = np.random.default_rng(6).standard_normal((rows, cols)).astype(F32)
    np.testing.assert_allclose(call(x), x.sum(axis=1), rtol=1e-5, atol=1e-5)


# -- errors -------------------------------------------------------------------------------------
def _double(x_ref, o_ref):
    o_ref[...] = x_ref[...] * 2.0


def test_block_that_does_not_divide_without_a_mask_is_an_error():
    spec = pl.BlockSpec((8,), lambda i: (i,))
    call = pl.pallas_call(
        _double,
        out_shape=minixla.ShapeDtypeStruct((20,), F32),
        grid=(3,),
        in_specs=[spec],
        out_specs=spec,
    )
    with pytest.raises(
        pl.PallasError,
        match=r"kernel _double \(test_pallas.py:\d+\).*does "
        r"not divide.*mask",
    ):
        call(np.zeros(20, F32))


def test_index_map_with_the_wrong_arity_is_an_error():
    call = pl.pallas_call(
        _double,
        out_shape=minixla.ShapeDtypeStruct((4, 8), F32),
        grid=(2,),
        in_specs=[pl.BlockSpec((2, 8), lambda i: (i,))],
        out_specs=pl.BlockSpec((2, 8), lambda i: (i, 0)),
    )
    with pytest.raises(
        pl.PallasError,
        match=r"kernel _double.*index map of input 0 returned 1 "
        r"block indices.*rank 2",
    ):
        call(np.zeros((4, 8), F32))


def test_index_map_selecting_a_block_outside_the_array_is_an_error():
    spec = pl.BlockSpec((4,), lambda i: (i + 1,))
    call = pl.pallas_call(
        _double,
        out_shape=minixla.ShapeDtypeStruct((8,), F32),
        grid=(2,),
        in_specs=[spec],
        out_specs=pl.BlockSpec((4,), lambda i: (i,)),
    )
    with pytest.raises(
        pl.PallasError,
        match=r"at grid step \(1,\) the index map of input 0 "
        r"selects elements \[8, 12\) of dim 0",
    ):
        call(np.zeros(8, F32))


def test_a_ref_used_as_an_array_is_an_error():
    def numpy_on_ref(x_ref, o_ref):
        o_ref[...] = np.exp(np.asarray(x_ref))

    call = pl.pallas_call(numpy_on_ref, out_shape=minixla.ShapeDtypeStruct((4,), F32))
    with pytest.raises(pl.PallasError, match=r"input 0 is a kernel ref, not an array"):
        call(np.zeros(4, F32))


def test_out_shape_and_out_specs_mismatch_is_an_error():
    spec = pl.BlockSpec((4,), lambda i: (i,))
    with pytest.raises(pl.PallasError, match=r"kernel _double.*2 out_specs for 1 outputs"):
        pl.pallas_call(
            _double,
            out_shape=minixla.ShapeDtypeStruct((8,), F32),
            grid=(2,),
            in_specs=[spec],
            out_specs=[spec, spec],
        )


def test_block_rank_mismatch_and_argument_count_are_errors():
    call = pl.pallas_call(
        _double,
        out_shape=minixla.ShapeDtypeStruct((8,), F32),
        grid=(2,),
        in_specs=[pl.BlockSpec((4, 1), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((4,), lambda i: (i,)),
    )
    with pytest.raises(pl.PallasError, match=r"block shape \(4, 1\) of input 0 has rank 2"):
        call(np.zeros(8, F32))
    with pytest.raises(pl.PallasError, match=r"called with 2 arguments but given 1 in_specs"):
        call(np.zeros(8, F32), np.zeros(8, F32))


def test_store_of_the_wrong_shape_names_the_kernel_line():
    def bad_store(x_ref, o_ref):
        o_ref[...] = mnp.zeros((3,), F32)  # the block is (4,)

    call = pl.pallas_call(
        bad_store,
        out_shape=minixla.ShapeDtypeStruct((8,), F32),
        grid=(2,),
        in_specs=[pl.BlockSpec((4,), lambda i: (i,))],
        out_specs=pl.BlockSpec((4,), lambda i: (i,)),
    )
    with pytest.raises(
        pl.PallasError,
        match=r"test_pallas.py:\d+: store to output 0: a value "
        r"of shape \(3,\)",
    ):
        call(np.zeros(8, F32))


def test_static_out_of_bounds_load_is_an_error():
    def overread(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(6, 4)]

    call = pl.pallas_call(overread, out_shape=minixla.ShapeDtypeStruct((4,), F32))
    with pytest.raises(
        pl.PallasError,
        match=r"load of input 0: elements \[6, 10\) of dim 0 are "
        r"out of bounds for size 8",
    ):
        call(np.zeros(8, F32))


@pytest.mark.parametrize("options", MODES[:2], ids=MODE_IDS[:2])
def test_unmasked_window_at_a_computed_start_past_the_end_is_an_error(options):
    n, block = 20, 8

    def unmasked_tail(x_ref, o_ref):
        start = pl.program_id(0) * block
        o_ref[pl.ds(start, block)] = x_ref[pl.ds(start, block)] * 2.0

    call = pl.pallas_call(
        unmasked_tail,
        out_shape=minixla.ShapeDtypeStruct((n,), F32),
        grid=(pl.cdiv(n, block),),
        **options,
    )
    with pytest.raises(
        pl.PallasError,
        match=r"test_pallas.py:\d+: load of input 0 \(shape "
        r"\(20,\)\) with window \(8 from a computed start\)"
        r" reaches outside the ref.*grid step \(2,\)",
    ):
        call(np.zeros(n, F32))
    in_range = pl.pallas_call(
        unmasked_tail, out_shape=minixla.ShapeDtypeStruct((16,), F32), grid=(2,), **options
    )
    x = np.arange(16, dtype=F32)
    np.testing.assert_array_equal(in_range(x), 2 * x)


def test_a_float_start_is_an_error():
    def float_start(x_ref, o_ref):
        o_ref[...] = x_ref[pl.ds(pl.program_id(0) * 0.5, 4)]

    call = pl.pallas_call(float_start, out_shape=minixla.ShapeDtypeStruct((4,), F32), grid=(2,))
    with pytest.raises(
        pl.PallasError,
        match=r"input 0: the start of dim 0 must be an integer "
        r"scalar, got float32\[\]",
    ):
        call(np.zeros(8, F32))


def test_store_inside_a_loop_body_is_an_error():
    def loop_store(x_ref, o_ref):
        def body(i, c):
            o_ref[...] = x_ref[...]
            return c

        lax.fori_loop(0, 2, body, 0)

    call = pl.pallas_call(loop_store, out_shape=minixla.ShapeDtypeStruct((4,), F32))
    with pytest.raises(pl.PallasError, match=r"inside a lax loop or cond body"):
        call(np.zeros(4, F32))


def test_program_id_outside_a_kernel_and_unknown_options_are_errors():
    with pytest.raises(pl.PallasError, match=r"only available inside a kernel"):
        pl.program_id(0)
    with pytest.raises(pl.PallasError, match=r"unknown pallas_call options \['grid_spec'\]"):
        pl.pallas_call(_double, out_shape=minixla.ShapeDtypeStruct((4,), F32), grid_spec=1)


def test_shape_dtype_struct():
    s = minixla.ShapeDtypeStruct((2, 3), np.float32)
    assert s.shape == (2, 3) and s.dtype == np.float32 and s.size == 6 and s.ndim == 2
    assert s == minixla.ShapeDtypeStruct([2, 3], "float32")
    assert pl.cdiv(10, 4) == 3 and pl.cdiv(8, 4) == 2
