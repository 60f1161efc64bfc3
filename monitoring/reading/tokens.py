"""Cut a (prefix-stripped) line into tokens: words, numbers, binders, brackets, separators.

One left-to-right pass; each character is looked at a bounded number of times.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from monitoring.reading.numbers import NON_FINITE, non_finite, scan_number

WORD = "w"
NUMBER = "n"  # nan and inf are float values
BAD = "b"
SPACE = " "
SEP = "s"  # `,` `|` `;` ` - ` tabs, runs of spaces, anything else that is not text
BIND = ":"  # `:` or `=`
SLASH = "/"
OPEN = "("
CLOSE = ")"
OPEN_LIST = "["
CLOSE_LIST = "]"
OPEN_DICT = "{"
CLOSE_DICT = "}"
_KINDS = {"(": OPEN, ")": CLOSE, "[": OPEN_LIST, "]": CLOSE_LIST, "{": OPEN_DICT, "}": CLOSE_DICT}
_WORD_JOINERS = "._-/"


class Token(NamedTuple):
    kind: str
    text: str
    value: float | int | None = None
    unit: str = ""


# A word: letters, digits and `_`, joined by `.` `-` `/` that a letter, digit or `_` follows.
_WORD = re.compile(r"(?:\w|[./-](?=\w))+")
_SPACES = re.compile(r" +")


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == " ":
            j = _SPACES.match(text, i).end()  # type: ignore[union-attr]
            if text.startswith("- ", j) and j - i == 1 and (j + 2 >= n or text[j + 2] != "-"):
                tokens.append(Token(SEP, " - "))
                j += 2
            else:
                tokens.append(Token(SPACE if j - i == 1 else SEP, text[i:j]))
            i = j
            continue
        if c.isdigit() or (
            c in "+-." and i + 1 < n and (text[i + 1].isdigit() or text[i + 1] == ".")
        ):
            number = scan_number(text, i)
            if number is not None:
                kind = NUMBER if number.readable else BAD
                tokens.append(Token(kind, text[i : number.end], number.value, number.unit))
                i = number.end
                continue
        if c in "+-" and text[i + 1 : i + 4].lower() in ("inf", "nan"):
            number = scan_number(text, i)
            if number is not None and number.readable:
                tokens.append(Token(NUMBER, text[i : number.end], number.value))
                i = number.end
                continue
        if c.isalpha() or c == "_":
            j = _WORD.match(text, i).end()  # type: ignore[union-attr]
            word = text[i:j]
            if word.lower() in NON_FINITE:
                tokens.append(Token(NUMBER, word, non_finite(word)))
            else:
                tokens.append(Token(WORD, word))
            i = j
            continue
        if c in ":=":
            tokens.append(Token(BIND, c))
        elif c in _KINDS:
            tokens.append(Token(_KINDS[c], c))
        elif c == "/":
            tokens.append(Token(SLASH, c))
        elif c in "'\"":
            pass  # quotes around dict keys and JSON strings say nothing
        else:
            tokens.append(Token(SEP, c))
        i += 1
    return tokens
