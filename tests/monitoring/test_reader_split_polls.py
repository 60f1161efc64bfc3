"""A log read in two polls, cut anywhere, gives the points of one read of it.

The poller hands over a file's new bytes per poll; `monitoring.reading.lines` carries the
unfinished tail and gives the finished `\\r` redraws of a bar, and the reader's state
goes from poll to poll as JSON. This runs that path (`tests.corpus.runner.ingest_polls`,
ingest's code without the database and the process) on corpus samples
(tests/corpus/metrics, each with its source), for every cut into two chunks. Before, a
line cut mid-number was read at once (`iter 100: loss 2` for `loss 2.3456`), then again
when it ended; a step's lines in two polls gave its first values twice; a `*****
train metrics *****` block cut in two lost the half without a loss.
"""

import pytest

from monitoring.reading.lines import read_chunk
from monitoring.reading.overwrite import newest_per_step
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import ingest_polls, writes

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
# Every corpus sample with `\r` redraws (tqdm, Lightning, Keras bars).
REDRAWN = sorted(name for name, case in CASES.items() if "\r" in case.text)
Key = tuple[str, float]


def _polls(chunks: list[bytes]) -> list[tuple[str, float, float]]:
    """What ingest_parse reads of a file that grows by these chunks, then ends."""
    return [(name, step, value) for _, name, step, value in ingest_polls(chunks)]


def _latest(points: list[tuple[str, float, float]]) -> dict[Key, float]:
    """What is stored: one value per step and name, the newest (`monitoring.reading.overwrite`)."""
    return {
        (name, step): value
        for _, name, step, value in newest_per_step(
            [(0, name, step, value) for name, step, value in points]
        )
    }


@pytest.mark.parametrize("name", SAMPLES)
def test_every_cut_into_two_polls_gives_the_points_of_one_read(name: str) -> None:
    """The same (name, step) pairs, each with the one read's value as its newest: the
    series stored are the same (four of these samples give a step twice at some cuts)."""
    data = CASES[name].text.encode()
    assert "\r" not in CASES[name].text  # a bar's redraws: the test below
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
    assert read_chunk(b"", b"iter 100: loss 2", final=False).redraw == ""
    assert _polls([b"iter 100: loss 2", b".3456, time 123.45ms\n"]) == [
        ("loss", 100, 2.3456),
        ("time", 100, 123.45),
    ]


BAR = [  # tqdm (tqdm/std.py format_meter): `\r` + the bar, one write per redraw
    b"\r 10%|#| 10/100 [00:01<00:09, 9.50it/s, loss=2.31]",
    b"\r 11%|#| 11/100 [00:01<00:09, 9.52it/s, loss=2.29]",
    b"\r 12%|#| 12/100 [00:01<00:09, 9.53it/s, loss=2.27]",
    b"\r 13%|#| 13/100 [00:01<00:09, 9.55it/s, loss=2.26]",
]


def test_a_finished_redraw_is_read_while_the_bar_goes_on() -> None:
    """The redraw after the last `\\r` may be cut by the read; the one before it has ended."""
    cut = BAR[0] + BAR[1][:-9]
    assert read_chunk(b"", cut, final=False).redraw == BAR[0][1:].decode()
    # Across polls: the carry holds only the text after the last `\\r`.
    first = read_chunk(b"", BAR[0], final=False)
    assert first.redraw == "" and first.carry == BAR[0][1:]
    assert read_chunk(first.carry, BAR[1], final=False).redraw == BAR[0][1:].decode()


def test_a_bar_that_gets_no_complete_line_is_read_poll_by_poll() -> None:
    """The sandbox job's case: each poll brings a redraw or two and never a newline."""
    points = _polls([BAR[0], BAR[1], BAR[2]])
    steps = sorted({step for name, step, _ in points if name == "loss"})
    assert steps == [10, 11, 12]  # 10 and 11 while the bar ran, 12 when the file ended
    assert ("loss", 11, 2.29) in points


def test_a_redraw_read_while_running_is_not_read_again_when_its_line_ends() -> None:
    """A bar that ends with `\\r` then `\\n`: its last redraw was read before the newline came."""
    points = _polls([BAR[0] + b"\r", b"\n"])
    assert points.count(("loss", 10, 2.31)) == 1
    # One poll reads its first line's first redraw (what a bar showed right after the line
    # before, `monitoring.reading.lines`) and the newest finished one, not every one it brings.
    points = _polls([BAR[0] + BAR[1] + BAR[2] + b"\r", BAR[3] + b"\n"])
    assert [step for name, step, _ in points if name == "loss"] == [10, 12, 13]


# Cutting anywhere is quadratic in the text: a longer sample is cut within its lines that
# end in the first CUT_BYTES (its pattern repeats after them), each read of the same lines.
CUT_BYTES = 1500


def _head(data: bytes) -> bytes:
    """A bar with no line end in CUT_BYTES (stdout held back) is cut at a redraw, ended there."""
    if len(data) <= CUT_BYTES:
        return data
    end = data.rfind(b"\n", 0, CUT_BYTES)
    return data[: end + 1] if end >= 0 else data[: data.rindex(b"\r", 0, CUT_BYTES)] + b"\n"


@pytest.mark.parametrize("name", REDRAWN)
def test_a_redrawn_line_cut_anywhere_reads_the_one_read_and_more_of_the_bar(name: str) -> None:
    """One poll reads each line's final state and the redraws before it; more polls read
    more of the bar while it runs, never other values: one read <= two polls <= a poll per
    write (what the corpus runner reads), with the same value per step where they meet.
    A record written over a cleared bar is at the step of the bar's refresh in each."""
    data = _head(CASES[name].text.encode())
    every = dict(_latest(_polls(writes(data))))
    whole = _latest(_polls([data]))
    assert whole.items() <= every.items()
    for cut in range(1, len(data)):
        split = _latest(_polls([data[:cut], data[cut:]]))
        assert whole.items() <= split.items() <= every.items(), (cut, data[:cut][-40:])
