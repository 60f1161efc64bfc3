"""A record written with tqdm.write takes the step of the bar's refresh, across polls too.

The real output of a Hugging Face Trainer on an H200 (tests/corpus/metrics/hf_trainer.toml,
`hf_trainer_tqdm_write_h200`): the bar was last drawn at 6/200, then tqdm.write cleared it,
wrote the logs dict of step 10 and at once redrew the bar at 10/200. Ingest reads the file
poll by poll; the reader's state goes from poll to poll as JSON (`LogFile.reader_state`).
"""

import json
from typing import Any

import pytest

from monitoring.ingest.worker import parse_request, stdout_request
from monitoring.reading.lines import read_chunk
from monitoring.reading.reader import MetricReader
from tests.corpus.loader import load_metric_cases

HF = next(c for c in load_metric_cases() if c.name == "hf_trainer_tqdm_write_h200").text.encode()
CLEAR = HF.index(b"\r" + b" " * 40)  # tqdm.write's clear after `6/200`
DICT = HF.index(b"{'loss': '6.902'")
END = HF.index(b"\n", DICT) + 1  # the dict's line has ended
REFRESH = HF.index(b"\r", END + 1)  # the `\r` that finishes the refresh `\r  5%|▌ | 10/200 ...`
AFTER = HF.index(b"\r", REFRESH + 1)  # the `\r` that finishes `11/200`
Point = tuple[str, int, float]


def _each_poll(chunks: list[bytes], *, ends: bool) -> list[list[Point]]:
    """Ingest's path (as tests.corpus.runner.ingest_polls), the points of each poll apart;
    with `ends`, a last poll when the file will not grow."""
    carry, high = b"", None
    state: dict[str, Any] = {}
    polls: list[list[Point]] = []
    for index, data in enumerate([*chunks, b""] if ends else chunks):
        final = ends and index == len(chunks)
        chunk = read_chunk(carry, data, final=final)
        carry = chunk.carry
        if not chunk.lines and not chunk.redraw and not final:
            polls.append([])  # ingest_parse reads nothing then
            continue
        stored = json.loads(json.dumps(state))  # what the database gives back
        request = stdout_request(
            chunk.lines, redraw=chunk.redraw, state=stored, last_step=high, final=final
        )
        reply = parse_request(request)
        state = reply["state"]
        polls.append([(name, int(step), value) for name, step, value, _ in reply["points"]])
        for _, step, _ in polls[-1]:
            high = step if high is None else max(high, step)
    return polls


def _loss(polls: list[list[Point]]) -> list[tuple[int, int, float]]:
    """(poll, step, value) of each loss given."""
    return [
        (i, step, value)
        for i, poll in enumerate(polls)
        for name, step, value in poll
        if name == "loss"
    ]


@pytest.mark.parametrize(
    "cuts",
    [
        [END, REFRESH, AFTER],  # the dict; the refresh, unfinished; the redraw that ends it
        [END, AFTER],  # the dict; the refresh and the next redraw
        [CLEAR + 3, DICT + 10, END, AFTER],  # the clear, the dict and its newline cut apart
        [END - 1, END + 5, AFTER],  # the dict without its newline; the refresh cut
    ],
    ids=["refresh-unfinished", "refresh-next-poll", "clear-and-dict-cut", "newline-late"],
)
def test_the_dict_and_the_refresh_in_different_polls_give_the_loss_at_the_refresh(
    cuts: list[int],
) -> None:
    chunks = [HF[start:end] for start, end in zip([0, *cuts[:-1]], cuts, strict=True)]
    polls = _each_poll(chunks, ends=False)
    assert _loss(polls) == [(len(cuts) - 1, 10, 6.902)]  # held until the refresh was read
    assert ("it_per_s", 10, 8.33) in polls[-1]
    assert ("grad_norm", 10, 0.7358) in polls[-1]


def test_a_dict_whose_file_ends_before_a_refresh_keeps_the_step_drawn_before() -> None:
    polls = _each_poll([HF[:END]], ends=True)
    assert _loss(polls) == [(1, 6, 6.902)]  # the poll that ends the file gives it


def test_a_line_that_is_no_redraw_of_the_bar_gives_the_dict_the_step_drawn_before() -> None:
    """Not tqdm.write's pattern (here made by hand): the dict is not followed by the bar."""
    polls = _each_poll([HF[:END], b"Saving model checkpoint to hf-out/checkpoint-10\n"], ends=False)
    assert _loss(polls) == [(1, 6, 6.902)]
    polls = _each_poll([HF[:END], HF[END:AFTER].replace(b"/200", b"/300")], ends=False)
    assert _loss(polls) == [(1, 6, 6.902)]  # a redraw of another bar


def test_a_paste_that_turned_redraws_into_lines_has_no_clear() -> None:
    """A blank line is no clear: the dict attaches to the bar line before it (README)."""
    polls = _each_poll([HF[:AFTER].replace(b"\r", b"\n")], ends=True)
    assert [(step, value) for _, step, value in _loss(polls)] == [(6, 6.902)]


def test_the_reader_fed_raw_lines_reads_the_clear_and_the_refresh() -> None:
    """`MetricReader.feed` with the `\\r`s still in the lines (bench/parsers.py reads so)."""
    reader = MetricReader()
    for line in HF[:AFTER].decode().split("\n"):
        reader.feed(line)
    points = {p.step: p.values for p in reader.finish()}
    assert points[6] == {"it_per_s": 8.33}
    assert points[10]["loss"] == 6.902 and points[10]["it_per_s"] == 8.33
