"""Hugging Face Trainer, run for real (transformers 5.25, CPU): every logged dict at its step.

Each dict carries `epoch` = step / 64 in these runs, so its step is known: the reader must
chart 24 losses at 5, 10, ... 120, the evaluations at 40, 80, 120 and the summary at 120,
with stdout unbuffered and block-buffered, however the polls cut the file.
"""

import random

import pytest

from monitoring.reading.overwrite import newest_per_step
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import ingest_polls

CASES = {c.name: c for c in load_metric_cases()}
RUNS = ["hf_trainer_eval_cpu", "hf_trainer_buffered_eval_cpu"]
STEPS_PER_EPOCH = 64


def _polls(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), rng.randint(0, 30)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("name", RUNS)
def test_every_dict_is_at_its_step(name: str, seed: int) -> None:
    points = newest_per_step(ingest_polls(_polls(CASES[name].text.encode(), seed)))
    steps: dict[str, list[float]] = {}
    epochs: dict[float, float] = {}
    for _, series, step, value in points:
        steps.setdefault(series, []).append(step)
        if series == "epoch":
            epochs[step] = value
    assert sorted(steps["loss"]) == [float(s) for s in range(5, 121, 5)]
    assert all(round(epochs[s] * STEPS_PER_EPOCH) == s for s in steps["loss"])
    assert sorted(steps["eval_loss"]) == [40.0, 80.0, 120.0]
    assert steps["train_runtime"] == [120.0]


def test_the_evaluation_bar_gives_no_rate() -> None:
    """The evaluation bar's 4/4 at 740 it/s is not the training's 100-200."""
    points = ingest_polls([CASES["hf_trainer_eval_cpu"].text.encode()])
    assert max(value for _, series, _, value in points if series == "it_per_s") < 300
