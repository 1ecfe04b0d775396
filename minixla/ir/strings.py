"""Escapes in the quoted strings of XLA's text, read by the parser and by the IR's own
attribute accessors."""

from __future__ import annotations

import re

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    '"': '"',
    "'": "'",
    "\\": "\\",
    "?": "?",
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
}


def unescape(body: str, lexer=None, offset: int = 0) -> str:
    """`body` with its backslash escapes replaced; a bad escape is the lexer's located error."""
    if "\\" not in body:
        return body
    out, i = [], 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt.isdigit():
            octal = re.match(r"[0-7]{1,3}", body[i + 1 :])
            if not octal:
                raise (
                    lexer.error("bad octal escape", offset) if lexer else ValueError("bad escape")
                )
            out.append(chr(int(octal.group(), 8)))
            i += 1 + len(octal.group())
        elif nxt == "x":
            hexa = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2 :])
            if not hexa:
                raise (lexer.error("bad \\x escape", offset) if lexer else ValueError("bad escape"))
            out.append(chr(int(hexa.group(), 16)))
            i += 2 + len(hexa.group())
        else:
            raise (
                lexer.error(f"unknown escape \\{nxt}", offset)
                if lexer
                else ValueError("bad escape")
            )
    return "".join(out)
