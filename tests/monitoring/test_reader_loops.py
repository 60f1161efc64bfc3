"""A step-less record takes its step only from the training loop's progress.

The training loop is the first `i/N` progress seen to advance; a progress with another N
(Hugging Face's evaluation bar, drawn with no description below the open training bar;
Keras's `evaluate` after `fit`; an outer epoch bar) is another loop: its count is never the
step and its rate is no training rate. Before, the summary after the last evaluation bar
`4/4` landed at step 4 and the evaluation bar's it/s (270-410) joined the training's.
"""

from monitoring.reading.reader import MetricReader, ReaderState
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import read_case

HF_EVAL = next(c for c in load_metric_cases() if c.name == "hf_trainer_eval_bar_below_tqdm")


def _read(lines: list[str], state: ReaderState | None = None) -> list[tuple[int, dict]]:
    reader = MetricReader(state)
    for line in lines:
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()]


def test_the_evaluation_bar_gives_no_step_and_no_rate() -> None:
    points = read_case(HF_EVAL.text)
    assert min(p["step"] for p in points) >= 9  # the eval bar's 2/4 and 4/4 are no steps
    eval_rates = (10.4, 10.35, 16.65)  # the eval bar's own it/s, at 2/4 and 4/4
    assert not [p for p in points if p.get("it_per_s") in eval_rates]


def test_each_evaluation_and_the_summary_keep_the_training_step() -> None:
    points = {p["step"]: p for p in read_case(HF_EVAL.text)}
    assert {s: p["eval_loss"] for s, p in points.items() if "eval_loss" in p} == {
        40: 2.2,
        80: 1.8,
        120: 1.4,
    }
    assert [s for s, p in points.items() if "train_runtime" in p] == [120]
    assert all(p["loss"] == round(2.5 - s / 100, 4) for s, p in points.items() if "loss" in p)


def test_keras_evaluate_after_fit_is_no_step() -> None:
    """Keras 3 progbar (keras/src/utils/progbar.py): `evaluate`'s 4/4 is no step 4 of fit."""
    lines = [
        "Epoch 2/2",
        "100/100 ━━━━━━━━━━━━━━━━━━━━ 1s 9ms/step - accuracy: 0.8500 - loss: 0.4000",
        "4/4 ━━━━━━━━━━━━━━━━━━━━ 0s 3ms/step - accuracy: 0.7000 - loss: 0.9000",
    ]
    assert _read(lines) == [(200, {"ms_per_step": 9, "accuracy": 0.85, "loss": 0.4, "epoch": 2})]


def test_an_outer_bar_drawn_first_at_0_does_not_claim_the_steps() -> None:
    """Nested tqdm (`trange(epochs)` around `tqdm(loader)`): the outer bar is drawn at 0
    first, but the inner one is the first to advance; the outer's 1/3 is no step."""
    lines = [
        "Epoch:   0%|          | 0/3 [00:00<?, ?it/s]",
        "Iteration:  50%|█████     | 50/100 [00:05<00:05,  9.50it/s, loss=0.5]",
        "Epoch:  33%|███▎      | 1/3 [00:10<00:20, 10.00s/it]",
        "Iteration:  60%|██████    | 60/100 [00:06<00:04,  9.50it/s, loss=0.3]",
    ]
    assert _read(lines) == [
        (50, {"it_per_s": 9.5, "loss": 0.5}),
        (60, {"it_per_s": 9.5, "loss": 0.3}),
    ]


def test_the_training_loop_is_kept_between_polls() -> None:
    reader = MetricReader()
    reader.feed(" 33%|███▎      | 40/120 [00:00<00:00, 81.35it/s]")
    reader.finish(more_to_come=True)
    state = ReaderState.from_json(reader.state.to_json())
    points = _read(
        [
            "100%|██████████| 4/4 [00:00<00:00, 270.15it/s]",
            "{'train_runtime': 2.3114, 'train_loss': 1.9, 'epoch': 1.88}",
        ],
        state,
    )
    assert points == [(40, {"train_runtime": 2.3114, "train_loss": 1.9, "epoch": 1.88})]


def test_a_loop_that_ran_to_its_end_with_only_its_rate_gives_way_to_training() -> None:
    """A bare `tqdm(files)` preparing data before training: done, it gave nothing but its
    rate, so the training bar after it is the training loop (before, no step ever again)."""
    lines = [
        "100%|██████████| 1000/1000 [00:01<00:00, 900.00it/s]",
        "  2%|▏         | 10/500 [00:01<00:49,  9.90it/s, loss=2.5]",
        "  4%|▍         | 20/500 [00:02<00:48,  9.90it/s, loss=2.4]",
        "100%|██████████| 4/4 [00:00<00:00, 270.15it/s]",  # then an evaluation: another loop
    ]
    points = _read(lines)
    assert [(step, values.get("loss")) for step, values in points][1:] == [(10, 2.5), (20, 2.4)]
