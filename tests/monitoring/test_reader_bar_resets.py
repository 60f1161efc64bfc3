"""A bar redrawn at 0, text printed onto a bar, a fraction with a negative number.

Real output of an H200 run (tests/corpus, `devtools/gpu_check/run2.sh`): Lightning's
TQDMProgressBar resets its bar for each epoch by redrawing it at 0 under the old
description, with the last step's postfix; Lightning's `Trainer.fit stopped` line is
printed onto the last redraw; NCCL's INFO lines print a tree as `-1/-1/-1->0->-1`.
Before, the reset put the last loss at step 0 and, a reset later, step 256's loss at
step 128; the tree made step -1, which the next step-less line attached to.
"""

from monitoring.reading.reader import MetricReader
from tests.corpus.loader import FAILURES_DIR, load_metric_cases
from tests.corpus.runner import read_case

CASES = {c.name: c for c in load_metric_cases()}
LIGHTNING = CASES["lightning_tqdm_bar_h200"].text
NCCL = (FAILURES_DIR / "none_nccl_debug_info_h200.log").read_text()
Points = list[tuple[int, dict[str, float | int]]]


def _read(text: str) -> tuple[Points, MetricReader]:
    reader = MetricReader()
    for line in text.splitlines(keepends=True):
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()], reader


def _redraws(first: str, last: str) -> str:
    """The bar's redraws from the one that begins with `first` to the one with `last`."""
    start = LIGHTNING.index("\r" + first)
    end = LIGHTNING.index("\r", LIGHTNING.index(last, start))
    return LIGHTNING[start:end]


def test_a_bar_reset_for_the_next_epoch_gives_no_point() -> None:
    text = _redraws("Epoch 0: 100%", "Epoch 1:   1%|          | 1/128 [00:00<00:00, 374.49it/s")
    assert "Epoch 0:   0%|          | 0/128 [00:00<?, ?it/s, v_num=0, train_loss=0.0605]" in text
    points, _ = _read(text)
    assert [step for step, _ in points] == [128, 129]
    assert points[0][1] == {"epoch": 0, "it_per_s": 158.29, "train_loss": 0.0605}
    assert points[1][1] == {"epoch": 1, "it_per_s": 374.49, "train_loss": 0.0508}


def test_each_steps_loss_stays_its_own_through_every_reset() -> None:
    """The whole capture, polled after each redraw as ingest reads it: every step once."""
    points = read_case(LIGHTNING)
    assert [p["step"] for p in points] == list(range(1, 385))
    by_step = {p["step"]: p for p in points}
    assert by_step[128]["train_loss"] == 0.0605 and by_step[128]["epoch"] == 0
    assert by_step[256]["train_loss"] == 0.0274 and by_step[256]["epoch"] == 1


def test_a_bar_at_0_still_says_its_total() -> None:
    points, reader = _read("  0%|          | 0/200 [00:00<?, ?it/s]\r")
    assert points == [] and reader.total_steps == 200


def test_a_bar_at_0_with_a_global_counter_is_that_step() -> None:
    points, _ = _read("Epoch 3:   0%|          | 0/100 [00:00<?, ?it/s, loss=0.5, global_step=300]")
    assert points == [(300, {"epoch": 3, "loss": 0.5})]


def test_a_line_printed_onto_a_bar_is_read_as_its_own_line() -> None:
    end = LIGHTNING.index("`Trainer.fit` stopped")
    last = LIGHTNING.rindex("\r", 0, end)
    glued = LIGHTNING[last : LIGHTNING.index("\n", end) + 1]
    assert glued.endswith("train_loss=0.0155]`Trainer.fit` stopped: `max_epochs=3` reached.\n")
    points, _ = _read(glued)
    assert points == [(384, {"epoch": 2, "it_per_s": 294.04, "train_loss": 0.0155})]
    # A metrics line printed onto a bar keeps its values, at the bar's step.
    bar = " 45%|████▌     | 45/100 [00:05<00:06,  8.08it/s, loss=0.598]"
    points, _ = _read(bar + "val_loss=0.25, val_acc=0.91\n")
    assert points == [(45, {"it_per_s": 8.08, "loss": 0.598, "val_loss": 0.25, "val_acc": 0.91})]


def test_a_postfix_with_brackets_stays_with_its_bar() -> None:
    bar = " 45%|████▌     | 45/100 [00:05<00:06,  8.08it/s, lr=[0.001], loss=0.598]"
    points, _ = _read(bar + "\n")
    assert points == [(45, {"it_per_s": 8.08, "lr": 0.001, "loss": 0.598})]


def test_a_fraction_with_a_negative_number_is_no_step() -> None:
    tree = next(line for line in NCCL.splitlines() if "NCCL INFO Trees" in line)
    assert "-1/-1/-1->0->-1" in tree
    points, reader = _read(f"step 5, loss=0.3268\n{tree}\nval_loss: 0.3\n")
    assert points == [(5, {"loss": 0.3268, "val_loss": 0.3})]
    assert reader.total_steps is None


def test_the_nccl_debug_lines_of_a_real_run_give_only_the_trainers_points() -> None:
    points, reader = _read(NCCL)
    assert [step for step, _ in points] == list(range(1, 21))
    assert {name for _, values in points for name in values} == {"loss", "samples_per_sec"}
    assert reader.total_steps is None
