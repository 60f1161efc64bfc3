"""Whether a job's stdout arrives in bursts: block-buffered, not as it is written.

A process whose stdout is a file, not a terminal, buffers it (Python 8 KiB, libc 4 KiB)
and writes a whole buffer at a time, so each poll finds the output grown by a multiple of
the block, or by nothing for a while and then by many lines at once. Output written line
by line grows by a few lines of any size at most polls. Pure: no Django, linear in the
polls given, constant memory.
"""

from collections.abc import Iterable
from dataclasses import dataclass

BLOCK = 4096  # libc's stdio buffer; Python's (8 KiB) and larger ones are multiples of it
MIN_CHUNKS = 3  # fewer grown polls say nothing either way
BURST_LINES = 50  # a chunk after a silent poll with this many lines was held back


@dataclass(frozen=True)
class Growth:
    """What one poll found appended to the job's stdout: bytes and newlines (0 and 0 for none)."""

    size: int
    lines: int


def arrives_in_bursts(polls: Iterable[Growth]) -> bool:
    """Whether the stdout grew in blocks or bursts while the job ran.

    `polls` are the successive polls of a running job, silent ones included; leave out
    the growth found after it ended (its last flush is a partial buffer). Bursts when at
    least half of the grown polls are whole blocks, or are many lines after a silent poll.
    """
    grown = blocks = bursts = 0
    silent_before = False
    for poll in polls:
        if poll.size <= 0:
            silent_before = True
            continue
        grown += 1
        blocks += poll.size % BLOCK == 0
        bursts += silent_before and poll.lines >= BURST_LINES
        silent_before = False
    if grown < MIN_CHUNKS:
        return False
    return 2 * blocks >= grown or 2 * bursts >= grown
