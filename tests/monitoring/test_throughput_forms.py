"""Throughput from every form trainers print it in, stored as one rate per bar.

tqdm prints `s/it` below one step a second and `it/s` above it; Keras prints `1s/step`,
`205ms/step` or `76us/step` by size. Stored as printed, one bar's rate was two or three
series (on two charts) with holes where the unit flipped, and Keras's never reached the
throughput chart. The ingest stores each as the rate it stands for.
"""

import pytest

from monitoring.ingest.parse import NewBytes, attempt_parse
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.kinds import series_kind
from tests import factories

pytestmark = pytest.mark.django_db

# tqdm 4 (std.py format_meter: `rate_inv_fmt if inv_rate > 1`), a bar slower than 1 it/s.
TQDM_SLOW = (
    b"\r  0%|          | 0/3 [00:00<?, ?it/s]"
    b"\r 33%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8e      | 1/3 [00:01<00:02,  1.20s/it]"
    b"\r 67%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88\xe2\x96\x8b"
    b"   | 2/3 [00:02<00:01,  1.20s/it]\n"
)
# Keras 3.15 Progbar (verbose=1, utils/progbar.py _format_time), as a fit's last redraw
# writes it: bold count and time, the bar in colours.
KERAS3_MS = (
    "\r\x1b[1m4/4\x1b[0m \x1b[32m" + "━" * 20 + "\x1b[0m\x1b[37m\x1b[0m \x1b[1m1s\x1b[0m"
    " 212ms/step - loss: 0.5000\n"
).encode()
KERAS3_S = (
    "\r\x1b[1m2/2\x1b[0m \x1b[32m" + "━" * 20 + "\x1b[0m\x1b[37m\x1b[0m \x1b[1m3s\x1b[0m"
    " 1s/step - loss: 0.5000\n"
).encode()
# Keras 2 (keras-team/keras#10506, as pasted): `76us/step`.
KERAS2_US = (
    b"178/178 [==============================] - 0s 76us/step - loss: 0.0636 - acc: 0.0056"
    b" - val_loss: 0.0673 - val_acc: 0.0000e+00\n"
)


def _stored(data: bytes, project, owner) -> list[tuple[str, float, float]]:
    cluster = factories.cluster()
    _, attempt = factories.job(project, owner, cluster, nodes=1, gpus_per_node=1)
    log_file = LogFile.objects.create(attempt=attempt, name="stdout.log")
    note = AttemptIngest.objects.create(attempt=attempt)
    parsed = attempt_parse(
        attempt,
        {"stdout.log": log_file},
        {"stdout.log": NewBytes(0, data)},
        final=True,
        note=note,
    )
    return [(name, x, y) for _, name, x, y in parsed.points]


def test_tqdm_seconds_per_iteration_are_stored_as_iterations_per_second(project, owner) -> None:
    points = _stored(TQDM_SLOW, project, owner)
    rates = [(x, y) for name, x, y in points if name == "it_per_s"]
    assert rates and all(y == pytest.approx(1 / 1.20) for _, y in rates)
    assert not any(name == "s_per_it" for name, _, _ in points)
    assert series_kind("it_per_s") == "step_rate"


@pytest.mark.parametrize(
    ("data", "step", "steps_per_s", "loss"),
    [
        (KERAS3_MS, 4, 1 / 0.212, 0.5),
        (KERAS3_S, 2, 1.0, 0.5),
        (KERAS2_US, 178, 1 / 76e-6, 0.0636),
    ],
)
def test_keras_time_per_step_in_any_unit_is_one_steps_per_second_series(
    project, owner, data: bytes, step: int, steps_per_s: float, loss: float
) -> None:
    points = _stored(data, project, owner)
    assert not any(name.endswith("_per_step") for name, _, _ in points)  # never as a time
    assert [(x, y) for name, x, y in points if name == "step_per_s"] == [
        (step, pytest.approx(steps_per_s))
    ]
    assert ("loss", step, loss) in points
    assert series_kind("step_per_s") == "step_rate"
