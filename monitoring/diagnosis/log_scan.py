"""A log tail as lines a diagnosis may quote: stack frames and warning blocks masked.

Evidence is the line that ended the process (an exception, an error message), so
the lines that only echo code (Python and C++ frames, the source line of a
warning) and the lines of a warning block (which may quote an exception that
was caught) are never quoted. Every pattern here is linear: literal cores and
single character-class runs, no nested quantifiers.
"""

import re
from bisect import bisect_right
from dataclasses import dataclass

EVIDENCE_CHARS = 500  # how much of a line a diagnosis quotes
LAST_LINES = 20  # how many lines an unknown failure shows
WINDOW_LINES = 40  # how far back a clue's context may be (a traceback's frames)

# What a line may start with before its message: a log viewer's line number, srun
# --label's task (Slurm's `"%0*d: "`: `0: `, `07: `), a torch rank or torchrun's --tee
# label (`[80746] [rank0]:`, `3: [rank3]:`, `[default0]:`).
_PREFIX = re.compile(r"(?:\[\d+\] )?(?:\d{1,6}: )?(?:\[(?:rank|default)\d+\]: ?)?")
_FRAME = re.compile(
    r"\s*(?:frame #\d+: |#\d+ +0x[0-9a-fA-F]+ in |0x[0-9a-fA-F]+ in |File \"|"
    r"Exception raised from |\^+$)"
)
_SOURCE_AFTER_FRAME = re.compile(r"\s{2,}\S")
# A Python warning (`file.py:13: UserWarning: ...`) or a log record at warning level.
_PY_WARNING = re.compile(r"\b[A-Z]\w*Warning: ")
# On the line's body: glog's `W0219 12:09:28.3 run.py:757]` starts it; c10d's bracketed
# `[W socket.cpp:558]`, `[W1016 10:11:12.1 socket.cpp:697]` may follow any launcher's prefix
# (torchx's `trainer/0 [1]:`, a container runtime's).
_LOG_WARNING = re.compile(
    r"\[WARNING\]|\bWARNING[:\] ]| - WARNING - |^W\d{4} \d\d:\d\d:\d\d"
    r"|\[W\d{4} \d\d:\d\d:\d\d|\[W [\w.]+:\d+\]"
)
_WARNING_SOURCE = re.compile(r"  \S")  # the source line Python prints under a warning
_WARNING_BLOCK_MAX = 12
# An exception as Python prints it last: `RuntimeError: ...`, `torch.cuda.OutOfMemoryError: ...`.
_EXCEPTION = re.compile(r"[\w.]*(?:Error|Exception|Interrupt|Exit|Failure)\b:? ")
_ERROR_WORD = re.compile(
    r"Error|error|ERROR|Exception|FAILED|Segmentation fault|core dumped|Killed|Aborted"
)


@dataclass(frozen=True)
class Found:
    """A line a pattern matched: its index, the match's offset in it, and its text."""

    index: int
    column: int
    line: str

    def quote(self) -> str:
        """The line as evidence: whole if short, else a window around the match."""
        line = self.line
        if len(line) <= EVIDENCE_CHARS:
            return line.strip()
        start = max(0, self.column - EVIDENCE_CHARS // 5)
        return line[start : start + EVIDENCE_CHARS].strip()


class LogTail:
    """The lines of a tail, which of them may be quoted, and where each starts."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.starts: list[int] = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line) + 1
        self.quotable = _quotable(self.lines)
        self._context: dict[re.Pattern[str], list[int]] = {}

    def first(
        self, pattern: re.Pattern[str], near: re.Pattern[str] | None = None, before: int = 0
    ) -> Found | None:
        """The first quotable line the pattern matches, with `near` on it or `before` lines up.

        Each line is judged once (a rejected line is skipped whole), and where `near`
        occurs is found once per pattern: linear however often a line repeats the match.
        """
        position = 0
        while (match := pattern.search(self.text, position)) is not None:
            index = bisect_right(self.starts, match.start()) - 1
            if self.quotable[index] and (near is None or self._near(index, near, before)):
                return Found(index, match.start() - self.starts[index], self.lines[index])
            if index + 1 >= len(self.starts):
                return None
            position = self.starts[index + 1]
        return None

    def _near(self, index: int, near: re.Pattern[str], before: int) -> bool:
        lines = self._context.get(near)
        if lines is None:
            lines = self._context[near] = self._lines_matching(near)
        at = bisect_right(lines, index) - 1  # the last context line at or above this one
        return at >= 0 and lines[at] >= index - before

    def _lines_matching(self, pattern: re.Pattern[str]) -> list[int]:
        found: list[int] = []
        position = 0
        while (match := pattern.search(self.text, position)) is not None:
            found.append(bisect_right(self.starts, match.start()) - 1)
            if found[-1] + 1 >= len(self.starts):
                break
            position = self.starts[found[-1] + 1]
        return found

    def last_lines(self, count: int = LAST_LINES) -> tuple[str, ...]:
        """The last non-empty lines, each cut to what a page shows."""
        kept: list[str] = []
        for line in reversed(self.lines):
            if line.strip():
                kept.append(line.rstrip()[:EVIDENCE_CHARS])
                if len(kept) == count:
                    break
        return tuple(reversed(kept))

    def last_error(self) -> str:
        """The last exception line, else the last line saying error; frames and warnings skipped."""
        fallback = ""
        for index in range(len(self.lines) - 1, -1, -1):
            if not self.quotable[index]:
                continue
            line = self.lines[index]
            if _EXCEPTION.match(body(line).lstrip()):
                return line.strip()[:EVIDENCE_CHARS]
            if not fallback and _ERROR_WORD.search(line):
                fallback = line.strip()[:EVIDENCE_CHARS]
        return fallback


def body(line: str) -> str:
    """The line without a viewer's line number, srun's task label or a torch rank prefix."""
    prefix = _PREFIX.match(line)
    return line[prefix.end() :] if prefix else line


def _quotable(lines: list[str]) -> list[bool]:
    quotable = [True] * len(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        text = body(line)
        if _FRAME.match(text):
            quotable[index] = False
            # A Python frame's source line (and its ^^^ markers) follow it, indented.
            if text.lstrip().startswith('File "'):
                for after in range(index + 1, min(index + 3, len(lines))):
                    following = body(lines[after])
                    if not _SOURCE_AFTER_FRAME.match(following) or _FRAME.match(following):
                        break
                    quotable[after] = False
                    index = after
        elif _PY_WARNING.search(line):
            index = _mask_warning(lines, index, quotable)
        elif _LOG_WARNING.search(text):
            quotable[index] = False
        index += 1
    return quotable


def _mask_warning(lines: list[str], index: int, quotable: list[bool]) -> int:
    """Mask a Python warning: its line, and any message lines up to the source line under it."""
    quotable[index] = False
    end = min(len(lines), index + _WARNING_BLOCK_MAX)
    for after in range(index + 1, end):
        if lines[after].startswith("Traceback "):
            break  # an exception after a warning that printed no source line
        if _WARNING_SOURCE.match(lines[after]):
            for masked in range(index + 1, after + 1):
                quotable[masked] = False
            return after
    return index
