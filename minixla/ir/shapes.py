"""Shapes and layouts, printed in XLA's syntax (`f32[2,<=8]{1,0:T(8,128)}`, `(s32[], f32[4]{0})`).

Shapes and layouts are immutable values. An array shape's `layout` is None when the text gave
none; `with_default_layout()` fills XLA's default (row-major, `{n-1,...,0}`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from .dtypes import ELEMENT_TYPES, TUPLE_TYPE, ElementType

UNBOUNDED = -1  # the size stored for a `?` dimension


@dataclass(frozen=True)
class Layout:
    minor_to_major: tuple[int, ...]
    tiles: tuple[tuple[int, ...], ...] = ()  # -1 inside a tile is XLA's `*` (combine)
    dim_level_types: str = ""  # D(...) contents, kept verbatim (sparse layouts)
    tail_padding_alignment: int = 1  # L(n), in elements
    index_type: str = ""  # #(u32)
    pointer_type: str = ""  # *(u32)
    element_size_bits: int = 0  # E(n); 0 means the type's own size
    memory_space: int = 0  # S(n)
    split_configs: tuple[tuple[int, ...], ...] = ()  # SC(dim:i,j)(...)
    physical_shape: "Shape | None" = None  # P(shape)
    dynamic_metadata_bytes: int = 0  # M(n)

    def __str__(self) -> str:
        extras = []
        if self.dim_level_types:
            extras.append(f"D({self.dim_level_types})")
        if self.tiles:
            extras.append(
                "T"
                + "".join(
                    "(" + ",".join("*" if d == -1 else str(d) for d in tile) + ")"
                    for tile in self.tiles
                )
            )
        if self.tail_padding_alignment != 1:
            extras.append(f"L({self.tail_padding_alignment})")
        if self.index_type:
            extras.append(f"#({self.index_type})")
        if self.pointer_type:
            extras.append(f"*({self.pointer_type})")
        if self.element_size_bits:
            extras.append(f"E({self.element_size_bits})")
        if self.memory_space:
            extras.append(f"S({self.memory_space})")
        if self.split_configs:
            extras.append(
                "SC"
                + "".join(
                    f"({cfg[0]}:" + ",".join(map(str, cfg[1:])) + ")" for cfg in self.split_configs
                )
            )
        if self.physical_shape is not None:
            extras.append(f"P({self.physical_shape})")
        if self.dynamic_metadata_bytes:
            extras.append(f"M({self.dynamic_metadata_bytes})")
        text = ",".join(map(str, self.minor_to_major))
        return "{" + text + (":" + "".join(extras) if extras else "") + "}"

    @property
    def is_default_extras(self) -> bool:
        return self == Layout(self.minor_to_major)


def default_layout(rank: int) -> Layout:
    return Layout(tuple(range(rank - 1, -1, -1)))


@dataclass(frozen=True)
class Shape:
    """An array shape (element type, dims, layout) or a tuple shape (element type 'tuple')."""

    element_type: ElementType
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()  # per dim: `<=N` (bounded) or `?` (size UNBOUNDED)
    layout: Layout | None = None
    tuple_shapes: tuple["Shape", ...] = field(default=())
    is_buffer: bool = False  # XLA's `b(f32[4])`: a buffer holding the array (custom calls)

    # -- construction ---------------------------------------------------------------------
    @staticmethod
    def array(
        dtype: str | ElementType,
        dims=(),
        layout: Layout | tuple | None = None,
        dynamic: tuple[bool, ...] | None = None,
    ) -> "Shape":
        etype = ELEMENT_TYPES[dtype] if isinstance(dtype, str) else dtype
        dims = tuple(int(d) for d in dims)
        if isinstance(layout, tuple):
            layout = Layout(layout)
        return Shape(etype, dims, tuple(dynamic) if dynamic else (False,) * len(dims), layout)

    @staticmethod
    def tuple_of(shapes) -> "Shape":
        return Shape(TUPLE_TYPE, tuple_shapes=tuple(shapes))

    @staticmethod
    def token() -> "Shape":
        return Shape(ELEMENT_TYPES["token"])

    # -- queries --------------------------------------------------------------------------
    @property
    def dtype(self) -> str:
        return self.element_type.name

    @property
    def is_tuple(self) -> bool:
        return self.element_type is TUPLE_TYPE

    @property
    def is_array(self) -> bool:
        return self.element_type.is_array_type

    @property
    def is_token(self) -> bool:
        return self.element_type.name == "token"

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        return any(self.dynamic)

    def numel(self) -> int:
        return math.prod(self.dims)

    def byte_size(self) -> int:
        """Unpadded bytes of an array (tuples: the sum of their leaves)."""
        if self.is_tuple:
            return sum(s.byte_size() for s in self.tuple_shapes)
        return self.numel() * self.element_type.byte_size

    @property
    def numpy_dtype(self):
        from .dtypes import numpy_dtype

        return numpy_dtype(self.dtype)

    def leaves(self) -> list[tuple[tuple[int, ...], "Shape"]]:
        """(shape index, array shape) for every non-tuple leaf, in order."""
        if not self.is_tuple:
            return [((), self)]
        out: list = []
        for i, sub in enumerate(self.tuple_shapes):
            out.extend(((i,) + idx, leaf) for idx, leaf in sub.leaves())
        return out

    def subshape(self, index: tuple[int, ...]) -> "Shape":
        shape = self
        for i in index:
            if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
                raise IndexError(f"shape index {index} is not valid in {self}")
            shape = shape.tuple_shapes[i]
        return shape

    def minor_to_major(self) -> tuple[int, ...]:
        return (self.layout or default_layout(self.rank)).minor_to_major

    # -- transformations ------------------------------------------------------------------
    def with_default_layout(self) -> "Shape":
        if self.is_tuple:
            return replace(
                self, tuple_shapes=tuple(s.with_default_layout() for s in self.tuple_shapes)
            )
        if self.layout is not None or not self.is_array:
            return self
        return replace(self, layout=default_layout(self.rank))

    def without_layout(self) -> "Shape":
        if self.layout is None and not self.is_tuple:
            return self
        return self._layout_free

    @cached_property
    def _layout_free(self) -> "Shape":
        # kept as the text is (below): cached_property writes the instance's __dict__,
        # outside the dataclass's fields, so equality, hashing and `replace` never see it
        if self.is_tuple:
            return replace(self, tuple_shapes=tuple(s.without_layout() for s in self.tuple_shapes))
        return replace(self, layout=None)

    def with_layout(self, layout: Layout | tuple | None) -> "Shape":
        return replace(self, layout=Layout(layout) if isinstance(layout, tuple) else layout)

    def with_dtype(self, dtype: str | ElementType) -> "Shape":
        return replace(self, element_type=ELEMENT_TYPES[dtype] if isinstance(dtype, str) else dtype)

    def with_dims(self, dims, dynamic=None) -> "Shape":
        dims = tuple(int(d) for d in dims)
        return Shape(
            self.element_type,
            dims,
            tuple(dynamic) if dynamic else (False,) * len(dims),
            None,
            is_buffer=self.is_buffer,
        )

    def compatible(self, other: "Shape") -> bool:
        """Same element types and dims (recursively); layouts are ignored."""
        return self.without_layout() == other.without_layout()

    # -- printing -------------------------------------------------------------------------
    def __str__(self) -> str:
        return self._text

    @cached_property
    def _text(self) -> str:
        # kept: shapes are immutable and printed often (every memo key prints its module)
        if self.is_buffer:
            return f"b({replace(self, is_buffer=False)})"
        if self.is_tuple:
            parts = []
            for i, sub in enumerate(self.tuple_shapes):
                parts.append((f"/*index={i}*/" if i and i % 5 == 0 else "") + str(sub))
            return "(" + ", ".join(parts) + ")"
        if not self.is_array:
            return f"{self.dtype}[]"
        dims = ",".join(
            ("?" if d == UNBOUNDED else f"<={d}") if dyn else str(d)
            for d, dyn in zip(self.dims, self.dynamic)
        )
        text = f"{self.dtype}[{dims}]"
        if self.layout is not None and (self.rank or not self.layout.is_default_extras):
            text += str(self.layout)
        return text

    def __repr__(self) -> str:
        return f"Shape({self})"


def scalar(dtype: str) -> Shape:
    return Shape.array(dtype, ())
