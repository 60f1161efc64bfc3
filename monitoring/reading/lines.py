"""Lines from the raw bytes of a file read a piece at a time, cut anywhere.

Pure: the poller hands over only the new bytes of each file per cycle, so the
unfinished tail is carried between cycles as plain bytes; a line longer than
MAX_LINE_BYTES is cut, and bytes that are not UTF-8 cost that line only.
"""

import re
from dataclasses import dataclass, field
from itertools import islice

MAX_LINE_BYTES = 64 * 1024
MAX_REDRAW_BYTES = 4096  # a longer redraw is no progress bar: it waits for its line to end
# What the metric reader is given for a blank redraw right before a line's final state: the
# line was cleared and that state written over it (tqdm.write). A blank segment ended by
# `\r`, which no line of the file can be.
CLEAR = " \r"


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace")


def _cut(segment: bytes, max_line: int, out: list[str]) -> bytes:
    """Emit max_line-byte pieces of an over-long segment; return the rest (<= max_line)."""
    start = 0
    while len(segment) - start > max_line:
        end = start + max_line
        cut = end
        # Cut before a UTF-8 sequence rather than through it (lead byte is at most 3 back).
        while cut > end - 3 and _is_continuation(segment[cut]):
            cut -= 1
        if _is_continuation(segment[cut]):
            cut = end  # not UTF-8 anyway
        out.append(_decode(segment[start:cut]))
        start = cut
    return segment[start:]


@dataclass
class _Segments:
    first: bytes = b""  # the first non-blank segment, when it is neither `before` nor `last`
    before: bytes = b""  # the last non-blank segment before `last`: a finished redraw
    last: bytes = b""  # the last non-empty segment
    current: bytes = b""  # the final segment (after the last \\r), maybe empty
    cleared: bool = False  # `last` was drawn right after a blank redraw (a clear)
    # Redraws right after a clear other than these (a bar refreshed after a record that went
    # to another, buffered stream: the record's place), in order; and whether `first` and
    # `before` came right after one too.
    slots: list[bytes] = field(default_factory=list)
    first_cleared: bool = False
    before_cleared: bool = False
    after_blank: bool = False  # `last` came right after a blank redraw, blank itself or not


# A cursor move or erase (tqdm's `ESC[A` up to a bar drawn below another) shows nothing.
_CURSOR = re.compile(rb"\x1b\[[0-9;]*[A-HJKST]")


def _shown(segment: bytes) -> bytes:
    """What a redraw shows: without its blanks and cursor moves ('' for a clear)."""
    return (_CURSOR.sub(b"", segment) if b"\x1b" in segment else segment).strip()


def _blank(segment: bytes) -> bool:
    return not _shown(segment)


def _segments(raw: bytes, max_line: int, out: list[str]) -> _Segments:
    """The \\r-segments of a line that matter, over-long segments cut into out.

    Linear, and in C but for the non-empty segments: 64 KiB of bare `\\r` is no loop.
    """
    *body, final = raw.split(b"\r")
    found = _Segments()
    if len(raw) <= max_line:  # no segment to cut: only the first and the newest two matter
        drawn = list(filter(None, body))
        if final:
            drawn.append(final)
        found.current = final
        if drawn:
            found.last = drawn.pop()
            found.after_blank = bool(drawn) and _blank(drawn[-1])
            found.cleared = found.after_blank and not _blank(found.last)
            # A blank redraw clears the line (tqdm.write): it is no state of it. (filter with
            # bytes.strip: the test runs in C, not a Python step a segment, unless the line
            # moves the cursor.)
            shown = _shown if b"\x1b" in raw else bytes.strip
            first = next(filter(shown, drawn), b"")
            if first:
                at = drawn.index(first)
                after = islice(reversed(drawn), len(drawn) - at - 1)
                found.before = next(filter(shown, after), b"")
                found.first, found.before = (first, found.before) if found.before else (b"", first)
                if b" \r" in raw or b" \x1b" in raw:  # a clear: a step a segment only then
                    _after_clears(found, drawn, at)
        return found
    first, first_at, before_at, at = b"", -1, -1, -1
    for segment in [*filter(None, body), final]:
        found.current = _cut(segment, max_line, out)
        if found.current:
            at += 1
            if not _blank(found.last):
                found.before, before_at = found.last, at - 1
            found.cleared = bool(found.last) and _blank(found.last)
            found.last = found.current
            if first_at < 0 and not _blank(found.current):
                first, first_at = found.current, at
    found.first = first if first_at < before_at else b""
    found.after_blank = found.cleared
    found.cleared = found.cleared and not _blank(found.last)
    return found


def _after_clears(found: _Segments, drawn: list[bytes], first_at: int) -> None:
    """Fill `slots`, `first_cleared` and `before_cleared`: `drawn` holds the line's
    non-empty segments but its last, the first non-blank one at first_at."""
    before_at = len(drawn) - 1
    while _blank(drawn[before_at]):
        before_at -= 1
    for at in range(max(first_at, 1), before_at + 1):
        if not _blank(drawn[at]) and _blank(drawn[at - 1]):
            if at == first_at and found.first:
                found.first_cleared = True
            elif at == before_at:
                found.before_cleared = True
            else:
                found.slots.append(drawn[at])


def _cleared(segment: bytes, cleared: bool) -> list[str]:
    """A redraw to read, after CLEAR when it came right after a clear."""
    drawn = _redraw(segment)
    return [CLEAR, *drawn] if cleared and drawn else drawn


def _slots(found: _Segments) -> list[str]:
    return [line for slot in found.slots for line in _cleared(slot, True)]


def _redraw(segment: bytes) -> list[str]:
    return [_decode(segment)] if segment and len(segment) <= MAX_REDRAW_BYTES else []


