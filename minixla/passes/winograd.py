"""winograd-convolution: convolutions of stride 1 with a 3x3 kernel or a 3x3 output as
Winograd's minimal filtering algorithms.

F(2x2, 3x3), for a 3x3 kernel: the output is computed in 2x2 tiles. Each tile's 4x4 input
patch d and the 3x3 kernel g are transformed, multiplied elementwise per (tile, feature) and
summed over input features, then transformed back (Lavin and Gray, "Fast Algorithms for
Convolutional Neural Networks"):

    V = B^T d B      U = G g G^T      M = sum over features of U * V      Y = A^T M A

Summed over input features, the elementwise products are 16 GEMMs, one per position of the
4x4 transform: [tiles, features] x [features, out features]. They do 16 multiply-adds per
tile and feature pair where the direct convolution does 36 (2.25x fewer); the transforms are
additions, which the rewrite spells as slices, adds and concatenations for fusion to turn
into loops:

    convolution(x, w) ->
      transpose(slice(reshape(Y))) where Y = A^T dot(V(pad(transpose(x))), U(transpose(w))) A

F(3x3, 2x2), for a 3x3 output (the weight gradient of a 3x3 convolution, whose window is the
whole image): the same algorithm with the roles of output and kernel swapped. The window is
cut into 2x2 tiles, each tile's 4x4 input patch is transformed as above and the kernel tile by
A, the products are summed over tiles and features (16 GEMMs contracting over both), and G^T
turns the sum into the 3x3 output:

    dW = G^T (sum over tiles and features of (A Y A^T) * (B^T d B)) G

A [16, 64, 16, 16] input to 64 features ran 4.97 -> 2.6 ms on one core, its weight gradient
5.97 -> 3.2 ms. Like BLAS's blocking,
the transforms change the rounding, not the accuracy: against the exact sum, the largest
error was 3.7e-5 where the direct convolution's was 6.3e-5 (values up to 128). Only f32 and
f64 convolutions are rewritten (narrow floats would round every transform step), and only
where the GEMMs are wide enough to pay for the transforms (`MIN_SAVED_PER_TRANSFORMED`).
"""

from __future__ import annotations

from ..ir.attrs import parse_dim_labels
from ..ir.instruction import HloInstruction
from ..ir.module import HloModule
from ..ir.shapes import Shape
from .base import Pass, register_pass
from .patterns import RuleSet, filled, m, new, rewrite, scalar_constant

WINOGRAD = RuleSet("winograd-convolution")

# Per output position the rewrite saves 5 * C * K multiply-adds (C features in, K out) and
# transforms 4 * (C + K) values. Measured on one core ([16, C, 16, 16] inputs), it paid from
# C * K / (C + K) = 16: 32 -> 32 features 1.15 -> 0.90 ms, 24 -> 48 1.20 -> 1.10 ms, but
# 16 -> 32 (10.7) 0.64 -> 0.79 ms.
MIN_SAVED_PER_TRANSFORMED = 16
FLOAT_TYPES = ("f32", "f64")

# Rows of the transform matrices as (coefficient, index) terms: B^T (input patches), G (3x3
# kernels), A^T (2x2 output tiles); for F(3x3, 2x2), A (2x2 kernel tiles) and G^T (3x3 outputs).
INPUT_ROWS = (((1, 0), (-1, 2)), ((1, 1), (1, 2)), ((1, 2), (-1, 1)), ((1, 1), (-1, 3)))
KERNEL_ROWS = (
    ((1, 0),),
    ((0.5, 0), (0.5, 1), (0.5, 2)),
    ((0.5, 0), (-0.5, 1), (0.5, 2)),
    ((1, 2),),
)
OUTPUT_ROWS = (((1, 0), (1, 1), (1, 2)), ((1, 1), (-1, 2), (-1, 3)))
TILE_ROWS = (((1, 0),), ((1, 0), (1, 1)), ((1, 0), (-1, 1)), ((-1, 1),))
GRADIENT_ROWS = (
    ((1, 0), (0.5, 1), (0.5, 2)),
    ((0.5, 1), (-0.5, 2)),
    ((0.5, 1), (0.5, 2), (1, 3)),
)


@WINOGRAD.rule(m.Convolution(m.Any("x"), m.Any("w")))
def winograd_3x3_kernel(root, x, w):
    conv = _Convolution.of(root)
    if conv is None or conv.kernel_size != [3, 3] or min(conv.output_size) < 2:
        return None
    if not _pays(conv.in_features, conv.out_features):
        return None
    return conv.small_kernel()


