"""Lightning's two bars, as a real run prints them on a file (tests/corpus/metrics/lightning.toml).

RichProgressBar (its default when `rich` is installed) prints only its final frame off a
terminal: `Epoch 2/2 ━━━ 32/32 ...`, epochs counted from 0. TQDMProgressBar carries
`val_loss` on every redraw until the next validation: before, a 21-point staircase.
"""

import csv

from monitoring.reading.reader import MetricReader
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import read_case

CASES = {c.name: c for c in load_metric_cases()}
RICH = CASES["lightning_rich_bar_validation_cpu"].text
TQDM = CASES["lightning_tqdm_bar_validation_cpu"].text


def _read(lines: list[str]) -> tuple[list[tuple[int, dict[str, float | int]]], MetricReader]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()], reader


def test_the_rich_final_frame_is_the_last_step_of_epochs_counted_from_0() -> None:
    [point] = read_case(RICH)
    assert point == {
        "step": 96,
        "epoch": 2.0,
        "it_per_s": 464.61,
        "train_loss": 0.499,
        "val_loss": 0.569,
    }


def test_rich_validation_and_sanity_bars_are_no_steps_and_the_total_counts_from_0() -> None:
    """rich_progress.py: `Epoch {current_epoch}/{max_epochs - 1}`; the validation and
    sanity-check tasks are described `Validation`, `Sanity Checking`."""
    points, reader = _read(
        [
            "Sanity Checking ━━━━━━━━━━━━━━━━ 2/2 0:00:00 • 0:00:00 100.15it/s",
            "Epoch 0/1  ━━━━━━━━━━━━━━━━ 32/32 0:00:01 • 0:00:00 25.31it/s v_num: 0 "
            "train_loss: 1.234 val_loss: 1.4",
            "Validation ━━━━━━━━━━━━━━━━ 4/4 0:00:00 • 0:00:00 270.15it/s",
            "Epoch 1/1  ━━━━━━━━━━━━━━━━ 32/32 0:00:01 • 0:00:00 25.31it/s v_num: 0 "
            "train_loss: 1.1 val_loss: 1.3",
        ]
    )
    assert [(step, values["train_loss"], values["epoch"]) for step, values in points] == [
        (32, 1.234, 0),
        (64, 1.1, 1),
    ]
    assert reader.total_steps == 64  # two epochs of 32, not `1/1` epochs of 32


def test_val_loss_is_charted_at_each_validation_not_at_every_redraw() -> None:
    points = read_case(TQDM)
    assert {p["step"]: p["val_loss"] for p in points if "val_loss" in p} == {
        16: 0.55,
        32: 0.574,
        48: 0.519,
        64: 0.569,
        80: 0.518,
        96: 0.569,
    }
    assert len([p for p in points if "train_loss" in p]) == 96  # the training value each step


def test_every_csv_logger_row_is_charted_at_its_step() -> None:
    """The run's own record: Lightning's CSVLogger counts steps from 0, the bar from 1."""
    rows = """epoch,step,train_loss,val_loss
0,7,0.4707011580467224,
0,15,0.7123140096664429,
0,15,,0.5503346920013428
0,31,0.5026832818984985,
0,31,,0.5738304853439331
2,95,0.49867331981658936,
2,95,,0.5685665011405945"""
    charted = {p["step"]: p for p in read_case(TQDM)}
    for row in csv.DictReader(rows.splitlines()):
        name = "train_loss" if row["train_loss"] else "val_loss"
        value = float(f"{float(row[name]):.3g}")  # the bar prints 3 significant digits
        assert charted[int(row["step"]) + 1][name] == value, row


def test_a_repeated_evaluation_value_is_given_again_after_a_poll_only_when_changed() -> None:
    bar = (
        "Epoch 0:  {p}%|█         | {n}/32 [00:00<00:00, 560.37it/s, v_num=0, train_loss={t}, "
        "val_loss=0.55]"
    )
    reader = MetricReader()
    reader.feed(bar.format(p=50, n=16, t=0.712))
    assert reader.finish(more_to_come=True)[0].values["val_loss"] == 0.55
    state = reader.state
    again = MetricReader(type(state).from_json(state.to_json()))
    again.feed(bar.format(p=53, n=17, t=0.455))
    [point] = again.finish()
    assert point.step == 17 and "val_loss" not in point.values
    assert point.values["train_loss"] == 0.455
