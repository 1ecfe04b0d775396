"""A reader for the MLIR text that JAX, PyTorch/XLA and XLA print (StableHLO, MHLO, CHLO, func).

It reads MLIR's syntax into a small tree of `MlirOp`s, without knowing what any op means;
minixla.text.stablehlo turns that tree into HLO. Both the generic form
(`"stablehlo.sort"(%a) <{dimension = 0 : i64}> ({...}) : (T) -> T`) and the custom forms the
StableHLO printer uses (`stablehlo.add %a, %b : T`, `stablehlo.reduce(%x init: %c) applies
stablehlo.add across dimensions = [0] : ...`) are read the same way: everything between the op
name and the `:` becomes operands, `key = value` attributes and bare words, in order.

    module   := ['module' [@name] ['attributes' dict] '{'] func* ['}'] [resources]
    func     := 'func.func' [visibility] @name '(' [arg (',' arg)*] ')' ['->' results]
                ['attributes' dict] '{' op* '}'
    op       := [results '='] (opname | STRING) item* [':' types ['->' types]] trailing*
    item     := %value | '(' items ')' | key '=' attr | word | @symbol | STRING | dict
                | '<{' props '}>' | '[' slices ']' | region-list
    trailing := word ['(' block-args ')']* '{' op* '}'        (reducer, cond, do)

Every error is an HloParseError with line and column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import HloParseError
from ..ir.shapes import UNBOUNDED, Shape

_SKIP = re.compile(r"(?:\s+|//[^\n]*)+")
_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_VALUE = re.compile(r"%[A-Za-z0-9_$.\-]+(?:#\d+)?")
_SUFFIX = re.compile(r"[A-Za-z0-9_$.\-]+|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_RESULTS = re.compile(
    r"(%[A-Za-z0-9_$.\-]+(?::\d+)?(?:\s*,\s*%[A-Za-z0-9_$.\-]+(?::\d+)?)*)"
    r"\s*=(?!=)"
)
# Words that open a region after an op's types in StableHLO's custom forms.
TRAILING_REGION_WORDS = ("reducer", "cond", "do", "then", "else")

ELEMENT_TYPES = {
    "i1": "pred",
    "i2": "s2",
    "i4": "s4",
    "i8": "s8",
    "i16": "s16",
    "i32": "s32",
    "i64": "s64",
    "si8": "s8",
    "si16": "s16",
    "si32": "s32",
    "si64": "s64",
    "ui2": "u2",
    "ui4": "u4",
    "ui8": "u8",
    "ui16": "u16",
    "ui32": "u32",
    "ui64": "u64",
    "f16": "f16",
    "bf16": "bf16",
    "f32": "f32",
    "f64": "f64",
    "f8E5M2": "f8e5m2",
    "f8E4M3FN": "f8e4m3fn",
    "f8E4M3B11FNUZ": "f8e4m3b11fnuz",
    "f8E5M2FNUZ": "f8e5m2fnuz",
    "f8E4M3FNUZ": "f8e4m3fnuz",
    "f8E4M3": "f8e4m3",
    "f8E3M4": "f8e3m4",
    "f8E8M0FNU": "f8e8m0fnu",
    "f4E2M1FN": "f4e2m1fn",
    "f6E2M3FN": "f6e2m3fn",
    "f6E3M2FN": "f6e3m2fn",
    "complex<f32>": "c64",
    "complex<f64>": "c128",
    "index": "s64",
}


# -- the tree --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Symbol:
    """`@name`: a reference to a function."""

    name: str


class AttrDict(dict):
    """`{key = value, ...}`; `raw` keeps its text (XLA prints FFI backend configs that way)."""

    raw = "{}"


@dataclass(frozen=True)
class Word:
    """A bare identifier in a custom form (`LT`, `applies`) or an enum (`#stablehlo<... LT>`)."""

    text: str


@dataclass(frozen=True)
class DialectAttr:
    """`#dialect.name<key = value, ...>`; `fields` is None when the body is kept as `raw` text."""

    name: str
    fields: dict | None
    raw: str

    def get(self, key: str, default=None):
        return default if self.fields is None else self.fields.get(key, default)

    def __str__(self) -> str:
        return f"#{self.name}<{self.raw}>" if self.raw else f"#{self.name}"


@dataclass
class Dense:
    """`dense<...>` (or `dense_resource<...>`) elements; `shape` when the attribute is typed."""

    body: Any  # nested lists of scalars, a hex string, or bytes (resources)
    shape: Shape | None = None
    line: int = 0
    column: int = 0

    def array(self, shape: Shape) -> np.ndarray:
        return dense_array(self, shape)

    def ints(self) -> list:
        return [int(v) for v in np.asarray(_flatten(self.body)).reshape(-1)]


@dataclass
class Slices:
    """`[0:2, 1:3:2]` in `stablehlo.slice`'s custom form."""

    ranges: list[tuple[int, int, int]]


