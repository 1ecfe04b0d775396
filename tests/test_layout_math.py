"""Physical offsets and sizes under XLA layouts; every expected number is worked out by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minixla.ir.layout_math import (
    logical_to_physical,
    physical_offset,
    physical_shape,
    physical_size,
    physical_size_bytes,
    physical_to_logical,
)

T8_128 = ((8, 128),)


def test_column_major_rank2():
    # f32[3,5]{0,1}: physical dims (5,3), so (i,j) -> j*3 + i.
    assert physical_offset((2, 1), (3, 5), (0, 1)) == 5
    assert physical_offset((0, 4), (3, 5), (0, 1)) == 12
    assert physical_offset((2, 4), (3, 5), (0, 1)) == 14
    assert physical_shape((3, 5), (0, 1)) == (5, 3)
    assert physical_size((3, 5), (0, 1)) == 15


def test_permuted_rank3():
    # f32[2,3,4]{0,2,1}: major-to-minor is (1,2,0), physical dims (3,4,2): (i,j,k) -> j*8 + k*2 + i.
    dims, m2m = (2, 3, 4), (0, 2, 1)
    assert physical_shape(dims, m2m) == (3, 4, 2)
    assert physical_offset((1, 0, 0), dims, m2m) == 1
    assert physical_offset((0, 0, 1), dims, m2m) == 2
    assert physical_offset((0, 1, 0), dims, m2m) == 8
    assert physical_offset((1, 2, 3), dims, m2m) == 23


def test_single_full_tile_is_identity():
    # f32[8,128]{1,0:T(8,128)}: one tile, grid (1,1), so the offset stays i*128 + j.
    assert physical_shape((8, 128), (1, 0), T8_128) == (1, 1, 8, 128)
    assert physical_offset((3, 5), (8, 128), (1, 0), T8_128) == 3 * 128 + 5
    assert physical_offset((7, 127), (8, 128), (1, 0), T8_128) == 1023


def test_partial_tiles_are_padded():
    # f32[10,130]{1,0:T(8,128)}: grid (2,2) of 8x128 tiles -> shape (2,2,8,128), 16*256 slots.
    # Offset = (tile_row*2 + tile_col)*1024 + within_row*128 + within_col.
    dims = (10, 130)
    assert physical_shape(dims, (1, 0), T8_128) == (2, 2, 8, 128)
    assert physical_size(dims, (1, 0), T8_128) == 16 * 256
    assert physical_offset((2, 3), dims, (1, 0), T8_128) == 2 * 128 + 3
    assert physical_offset((7, 127), dims, (1, 0), T8_128) == 1023
    assert physical_offset((0, 128), dims, (1, 0), T8_128) == 1 * 1024  # tile (0,1)
    assert physical_offset((8, 0), dims, (1, 0), T8_128) == 2 * 1024  # tile (1,0)
    assert physical_offset((9, 129), dims, (1, 0), T8_128) == 3 * 1024 + 1 * 128 + 1  # 3201


def test_xla_doc_figure1():
    # F32[3,5]{1,0:T(2,2)}, element (2,3): tile (1,1) in grid (2,3), within (0,1):
    # (1*3+1)*4 + 1 = 17.
    assert physical_offset((2, 3), (3, 5), (1, 0), ((2, 2),)) == 17
    assert physical_size((3, 5), (1, 0), ((2, 2),)) == 2 * 3 * 4


def test_tiles_apply_to_physical_dims():
    # f32[5,7]{1,0:T(2,4)}, (3,6): grid (3,2), tile (1,1), within (1,2): ((1*2+1)*2+1)*4+2 = 30.
    assert physical_offset((3, 6), (5, 7), (1, 0), ((2, 4),)) == 30
    assert physical_size((5, 7), (1, 0), ((2, 4),)) == 48
    # Column-major: physical (7,5), element (6,3); grid (4,2), tile (3,0), within (0,3): 12*4+3 = 51
    assert physical_offset((3, 6), (5, 7), (0, 1), ((2, 4),)) == 51
    assert physical_size((5, 7), (0, 1), ((2, 4),)) == 64


def test_two_level_bf16_packing():
    # bf16[16,256]{1,0:T(8,128)(2,1)}: first level -> (2,2,8,128); (2,1) splits the (8,128) box into
    # (4,128) and (2,1): shape (2,2,4,128,2,1). Rows 2r and 2r+1 of one column become neighbours.
    dims, tiles = (16, 256), ((8, 128), (2, 1))
    assert physical_shape(dims, (1, 0), tiles) == (2, 2, 4, 128, 2, 1)
    first = [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [physical_offset(i, dims, (1, 0), tiles) for i in first] == [0, 1, 2, 3]
    # (9,130): (1,1,1,2) -> (1,1, 0,2, 1,0): (((3*4+0)*128+2)*2+1) = 3077; (8,130) one less.
    assert physical_offset((9, 130), dims, (1, 0), tiles) == 3077
    assert physical_offset((8, 130), dims, (1, 0), tiles) == 3076


def test_second_tile_on_tile_counts():
    # XLA doc: 8x8 with (2,4)(2,1,1,1). (6,5) -> (3,1,0,1) in (4,2,2,4); the second tile splits the
    # tile-row count: (1,1,0,1, 1,0,0,0) in (2,2,2,4,2,1,1,1) -> 32 + 16 + 2 + 1 = 51.
    assert physical_offset((6, 5), (8, 8), (1, 0), ((2, 4), (2, 1, 1, 1))) == 51


def test_tile_with_fewer_dims():
    # f32[2,3,5]{2,1,0:T(4)}: only the minor dim is tiled, giving (2,3,2,4);
    # (a,b,c) -> ((a*3+b)*2 + c//4)*4 + c%4.
    dims, tiles = (2, 3, 5), ((4,),)
    assert physical_shape(dims, (2, 1, 0), tiles) == (2, 3, 2, 4)
    assert physical_offset((0, 1, 3), dims, (2, 1, 0), tiles) == 11
    assert physical_offset((1, 0, 0), dims, (2, 1, 0), tiles) == 24
    assert physical_offset((1, 2, 4), dims, (2, 1, 0), tiles) == 44


def test_tile_with_more_dims_pads_leading_ones():
    # f32[5]{0:T(8,128)} is tiled as f32[1,5]: (1,1,8,128), as XLA's ArraySize rounds 1 up to 8.
    assert physical_shape((5,), (0,), T8_128) == (1, 1, 8, 128)
    assert physical_offset((3,), (5,), (0,), T8_128) == 3


def test_rank0():
    assert physical_offset((), (), ()) == 0
    assert physical_shape((), ()) == ()
    assert physical_size((), ()) == 1
    # f32[]{:T(128)}: one 128-slot tile.
    assert physical_size((), (), ((128,),)) == 128
    assert logical_to_physical(np.float32(3.0), ()).tolist() == [3.0]
    assert physical_to_logical(np.array([7.0]), (), ()).shape == ()


def test_combine_dimension():
    # bf16[2,3,1004]{2,1,0:T(2,*,128)}: dims 1,2 merge into 3012; tile (2,128) -> grid (1,24).
    dims, tiles = (2, 3, 1004), ((2, -1, 128),)
    assert physical_shape(dims, (2, 1, 0), tiles) == (1, 24, 2, 128)
    # (0,1,0): merged 1004 = 7*128 + 108 -> (0,7, 0,108): 7*256 + 108 = 1900.
    assert physical_offset((0, 1, 0), dims, (2, 1, 0), tiles) == 1900
    # (1,2,1003): merged 3011 = 23*128 + 67 -> (0,23, 1,67): 23*256 + 128 + 67 = 6083.
    assert physical_offset((1, 2, 1003), dims, (2, 1, 0), tiles) == 6083
    # XLA doc: F32[2,7,8,11,10] with (*,*,2,*,3) is (112,110) tiled by (2,3) -> (56,37,2,3).
    tiles = ((-1, -1, 2, -1, 3),)
    assert physical_shape((2, 7, 8, 11, 10), (4, 3, 2, 1, 0), tiles) == (56, 37, 2, 3)


def test_size_in_bytes():
    # s4[1024]{0:E(4)}: 4096 bits.
    assert physical_size_bytes((1024,), (0,), (), 4, element_size_in_bits=4) == 512
    assert physical_size_bytes((1023,), (0,), (), 4, element_size_in_bits=4) == 512  # 4092 bits
    assert physical_size_bytes((5,), (0,), (), 4, element_size_in_bits=4) == 3  # 20 bits
    assert physical_size_bytes((5,), (0,), (), 4) == 5  # unpacked: a byte each
    assert physical_size_bytes((7,), (0,), (), 4, 4, tail_padding_alignment=4) == 4  # 8 slots
    assert physical_size_bytes((3, 5), (1, 0), (), 32, tail_padding_alignment=8) == 64  # 16 slots
    # u4[3,5]{1,0:T(2,2)E(4)}: 24 slots * 4 bits.
    assert physical_size_bytes((3, 5), (1, 0), ((2, 2),), 4, element_size_in_bits=4) == 12
    assert physical_size_bytes((10, 130), (1, 0), T8_128, 32) == 16 * 256 * 4
    assert physical_size_bytes((16, 256), (1, 0), ((8, 128), (2, 1)), 16) == 8192


def test_padding_is_zero_and_layout_round_trips():
    # f32[3,5]{1,0:T(2,2)}: grid (2,3); column 5 and row 3 are padding.
    array = np.arange(1, 16, dtype=np.float32).reshape(3, 5)
    buffer = logical_to_physical(array, (1, 0), ((2, 2),))
    # Tiles in row-major order, each 2x2 row-major; value = 5*i + j + 1.
    assert buffer.tolist() == [
        1,
        2,
        6,
        7,
        3,
        4,
        8,
        9,
        5,
        0,
        10,
        0,
        11,
        12,
        0,
        0,
        13,
        14,
        0,
        0,
        15,
        0,
        0,
        0,
    ]
    assert (physical_to_logical(buffer, (3, 5), (1, 0), ((2, 2),)) == array).all()


@pytest.mark.parametrize(
    "call",
    [
        lambda: physical_offset((0, 0), (2, 2), (0, 0)),  # not a permutation
        lambda: physical_offset((0,), (2, 2), (1, 0)),  # wrong index rank
        lambda: physical_offset((2, 0), (2, 2), (1, 0)),  # out of bounds
        lambda: physical_offset((0, -1), (2, 2), (1, 0)),  # negative
        lambda: physical_shape((2, 2), (1, 0), ((0, 2),)),  # zero tile size
        lambda: physical_shape((2, 2), (1, 0), ((2, -1),)),  # * with nothing minor to merge into
        lambda: physical_to_logical(np.zeros(3), (2, 2), (1, 0)),  # buffer too small
    ],
)
def test_invalid_inputs_raise(call):
    with pytest.raises(ValueError):
        call()


def _reference_buffer(array, minor_to_major, tiles):
    """XLA's pad-reshape-transpose reading of tiling, done on whole arrays (independent oracle)."""
    out = np.transpose(array, tuple(reversed(minor_to_major)))
    for tile in tiles:
        out = out.reshape((1,) * max(0, len(tile) - out.ndim) + out.shape)
        head = out.shape[: out.ndim - len(tile)]
        merged, sizes, run = [], [], 1
        for dim, t in zip(out.shape[len(head) :], tile):
            run *= dim
            if t != -1:
                merged, sizes, run = merged + [run], sizes + [t], 1
        counts = [-(-d // t) for d, t in zip(merged, sizes)]
        pads = [(0, 0)] * len(head) + [(0, c * t - d) for c, t, d in zip(counts, sizes, merged)]
        out = np.pad(out.reshape(head + tuple(merged)), pads)
        out = out.reshape(head + tuple(x for c, t in zip(counts, sizes) for x in (c, t)))
        h, k = len(head), len(sizes)
        grid, box = [h + 2 * i for i in range(k)], [h + 2 * i + 1 for i in range(k)]
        out = out.transpose(list(range(h)) + grid + box)
    return out.ravel()


@st.composite
def layouts(draw):
    rank = draw(st.integers(0, 3))
    dims = tuple(draw(st.lists(st.integers(0, 5), min_size=rank, max_size=rank)))
    m2m = tuple(draw(st.permutations(range(rank))))
    # Tiles may combine (-1), have fewer or more dims than the shape they tile.
    with_combine = st.lists(st.sampled_from([-1, 1, 2, 3, 4]), max_size=3).map(lambda t: (*t, 2))
    tile = with_combine | st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple)
    tiles = tuple(draw(st.lists(tile, max_size=2)))
    return dims, m2m, tiles


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_offsets_are_a_bijection_and_round_trip(layout):
    dims, m2m, tiles = layout
    array = np.arange(1, int(np.prod(dims)) + 1, dtype=np.int64).reshape(dims)
    buffer = logical_to_physical(array, m2m, tiles)
    assert buffer.size == physical_size(dims, m2m, tiles)
    # Every element lands in its own slot (values are distinct and non-zero), the rest are padding.
    assert np.count_nonzero(buffer) == array.size
    assert (buffer == _reference_buffer(array, m2m, tiles)).all()
    assert (physical_to_logical(buffer, dims, m2m, tiles) == array).all()
    if array.size:
        last = tuple(d - 1 for d in dims)
        assert buffer[physical_offset(last, dims, m2m, tiles)] == array[last]
