"""A diverged value is a value: nan and ±inf under their own name, at their own step.

Before, `step 12 loss nan lr 0.03` grew a series `loss_nan_lr` holding the lr and the
loss series silently stopped; a dict's `'grad_norm': nan` was dropped.
"""

import json
import math

import pytest

from monitoring.reading.parsers import parse_stdout_metrics
from monitoring.reading.reader import MetricReader, ReaderState


def _read(lines: list[str]) -> list[tuple[int, str, float]]:
    return [(p.step, p.name, p.value) for p in parse_stdout_metrics(lines)]


def _same(got: list[tuple[int, str, float]], want: list[tuple[int, str, float]]) -> bool:
    return len(got) == len(want) and all(
        g[:2] == w[:2] and (g[2] == w[2] or (math.isnan(g[2]) and math.isnan(w[2])))
        for g, w in zip(got, want, strict=True)
    )


NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("lines", "want"),
    [
        # The plain script: a label, then its value, then the next label.
        (["step 12 loss nan lr 0.03"], [(12, "loss", NAN), (12, "lr", 0.03)]),
        (["step 12 loss inf lr 0.03"], [(12, "loss", INF), (12, "lr", 0.03)]),
        (["step 3, loss=-inf, acc=0.5"], [(3, "loss", -INF), (3, "acc", 0.5)]),
        (["step 4 | loss: NaN | grad_norm: Infinity"], [(4, "loss", NAN), (4, "grad_norm", INF)]),
        (["iter 7: loss -nan, time 12.5ms"], [(7, "loss", NAN), (7, "time", 12.5)]),
        # karpathy/nanoGPT's `iter {iter_num}: loss {lossf:.4f}` once the loss diverged.
        (
            ["iter 2000: loss nan, time 101.25ms, mfu 40.11%"],
            [(2000, "loss", NAN), (2000, "time", 101.25), (2000, "mfu", 40.11)],
        ),
        # Hugging Face Trainer's logs dict (ProgressCallback.on_log), pasted in
        # AnswerDotAI/ModernBERT#233: its tqdm bar gives the step.
        (
            [
                " 10%|█         | 20/200 [00:05<00:45,  3.99it/s]",
                "{'loss': nan, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, "
                "'epoch': 0.53}",
            ],
            [
                (20, "it_per_s", 3.99),
                (20, "loss", NAN),
                (20, "grad_norm", NAN),
                (20, "learning_rate", 9.774074342405685e-06),
                (20, "epoch", 0.53),
            ],
        ),
        # Megatron-LM's training_log (bigscience-workshop/Megatron-DeepSpeed#396): the
        # label `number of nan iterations` keeps its `nan`; `grad norm: nan` is a value.
        (
            [
                " iteration     5426/  250000 | loss scale: 1.0 | grad norm: nan | "
                "number of skipped iterations:   0 | number of nan iterations:   3 |"
            ],
            [
                (5426, "loss_scale", 1.0),
                (5426, "grad_norm", NAN),
                (5426, "number_of_skipped_iterations", 0.0),
                (5426, "number_of_nan_iterations", 3.0),
            ],
        ),
        # darkflow's padded `loss        nan` (MahmudulAlam/...Blood-Cells#15).
        (
            ["step 1655 - loss        nan - moving ave loss        nan"],
            [(1655, "loss", NAN), (1655, "moving_ave_loss", NAN)],
        ),
        # A value past float's range is an infinity, not a dropped line.
        (["step 9 loss=1e999 lr=0.1"], [(9, "loss", INF), (9, "lr", 0.1)]),
    ],
)
def test_a_non_finite_value_keeps_its_name_and_step(
    lines: list[str], want: list[tuple[int, str, float]]
) -> None:
    got = _read(lines)
    assert _same(got, want), got


def test_a_label_word_nan_after_a_metric_is_its_value() -> None:
    """`loss nan grad norm: 2.5`: after a metric's label, `nan` is the metric's value."""
    assert _same(
        _read(["step 5 loss nan grad norm: 2.5"]), [(5, "loss", NAN), (5, "grad_norm", 2.5)]
    )


def test_a_nan_loss_then_finite_ones_stays_one_series() -> None:
    got = _read(["step 1 loss 0.5 lr 0.1", "step 2 loss nan lr 0.1", "step 3 loss 0.25 lr 0.1"])
    assert {name for _, name, _ in got} == {"loss", "lr"}
    assert [step for step, name, _ in got if name == "loss"] == [1, 2, 3]


def test_non_finite_values_cross_polls_in_strict_json() -> None:
    """A held record and a step's given values keep their nan across polls; the state stays
    strict JSON (it is stored on a row)."""
    reader = MetricReader()
    reader.feed("step 8 loss=nan grad_norm=inf")
    reader.feed("***** train metrics *****")
    reader.feed("  train_loss = nan")
    [point] = reader.finish(more_to_come=True)
    assert point.step == 8 and math.isnan(point.values["loss"])
    stored = json.loads(json.dumps(reader.state.to_json(), allow_nan=False))
    assert stored["given"] == {"loss": "nan", "grad_norm": "inf"}
    again = MetricReader(ReaderState.from_json(stored))
    assert math.isnan(again.state.given["loss"]) and again.state.given["grad_norm"] == INF
    again.feed("  train_runtime = 12.5")
    again.feed("step 9 loss=0.5")
    [block, nine] = again.finish()
    assert math.isnan(block.values["train_loss"]) and block.values["train_runtime"] == 12.5
    assert (nine.step, nine.values) == (9, {"loss": 0.5})
