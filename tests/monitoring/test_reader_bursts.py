"""Records that reach the file in bursts keep their own steps.

When stdout is no terminal, Python block-buffers it: Hugging Face's logs dicts reach the
file 8 KiB at a time, long after the bar (stderr, unbuffered) went on. tqdm.write leaves a
trace of each record where it was written: it clears the bar and refreshes it at once at
the step of the record, so the file shows a clear followed straight by a refresh (a
record's place). The records of the burst take those places in order. Before, every dict
of a burst took the step of the latest bar and the last one won: 3 of 120 losses charted.
"""

import random
from typing import Any

import pytest

from monitoring.reading.lines import read_chunk
from monitoring.reading.overwrite import newest_per_step
from monitoring.reading.parsers import parse_stdout_metrics
from monitoring.reading.reader import MetricReader, ReaderState
from monitoring.reading.state import MAX_SLOTS
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import ingest_polls

CASE = next(c for c in load_metric_cases() if c.name == "hf_trainer_buffered_stdout_tqdm")
DATA = CASE.text.encode()


def _series(chunks: list[bytes]) -> dict[str, dict[float, float]]:
    out: dict[str, dict[float, float]] = {}
    for _, name, step, value in newest_per_step(ingest_polls(chunks)):
        out.setdefault(name, {})[step] = value
    return out


def _cut(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(DATA)), rng.randint(1, 40)))
    return [DATA[a:b] for a, b in zip([0, *cuts], [*cuts, len(DATA)], strict=True)]


@pytest.mark.parametrize("seed", range(8))
def test_every_dict_of_a_burst_keeps_its_step_however_the_polls_cut_the_file(seed: int) -> None:
    series = _series(_cut(seed))
    assert series["loss"] == {float(s): round(2.5 - s / 1000, 4) for s in range(10, 1201, 10)}
    assert series["eval_loss"] == {400.0: 2.2, 800.0: 1.8, 1200.0: 1.4}
    assert series["train_runtime"] == {1200.0: 2.3114}


def test_a_poll_cut_inside_the_refresh_after_a_clear_keeps_the_place() -> None:
    at = DATA.index(b"\r\r  1%") + 3  # `\r\r ` read, ` 1%| 10/1200 ...` not yet
    assert _series([DATA[:at], DATA[at:]])["loss"][10.0] == 2.49


BAR = " {p:2d}%|          | {n}/1200 [00:00<00:03, 312.42it/s]"


def test_the_places_wait_in_the_state_between_polls() -> None:
    clear_refresh = "".join(f"\r{' ' * 50}\r\r{BAR.format(p=n // 12, n=n)}" for n in (10, 20))
    first = read_chunk(b"", f"{BAR.format(p=0, n=5)}{clear_refresh}\r".encode(), final=False)
    state: dict[str, Any] = {}
    parse_stdout_metrics(first.lines, state=state, provisional=first.redraw, final=False)
    assert state["slots"] == [10]  # the refresh at 20 is read with what ends its line
    burst = b"{'loss': 2.49, 'epoch': 0.02}\n{'loss': 2.48, 'epoch': 0.03}\n"
    second = read_chunk(first.carry, burst, final=True)
    points = parse_stdout_metrics(second.lines, state=ReaderState.from_json(state).to_json())
    assert [(p.step, p.value) for p in points if p.name == "loss"] == [(10, 2.49), (20, 2.48)]


def test_more_places_than_a_buffer_holds_are_dropped_not_shifted() -> None:
    """Past MAX_SLOTS the records' places are no longer known: the records attach to the
    latest step read (258: the refresh at 259 waits for its line), as a record with no place
    does, rather than to a place one off."""
    reader = MetricReader()
    line = BAR.format(p=0, n=1) + "".join(
        f"\r{' ' * 50}\r\r{BAR.format(p=0, n=n)}" for n in range(2, MAX_SLOTS + 4)
    )
    for redraw in read_chunk(b"", f"{line}\r".encode(), final=False).lines:
        reader.feed(redraw)
    assert reader.state.slots == [] and reader.state.slots_lost
    reader.feed("{'loss': 2.49, 'epoch': 0.02}")
    assert [(p.step, p.values.get("loss")) for p in reader.finish()][-1] == (MAX_SLOTS + 2, 2.49)


def _points(lines: list[str]) -> tuple[list[tuple[int, dict[str, float | int]]], ReaderState]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()], reader.state


def test_a_burst_with_no_places_charts_none_of_its_records_and_counts_them() -> None:
    """Dicts printed (not through tqdm.write) while stdout was held back: the bar left no
    places, so their steps are unknown; none lands on the bar's step, the last one winning."""
    points, state = _points(
        [
            " 33%|███▎      | 400/1200 [00:01<00:03, 250.27it/s]",
            "{'loss': 2.49, 'grad_norm': 1.01, 'learning_rate': 4.958e-05, 'epoch': 0.02}",
            "{'loss': 2.48, 'grad_norm': 1.02, 'learning_rate': 4.917e-05, 'epoch': 0.03}",
            "{'loss': 2.47, 'grad_norm': 1.03, 'learning_rate': 4.875e-05, 'epoch': 0.05}",
            " 34%|███▍      | 410/1200 [00:01<00:03, 250.27it/s]",
            "{'loss': 2.09, 'grad_norm': 1.41, 'learning_rate': 3.292e-05, 'epoch': 0.64}",
        ]
    )
    assert points == [
        (400, {"it_per_s": 250.27}),
        (410, {"it_per_s": 250.27, "loss": 2.09, "grad_norm": 1.41, "learning_rate": 3.292e-05,
               "epoch": 0.64}),
    ]  # fmt: skip
    assert state.unplaced == 3


def test_records_with_other_names_at_one_step_are_no_burst() -> None:
    """Hugging Face logs the loss and the evaluation at the same step: both are its values."""
    points, state = _points(
        [
            " 33%|███▎      | 400/1200 [00:01<00:03, 250.27it/s]",
            "{'loss': 2.1, 'grad_norm': 1.4, 'learning_rate': 3.333e-05, 'epoch': 0.62}",
            "{'eval_loss': 2.2, 'eval_runtime': 0.0148, 'epoch': 0.62}",
        ]
    )
    assert [(s, sorted(v)) for s, v in points] == [
        (400, ["epoch", "eval_loss", "eval_runtime", "grad_norm", "it_per_s", "learning_rate",
               "loss"])
    ]  # fmt: skip
    assert state.unplaced == 0
