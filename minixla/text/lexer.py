"""Tokens of XLA's HLO text, produced on demand so the parser can also read raw spans.

Follows XLA's lexer: `//` and `/* */` comments are skipped; an identifier directly followed by
`:` is a NAME and by `=` an ATTR (the punctuation is consumed); `%` before an identifier is
optional; numbers, window sizes (`3x3`), paddings (`0_0x1_1_2`) and dim labels (`b01f_01io->b01f`)
are tokens of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import HloParseError
from ..ir.strings import unescape

IDENT, NAME, ATTR, INT, FLOAT, STRING, DXD, PAD, DIM_LABELS, PUNCT, EOF = (
    "identifier",
    "name",
    "attribute",
    "integer",
    "float",
    "string",
    "window size",
    "padding",
    "dim labels",
    "punctuation",
    "end of input",
)

_SKIP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)+", re.S)
_IDENT_BODY = r"[A-Za-z_](?:[A-Za-z0-9_.]|-(?!>))*"
_PATTERNS = [
    # XLA's double-quoted strings may span lines (origin_recovery_table holds a module)
    (STRING, re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')),
    (PUNCT, re.compile(r"\.\.\.|->|<=")),
    (DIM_LABELS, re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")),
    (
        FLOAT,
        re.compile(
            r"[-+]?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
            r"|\d+[eE][-+]?\d+)(?![A-Za-z0-9_])"
        ),
    ),
    (PAD, re.compile(r"-?\d+_-?\d+(?:_-?\d+)?(?:x-?\d+_-?\d+(?:_-?\d+)?)*(?![A-Za-z0-9_])")),
    (DXD, re.compile(r"\d+(?:x\d+)+(?![A-Za-z0-9_])")),
    (INT, re.compile(r"[-+]?\d+(?![A-Za-z0-9_.])")),
    (FLOAT, re.compile(r"-(?:inf|nan(?:\(0x[0-9a-fA-F]+\))?)(?![A-Za-z0-9_])")),
    (FLOAT, re.compile(r"nan\(0x[0-9a-fA-F]+\)")),
    (IDENT, re.compile(r"%?" + _IDENT_BODY)),
    (PUNCT, re.compile(r"[=,:*#+~\[\]{}()?<>!]")),
]


_IDENT_PATTERN = _PATTERNS[-2][1]
# First characters that decide the token alone, looked up before trying every pattern in turn
# (which is most of the parser's time): these can only start a one-character punctuation or,
# for letters no earlier pattern starts with (dim labels: b, f; nan(0x..): n), an identifier.
_SINGLE_PUNCT = frozenset("=,:*#~[]{}()!")
_PLAIN_IDENT_START = frozenset("%_ACDEGHIJKLMOPQRSTUVWXYZBFNacdeghijklmopqrstuvwxyz")
# Digits followed by none of [A-Za-z0-9_.] can only be an integer (dims, layouts, indices):
# the dim-label, padding, window-size and float patterns all need one of those after them.
_PLAIN_INT = re.compile(r"\d+(?![A-Za-z0-9_.])")


@dataclass(frozen=True)
class Token:
    kind: str
    text: str  # identifier/name/attribute: without `%` and the trailing `:`/`=`
    start: int  # offset of the token in the source
    end: int  # offset just past it (past a consumed `:`/`=`)

    def is_punct(self, text: str) -> bool:
        return self.kind == PUNCT and self.text == text


class Lexer:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self._peeked: Token | None = None
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    # -- positions ------------------------------------------------------------------------
    def location(self, offset: int) -> tuple[int, int, str]:
        """(line, column, source line) of an offset, 1-based."""
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        start = self._line_starts[lo]
        end = self.text.find("\n", start)
        line_text = self.text[start : end if end >= 0 else len(self.text)]
        return lo + 1, offset - start + 1, line_text

    def error(self, message: str, offset: int | None = None) -> HloParseError:
        if offset is None:
            offset = self.peek().start
        line, column, source = self.location(min(offset, len(self.text)))
        return HloParseError(message, line, column, source)

    # -- tokens ---------------------------------------------------------------------------
    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Token:
        token = self.peek()
        self._peeked = None
        self.pos = token.end
        return token

    def seek(self, offset: int) -> None:
        self._peeked = None
        self.pos = offset

    def skip_space(self) -> int:
        match = _SKIP.match(self.text, self.pos)
        if match:
            self.pos = match.end()
        return self.pos

    def _scan(self) -> Token:
        start = self.skip_space()
        text = self.text
        if start >= len(text):
            return Token(EOF, "", start, start)
        first = text[start]
        if first in _SINGLE_PUNCT:
            return Token(PUNCT, first, start, start + 1)
        if first in _PLAIN_IDENT_START:
            return self._identifier(_IDENT_PATTERN.match(text, start), start)
        if first.isdigit():
            match = _PLAIN_INT.match(text, start)
            if match:
                return Token(INT, match.group(), start, match.end())
        for kind, pattern in _PATTERNS:
            match = pattern.match(text, start)
            if not match:
                continue
            if kind == IDENT:
                return self._identifier(match, start)
            value = match.group()
            if kind == STRING:
                value = unescape(value[1:-1], self, start)
            return Token(kind, value, start, match.end())
        raise self.error(f"unexpected character {text[start]!r}", start)

    def _identifier(self, match, start: int) -> Token:
        if match is None:  # a lone `%`
            raise self.error(f"unexpected character {self.text[start]!r}", start)
        end = match.end()
        value = match.group().lstrip("%")
        following = self.text[end : end + 1]
        if following == ":":
            return Token(NAME, value, start, end + 1)
        if following == "=":
            return Token(ATTR, value, start, end + 1)
        return Token(IDENT, value, start, end)

    def raw_span(self) -> str:
        """Text from the current position up to a `,` (or closing bracket, or line end) at
        nesting depth 0: how unknown attribute values are kept verbatim."""
        start = self.skip_space()
        text, depth, i = self.text, 0, start
        closers = {"}": "{", "]": "[", ")": "("}
        while i < len(text):
            char = text[i]
            if char in "\"'":
                match = _PATTERNS[0][1].match(text, i)
                if not match:
                    raise self.error("unterminated string", i)
                i = match.end()
                continue
            if char in "{[(":
                depth += 1
            elif char in closers:
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and char in ",\n":
                break
            i += 1
        if depth:
            raise self.error("unbalanced brackets in attribute value", start)
        value = text[start:i].rstrip()
        if not value:
            raise self.error("expected an attribute value", start)
        self.seek(start + len(value))
        return value