def _split(
    carry: bytes, data: bytes, *, max_line: int, redraws: bool
) -> tuple[list[str], bytes, str]:
    """split_lines, and with `redraws` the finished redraws a metric reader reads too.

    Those are, of each line that ends here, the newest redraw before its final state, then
    CLEAR when a blank redraw came right before that state (both put before it); of the
    unfinished last line, its newest finished redraw (the redraw to read now). And the
    first redraw of a line after one drawn over a clear (tqdm.write: the bar's refresh,
    at the count the record was written at), or of the read's first line (what ended
    before it is not known here): put first, of the unfinished line as a line.
    """
    if max_line < 4:
        raise ValueError("max_line must be at least 4 bytes (one UTF-8 character)")
    parts = (carry + data.replace(b"\0", b"")).split(b"\n")
    lines: list[str] = []
    wanted = redraws  # the next line's first redraw
    for raw in parts[:-1]:
        found = _segments(raw, max_line, lines)
        if redraws:
            first = found.first if wanted or found.first_cleared else b""
            lines += _cleared(first, found.first_cleared) + _slots(found)
            lines += _cleared(found.before, found.before_cleared)
            if found.cleared:
                lines.append(CLEAR)
        wanted = redraws and found.cleared
        lines.append(_decode(found.last))
    found = _segments(parts[-1], max_line, lines)
    if found.current:
        # Whatever came before the last \r can no longer be the line's final state.
        if not redraws:
            return lines, found.current, ""
        first = found.first if wanted or found.first_cleared else b""
        lines += _cleared(first, found.first_cleared) + _slots(found)
        # Text drawn over a clear keeps it (one blank redraw) for the read that ends its line
        # (a redraw cut while still blank too: `\r\r  ` of `\r\r  1%|`).
        rest = CLEAR.encode() + found.current if found.after_blank else found.current
        if found.before_cleared:  # a record's place: read as a line, not as a provisional redraw
            return [*lines, *_cleared(found.before, True)], rest, ""
        return lines, rest, "".join(_redraw(found.before))
    # Ends in \r: keep the last state, and the \r so that new text starts a new segment
    # (after a clear, the clear too: the next read sees that state right after it).
    rest = (CLEAR.encode() if found.cleared else b"") + found.last + b"\r" if found.last else b""
    if not _blank(found.last):
        newest, earliest = found.last, found.first or found.before
        cleared = found.first_cleared if found.first else found.before_cleared
        between = found.before if found.first and found.before_cleared else b""
    else:
        newest, earliest = found.before, found.first
        cleared, between = found.first_cleared, b""
        if found.before_cleared:  # a record's place: read as a line, not as a provisional redraw
            newest, between = b"", found.before
    redraw = ""
    if redraws:
        lines += _cleared(earliest if wanted or cleared else b"", cleared) + _slots(found)
        lines += _cleared(between, True)
        redraw = "".join(_redraw(newest)) if not found.cleared else ""
    return lines, rest, redraw


def split_lines(
    carry: bytes, data: bytes, *, max_line: int = MAX_LINE_BYTES
) -> tuple[list[str], bytes]:
    """Complete lines of carry + data, and the new carry (at most max_line + 1 bytes).

    A line is what a terminal would show: the last non-empty `\\r`-segment, so a
    tqdm bar redrawn a thousand times is one line, its final state; `\\r\\n` ends
    a line like `\\n`. NUL bytes (a file's unwritten hole on NFS) are dropped,
    invalid UTF-8 becomes U+FFFD, and a segment longer than max_line bytes is
    emitted in max_line pieces as it arrives, so the carry never holds more.
    The result does not depend on where the chunks were cut.
    """
    lines, carry, _ = _split(carry, data, max_line=max_line, redraws=False)
    return lines, carry


def finish_lines(carry: bytes, *, max_line: int = MAX_LINE_BYTES) -> list[str]:
    """The unterminated tail as a last line, for a file that will not grow any more."""
    return split_lines(carry, b"\n", max_line=max_line)[0] if carry else []


@dataclass(frozen=True)
class Chunk:
    """What one read of a file gives: its complete lines, the carry, and a redraw to read now."""

    lines: list[str]
    carry: bytes
    redraw: str = ""


def read_chunk(carry: bytes, data: bytes, *, final: bool, max_line: int = MAX_LINE_BYTES) -> Chunk:
    """The lines of a file for the metric reader: split_lines, and the finished redraws.

    A bar redrawn with `\\r` is read while it runs: each read gives the newest finished
    redraw of the unfinished last line, and of a line that ends, the newest redraw
    before its final state; and CLEAR for a clear right before a final state, and the
    first redraw of the line after it (`_split`). A redraw is finished once the next `\\r`
    has come; the text after the last `\\r` (or an unfinished line with none) may be cut
    anywhere by the read (`loss 2` of `loss 2.3456`) and waits for its line or redraw to
    end. With `final` the file will not grow: its unfinished line is a line.
    """
    data = data.replace(b"\0", b"")
    if final and (carry or data) and not data.endswith(b"\n"):
        data += b"\n"  # the file's end ends its last line
    lines, rest, redraw = _split(carry, data, max_line=max_line, redraws=True)
    return Chunk(lines, rest, redraw)


class LineSplitter:
    """split_lines with the carry kept on the object; `carry` is what to store between polls."""

    def __init__(self, carry: bytes = b"", *, max_line: int = MAX_LINE_BYTES) -> None:
        self.carry = carry
        self.max_line = max_line

    def feed(self, data: bytes) -> list[str]:
        lines, self.carry = split_lines(self.carry, data, max_line=self.max_line)
        return lines

    def finish(self) -> list[str]:
        lines = finish_lines(self.carry, max_line=self.max_line)
        self.carry = b""
        return lines
