"""Fields of one training line: `key=value`, `key: value`, `label value`, dict items, `i/N`.

Multi-word labels stay whole (`lm loss`), a value's parenthesised second value is
its running average (`loss: 6.9 (7.1)` -> loss_avg) or share (`9.46GiB(64.99%)` ->
memory_pct), a label with a unit and no value heads a group (`time (ms) | forward: 1`
-> time/forward), and a dict inside a label qualifies its keys (`tot_loss/loss`).
A segment of prose (a number followed by a bare word: `loaded 338025 tokens`) gives
nothing. One pass over the tokens; lookahead is bounded by the bracket it reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitoring.reading.attach import metric_name
from monitoring.reading.names import EVAL_PREFIXES, UNIT_WORDS, counter_word, label_name, rate_name
from monitoring.reading.numbers import is_rate
from monitoring.reading.tokens import (
    BAD,
    BIND,
    CLOSE,
    CLOSE_DICT,
    CLOSE_LIST,
    NUMBER,
    OPEN,
    OPEN_DICT,
    OPEN_LIST,
    SEP,
    SLASH,
    SPACE,
    WORD,
    Token,
)

MAX_LABEL_WORDS = 4
MAX_DEPTH = 8
_ACROSS_PADDING = (NUMBER, BAD, BIND, OPEN_LIST)
_LOOKAHEAD = 64


@dataclass
class Field:
    name: str  # "" when the value has no label
    value: float | int | None  # None: printed as nan/inf
    unit: str = ""
    total: int | None = None  # a fraction `i/N`: value i, total N
    counter: str | None = None  # step / iter / epoch ... when the label names a counter
    bracketed: bool = False  # `Epoch: [3]`, `[ 10/121]`
    then_comma: bool = False  # `0/40,` (DeepSpeed's epoch/step)


@dataclass
class LineFields:
    fields: list[Field] = field(default_factory=list)
    bar: int | None = None  # fields before this index are a progress bar's description
    prose: bool = False  # a segment was dropped as prose
    row: bool = False  # cells of a table under its header row
    tokens: list[Token] = field(default_factory=list)


def _is_int(token: Token) -> bool:
    return token.kind == NUMBER and isinstance(token.value, int) and not token.unit


def _progress(done: Token, total: Token) -> bool:
    """Whether `done/total` can be progress, i of N: neither is negative (NCCL's tree
    `-1/-1/-1->0->-1` is no step -1 of -1)."""
    return _is_int(done) and _is_int(total) and (done.value or 0) >= 0 and (total.value or 0) >= 0


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.out = LineFields(tokens=tokens)
        self.label: list[str] = []
        self.label_unit = ""
        self.bound = False
        self.quals: list[str | None] = []
        self.group = ""  # `time (ms) | ...`
        self.segment_start = 0
        self.segment_values = 0
        self.prose = False
        self.recent: list[int] = []  # fields a `(avg)` group may follow

    # --- segments ---------------------------------------------------------------------

    def end_segment(self, sep: str) -> None:
        if self.label and self.label_unit and not self.bound and sep.strip() == "|":
            self.group = label_name(self.label)[0]
        elif self.label and self.segment_values and not self.bound:
            self.prose = True
        if self.prose:
            self.out.prose = True
            del self.out.fields[self.segment_start :]
            self.recent = []
        self.segment_start = len(self.out.fields)
        self.segment_values = 0
        self.prose = False
        self.reset_label()

    def reset_label(self) -> None:
        self.label, self.label_unit, self.bound = [], "", False

    # --- names ------------------------------------------------------------------------

    def qualified(self, name: str) -> str:
        parts = [q for q in self.quals if q]
        if self.group:
            parts.insert(0, self.group)
        return "/".join([*parts, name]) if name else ""

    def emit(self, token: Token, *, total: int | None = None, bracketed: bool = False) -> Field:
        name, unit = label_name(self.label) if self.label else ("", "")
        unit = token.unit or self.label_unit or unit
        top = (not self.quals or self.quals[-1] is None) and not self.group
        counter = counter_word(self.label) if top else None
        if not name and token.unit and is_rate(token.unit):
            name = rate_name(token.unit)
        if counter in ("steps",) and self.out.fields:
            counter = None  # `steps=200` after other fields is a configured total
        result = Field(
            self.qualified(name) if not counter else name,
            token.value,
            unit,
            total,
            counter,
            bracketed,
        )
        self.out.fields.append(result)
        self.recent.append(len(self.out.fields) - 1)
        self.segment_values += 1
        self.reset_label()
        return result

    # --- tokens -----------------------------------------------------------------------

    def peek(self, i: int) -> int:
        """The next token at or after i that is not blank."""
        while i < len(self.tokens) and self.blank(i):
            i += 1
        return i

    def blank(self, i: int) -> bool:
        token = self.tokens[i]
        return token.kind == SPACE or (token.kind == SEP and not token.text.strip(" \t"))

    def kind(self, i: int) -> str:
        return self.tokens[i].kind if i < len(self.tokens) else ""

    def close_of(self, i: int, opening: str, closing: str) -> int:
        """Index of the bracket closing the one at i (nested ones counted), or -1."""
        depth = 0
        for j in range(i, min(len(self.tokens), i + _LOOKAHEAD)):
            kind = self.tokens[j].kind
            depth += kind == opening
            depth -= kind == closing
            if depth == 0:
                return j
        return -1

    def number(self, i: int) -> int:
        token = self.tokens[i]
        if token.kind == BAD:
            self.reset_label()
            self.segment_values += 1  # the label had a value, just not a readable one
            return i + 1
        j = self.peek(i + 1)
        k = self.peek(j + 1)
        total = self.tokens[k].value if k < len(self.tokens) else None
        if self.kind(j) == SLASH and total and _progress(token, self.tokens[k]):
            result = self.emit(token, total=int(total))
            result.then_comma = k + 1 < len(self.tokens) and self.tokens[k + 1].text == ","
            return k + 1
        if token.value is not None and not self.label and not token.unit:
            unit, end = self.spaced_unit(i + 1)
            if unit:
                self.emit(Token(NUMBER, token.text, token.value, unit))
                return end
        self.emit(token)
        return i + 1

    def spaced_unit(self, i: int) -> tuple[str, int]:
        """`1.3 it/sec`, `0.5049 s / it`, `5000.00 examples/s`: a rate written after a space."""
        if self.kind(i) != SPACE or self.kind(i + 1) != WORD:
            return "", i
        word = self.tokens[i + 1].text
        nxt = self.peek(i + 2)
        if is_rate(word) and self.kind(nxt) not in (BIND, NUMBER):
            return word, i + 2
        if word.lower() in UNIT_WORDS and self.kind(nxt) == SLASH:
            after = self.peek(nxt + 1)
            if self.kind(after) == WORD and is_rate(f"{word}/{self.tokens[after].text}"):
                return f"{word}/{self.tokens[after].text}", after + 1
        return "", i

    def paren(self, i: int) -> int:
        end = self.close_of(i, OPEN, CLOSE)
        if end < 0:
            self.end_segment("(")
            return i + 1
        inner = [t for t in self.tokens[i + 1 : end] if t.kind not in (SPACE, SEP)]
        if self.label and inner and all(t.kind in (WORD, SLASH) for t in inner):
            unit = "".join(t.text for t in inner)
            if unit.lower() in UNIT_WORDS or "/" in unit:
                self.label_unit = unit
            return end + 1  # `(ms)` is the label's unit; `Epoch(train)` names the mode
        numbers = [t for t in inner if t.kind == NUMBER]
        previous = self.out.fields[self.recent[-1]] if self.recent else None
        if (
            numbers
            and len(numbers) == len(inner)
            and not self.label
            and previous is not None
            and previous.total is None
            and len(numbers) <= len(self.recent)
        ):
            targets = self.recent[-len(numbers) :]
            for index, token in zip(targets, numbers, strict=True):
                base = self.out.fields[index]
                if token.value is None or not base.name:
                    continue
                suffix = "_pct" if token.unit == "%" and base.unit != "%" else "_avg"
                self.out.fields.append(Field(base.name + suffix, token.value, token.unit))
            self.recent = []
            return end + 1
        if (
            previous is not None
            and previous.total is not None
            and inner
            and all(t.kind == NUMBER and t.unit == "%" for t in inner)
        ):
            return end + 1  # `[ 100/1251 (  8%)]`: progress of the fraction
        self.recent = []
        self.end_segment("(")
        return i + 1

    def count_follows(self, i: int) -> bool:
        """Whether a bar's drawing and count `i/N` come next: `45%|####5 | 45/100`, or with
        no `|` (`45% 45/100`, `45%  #####  45/100`): at most _LOOKAHEAD marks, no word."""
        if self.kind(i) == SEP and self.tokens[i].text == "|":
            return True  # tqdm's own `45%|`, whatever its drawing (`####5`) holds
        for j in range(i, min(len(self.tokens), i + _LOOKAHEAD)):
            kind = self.tokens[j].kind
            if kind == NUMBER and j > i and self.tokens[j - 1].text == "#":
                continue  # an ASCII drawing's partial cell: `####5`
            if kind == NUMBER:
                return _is_int(self.tokens[j]) and self.kind(j + 1) == SLASH
            if kind not in (SPACE, SEP):
                return False
        return False

    def continues_label(self, i: int) -> bool:
        """Whether `nan` between words is a word of a label (`number of nan iterations: 0`),
        not the value of one (`loss nan lr 0.03`): the label before it names no metric and
        the words after it end in `:` or `=`."""
        if not (
            self.label
            and not metric_name(label_name(self.label)[0])
            and not self.bound
            and self.kind(i - 1) == SPACE
            and self.kind(i + 1) == SPACE
            and self.kind(i + 2) == WORD
        ):
            return False
        j = i + 2
        for _ in range(MAX_LABEL_WORDS):
            j = self.peek(j + 1) if self.kind(j) == WORD else j
            if self.kind(j) != WORD:
                break
        return self.kind(j) == BIND

    def bracket(self, i: int) -> int:
        end = self.close_of(i, OPEN_LIST, CLOSE_LIST)
        inner = [t for t in self.tokens[i + 1 : end] if t.kind != SPACE] if end > 0 else []
        counter = counter_word(self.label) if self.label else None
        if end > 0 and counter and inner and _is_int(inner[0]):
            if len(inner) == 1:
                self.emit(inner[0], bracketed=True)
                return end + 1
            if len(inner) == 3 and inner[1].kind == SLASH and _progress(inner[0], inner[2]):
                self.emit(inner[0], total=int(inner[2].value or 0), bracketed=True)
                return end + 1
        if self.bound and self.label:
            if end > 0 and len(inner) == 1 and inner[0].kind == NUMBER:
                self.emit(inner[0])
            else:
                self.reset_label()
            return end + 1 if end > 0 else len(self.tokens)
        self.end_segment("[")
        return i + 1

    def word(self, i: int) -> int:
        token = self.tokens[i]
        previous = self.tokens[i - 1].kind if i else SEP
        if self.label and (self.bound or previous != SPACE):
            self.reset_label()
        self.label.append(token.text)
        if len(self.label) > MAX_LABEL_WORDS:
            self.prose = True
        return i + 1

    def run(self) -> LineFields:
        i = 0
        tokens = self.tokens
        while i < len(tokens):
            token = tokens[i]
            kind = token.kind
            if kind == WORD:
                i = self.word(i)
            elif kind == NUMBER and token.text.isalpha() and self.continues_label(i):
                i = self.word(i)  # `number of nan iterations`: nan is a word here
            elif kind in (NUMBER, BAD):
                if token.unit == "%" and self.out.bar is None and self.count_follows(i + 1):
                    self.out.bar = len(self.out.fields)  # the bar's percentage: no value
                    self.end_segment("|")
                    i += 1
                    continue
                i = self.number(i)
            elif kind == BIND:
                if self.label:
                    self.bound = True
                i += 1
            elif kind == OPEN:
                i = self.paren(i)
            elif kind == OPEN_LIST:
                i = self.bracket(i)
            elif kind == OPEN_DICT:
                qualifier = label_name(self.label)[0] if self.label else None
                self.end_segment("{")
                if len(self.quals) < MAX_DEPTH:
                    self.quals.append(qualifier)
                i += 1
            elif kind == CLOSE_DICT:
                self.end_segment("}")
                if self.quals:
                    self.quals.pop()
                i += 1
            elif kind == SPACE:
                i += 1
            elif self.blank(i) and self.label and self.kind(self.peek(i)) in _ACROSS_PADDING:
                i += 1  # `consumed samples:        51200`: padding between a label and its value
            else:  # SEP, SLASH, CLOSE, CLOSE_LIST
                self.end_segment(token.text)
                i += 1
        self.end_segment("")
        return self.out


def _evaluation_heading(tokens: list[Token]) -> str:
    """`DEV  : loss 0.0388 - f-score 0.5586` (flair), `TEST : loss ...`: the line's values
    are the evaluation's, named under it (`dev/loss`); '' for any other line."""
    kinds = [
        t for t in tokens[:6] if t.kind != SPACE and not (t.kind == SEP and not t.text.strip())
    ]
    if len(kinds) < 3 or kinds[0].kind != WORD or kinds[1].text != ":" or kinds[2].kind != WORD:
        return ""
    word = kinds[0].text.lower()
    return word if word in EVAL_PREFIXES else ""


def read_fields(tokens: list[Token]) -> LineFields:
    found = _Parser(tokens).run()
    heading = _evaluation_heading(tokens)
    for item in found.fields if heading else ():
        if item.name and item.counter is None:
            item.name = f"{heading}/{item.name}"
    return found
