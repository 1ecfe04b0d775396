"""Where each element of an array lives in memory, under XLA's layouts: minor_to_major plus tiles.

Pure index arithmetic (numpy only), shared by whatever needs physical offsets or buffer sizes:
layout-sensitive passes, backends packing literals, buffer assignment.

Semantics follow XLA's docs/tiled_layout.md:
- `minor_to_major[0]` is the fastest-varying logical dim, so the physical (major-to-minor) dims are
  the logical dims in `reversed(minor_to_major)` order, laid out row-major.
- Each tile in `tiles` is applied in turn to the minor-most dims of the current physical shape:
  every tiled dim `d` by `t` becomes a tile count `ceil(d/t)` and a within-tile size `t`; the new
  shape is (untouched major dims, tile counts, tile sizes). Partial tiles are padded.
- A tile with more dims than the current shape pads the shape with leading dims of size 1 (as
  XLA's ShapeUtil::ArraySize does for e.g. `f32[]{:T(128)}`).
- A tile entry of COMBINE (-1, XLA's `*`) merges that dim into the next more minor one first.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np

from minixla.errors import ShapeError

COMBINE = -1  # XLA's `*` tile dimension (Tile::kCombineDimension)


def _check_layout(dims: Sequence[int], minor_to_major: Sequence[int], tiles) -> None:
    if any(d < 0 for d in dims):
        raise ShapeError(f"dimensions must be non-negative, got {tuple(dims)}")
    if sorted(minor_to_major) != list(range(len(dims))):
        raise ShapeError(
            f"minor_to_major {tuple(minor_to_major)} is not a permutation of "
            f"range({len(dims)}) for dims {tuple(dims)}"
        )
    for tile in tiles:
        if not tile or any(t != COMBINE and t < 1 for t in tile):
            raise ShapeError(f"tile {tuple(tile)} must be non-empty with sizes >= 1 or -1 (*)")
        if tile[-1] == COMBINE:
            raise ShapeError(
                f"tile {tuple(tile)}: the minor-most entry cannot be * "
                "(there is no more minor dim to combine into)"
            )


def _tile_once(idx: list, shape: tuple[int, ...], tile: Sequence[int]):
    """Applies one tiling level to per-dim index vectors `idx` in `shape`; returns (idx, shape)."""
    if len(tile) > len(shape):  # implied leading dims of size 1
        pad = len(tile) - len(shape)
        idx, shape = [0] * pad + idx, (1,) * pad + shape
    first = len(shape) - len(tile)
    counts, sizes, outer, inner = [], [], [], []
    merged_idx, merged_dim = 0, 1
    for k, t in enumerate(tile):
        # Row-major flattening of a run of `*` dims with the next non-`*` dim.
        merged_idx = merged_idx * shape[first + k] + idx[first + k]
        merged_dim *= shape[first + k]
        if t == COMBINE:
            continue
        counts.append(-(-merged_dim // t))
        sizes.append(t)
        outer.append(merged_idx // t)
        inner.append(merged_idx % t)
        merged_idx, merged_dim = 0, 1
    return idx[:first] + outer + inner, shape[:first] + tuple(counts) + tuple(sizes)


def _physical(idx: Sequence, dims, minor_to_major, tiles):
    """Maps per-logical-dim index arrays (mutually broadcastable) to (offsets, physical shape)."""
    order = list(reversed(minor_to_major))
    rows = [np.asarray(idx[d], np.int64) for d in order]
    shape = tuple(int(dims[d]) for d in order)
    for tile in tiles:
        rows, shape = _tile_once(rows, shape, tile)
    offsets: np.ndarray | np.int64 = np.int64(0)
    for row, size in zip(rows, shape):
        offsets = offsets * size + row
    return offsets, shape


def physical_offset(index, dims, minor_to_major, tiles=()) -> int:
    """Linear element offset (padding slots counted) of logical `index` in the physical buffer."""
    _check_layout(dims, minor_to_major, tiles)
    if len(index) != len(dims) or any(not 0 <= i < d for i, d in zip(index, dims)):
        raise ShapeError(f"index {tuple(index)} is out of bounds for dims {tuple(dims)}")
    return int(_physical(index, dims, minor_to_major, tiles)[0])


def physical_shape(dims, minor_to_major, tiles=()) -> tuple[int, ...]:
    """The padded major-to-minor physical dims after every tiling level."""
    _check_layout(dims, minor_to_major, tiles)
    return _physical([0] * len(dims), dims, minor_to_major, tiles)[1]


def physical_size(dims, minor_to_major, tiles=()) -> int:
    """Element slots in the buffer, padding included."""
    return prod(physical_shape(dims, minor_to_major, tiles))


def physical_size_bytes(
    dims,
    minor_to_major,
    tiles,
    element_bits: int,
    element_size_in_bits: int = 0,
    tail_padding_alignment: int = 1,
) -> int:
    """Buffer bytes: slots rounded up to L(n), packed at E(n) bits if set, else whole bytes each."""
    if tail_padding_alignment < 1:
        raise ShapeError(f"tail padding alignment must be >= 1, got {tail_padding_alignment}")
    slots = physical_size(dims, minor_to_major, tiles)
    slots = -(-slots // tail_padding_alignment) * tail_padding_alignment
    if element_size_in_bits:
        return -(-slots * element_size_in_bits // 8)
    return slots * -(-element_bits // 8)  # unpacked sub-byte types still take a whole byte


def _offset_table(dims, minor_to_major, tiles) -> tuple[np.ndarray, int]:
    """Offsets of every logical element in row-major logical order, and the buffer size."""
    _check_layout(dims, minor_to_major, tiles)
    # Sparse index grids: the offset table is built by broadcasting, not a Python loop.
    grids = np.indices(tuple(dims), dtype=np.int64, sparse=True)
    offsets, shape = _physical(grids, dims, minor_to_major, tiles)
    return np.broadcast_to(offsets, tuple(dims)).reshape(-1), prod(shape)


def logical_to_physical(array, minor_to_major, tiles=()) -> np.ndarray:
    """The 1-D physical buffer holding `array` in this layout; padding slots are zero."""
    array = np.asarray(array)
    offsets, size = _offset_table(array.shape, minor_to_major, tiles)
    buffer = np.zeros(size, array.dtype)
    buffer[offsets] = array.reshape(-1)
    return buffer


def physical_to_logical(buffer, dims, minor_to_major, tiles=()) -> np.ndarray:
    """The logical array of `dims` read out of a 1-D physical buffer in this layout."""
    buffer = np.asarray(buffer)
    offsets, size = _offset_table(dims, minor_to_major, tiles)
    if buffer.ndim != 1 or buffer.size < size:
        raise ShapeError(f"buffer of shape {buffer.shape} is not 1-D with at least {size} elements")
    return buffer[offsets].reshape(tuple(dims))


def shape_bytes(shape) -> int:
    """Bytes of an array Shape's buffer in its layout (the default one when it has none)."""
    layout = shape.layout
    if layout is None:
        return physical_size_bytes(shape.dims, shape.minor_to_major(), (), shape.element_type.bits)
    return physical_size_bytes(
        shape.dims,
        shape.minor_to_major(),
        layout.tiles,
        shape.element_type.bits,
        layout.element_size_bits,
        layout.tail_padding_alignment,
    )
