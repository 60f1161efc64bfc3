"""A `key=value` line of settings printed once before training is not charted.

Before, `config: lr=0.001 batch_size=32 max_steps=1000 loss_scale=1024` before the first
step became a point at step 0 (a name with `loss` is a record's, before any step), and a
banner printed again after a step (a resumed run) joined that step's values.
"""

import pytest

from monitoring.reading.reader import MetricReader

BANNERS = [
    "lr=0.001 batch_size=32 epochs=10 warmup=100",
    "config: lr=0.001 batch_size=32 max_steps=1000 weight_decay=0.01 loss_scale=1024",
    # examples/ddp_train.py: f"ddp_train: world_size={world} backend={backend} ..."
    "ddp_train: world_size=2 backend=nccl device=cuda params=5313 batch_size=32 "
    "start_step=1 steps=200",
]


def _read(lines: list[str]) -> list[tuple[int, dict[str, float | int]]]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()]


@pytest.mark.parametrize("banner", BANNERS)
def test_a_banner_before_training_is_no_point(banner: str) -> None:
    assert _read([banner, "step 1, loss=2.5", "step 2, loss=2.4"]) == [
        (1, {"loss": 2.5}),
        (2, {"loss": 2.4}),
    ]


@pytest.mark.parametrize("banner", BANNERS)
def test_a_banner_printed_again_after_a_step_adds_nothing_to_it(banner: str) -> None:
    assert _read(["step 1, loss=2.5", banner]) == [(1, {"loss": 2.5})]


@pytest.mark.parametrize(
    "record",
    [
        "val_loss=0.5 val_acc=0.9",
        "tokens=4096 samples=32 loss=2.3",  # counts that are measures: a record
        "{'loss': 2.1, 'num_input_tokens_seen': 40960, 'epoch': 1}",  # a dict is a record
    ],
)
def test_a_record_after_a_step_still_attaches(record: str) -> None:
    [(step, values)] = _read(["step 1, lr=0.1", record])
    assert step == 1 and len(values) > 1
