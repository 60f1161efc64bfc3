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
    tally = Tally()
    for poll in polls:
        tally.add(poll)
    return tally.bursty


@dataclass
class Tally:
    """`arrives_in_bursts` one poll at a time, in a few counters kept between polls
    (LogFile.growth): grown polls, whole-block ones, bursts after silence, and whether the
    last poll was silent."""

    grown: int = 0
    blocks: int = 0
    bursts: int = 0
    silent: bool = False

    @classmethod
    def from_json(cls, data: object) -> "Tally":
        if not isinstance(data, dict):
            return cls()
        grown, blocks, bursts = (data.get(k) for k in ("grown", "blocks", "bursts"))
        for count in (grown, blocks, bursts):
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                return cls()
        return cls(grown, blocks, bursts, silent=data.get("silent") is True)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, object]:
        return {
            "grown": self.grown,
            "blocks": self.blocks,
            "bursts": self.bursts,
            "silent": self.silent,
        }

    def add(self, poll: Growth) -> bool:
        """Count one poll; whether the counters changed (a silent poll after a silent one
        changes nothing, so an idle job costs no write)."""
        if poll.size <= 0:
            changed = not self.silent
            self.silent = True
            return changed
        self.grown += 1
        self.blocks += poll.size % BLOCK == 0
        self.bursts += self.silent and poll.lines >= BURST_LINES
        self.silent = False
        return True

    @property
    def bursty(self) -> bool:
        if self.grown < MIN_CHUNKS:
            return False
        return 2 * self.blocks >= self.grown or 2 * self.bursts >= self.grown
