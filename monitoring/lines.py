"""Lines from the raw bytes of a file read a piece at a time, cut anywhere.

Pure: the poller hands over only the new bytes of each file per cycle, so the
unfinished tail is carried between cycles as plain bytes; a line longer than
MAX_LINE_BYTES is cut, and bytes that are not UTF-8 cost that line only.
"""

MAX_LINE_BYTES = 64 * 1024


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


def _segments(raw: bytes, max_line: int, out: list[str]) -> tuple[bytes, bytes]:
    """(last non-empty \\r-segment, final segment) of a line, over-long segments cut into out."""
    last = current = b""
    for segment in raw.split(b"\r"):
        current = _cut(segment, max_line, out)
        if current:
            last = current
    return last, current


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
    if max_line < 4:
        raise ValueError("max_line must be at least 4 bytes (one UTF-8 character)")
    parts = (carry + data.replace(b"\0", b"")).split(b"\n")
    lines: list[str] = []
    for raw in parts[:-1]:
        last, _ = _segments(raw, max_line, lines)
        lines.append(_decode(last))
    last, current = _segments(parts[-1], max_line, lines)
    if current:
        # Whatever came before the last \r can no longer be the line's final state.
        return lines, current
    # Ends in \r: keep the last state, and the \r so that new text starts a new segment.
    return lines, last + b"\r" if last else b""


def finish_lines(carry: bytes, *, max_line: int = MAX_LINE_BYTES) -> list[str]:
    """The unterminated tail as a last line, for a file that will not grow any more."""
    return split_lines(carry, b"\n", max_line=max_line)[0] if carry else []


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