@WINOGRAD.rule(m.Convolution(m.Any("x"), m.Any("w")))
def winograd_3x3_output(root, x, w):
    conv = _Convolution.of(root)
    if conv is None or conv.output_size != [3, 3] or min(conv.kernel_size) < 2:
        return None
    if not _pays(conv.batch, conv.out_features):  # the GEMMs' rows and columns
        return None
    return conv.small_output()


def _pays(rows: int, columns: int) -> bool:
    return rows * columns >= MIN_SAVED_PER_TRANSFORMED * (rows + columns)


class _Convolution:
    """A 2-D convolution of stride 1 without dilation or groups, channels-last inside: the
    input as [batch, rows, columns, features], the kernel as [rows, columns, in, out], the
    result as [batch, rows, columns, out] transposed to the convolution's own order."""

    @staticmethod
    def of(conv: HloInstruction) -> "_Convolution | None":
        attrs = conv.attrs
        dtype = conv.shape.dtype
        if conv.shape.is_tuple or dtype not in FLOAT_TYPES or conv.shape.numel() == 0:
            return None
        if any(o.shape.dtype != dtype for o in conv.operands) or "window" not in attrs:
            return None
        if attrs.get("feature_group_count", 1) != 1 or attrs.get("batch_group_count", 1) != 1:
            return None
        if len(parse_dim_labels(str(attrs["dim_labels"])).input_spatial) != 2:
            return None
        for wd in attrs["window"].dims:
            plain = wd.stride == 1 and wd.lhs_dilation == 1 and wd.rhs_dilation == 1
            if not plain or wd.padding_low < 0 or wd.padding_high < 0:
                return None
        return _Convolution(conv)

    def __init__(self, conv: HloInstruction):
        self.conv = conv
        self.dtype = conv.shape.dtype
        self.dims = d = parse_dim_labels(str(conv.attrs["dim_labels"]))
        self.window = conv.attrs["window"].dims
        x, w = conv.operand(0).shape.dims, conv.operand(1).shape.dims
        self.batch, self.in_features = x[d.input_batch], x[d.input_feature]
        self.out_features = w[d.kernel_output_feature]
        self.kernel_size = [w[s] for s in d.kernel_spatial]
        self.output_size = [conv.shape.dims[s] for s in d.output_spatial]

    def shape(self, *dims: int) -> Shape:
        return _shape(self.dtype, dims)

    def input(self, major: int, minor: int) -> HloInstruction:
        """[1, major, rows, columns, minor] (major and minor: the input's batch and feature
        dims, in either role): the leading 1 lets values computed from it stack into the
        GEMMs' operand with one concatenation."""
        d = self.dims
        x = _transpose(self.conv.operand(0), (major, *d.input_spatial, minor))
        return new("reshape", self.shape(1, *x.shape.dims), x)

    def kernel(self, *order: int) -> HloInstruction:
        return _transpose(self.conv.operand(1), order)

    def result(self, y: HloInstruction) -> HloInstruction:
        """y [batch, rows, columns, out] in the convolution's own order."""
        d = self.dims
        order = {d.output_batch: 0, d.output_spatial[0]: 1, d.output_spatial[1]: 2}
        order[d.output_feature] = 3
        return _transpose(y, tuple(order[axis] for axis in range(4)))

    def patches(self, tiles: list[int], x: HloInstruction) -> list[list[HloInstruction]]:
        """[i][j]: element (i, j) of every tile's 4x4 patch of x ([1, major, rows, columns,
        minor], padded here), tiles 2 apart: [1, major, tiles..., minor]."""
        _, major, _, _, minor = x.shape.dims
        extent = [2 * t + 2 for t in tiles]  # rows the patches read, padding included
        config = [(0, 0, 0)] * 5
        for axis, (wd, size) in enumerate(zip(self.window, extent), start=2):
            config[axis] = (wd.padding_low, size - x.shape.dims[axis] - wd.padding_low, 0)
        if any(low or high for low, high, _ in config):
            zero = scalar_constant(0, self.dtype)
            x = new("pad", self.shape(1, major, *extent, minor), x, zero, padding=tuple(config))
        tile = self.shape(1, major, *tiles, minor)
        return [[_strided(x, tile, (i, j), first=2) for j in range(4)] for i in range(4)]

    def gemms(self, lhs: list, rhs: list, contracting: tuple, free: tuple):
        """The 16 products of transformed values lhs[k] . rhs[k] (each [1, ...]) as one dot
        (16 GEMMs), contracting dims `contracting` of the lhs values with dims 1.. of the rhs
        values; returns [i][j] = product 4 * i + j, [1, free...]."""
        left, right = _stack(lhs), _stack(rhs)
        product = new(
            "dot",
            self.shape(16, *free),
            left,
            right,
            lhs_batch_dims=(0,),
            rhs_batch_dims=(0,),
            lhs_contracting_dims=contracting,
            rhs_contracting_dims=tuple(range(1, 1 + len(contracting))),
        )
        bounds = tuple((0, size, 1) for size in free)
        return [
            [
                new(
                    "slice",
                    self.shape(1, *free),
                    product,
                    slice=((4 * i + j, 4 * i + j + 1, 1), *bounds),
                )
                for j in range(4)
            ]
            for i in range(4)
        ]

    def small_kernel(self) -> HloInstruction:
        """F(2x2, 3x3): V = B^T d B per tile, U = G g G^T, Y = A^T (V U) A."""
        n, c, k = self.batch, self.in_features, self.out_features
        tiles = [(size + 1) // 2 for size in self.output_size]
        d = self.dims
        x = self.input(d.input_batch, d.input_feature)
        v = _transform(self.shape(1, n, *tiles, c), INPUT_ROWS, self.patches(tiles, x))
        w = self.kernel(*d.kernel_spatial, d.kernel_input_feature, d.kernel_output_feature)
        flips = [wd.reversal for wd in self.window]
        taps = [
            [
                _tap(w, self.shape(1, c, k), 2 - i if flips[0] else i, 2 - j if flips[1] else j)
                for j in range(3)
            ]
            for i in range(3)
        ]
        u = _transform(self.shape(1, c, k), KERNEL_ROWS, taps)
        grid = self.gemms(v, u, contracting=(4,), free=(n, *tiles, k))
        # y[a * 2 + b]: the outputs (2t + a, 2u + b) of every tile (t, u)
        y = _transform(self.shape(1, n, *tiles, k), OUTPUT_ROWS, grid, shared=False)
        th, tw = tiles
        halves = []
        for a in range(2):
            pair = [new("reshape", self.shape(n, th, 1, tw, 1, k), y[2 * a + b]) for b in range(2)]
            halves.append(
                new("concatenate", self.shape(n, th, 1, tw, 2, k), *pair, dimensions=(4,))
            )
        tiled = new("concatenate", self.shape(n, th, 2, tw, 2, k), *halves, dimensions=(2,))
        out = new("reshape", self.shape(n, 2 * th, 2 * tw, k), tiled)
        rows, columns = self.output_size
        if (rows, columns) != (2 * th, 2 * tw):
            out = new(
                "slice",
                self.shape(n, rows, columns, k),
                out,
                slice=((0, n, 1), (0, rows, 1), (0, columns, 1), (0, k, 1)),
            )
        return self.result(out)

    def small_output(self) -> HloInstruction:
        """F(3x3, 2x2): the window in 2x2 tiles; sum over tiles and features of
        (A Y A^T) * (B^T d B), then G^T . G. The input's batch dim is the GEMMs' rows and
        its features (which the window's in features match) are contracted with the tiles:
        kept major, so the transforms' loops run along the batch (a ResNet layer's 64
        channels, where its features are the gradient's batch of 16)."""
        n, c, k = self.batch, self.in_features, self.out_features
        d = self.dims
        tiles = [(size + 1) // 2 for size in self.kernel_size]
        x = self.input(d.input_feature, d.input_batch)
        v = _transform(self.shape(1, c, *tiles, n), INPUT_ROWS, self.patches(tiles, x))
        w = self.kernel(d.kernel_input_feature, *d.kernel_spatial, d.kernel_output_feature)
        w = new("reshape", self.shape(1, *w.shape.dims), w)
        extent = [2 * t for t in tiles]
        if extent != self.kernel_size:  # odd sizes: a zero row or column completes the tiles
            high = [(0, e - s, 0) for e, s in zip(extent, self.kernel_size)]
            zero = scalar_constant(0, self.dtype)
            padding = ((0, 0, 0), (0, 0, 0), *high, (0, 0, 0))
            w = new("pad", self.shape(1, c, *extent, k), w, zero, padding=padding)
        tile = self.shape(1, c, *tiles, k)
        kernel_tiles = [[_strided(w, tile, (a, b), first=2) for b in range(2)] for a in range(2)]
        z = _transform(tile, TILE_ROWS, kernel_tiles)
        grid = self.gemms(v, z, contracting=(1, 2, 3), free=(n, k))
        # out[p * 3 + q]: output (p, q)
        out = _transform(self.shape(1, n, k), GRADIENT_ROWS, grid, shared=False)
        rows = []
        for p in range(3):
            row = [new("reshape", self.shape(n, 1, 1, k), out[3 * p + q]) for q in range(3)]
            rows.append(new("concatenate", self.shape(n, 1, 3, k), *row, dimensions=(2,)))
        return self.result(new("concatenate", self.shape(n, 3, 3, k), *rows, dimensions=(1,)))


def _strided(x: HloInstruction, shape: Shape, offsets, first: int) -> HloInstruction:
    """Every other element of x along its two spatial dims (from `first`), starting at
    `offsets`: shape's spatial sizes."""
    bounds = [(0, size, 1) for size in shape.dims]
    for axis, offset in enumerate(offsets, start=first):
        bounds[axis] = (offset, offset + 2 * shape.dims[axis] - 1, 2)
    return new("slice", shape, x, slice=tuple(bounds))


def _tap(w: HloInstruction, shape: Shape, i: int, j: int) -> HloInstruction:
    """Tap (i, j) of the [3, 3, in, out] kernel as `shape`, [1, in, out]."""
    _, c, k = shape.dims
    piece = new(
        "slice",
        _shape(shape.dtype, (1, 1, c, k)),
        w,
        slice=((i, i + 1, 1), (j, j + 1, 1), (0, c, 1), (0, k, 1)),
    )
    return new("reshape", shape, piece)


def _stack(values: list) -> HloInstruction:
    """The 16 values ([1, ...] each) concatenated along dim 0."""
    shape = values[0].shape
    stacked = _shape(shape.dtype, (16, *shape.dims[1:]))
    return new("concatenate", stacked, *values, dimensions=(0,))


def _transform(shape: Shape, rows, grid, shared: bool = True) -> list[HloInstruction]:
    """R X R^T for the matrix of values `grid` ([i][j]) and R given by its `rows`: a list, row
    major, of len(rows)^2 values of `shape`.

    `shared`: rows first, then columns of those sums, which the outputs share (fewest ops:
    the input transforms, whose one concatenation reads all 16). Otherwise each output is
    its own sum over X, sharing only X's slices: for the output transform, which fusion
    copies into each reader of the convolution's result; sums shared there counted as
    recomputation and made fusion store the slices apart."""
    if shared:
        half = [
            [
                _combine(shape, row, [grid[i][j] for i in range(len(grid))])
                for j in range(len(grid[0]))
            ]
            for row in rows
        ]
        return [_combine(shape, column, half[p]) for p in range(len(rows)) for column in rows]
    values = [value for row in grid for value in row]
    width = len(grid[0])
    return [
        _combine(shape, [(a * b, i * width + j) for a, i in p for b, j in q], values)
        for p in rows
        for q in rows
    ]


def _combine(shape: Shape, terms, values) -> HloInstruction:
    """sum of coefficient * values[index] over the (coefficient, index) terms."""
    total = None
    for coefficient, index in terms:
        value = values[index]
        if abs(coefficient) != 1:
            value = new("multiply", shape, value, filled(abs(coefficient), shape))
        if total is None:
            total = value if coefficient > 0 else new("negate", shape, value)
        else:
            total = new("add" if coefficient > 0 else "subtract", shape, total, value)
    assert total is not None
    return total


def _transpose(x: HloInstruction, order: tuple[int, ...]) -> HloInstruction:
    if order == tuple(range(len(order))):
        return x
    dims = [x.shape.dims[axis] for axis in order]
    return new("transpose", _shape(x.shape.dtype, dims), x, dimensions=order)


def _shape(dtype: str, dims) -> Shape:
    return Shape.array(dtype, tuple(dims)).with_default_layout()


@register_pass
class WinogradConvolution(Pass):
    name = "winograd-convolution"

    def run(self, module: HloModule) -> bool:
        return rewrite(module, WINOGRAD)