@dataclass
class Block:
    args: list[tuple[str, Shape]]
    ops: list["MlirOp"]


@dataclass
class MlirOp:
    name: str
    results: list[str]  # one value name per result, `%0#1` style for packs
    operands: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    words: list[Any] = field(default_factory=list)  # Word, Symbol, str, Slices, in order
    groups: list[list] = field(default_factory=list)  # parenthesized operand groups
    types: list[Shape] = field(default_factory=list)  # before `->` (or the only list)
    result_types: list[Shape] | None = None  # after `->`
    regions: list[Block] = field(default_factory=list)
    line: int = 0
    column: int = 0

    def get(self, *names: str, default=None):
        for name in names:
            if name in self.attrs:
                return self.attrs[name]
        return default

    @property
    def out_types(self) -> list[Shape]:
        if self.result_types is not None:
            return self.result_types
        return self.types[-1:] if self.types else []


@dataclass
class MlirFunc:
    name: str
    args: list[tuple[str, Shape, dict]]
    result_attrs: list[dict]
    result_types: list[Shape]
    body: Block
    visibility: str = "public"
    line: int = 0
    column: int = 0


@dataclass
class MlirModule:
    name: str
    attrs: dict
    funcs: dict[str, MlirFunc]
    resources: dict[str, bytes]
    meshes: dict[str, str] = field(default_factory=dict)  # Shardy: name -> `["x"=2, "y"=2]`


def looks_like_mlir(text: str) -> bool:
    """MLIR text starts with `module`, `func.func`, `#loc`, or a quoted generic op."""
    start = _SKIP.match(text)
    head = text[start.end() if start else 0 :][:40]
    return bool(re.match(r"(module\b|func\.func\b|#loc|\"builtin\.module\"|\"func\.func\")", head))


def parse_mlir(text: str) -> MlirModule:
    return MlirReader(text).module()


