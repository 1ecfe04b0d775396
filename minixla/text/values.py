"""Token-level reading shared by the HLO parser: token helpers, attribute values (through the
kinds in minixla.ir.attrs), shapes and layouts. `Parser` (parser.py) adds modules, computations
and instructions on top.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import HloParseError
from ..ir.attrs import Raw, Window, WindowDim
from ..ir.dtypes import ELEMENT_TYPES
from ..ir.shapes import UNBOUNDED, Layout, Shape
from .lexer import ATTR, DIM_LABELS, DXD, EOF, FLOAT, IDENT, INT, PAD, PUNCT, STRING, Lexer

_LAYOUT_INTS = {
    "L": "tail_padding_alignment",
    "E": "element_size_bits",
    "S": "memory_space",
    "M": "dynamic_metadata_bytes",
}


class ValueParser:
    def __init__(self, text: str):
        self.lexer = Lexer(text)

    # -- token helpers --------------------------------------------------------------------
    def error(self, message: str, offset: int | None = None) -> HloParseError:
        return self.lexer.error(message, offset)

    def peek(self):
        return self.lexer.peek()

    def next(self):
        return self.lexer.next()

    def accept(self, punct: str) -> bool:
        if self.peek().is_punct(punct):
            self.next()
            return True
        return False

    def expect(self, punct: str) -> None:
        token = self.peek()
        if not token.is_punct(punct):
            raise self.error(f"expected '{punct}', found {_describe(token)}")
        self.next()

    def expect_kind(self, kind: str, what: str = ""):
        token = self.peek()
        if token.kind != kind:
            raise self.error(f"expected {what or kind}, found {_describe(token)}")
        return self.next()

    def expect_keyword(self, word: str) -> None:
        token = self.peek()
        if token.kind != IDENT or token.text != word:
            raise self.error(f"expected '{word}', found {_describe(token)}")
        self.next()

    def lookahead(self, count: int):
        """The token `count` positions ahead (1 = the one after peek), without consuming."""
        saved = self.lexer.pos, self.lexer._peeked
        token = self.peek()
        for _ in range(count):
            self.next()
            token = self.peek()
        self.lexer.pos, self.lexer._peeked = saved
        return token

    def parse_int(self) -> int:
        token = self.expect_kind(INT, "an integer")
        return int(token.text)

    def parse_float(self) -> float:
        token = self.next()
        if token.kind not in (INT, FLOAT):
            raise self.error(f"expected a number, found {_describe(token)}", token.start)
        return float(token.text)

    def parse_bool(self) -> bool:
        token = self.expect_kind(IDENT, "true or false")
        if token.text not in ("true", "false"):
            raise self.error(f"expected true or false, found '{token.text}'", token.start)
        return token.text == "true"

    def parse_identifier(self) -> str:
        return self.expect_kind(IDENT, "a name").text

    def parse_string(self) -> str:
        return self.expect_kind(STRING, "a quoted string").text

    def parse_int_list(self) -> tuple[int, ...]:
        self.expect("{")
        values = []
        if not self.peek().is_punct("}"):
            values.append(self.parse_int())
            while self.accept(","):
                values.append(self.parse_int())
        self.expect("}")
        return tuple(values)

    def parse_slice_sizes(self):
        if self.peek().is_punct("{") and self.lookahead(1).is_punct("{"):
            return Raw(self.lexer.raw_span())  # collective-permute's list of lists
        return self.parse_int_list()

    def parse_shape_list(self) -> tuple[Shape, ...]:
        self.expect("{")
        shapes = []
        if not self.peek().is_punct("}"):
            shapes.append(self.parse_shape())
            while self.accept(","):
                shapes.append(self.parse_shape())
        self.expect("}")
        return tuple(shapes)

    def parse_slice(self) -> tuple[tuple[int, int, int], ...]:
        self.expect("{")
        dims: list = []
        while not self.peek().is_punct("}"):
            if dims:
                self.expect(",")
            self.expect("[")
            start = self.parse_int()
            self.expect(":")
            limit = self.parse_int()
            stride = 1
            if self.accept(":"):
                stride = self.parse_int()
            self.expect("]")
            dims.append((start, limit, stride))
        self.expect("}")
        return tuple(dims)

    def parse_padding(self) -> tuple[tuple[int, int, int], ...]:
        token = self.next()
        if token.kind not in (PAD, INT):
            raise self.error(
                f"expected a padding like 0_0x1_1, found {_describe(token)}", token.start
            )
        dims = []
        for part in token.text.split("x"):
            values = [int(v) for v in part.split("_")]
            if len(values) not in (2, 3):
                raise self.error(f"bad padding '{part}'", token.start)
            dims.append((values[0], values[1], values[2] if len(values) == 3 else 0))
        return tuple(dims)

    def parse_window(self) -> Window:
        self.expect("{")
        fields: dict[str, list[str]] = {}
        while not self.peek().is_punct("}"):
            token = self.expect_kind(ATTR, "a window field")
            value = self.next()
            if value.kind not in (INT, DXD, PAD):
                raise self.error(f"bad value for window field {token.text}", value.start)
            if token.text in fields:
                raise self.error(f"window field {token.text} given twice", token.start)
            fields[token.text] = value.text.split("x")
        self.expect("}")
        known = {"size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"}
        unknown = set(fields) - known
        if unknown:
            raise self.error(f"unknown window field {sorted(unknown)[0]}")
        rank = len(fields.get("size", []))
        if any(len(v) != rank for v in fields.values()):
            raise self.error("window fields disagree on the number of dimensions")
        dims = []
        for i in range(rank):
            lo, hi = (fields["pad"][i].split("_") + ["0"])[:2] if "pad" in fields else ("0", "0")
            dims.append(
                WindowDim(
                    int(fields["size"][i]),
                    int(fields.get("stride", ["1"] * rank)[i]),
                    int(lo),
                    int(hi),
                    int(fields.get("lhs_dilate", ["1"] * rank)[i]),
                    int(fields.get("rhs_dilate", ["1"] * rank)[i]),
                    fields.get("rhs_reversal", ["0"] * rank)[i] == "1",
                )
            )
        return Window(tuple(dims))

    def parse_dim_labels(self) -> str:
        return self.expect_kind(DIM_LABELS, "dim labels like b01f_01io->b01f").text

    def parse_raw(self) -> Raw:
        return Raw(self.lexer.raw_span())

    # -- shapes ---------------------------------------------------------------------------
    def at_shape(self) -> bool:
        token = self.peek()
        if token.is_punct("("):
            return True
        # `name[` can only start a shape; parse_shape reports an unknown element type.
        if token.kind == IDENT and token.text == "b" and self.lookahead(1).is_punct("("):
            return True  # a buffer shape, b(f32[4])
        return token.kind == IDENT and self.lookahead(1).is_punct("[")

    def parse_shape(self) -> Shape:
        token = self.peek()
        if token.kind == IDENT and token.text == "b" and self.lookahead(1).is_punct("("):
            self.next()
            self.expect("(")
            inner = self.parse_shape()
            self.expect(")")
            if not inner.is_array:
                raise self.error("a buffer shape b(...) holds an array shape", token.start)
            return replace(inner, is_buffer=True)
        if token.is_punct("("):
            self.next()
            shapes = []
            if not self.peek().is_punct(")"):
                shapes.append(self.parse_shape())
                while self.accept(","):
                    shapes.append(self.parse_shape())
            self.expect(")")
            return Shape.tuple_of(shapes)
        token = self.expect_kind(IDENT, "a shape")
        etype = ELEMENT_TYPES.get(token.text)
        if etype is None:
            raise self.error(f"unknown element type '{token.text}'", token.start)
        self.expect("[")
        dims: list = []
        dynamic: list = []
        while not self.peek().is_punct("]"):
            if dims:
                self.expect(",")
            if self.accept("?"):
                dims.append(UNBOUNDED)
                dynamic.append(True)
            elif self.accept("<="):
                dims.append(self.parse_int())
                dynamic.append(True)
            else:
                dims.append(self.parse_int())
                dynamic.append(False)
            if dims[-1] < 0 and not dynamic[-1]:
                raise self.error("dimension sizes must be non-negative")
        self.expect("]")
        if not etype.is_array_type and dims:
            raise self.error(f"{etype.name} shapes have no dimensions")
        layout = None
        if self.peek().is_punct("{") and self.at_layout():
            layout = self.parse_layout(len(dims))
        return Shape(etype, tuple(dims), tuple(dynamic), layout)

    def at_layout(self) -> bool:
        after = self.lookahead(1)
        return after.kind == INT or after.is_punct(":") or after.is_punct("}")

    def parse_layout(self, rank: int) -> Layout:
        start = self.peek().start
        self.expect("{")
        minor_to_major = []
        while self.peek().kind == INT:
            minor_to_major.append(self.parse_int())
            if not self.accept(","):
                break
        fields: dict = {}
        if self.accept(":"):
            fields = self.parse_layout_extras()
        self.expect("}")
        if sorted(minor_to_major) != list(range(rank)) and (minor_to_major or rank):
            raise self.error(
                f"layout {{{','.join(map(str, minor_to_major))}}} is not a "
                f"permutation of the {rank} dimensions",
                start,
            )
        return Layout(tuple(minor_to_major), **fields)

    def parse_layout_extras(self) -> dict:
        fields: dict = {}
        while not self.peek().is_punct("}"):
            token = self.next()
            letter = token.text
            if token.kind == IDENT and letter == "T":
                tiles = []
                while self.peek().is_punct("("):
                    self.next()
                    tile: list = []
                    while not self.peek().is_punct(")"):
                        if tile:
                            self.expect(",")
                        tile.append(-1 if self.accept("*") else self.parse_int())
                    self.expect(")")
                    tiles.append(tuple(tile))
                fields["tiles"] = tuple(tiles)
            elif token.kind == IDENT and letter in _LAYOUT_INTS:
                self.expect("(")
                fields[_LAYOUT_INTS[letter]] = self.parse_int()
                self.expect(")")
            elif token.kind == IDENT and letter == "D":
                self.expect("(")
                raw = self.lexer.raw_span()
                fields["dim_level_types"] = raw
                self.expect(")")
            elif token.kind == PUNCT and letter in "#*":
                self.expect("(")
                fields["index_type" if letter == "#" else "pointer_type"] = self.expect_kind(
                    IDENT, "an element type"
                ).text
                self.expect(")")
            elif token.kind == IDENT and letter == "SC":
                configs = []
                while self.accept("("):
                    config = [self.parse_int()]
                    self.expect(":")
                    config.append(self.parse_int())
                    while self.accept(","):
                        config.append(self.parse_int())
                    self.expect(")")
                    configs.append(tuple(config))
                fields["split_configs"] = tuple(configs)
            elif token.kind == IDENT and letter == "P":
                self.expect("(")
                fields["physical_shape"] = self.parse_shape()
                self.expect(")")
            else:
                raise self.error(f"unknown layout attribute {_describe(token)}", token.start)
        return fields


def _describe(token) -> str:
    if token.kind == EOF:
        return "end of input"
    return (
        f"'{token.text}'"
        if token.kind in (PUNCT, IDENT, INT, FLOAT, DXD, PAD, DIM_LABELS)
        else f"{token.kind} '{token.text}'"
    )
