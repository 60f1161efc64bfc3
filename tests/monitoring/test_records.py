"""Trainers' own record files read into points: real files, and hostile framing."""

import struct
from pathlib import Path

import pytest

from monitoring.records.names import record_kind, record_name
from monitoring.records.request import records_reply, records_request
from monitoring.records.tables import read_csv, read_trainer_state
from monitoring.records.tfevents import MAX_RECORD_BYTES, masked_crc, read_events

FIXTURES = Path(__file__).parent / "fixtures" / "records"


def events_file(folder: str) -> bytes:
    (path,) = (FIXTURES / folder).glob("events.out.tfevents.*")
    return path.read_bytes()


def series(points: list[tuple[str, int, float]], name: str) -> list[tuple[int, float]]:
    return [(step, value) for n, step, value in points if n == name]


def frame(body: bytes) -> bytes:
    length = struct.pack("<Q", len(body))
    return (
        length + struct.pack("<I", masked_crc(length)) + body + struct.pack("<I", masked_crc(body))
    )


def test_summary_writer_scalars_and_no_histograms() -> None:
    read = read_events(events_file("summarywriter"))
    data = events_file("summarywriter")
    assert read.consumed == len(data) and read.skipped_records == 0
    assert {name for name, _, _ in read.points} == {"loss/train", "lr"}
    assert series(read.points, "loss/train") == [
        (s, pytest.approx(1.0 / (s + 1))) for s in range(0, 50, 5)
    ]


def test_lightning_events_and_csv_agree() -> None:
    """The TensorBoard logger and the CSV logger of one run give the same points."""
    events = read_events(events_file("lightning"))
    table = read_csv((FIXTURES / "lightning/metrics.csv").read_bytes(), [])
    assert table.header == ["epoch", "step", "train_loss", "val_loss"] and table.bad == 0
    for name in ("train_loss", "val_loss", "epoch"):
        from_csv = series(table.points, name)
        assert from_csv, name
        assert series(events.points, name) == [(s, pytest.approx(v)) for s, v in from_csv]
    assert series(table.points, "val_loss")[0] == (7, pytest.approx(0.8549166917800903))


def test_hf_events_are_named_as_its_logged_dicts() -> None:
    """HF's `train/loss`, `eval/loss` tags are trainer_state.json's `loss`, `eval_loss`."""
    events = read_events(events_file("hf"))
    state = read_trainer_state((FIXTURES / "hf/checkpoint-30/trainer_state.json").read_bytes())
    assert state.bad == 0
    for name in ("loss", "eval_loss", "learning_rate", "grad_norm"):
        from_state = series(state.points, name)
        assert from_state, name
        assert series(events.points, name) == [(s, pytest.approx(v)) for s, v in from_state]
    assert [s for s, _ in series(state.points, "loss")] == [5, 10, 15, 20, 25, 30]
    assert [s for s, _ in series(state.points, "eval_loss")] == [10, 20, 30]


def test_an_earlier_checkpoints_state_is_a_prefix() -> None:
    early = read_trainer_state((FIXTURES / "hf/checkpoint-10/trainer_state.json").read_bytes())
    late = read_trainer_state((FIXTURES / "hf/checkpoint-30/trainer_state.json").read_bytes())
    assert early.points == late.points[: len(early.points)]


@pytest.mark.parametrize("cut", [1, 11, 12, 30, 60])
def test_a_partial_record_waits_for_the_next_read(cut: int) -> None:
    data = events_file("lightning")
    whole = read_events(data)
    first = read_events(data[: len(data) - cut])
    assert first.consumed < len(data) - cut + 1 and first.skipped_records == 0
    second = read_events(data[first.consumed :])
    assert first.points + second.points == whole.points
    assert first.consumed + second.consumed == len(data)


def test_a_record_over_the_cap_is_passed_by_its_length_unread() -> None:
    good = events_file("lightning")
    huge = frame(b"\0" * (MAX_RECORD_BYTES + 1))
    # Only its header has arrived: the reader moves past it without waiting for the body.
    read = read_events(huge[:12])
    assert read.consumed == len(huge) and read.skipped_records == 1
    whole = read_events(huge + good)
    assert whole.points == read_events(good).points and whole.skipped_records == 1


def test_bad_crcs_and_garbage_are_skipped_and_the_rest_read() -> None:
    good = events_file("lightning")
    bad_body = bytearray(frame(b"not an event"))
    bad_body[14] ^= 0xFF
    garbage = b"\xff" * 1000
    read = read_events(bytes(bad_body) + garbage + good)
    assert read.points == read_events(good).points
    assert read.skipped_records == 1 and read.skipped_bytes == 1000
    assert read.consumed == len(bad_body) + len(garbage) + len(good)


def test_an_unparsable_body_with_a_good_crc_is_skipped() -> None:
    read = read_events(frame(b"\xff\xff\xff") + events_file("lightning"))
    assert read.skipped_records == 1 and read.points == read_events(events_file("lightning")).points


def test_csv_read_in_pieces_and_rewritten_with_a_wider_header() -> None:
    text = (FIXTURES / "lightning/metrics.csv").read_bytes()
    whole = read_csv(text, [])
    cut = text.index(b"\n", 40) + 5  # inside a row
    first = read_csv(text[:cut], [])
    second = read_csv(text[first.consumed :], first.header)
    assert first.points + second.points == whole.points
    rewritten = b"epoch,step,train_loss,val_loss,lr\n0,1,0.5,,0.1\n,,,0.3,\n"
    again = read_csv(rewritten, [])
    assert again.points == [("epoch", 1, 0.0), ("train_loss", 1, 0.5), ("lr", 1, 0.1)]
    assert again.bad == 1  # a row without its step is counted, not guessed


def test_broken_trainer_states_give_nothing() -> None:
    assert read_trainer_state(b'{"log_history": [').bad == 1
    odd = read_trainer_state(b'{"log_history": [{"loss": 1.0}, {"step": 3, "loss": "x"}, 7]}')
    assert odd.points == [] and odd.bad == 2


@pytest.mark.parametrize(
    ("tag", "name"),
    [
        ("train/loss", "loss"),
        ("eval/loss", "eval_loss"),
        ("train/epoch", "epoch"),
        ("val_loss", "val_loss"),
        ("Loss/train", "loss/train"),
        ("learning_rate", "learning_rate"),
    ],
)
def test_record_names(tag: str, name: str) -> None:
    assert record_name(tag) == name


def test_record_kinds() -> None:
    assert record_kind("events.out.tfevents.1796549923.vm.13087.1") == "tfevents"
    assert record_kind("metrics.csv") == "csv"
    assert record_kind("trainer_state.json") == "trainer_state"
    assert record_kind("metrics.jsonl") is None


def test_the_parser_request_round_trips() -> None:
    data = events_file("lightning")
    reply = records_reply(records_request(kind="tfevents", data=data, header=[]))
    assert reply["consumed"] == len(data)
    assert [tuple(p[:3]) for p in reply["points"]] == read_events(data).points