# -- the reader ------------------------------------------------------------------------------
class MlirReader:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._lines = [0] + [m.end() for m in re.finditer("\n", text)]

    # positions and errors
    def location(self, offset: int) -> tuple[int, int]:
        import bisect

        index = bisect.bisect_right(self._lines, offset) - 1
        return index + 1, offset - self._lines[index] + 1

    def error(self, message: str, offset: int | None = None) -> HloParseError:
        offset = self.pos if offset is None else offset
        line, column = self.location(offset)
        start = self._lines[line - 1]
        end = self.text.find("\n", start)
        source = self.text[start : end if end >= 0 else len(self.text)]
        return HloParseError(message, line, column, source)

    # characters
    def skip(self) -> None:
        while True:
            m = _SKIP.match(self.text, self.pos)
            if m:
                self.pos = m.end()
            if self.text.startswith("loc(", self.pos):  # debug locations carry no semantics
                self.pos += 4
                self.balanced("(", ")")
                continue
            return

    def peek(self, s: str) -> bool:
        self.skip()
        return self.text.startswith(s, self.pos)

    def accept(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str) -> None:
        if not self.accept(s):
            raise self.error(f"expected '{s}', found {self.found()}")

    def found(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of input"
        return repr(self.text[self.pos : self.pos + 12].split("\n")[0])

    def match(self, pattern: re.Pattern) -> str | None:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            return None
        self.pos = m.end()
        return m.group(0)

    def bare(self) -> str:
        word = self.match(_BARE)
        if word is None:
            raise self.error(f"expected an identifier, found {self.found()}")
        return word

    def peek_bare(self) -> str | None:
        self.skip()
        m = _BARE.match(self.text, self.pos)
        return m.group(0) if m else None

    def string(self) -> str:
        raw = self.match(_STRING)
        if raw is None:
            raise self.error(f"expected a string, found {self.found()}")
        return unescape_mlir(raw[1:-1])

    def balanced(self, open_: str, close: str) -> str:
        """Text up to the bracket that closes one already consumed; skips strings and `->`."""
        start, depth, text = self.pos, 1, self.text
        i = self.pos
        while i < len(text):
            c = text[i]
            if c == '"':
                m = _STRING.match(text, i)
                i = m.end() if m else i + 1
                continue
            if c == "-" and text.startswith("->", i):
                i += 2
                continue
            if c in "<([{":
                depth += 1
            elif c in ">)]}":
                depth -= 1
                if depth == 0:
                    self.pos = i + 1
                    return text[start:i]
            i += 1
        raise self.error(f"unclosed '{open_}'", start)

    # -- module and functions -----------------------------------------------------------
    def module(self) -> MlirModule:
        self.skip_aliases()
        name, attrs = "", dict[str, object]()
        generic = self.accept('"builtin.module"')  # print_generic_op_form
        wrapped = generic or self.accept("module")
        if generic:
            self.expect("(")
            self.expect(")")
            if self.accept("<{"):
                name = str(self.dict_entries("}>").get("sym_name", ""))
            self.expect("(")
            self.expect("{")
        elif wrapped:
            self.skip()
            if self.peek("@"):
                name = self.symbol().name
            if self.accept("attributes"):
                attrs = self.attr_dict()
            self.expect("{")
        funcs: dict[str, MlirFunc] = {}
        meshes: dict[str, str] = {}
        while not (self.peek("}") if wrapped else self.at_end_of_ops()):
            self.top_level_item(funcs, meshes)
        if wrapped:
            self.expect("}")
        if generic:
            self.expect(")")
            if self.peek("{"):
                attrs = self.attr_dict()
            self.types_section(MlirOp("builtin.module", []))
        resources = self.resources()
        self.skip_aliases()
        if self.pos < len(self.text):
            raise self.error(f"unexpected text after the module: {self.found()}")
        if not funcs:
            raise self.error("the module has no functions")
        return MlirModule(name, attrs, funcs, resources, meshes)

    def top_level_item(self, funcs: dict, meshes: dict) -> None:
        """A function or a Shardy mesh, in the custom or the generic form."""
        offset = self.pos
        if self.accept("sdy.mesh"):  # sdy.mesh @mesh = <["x"=2, "y"=2]> {stablehlo.mesh...}
            mesh = self.symbol().name
            self.expect("=")
            self.expect("<")
            meshes[mesh] = self.balanced("<", ">").strip()
            if self.peek("{"):
                self.attr_dict()
            return
        if self.peek('"'):  # "func.func"() <{sym_name = "f", function_type = ...}> ({...})
            op = self.op()
            if op.name == "sdy.mesh":
                mesh = op.get("mesh")
                meshes[str(op.get("sym_name"))] = mesh.raw if isinstance(mesh, DialectAttr) else ""
                return
            if op.name != "func.func":
                raise self.error(f"expected func.func or sdy.mesh, found {op.name}", offset)
            func = _generic_func(op, self.location(offset))
        else:
            if not (self.accept("func.func") or self.accept("func")):
                raise self.error(f"expected func.func or sdy.mesh, found {self.found()}", offset)
            func = self.func(offset)
        funcs[func.name] = func

    def at_end_of_ops(self) -> bool:
        self.skip()
        return self.pos >= len(self.text) or self.text.startswith("{-#", self.pos)

    def skip_aliases(self) -> None:
        """`#loc1 = loc(...)` and `#map = ...` lines at the top or bottom."""
        while True:
            self.skip()
            m = re.compile(r"[#!][A-Za-z0-9_.$\-]+\s*=").match(self.text, self.pos)
            if not m:
                return
            self.pos = m.end()
            start = self._after_space(self.pos)
            if self.text.startswith("loc(", start):  # skip() would take it for a comment
                self.pos = start + 4
                self.balanced("(", ")")
            else:
                self.attr()

    def resources(self) -> dict[str, bytes]:
        if not self.accept("{-#"):
            return {}
        blobs = {}
        end = self.text.find("#-}", self.pos)
        if end < 0:
            raise self.error("unclosed '{-#'")
        for m in re.finditer(
            r'([A-Za-z0-9_.$\-]+|"[^"]*")\s*:\s*"0x([0-9A-Fa-f]*)"', self.text[self.pos : end]
        ):
            data = bytes.fromhex(m.group(2))
            blobs[m.group(1).strip('"')] = data[4:]  # the first 4 bytes give the alignment
        self.pos = end + 3
        return blobs

    def func(self, offset: int) -> MlirFunc:
        visibility = "public"
        word = self.peek_bare()
        if word in ("public", "private", "nested"):
            visibility = self.bare()
        name = self.symbol().name
        self.expect("(")
        args: list = []
        while not self.accept(")"):
            if args:
                self.expect(",")
            value = self.match(_VALUE)
            if value is None:
                raise self.error(f"expected a function argument, found {self.found()}")
            self.expect(":")
            shape = self.type()
            arg_attrs = self.attr_dict() if self.peek("{") else {}
            args.append((value, shape, arg_attrs))
        result_types: list = []
        result_attrs: list = []
        if self.accept("->"):
            if self.accept("("):
                while not self.accept(")"):
                    if result_types:
                        self.expect(",")
                    result_types.append(self.type())
                    result_attrs.append(self.attr_dict() if self.peek("{") else {})
            else:
                result_types.append(self.type())
                result_attrs.append({})
        if self.accept("attributes"):
            self.attr_dict()
        self.expect("{")
        body = self.block_body(args=[(n, s) for n, s, _ in args])
        line, column = self.location(offset)
        return MlirFunc(name, args, result_attrs, result_types, body, visibility, line, column)

    def block_body(self, args=()) -> Block:
        """Ops up to the closing `}` (consumed); an optional `^bb0(...):` label first."""
        args = list(args)
        if self.accept("^"):
            self.bare()
            if self.accept("("):
                while not self.accept(")"):
                    self.accept(",")
                    value = self.value()
                    self.expect(":")
                    args.append((value, self.type()))
            self.expect(":")
        ops = []
        while not self.accept("}"):
            if self.pos >= len(self.text):
                raise self.error("unclosed region")
            ops.append(self.op())
        return Block(args, ops)

    # -- operations ---------------------------------------------------------------------
    def op(self) -> MlirOp:
        self.skip()
        results: list[str] = []
        m = _RESULTS.match(self.text, self.pos)
        if m:
            for part in re.split(r"\s*,\s*", m.group(1)):
                name, _, count = part.partition(":")
                results.extend([name] if not count else [f"{name}#{i}" for i in range(int(count))])
            self.pos = m.end()
            self.skip()
        offset = self.pos
        line, column = self.location(offset)
        if self.peek('"'):
            op = MlirOp(self.string(), results, line=line, column=column)
            self.generic_body(op)
        else:
            name = self.match(_BARE)
            if name is None:
                raise self.error(f"expected an operation, found {self.found()}")
            op = MlirOp(name, results, line=line, column=column)
            self.custom_body(op)
        self.types_section(op)
        while self.peek_bare() in TRAILING_REGION_WORDS:
            self.trailing_region(op)
        return op

    def generic_body(self, op: MlirOp) -> None:
        self.expect("(")
        while not self.accept(")"):
            if op.operands:
                self.expect(",")
            op.operands.append(self.value())
        if self.accept("<{"):
            op.attrs.update(self.dict_entries("}>"))
        if self.peek("(") and self.text.startswith("{", self._after_space(self.pos + 1)):
            self.expect("(")
            while not self.accept(")"):
                self.accept(",")
                self.expect("{")
                op.regions.append(self.block_body())
        if self.peek("{"):
            op.attrs.update(self.attr_dict())

    def _after_space(self, i: int) -> int:
        m = _SKIP.match(self.text, i)
        return m.end() if m else i

    def custom_body(self, op: MlirOp) -> None:
        """Items up to the `:` of the types (or the end of the line, for `return`)."""
        while True:
            self.skip_inline()
            if self.pos >= len(self.text) or self.text[self.pos] in ":\n}":
                return
            if self.peek("->"):
                return
            self.custom_item(op)
            self.accept(",")

    def skip_inline(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1
        if self.text.startswith("loc(", self.pos):
            self.pos += 4
            self.balanced("(", ")")

    def custom_item(self, op: MlirOp) -> None:
        text, pos = self.text, self.pos
        if text.startswith("%", pos):
            op.operands.append(self.value())
        elif text.startswith("<{", pos):
            self.pos += 2
            op.attrs.update(self.dict_entries("}>"))
        elif text.startswith("(", pos):
            self.pos += 1
            if self.peek("{"):  # generic region list after a custom name
                while not self.accept(")"):
                    self.accept(",")
                    self.expect("{")
                    op.regions.append(self.block_body())
                return
            group = self.group()
            if self.peek("{") and _block_arguments(group) is not None:
                self.expect("{")  # sdy.manual_computation(%x) ... (%arg: T) {...}
                op.regions.append(self.block_body(_block_arguments(group)))
            else:
                op.groups.append(group)
        elif text.startswith("<", pos):  # a Shardy sharding: <@mesh, [{"x"}, {}]>
            op.words.append(self.attr(typed=False))
        elif text.startswith("{", pos):
            op.attrs.update(self.attr_dict())
        elif text.startswith("[", pos):
            op.words.append(self.slices())
        elif text.startswith("@", pos):
            op.words.append(self.symbol())
        elif text.startswith('"', pos):
            op.words.append(self.string())
        elif re.match(r"(dense<|dense_resource<|array<|#)", text[pos : pos + 16]):
            op.words.append(self.attr(typed=False))
        else:
            word = self.match(_BARE)
            if word is None:
                raise self.error(f"unexpected {self.found()} in {op.name}")
            if self.accept("="):
                op.attrs[word] = self.custom_value(word)
            else:
                op.words.append(Word(word))

    def custom_value(self, key: str):
        if key == "dim_numbers":  # [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
            m = self.match(re.compile(r"\[[^\]]*\]\s*x\s*\[[^\]]*\]\s*->\s*\[[^\]]*\]"))
            if m is None:
                raise self.error("expected convolution dimension numbers")
            return m
        value = self.attr(typed=False)
        if (
            isinstance(value, list)
            and self.peek("x")
            and not (self.peek_bare() or "").startswith("x_")
        ):
            self.expect("x")  # dot_general's `contracting_dims = [1] x [0]`
            return (value, self.attr(typed=False))
        return value

    def group(self) -> list:
        """`(%x init: %c)` or `(%iterArg = %c, ...)` or `(%a, %b)`: a list of items."""
        items: list = []
        while not self.accept(")"):
            self.accept(",")
            if self.peek("%"):
                items.append(self.value())
            elif self.accept("init:"):
                items.append(("init", self.value()))
            elif self.accept("="):
                items.append(("=", self.value()))
            elif self.accept(":"):
                items.append((":", self.type()))
            else:
                word = self.bare()
                if self.accept("="):
                    items.append((word, self.attr(typed=False)))
                else:
                    items.append(Word(word))
        return items

    def slices(self) -> Slices:
        self.expect("[")
        ranges = []
        while not self.accept("]"):
            self.accept(",")
            parts = [self.integer()]
            while self.accept(":"):
                parts.append(self.integer())
            if len(parts) == 2:
                parts.append(1)
            if len(parts) != 3:
                raise self.error("expected start:limit[:stride]")
            start, limit, stride = parts
            ranges.append((start, limit, stride))
        return Slices(ranges)

    def types_section(self, op: MlirOp) -> None:
        self.skip_inline()
        if self.text.startswith(":", self.pos) and not self.text.startswith("::", self.pos):
            self.pos += 1
            op.types = self.type_list()
            if self.accept("->"):
                op.result_types = self.type_list()
        elif self.peek("->"):  # chlo.top_k(... ) : T -> (T, T) handled above; bare -> rare
            self.expect("->")
            op.result_types = self.type_list()

    def type_list(self) -> list[Shape]:
        if self.peek("(") and not self.peek("()"):
            self.expect("(")
            types = [self.type()]
            while self.accept(","):
                types.append(self.type())
            self.expect(")")
            return types
        if self.accept("()"):
            return []
        types = [self.type()]
        while self.peek(",") and self._type_follows(self.pos + 1):
            self.expect(",")
            types.append(self.type())
        return types

    def _type_follows(self, i: int) -> bool:
        i = self._after_space(i)
        return bool(
            re.match(
                r"(tensor<|tuple<|!|complex<|[iuf]\d|bf16|index\b|si\d|ui\d|none)",
                self.text[i : i + 8],
            )
        )

    def trailing_region(self, op: MlirOp) -> None:
        """`reducer(%a: T, %c: T) (%b: T, %d: T) {...}` or `cond {...}` / `do {...}`."""
        word = self.bare()
        groups: list[list[tuple[str, Shape]]] = []
        while self.accept("("):
            group = []
            while not self.accept(")"):
                self.accept(",")
                value = self.match(_VALUE)
                if value is None:
                    raise self.error(f"expected a value name, found {self.found()}")
                self.expect(":")
                group.append((value, self.type()))
            groups.append(group)
        self.expect("{")
        # block arguments go first-of-each-pair, then second-of-each-pair
        args = [pair[0] for pair in groups if pair] + [pair[1] for pair in groups if len(pair) > 1]
        block = self.block_body(args)
        block.label = word  # type: ignore[attr-defined]
        op.regions.append(block)

    def value(self) -> str:
        value = self.match(_VALUE)
        if value is None:
            raise self.error(f"expected a value (%name), found {self.found()}")
        return value

    def symbol(self) -> Symbol:
        self.skip()
        if not self.accept("@"):
            raise self.error(f"expected @symbol, found {self.found()}")
        if self.text.startswith('"', self.pos):
            return Symbol(self.string())
        m = _SUFFIX.match(self.text, self.pos)
        if not m:
            raise self.error("expected a symbol name")
        self.pos = m.end()
        return Symbol(m.group(0))

    def integer(self) -> int:
        raw = self.match(_NUMBER)
        if (
            raw is None
            or "." in raw
            or ("e" in raw.lower() and not raw.lower().startswith(("0x", "-0x")))
        ):
            raise self.error(f"expected an integer, found {self.found()}")
        return int(raw, 0)

    # -- types ----------------------------------------------------------------------------
    def type(self) -> Shape:
        self.skip()
        offset = self.pos
        if self.accept("tensor<"):
            body = self.balanced("<", ">")
            return self.tensor_type(body, offset)
        if self.accept("tuple<"):
            body = self.balanced("<", ">")
            sub = MlirReader(body)
            shapes = []
            while not sub.at_end_of_ops():
                sub.accept(",")
                shapes.append(sub.type())
            return Shape.tuple_of(shapes)
        if self.accept("!stablehlo.token") or self.accept("!mhlo.token"):
            return Shape.token()
        if self.accept("complex<"):
            body = self.balanced("<", ">")
            return Shape.array(self.element_type(f"complex<{body.strip()}>", offset), ())
        word = self.match(re.compile(r"[A-Za-z][A-Za-z0-9]*"))
        if word is None:
            raise self.error(f"expected a type, found {self.found()}")
        return Shape.array(self.element_type(word, offset), ())

    def element_type(self, name: str, offset: int) -> str:
        etype = ELEMENT_TYPES.get(name)
        if etype is None:
            raise self.error(f"unsupported element type {name}", offset)
        return etype

    def tensor_type(self, body: str, offset: int) -> Shape:
        body, _, encoding = body.partition(",")
        m = re.fullmatch(r"((?:(?:\d+|\?)x)*)(.+)", body.strip())
        if m is None:
            raise self.error(f"bad tensor type tensor<{body}>", offset)
        element = m.group(2).strip()
        dims, dynamic = [], []
        for part in m.group(1).split("x")[:-1]:
            if part == "?":
                dims.append(UNBOUNDED)
                dynamic.append(True)
            elif part.isdigit():
                dims.append(int(part))
                dynamic.append(False)
            else:
                raise self.error(f"bad dimension {part!r} in tensor<{body}>", offset)
        bounds = re.search(r"bounds\s*<([^>]*)>", encoding)
        if bounds:  # tensor<?x4xf32, #stablehlo.bounds<8, ?>>: `?` with a bound is `<=8`
            for i, bound in enumerate(b.strip() for b in bounds.group(1).split(",")):
                if i < len(dims) and dynamic[i] and bound != "?":
                    dims[i] = int(bound)
        return Shape.array(self.element_type(element, offset), dims, dynamic=tuple(dynamic))

    # -- attributes -----------------------------------------------------------------------
    def attr_dict(self) -> "AttrDict":
        self.expect("{")
        start = self.pos - 1
        entries = AttrDict(self.dict_entries("}"))
        entries.raw = self.text[start : self.pos]
        return entries

    def dict_entries(self, close: str) -> dict:
        entries: dict = {}
        while not self.accept(close):
            if entries:
                self.expect(",")
            key = self.string() if self.peek('"') else self.bare()
            entries[key] = self.attr() if self.accept("=") else True  # unit attribute
        return entries

    def attr(self, typed: bool = True):
        """One attribute value; `typed` also consumes a `: type` suffix (`1 : i64`)."""
        self.skip()
        offset = self.pos
        text = self.text
        if text.startswith("[", self.pos):
            self.pos += 1
            items: list = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.attr())
            return items
        if text.startswith("{", self.pos):
            return self.attr_dict()
        if text.startswith('"', self.pos):
            value = self.string()
            return self.type_suffix(value) if typed else value
        if text.startswith("@", self.pos):
            return self.symbol()
        if text.startswith("#", self.pos):
            return self.dialect_attr()
        if text.startswith("(", self.pos):  # a function type: (T, U) -> V
            inputs = self.type_list()
            self.expect("->")
            return FunctionType(inputs, self.type_list())
        if text.startswith("<", self.pos):  # Shardy's bare <@mesh, [{"x"}, {}]>
            self.pos += 1
            return DialectAttr("sdy.sharding", None, self.balanced("<", ">"))
        for prefix in ("dense<", "dense_resource<"):
            if text.startswith(prefix, self.pos):
                self.pos += len(prefix)
                line, column = self.location(offset)
                body = self.balanced("<", ">")
                dense = Dense(
                    body.strip() if prefix == "dense_resource<" else None, line=line, column=column
                )
                if prefix == "dense<":
                    dense.body = _dense_body(body, self, offset)
                else:
                    dense.body = ("resource", body.strip())
                if typed and self.accept(":"):
                    dense.shape = self.type()
                return dense
        if text.startswith("array<", self.pos):
            self.pos += 6
            body = self.balanced("<", ">")
            _, _, values = body.partition(":")
            return [_scalar(v.strip()) for v in values.split(",") if v.strip()]
        number = self.match(_NUMBER)
        if number is not None:
            value = _scalar(number)
            return self.type_suffix(value) if typed else value
        if self._type_follows(self.pos) and re.match(
            r"(tensor<|tuple<|!|complex<)", text[self.pos : self.pos + 8]
        ):
            return self.type()
        word = self.match(_BARE)
        if word is None:
            raise self.error(f"expected an attribute value, found {self.found()}")
        if word in ("true", "false"):
            return self.type_suffix(word == "true") if typed else word == "true"
        if word in ("inf", "nan"):
            return self.type_suffix(float(word)) if typed else float(word)
        if word in ("affine_map", "strided", "distinct") and self.accept("<"):
            return Word(word + "<" + self.balanced("<", ">") + ">")
        if word == "unit":
            return True
        return Word(word)

    def type_suffix(self, value):
        if self.peek(":") and not self.peek("::"):
            self.expect(":")
            self.type()
        return value

    def dialect_attr(self):
        self.expect("#")
        name = self.match(re.compile(r"[A-Za-z0-9_.$\-]+"))
        if not self.text.startswith("<", self.pos):
            return DialectAttr(name, None, "")
        self.pos += 1
        raw = self.balanced("<", ">")
        body = raw.strip()
        words = body.split()
        if len(words) <= 2 and all(_BARE.fullmatch(w) for w in words):  # #stablehlo<precision X>
            return Word(words[-1])
        if re.match(r"[A-Za-z_][A-Za-z0-9_]*\s*=", body) and not name.startswith("sdy"):
            try:
                return DialectAttr(name, MlirReader(body + ">").dict_entries(">"), raw)
            except HloParseError:
                pass
        return DialectAttr(name, None, raw)


@dataclass(frozen=True)
class FunctionType:
    """`(T, U) -> V` as an attribute value (a generic func.func's function_type)."""

    inputs: list
    results: list


def _generic_func(op: MlirOp, location: tuple[int, int]) -> MlirFunc:
    """A func.func read in the generic form: its properties hold the name, visibility, type
    and argument/result attributes, its one region the body."""
    kind = op.get("function_type")
    if not isinstance(kind, FunctionType) or len(op.regions) != 1:
        raise HloParseError("a generic func.func needs a function_type and a body", *location)
    body = op.regions[0]
    arg_attrs = op.get("arg_attrs") or [{}] * len(body.args)
    args = [(name, shape, dict(attrs)) for (name, shape), attrs in zip(body.args, arg_attrs)]
    result_attrs = [dict(a) for a in op.get("res_attrs") or [{}] * len(kind.results)]
    visibility = str(op.get("sym_visibility", default="public"))
    name = str(op.get("sym_name"))
    return MlirFunc(name, args, result_attrs, list(kind.results), body, visibility, *location)


def _block_arguments(group: list) -> list[tuple[str, Shape]] | None:
    """`(%a: T, %b: U)` read as a group: its (name, type) pairs, or None if it is not that."""
    pairs = list(zip(group[::2], group[1::2]))
    if len(group) % 2 or not all(
        isinstance(name, str) and isinstance(typed, tuple) and typed[0] == ":"
        for name, typed in pairs
    ):
        return None
    return [(name, typed[1]) for name, typed in pairs]


class _Hex(int):
    """An integer written in hex: in a float dense<...> it is the element's bit pattern."""


def _scalar(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low.startswith(("0x", "-0x")):
        return _Hex(int(text, 16))
    if any(c in low for c in ".e") or low in ("inf", "-inf", "nan"):
        return float(text)
    return int(text)


def _dense_body(body: str, reader: MlirReader, offset: int):
    text = body.strip()
    if not text:
        return []
    if text.startswith('"'):
        hexed = unescape_mlir(text[1:-1])
        if not hexed.startswith("0x"):
            raise reader.error('a dense string must be hex ("0x...")', offset)
        return bytes.fromhex(hexed[2:])

    def parse(sub: MlirReader):
        if sub.accept("["):
            items = []
            while not sub.accept("]"):
                sub.accept(",")
                items.append(parse(sub))
            return items
        if sub.accept("("):  # complex (re, im)
            real = parse(sub)
            sub.expect(",")
            imag = parse(sub)
            sub.expect(")")
            return (
                complex(real, imag)
                if not isinstance(real, int) or not isinstance(imag, int)
                else ("bits", real, imag)
            )
        word = sub.match(
            re.compile(
                r"[-+]?(?:0x[0-9a-fA-F]+|inf|nan|true|false|"
                r"\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)"
            )
        )
        if word is None:
            raise reader.error(f"bad dense element near {sub.found()}", offset)
        return _scalar(word)

    sub = MlirReader(text)
    return parse(sub)


def _flatten(body):
    if isinstance(body, list):
        out = []
        for item in body:
            out.extend(_flatten(item) if isinstance(item, list) else [item])
        return out
    return [body]


def dense_array(dense: Dense, shape: Shape) -> np.ndarray:
    """The elements of `dense` as a NumPy array of `shape`'s type and dims (splats broadcast)."""
    dtype = shape.numpy_dtype
    count = int(np.prod(shape.dims)) if shape.dims else 1
    body = dense.body
    if isinstance(body, tuple) and body[0] == "resource":
        raise HloParseError(f"dense_resource {body[1]} is not defined", dense.line, dense.column)
    if isinstance(body, bytes):
        if shape.dtype == "pred":
            flat = np.frombuffer(body, np.uint8).astype(bool)
        else:
            flat = np.frombuffer(body, dtype)
        if flat.size == 1 and count != 1:
            flat = np.repeat(flat, count)
        if flat.size != count:
            raise HloParseError(
                f"dense data has {flat.size} elements, {shape} needs {count}",
                dense.line,
                dense.column,
            )
        return flat.reshape(shape.dims).copy()
    items = _flatten(body)
    etype = shape.element_type
    if etype.is_float and any(isinstance(v, _Hex) for v in items):
        bits = np.dtype(f"u{dtype.itemsize}")  # hex elements are bit patterns
        values = [
            np.array(v, bits).view(dtype)
            if isinstance(v, _Hex)
            else np.array(v).astype(np.float64).astype(dtype)
            for v in items
        ]
        flat = np.array(values, dtype)
    elif etype.is_complex:
        flat = np.array(
            [complex(v) if not isinstance(v, tuple) else complex(v[1], v[2]) for v in items], dtype
        )
    else:
        flat = np.array(items, dtype=np.float64 if etype.is_float else None)
        flat = flat.astype(dtype)
    if flat.size == 1 and count != 1:
        flat = np.repeat(flat, count)
    if flat.size != count:
        raise HloParseError(
            f"dense<...> has {flat.size} elements, {shape} needs {count}", dense.line, dense.column
        )
    return flat.reshape(shape.dims)


def unescape_mlir(text: str) -> str:
    """MLIR strings escape bytes as `\\XX` (hex) and `\\\\`, `\\"`, `\\n`, `\\t`."""
    if "\\" not in text:
        return text
    out, i = bytearray(), 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if re.match(r"[0-9a-fA-F]{2}", text[i + 1 : i + 3]):
                out.append(int(text[i + 1 : i + 3], 16))
                i += 3
                continue
            out.extend({"n": b"\n", "t": b"\t"}.get(nxt, nxt.encode()))
            i += 2
            continue
        out.extend(c.encode())
        i += 1
    return out.decode("utf-8", "replace")


__all__ = [
    "MlirModule",
    "MlirFunc",
    "MlirOp",
    "Block",
    "Dense",
    "DialectAttr",
    "Symbol",
    "Word",
    "Slices",
    "parse_mlir",
    "looks_like_mlir",
    "dense_array",
]
