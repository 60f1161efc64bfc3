"""Forms a held-out set of third-party logs missed: bars drawn without `|`, a bar an error
ran into, flair's iteration and evaluation lines."""

import pytest

from monitoring.reading.reader import MetricReader

Points = list[tuple[int, dict[str, float | int]]]


def _read(lines: list[str]) -> Points:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return [(p.step, p.values) for p in reader.finish()]


@pytest.mark.parametrize(
    "bar",
    [
        # tqdm bar_format="{desc}: {percentage:3.0f}% {n_fmt}/{total_fmt} [{elapsed}<..."
        "Training:  45% 45/100 [00:05<00:06,  8.90it/s, loss=0.512]",
        # an ASCII drawing with no `|`
        "Training:  45% ####5      45/100 [00:05<00:06,  8.90it/s, loss=0.512]",
        # tqdm ascii=True: the drawing holds digits
        "Training:  45%|####5     | 45/100 [00:05<00:06,  8.90it/s, loss=0.512]",
    ],
)
def test_a_bar_without_its_pipes_is_a_bar(bar: str) -> None:
    """Before, the percentage read as an epoch: `45% 45/100` was step 4445."""
    assert _read([bar]) == [(45, {"it_per_s": 8.9, "loss": 0.512})]


def test_an_evaluation_bar_without_pipes_is_no_step() -> None:
    points = _read(
        [
            "Training:  45% 45/100 [00:05<00:06,  8.90it/s, loss=0.512]",
            "Validating:  50% 2/4 [00:00<00:00, 30.10it/s]",
            "{'val_loss': 0.4}",
        ]
    )
    assert points == [(45, {"it_per_s": 8.9, "loss": 0.512, "val_loss": 0.4})]


@pytest.mark.parametrize(
    "error",
    [
        # c10d ProcessGroupNCCL's watchdog, with torchrun's `[rankN]:` and glog prefix
        "[rank1]:[E1206 12:00:00.123456 140 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=1, "
        "NumelOut=1, Timeout(ms)=1800000) ran for 1800123 milliseconds before timing out.",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 3.44 MiB is free.",
        "slurmstepd: error: *** STEP 4242.0 ON n1 CANCELLED AT 2026-12-06T10:00:00 ***",
    ],
)
def test_a_bar_an_error_ran_into_keeps_its_step_and_gives_no_error_number(error: str) -> None:
    bar = " 46%|████▌     | 46/100 [00:05<00:06,  8.90it/s, loss=0.511]"
    assert _read([bar + error, "{'eval_loss': 0.3}"]) == [(46, {"it_per_s": 8.9, "loss": 0.511})]


def test_flair_iteration_lines() -> None:
    """flair/trainers/trainer.py, pasted in flairNLP/flair#3439 (epochs from 1, iter per epoch)."""
    lines = [
        "2024-03-14 05:47:08,072 epoch 144 - iter 8/45 - loss 0.00038394 - time (sec): 2.45 - "
        "samples/sec: 2014.87 - lr: 0.000003 - momentum: 0.000000",
        "2024-03-14 05:47:09,234 epoch 144 - iter 12/45 - loss 0.00032369 - time (sec): 3.61 - "
        "samples/sec: 2099.26 - lr: 0.000003 - momentum: 0.000000",
    ]
    points = _read(lines)
    assert [step for step, _ in points] == [143 * 45 + 8, 143 * 45 + 12]
    assert points[0][1] == {
        "loss": 0.00038394,
        "time": 2.45,
        "samples_per_sec": 2014.87,
        "lr": 0.000003,
        "momentum": 0.0,
        "epoch": 144,
    }


def test_flair_evaluation_lines_are_named_apart_from_the_training_loss() -> None:
    """flairNLP/flair#517: the epoch's summary, then `DEV  :` and `TEST :` with their own loss.
    Before, the test loss replaced the training loss of the epoch's last step."""
    lines = [
        "2019-02-19 18:37:11,947 epoch 1 - iter 240/249 - loss 0.03491753",
        "2019-02-19 18:37:12,097 EPOCH 1 done: loss 0.0350 - lr 0.1000 - bad epochs 0",
        "2019-02-19 18:37:12,571 DEV  : loss 0.03877527 - f-score 0.5586 - acc 0.5586",
        "2019-02-19 18:37:13,162 TEST : loss 0.04066545 - f-score 0.5521 - acc 0.5521",
    ]
    [(step, values)] = _read(lines)
    assert step == 240 and values["loss"] == 0.035
    assert (values["dev/loss"], values["dev/f_score"]) == (0.03877527, 0.5586)
    assert (values["test/loss"], values["test/acc"]) == (0.04066545, 0.5521)
