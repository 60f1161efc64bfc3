"""Output that arrives in bursts (block-buffered) against output written as it goes."""

import pytest

from monitoring.logs.bursts import BLOCK, Growth, arrives_in_bursts


def _polls(*pairs: tuple[int, int]) -> list[Growth]:
    return [Growth(size, lines) for size, lines in pairs]


def test_python_writing_to_a_file_grows_by_whole_8_kib_buffers() -> None:
    # HF Trainer's dicts under `python train.py` > file: 8192 bytes a flush, one or two a poll.
    polls = _polls((8192, 61), (0, 0), (8192, 58), (16384, 120), (0, 0), (8192, 60))
    assert arrives_in_bursts(polls)


def test_libc_block_buffering_grows_by_4_kib_blocks_among_a_few_other_sizes() -> None:
    polls = _polls((BLOCK, 90), (BLOCK, 88), (3 * BLOCK, 270), (1187, 25))
    assert arrives_in_bursts(polls)


def test_many_lines_at_once_after_silent_polls_are_bursts_whatever_their_size() -> None:
    polls = _polls((0, 0), (0, 0), (7301, 140), (0, 0), (6988, 133), (0, 0), (7410, 142))
    assert arrives_in_bursts(polls)


def test_output_written_line_by_line_is_no_burst() -> None:
    # `step 12 loss 2.31 lr 3e-4` lines, a few a poll, and a progress bar's redraws.
    polls = _polls((212, 4), (159, 3), (4096, 2), (318, 6), (2731, 1), (105, 2), (212, 4))
    assert not arrives_in_bursts(polls)


def test_a_short_summary_after_a_quiet_stretch_is_no_burst() -> None:
    # An evaluation every few minutes prints its few lines as it goes.
    polls = _polls((0, 0), (0, 0), (420, 6), (0, 0), (0, 0), (388, 6), (0, 0), (455, 7))
    assert not arrives_in_bursts(polls)


@pytest.mark.parametrize(
    "polls",
    [[], _polls((0, 0), (0, 0)), _polls((8192, 60), (8192, 61)), _polls((0, 0), (BLOCK, 80))],
)
def test_too_few_grown_polls_say_nothing(polls: list[Growth]) -> None:
    assert not arrives_in_bursts(polls)
