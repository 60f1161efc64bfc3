"""Per-rank progress from the job's own bytes: heartbeat records and rank-labelled log lines."""

import json

from monitoring.hangs.heartbeats import (
    HEARTBEAT_READ,
    LOG_SCAN_BYTES,
    MAX_PAUSED,
    log_rank_steps,
    parse_heartbeat,
)

NOW = 1_700_000_100.0
# What portal_metrics.heartbeat writes (its _write_progress), cut to its 512 bytes.
RECORD = (
    b'{"v":1,"rank":1,"node":"n2","pid":4242,"step":40,"step_time":1700000050.5,'
    b'"alive":1700000090.25,"pause":null,"pause_since":null,"resumed":null}'
).ljust(511) + b"\n"


def test_a_record_of_the_helper_is_read_field_by_field() -> None:
    found = parse_heartbeat(RECORD.strip(), rank=1, now=NOW)
    assert found is not None
    assert (found.rank, found.node, found.step, found.pause) == (1, "n2", 40, "")
    assert (found.step_at, found.alive_at) == (1700000050.5, 1700000090.25)
    assert found.paused == 0.0  # a record from before declared-pause totals


def test_the_declared_pause_total_is_read_and_a_lie_about_it_is_tamed() -> None:
    record = {"rank": 1, "step": 40, "step_time": NOW - 5, "pause": None, "resumed": NOW - 6}
    found = parse_heartbeat(json.dumps({**record, "paused": 93.25}).encode(), rank=1, now=NOW)
    assert found is not None and found.paused == 93.25
    for lie in (-5, True, "90", None, 1e300):
        found = parse_heartbeat(json.dumps({**record, "paused": lie}).encode(), rank=1, now=NOW)
        assert found is not None
        assert 0.0 <= found.paused <= MAX_PAUSED
    found = parse_heartbeat(b'{"rank":1,"paused":NaN}', rank=1, now=NOW)
    assert found is not None and found.paused == 0.0


def test_torn_foreign_oversized_and_lying_records_are_ignored_or_tamed() -> None:
    assert parse_heartbeat(RECORD[:100], rank=1, now=NOW) is None  # torn mid-write
    assert parse_heartbeat(RECORD.strip(), rank=0, now=NOW) is None  # another rank's file
    assert parse_heartbeat(b"x" * (HEARTBEAT_READ + 1), rank=1, now=NOW) is None
    assert parse_heartbeat(b"[" * 1000, rank=1, now=NOW) is None  # deep nesting
    assert parse_heartbeat(b"\xff\xfe", rank=1, now=NOW) is None
    lie = json.dumps(
        {"rank": 1, "step": True, "alive": 9e99, "node": "n2; rm -rf /", "pause": "\x1b[31m" * 40}
    ).encode()
    found = parse_heartbeat(lie, rank=1, now=NOW)
    assert found is not None
    assert found.step is None and found.step_at is None  # a bool is not a step
    assert found.alive_at == NOW  # a time in the future would hide a hang forever
    assert found.node == ""  # not a node name
    assert len(found.pause) <= 64 and "\x1b" not in found.pause


def test_rank_labelled_lines_give_each_ranks_step() -> None:
    data = (
        # torchtitan's logger under torchrun (tests/corpus/metrics/torchtitan.toml).
        b"[rank0]:[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep: 10  "
        b"\x1b[32mloss:  8.12340\n"
        b"[rank3]:[titan] 2025-06-16 22:30:50,322 - root - INFO - \x1b[31mstep:  9  loss: 8.2\n"
        # srun --label, examples/ddp_train.py's line.
        b"1: step 12, loss=0.5321, samples_per_sec=812.0\n"
        b"1: step 13, loss=0.5301, samples_per_sec=815.2\n"
        # No label, a label without a step, a partial last line: nothing.
        b"step 99, loss=0.1\n"
        b"[rank2]: Traceback (most recent call last):\n"
        b"[rank5]: step 77"
    )
    assert log_rank_steps(data) == {0: 10, 3: 9, 1: 13}


def test_a_flood_of_log_bytes_is_scanned_in_its_newest_part_only() -> None:
    filler = b"[rank0]: step 1\n" * (LOG_SCAN_BYTES // 16 + 10)
    steps = log_rank_steps(filler + b"[rank1]: step 500\n")
    assert steps == {0: 1, 1: 500}
    many = b"".join(b"%d: step 1\n" % r for r in range(10_000))
    assert len(log_rank_steps(many)) <= 4096
