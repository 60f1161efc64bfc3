"""Generated training lines: every value the reader reads is the value that was written."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from monitoring.reading.reader import MetricReader

NAMES = st.sampled_from(
    ["loss", "lr", "grad_norm", "acc", "val_loss", "tokens_per_sec", "mem", "ppl", "wd"]
)
VALUES = st.one_of(
    st.integers(min_value=0, max_value=10**12),
    st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False),
)
UNITS = st.sampled_from(["", "", "ms", "%", "s", "GB", "GiB"])
PREFIXES = st.sampled_from(
    [
        "",
        "2024-05-01 12:00:00,123 - INFO - ",
        "[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - ",
        "I0912 11:40:27.956218 139735407601536 train.py:652] ",
        "stdout: [2022-12-20 08:26:26,101] [INFO] [timer.py:197:stop] ",
        "\x1b[32m",
    ]
)
SHAPES = st.sampled_from(["{k}={v}", "{k}: {v}", "{k} {v}", "'{k}': {v}"])
SEPARATORS = st.sampled_from([", ", " | ", " - ", "  ", " "])


def _text(value: int | float) -> str:
    return str(value) if isinstance(value, int) else repr(value)


@settings(max_examples=300, deadline=None)
@given(
    prefix=PREFIXES,
    step=st.integers(min_value=0, max_value=10**9),
    step_shape=st.sampled_from(["step {s}", "iter {s}:", "global_step={s}", "Step [{s}/{s}]"]),
    fields=st.dictionaries(NAMES, st.tuples(VALUES, UNITS), min_size=1, max_size=6),
    shape=SHAPES,
    separator=SEPARATORS,
    as_dict=st.booleans(),
)
def test_every_value_read_is_the_value_written(
    prefix: str,
    step: int,
    step_shape: str,
    fields: dict[str, tuple[int | float, str]],
    shape: str,
    separator: str,
    as_dict: bool,
) -> None:
    if as_dict:
        body = "{" + ", ".join(f"'{k}': {_text(v)}" for k, (v, _) in fields.items()) + "}"
        line = f"{prefix}{step_shape.format(s=step)} {body}"
    else:
        parts = [shape.format(k=k, v=_text(v) + u) for k, (v, u) in fields.items()]
        line = prefix + step_shape.format(s=step) + separator + separator.join(parts)
    reader = MetricReader()
    reader.feed(line + "\n")
    points = reader.finish()
    assert [p.step for p in points] == [step]
    for name, value in points[0].values.items():
        written = fields[name][0]
        assert math.isclose(value, written, rel_tol=1e-12, abs_tol=0.0) or value == written, line


@settings(max_examples=200, deadline=None)
@given(
    done=st.integers(min_value=1, max_value=10**6),  # at 0 a bar gives no point
    total=st.integers(min_value=1, max_value=10**6),
    rate=st.floats(min_value=0.01, max_value=999.99).map(lambda r: round(r, 2)),
    loss=st.floats(min_value=0, max_value=100).map(lambda r: round(r, 4)),
)
def test_a_tqdm_bar_gives_its_counter_rate_and_postfix(
    done: int, total: int, rate: float, loss: float
) -> None:
    line = f" 50%|█████     | {done}/{total} [00:05<00:05, {rate:.2f}it/s, loss={loss}]"
    reader = MetricReader()
    reader.feed(line)
    (point,) = reader.finish()
    assert point.step == done and reader.total_steps == total
    assert point.values == {"it_per_s": float(f"{rate:.2f}"), "loss": loss}


@settings(max_examples=100, deadline=None)
@given(
    prose=st.sampled_from(["done", "Saved model", "checkpoint written", "finished training"]),
    counter=st.sampled_from(["step", "iter", "iteration", "epoch"]),
    last=st.integers(min_value=1, max_value=10**6),
)
def test_prose_that_says_at_which_step_is_no_metric(prose: str, counter: str, last: int) -> None:
    """`done at step 200`: the last line examples/ddp_train.py prints (and prose like it)
    names where it happened; it was read as a series `done_at_step` on the step before."""
    reader = MetricReader()
    reader.feed("step 1, loss=0.5")
    reader.feed(f"{prose} at {counter} {last}")
    points = reader.finish()
    assert [(p.step, p.values) for p in points] == [(1, {"loss": 0.5})]


PIECES = st.sampled_from(
    [" ", "  ", ":", "=", ",", "|", " - ", "-", ".", "/", "1", "12", "0.5", "1e-4", "%", "ms",
     "it/s", "(", ")", "[", "]", "{", "}", "'", "loss", "step", "Epoch", "nan", "\t", "5%|",
     "File \"a.py\", line 3", "--x", "x.cc:12", "\r", "INFO", "[rank0]:"]
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(pieces=st.lists(PIECES, min_size=1, max_size=30))
def test_no_line_makes_the_reader_fail(pieces: list[str]) -> None:
    """`loss 1 /` (a fraction cut at the end of a line, or of a chunk) raised IndexError."""
    reader = MetricReader()
    reader.feed("step 7, loss=0.25")
    reader.feed("".join(pieces))
    reader.finish()
