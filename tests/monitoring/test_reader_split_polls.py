"""A log read in two polls, cut anywhere, gives the points of one read of it.

The poller hands over a file's new bytes per poll; `monitoring.lines` carries the
unfinished tail, `ingest_parse` reads a finished `\\r` redraw of it provisionally, and
the reader's state goes from poll to poll as JSON. This runs that path (pure: no
database, no worker) on corpus samples (tests/corpus/metrics, each with its source),
for every cut into two chunks. Before, a line cut mid-number was read at once
(`iter 100: loss 2` for `loss 2.3456`), then again when it ended; a step's lines in two
polls gave its first values twice; a `***** train metrics *****` block cut in two lost
the half without a loss.
"""

from typing import Any

import pytest

from monitoring.ingest_parse import _newest_segment
from monitoring.lines import finish_lines, split_lines
from monitoring.parsers import parse_stdout_metrics
from tests.corpus.loader import load_metric_cases

CASES = {case.name: case for case in load_metric_cases()}
SAMPLES = [
    "nanogpt_iter",
    "megatron_lm_iteration_format",
    "deit_total_time_and_averaged_stats",
    "hf_trainer_train_runtime",
    "composer_console_batch_block",
    "fairseq_json",
    "flair_legacy_epoch_done",
    "ultralytics_epoch_table",
    "torchtitan_pasted_every_rank",
]
Key = tuple[str, int]


def _polls(chunks: list[bytes]) -> list[tuple[str, int, float]]:
    """What ingest_parse reads of a file that grows by these chunks, then ends."""
    carry, last_step = b"", None
    state: dict[str, Any] = {}
    points = []
    for index in range(len(chunks) + 1):
        final = index == len(chunks)
        if final:
            lines, provisional = finish_lines(carry), ""
        else:
            lines, carry = split_lines(carry, chunks[index])
            provisional = _newest_segment(carry)
        read = parse_stdout_metrics(
            lines, last_step=last_step, state=state, provisional=provisional, final=final
        )
        if read:
            last_step = max(point.step for point in read)
        points += [(point.name, point.step, point.value) for point in read]
    return points


def _latest(points: list[tuple[str, int, float]]) -> dict[Key, float]:
    return {(name, step): value for name, step, value in points}


@pytest.mark.parametrize("name", SAMPLES)
def test_every_cut_into_two_polls_gives_the_points_of_one_read(name: str) -> None:
    """The same (name, step) pairs, each with the one read's value as its latest."""
    data = CASES[name].text.encode()
    assert "\r" not in CASES[name].text  # redraws are read provisionally by design
    whole = _polls([data])
    assert whole
    for cut in range(1, len(data)):
        split = _polls([data[:cut], data[cut:]])
        assert _latest(split) == _latest(whole), (cut, data[:cut][-40:])


@pytest.mark.parametrize("name", ["nanogpt_iter", "megatron_lm_iteration_format", "fairseq_json"])
def test_a_step_whose_lines_come_in_two_polls_gives_each_value_once(name: str) -> None:
    data = CASES[name].text.encode()
    whole = _polls([data])
    for cut in [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]:
        assert sorted(_polls([data[:cut], data[cut:]])) == sorted(whole), cut


def test_a_line_cut_by_the_read_is_not_read_until_it_ends() -> None:
    assert _newest_segment(b"iter 100: loss 2") == ""
    assert _polls([b"iter 100: loss 2", b".3456, time 123.45ms\n"]) == [
        ("loss", 100, 2.3456),
        ("time", 100, 123.45),
    ]


def test_a_finished_redraw_is_read_while_the_bar_goes_on() -> None:
    """tqdm: `\\r` + bar per redraw; the text after the last `\\r` may be cut."""
    carry = b"\r 10%|#| 10/100 [00:01<00:09, 9.50it/s]\r 11%|#| 11/100 [00:01<00:09, 9.5"
    assert _newest_segment(carry) == " 10%|#| 10/100 [00:01<00:09, 9.50it/s]"
