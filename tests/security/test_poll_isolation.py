"""One attempt's hostile output costs that attempt only: bytes kept, parse skipped, others on time.

Attack (issue 13): a job printed `step` and 64k spaces; the built-in step pattern
takes about a minute on it, the poll rolled back and read the same bytes again,
forever, and no account after it was polled.
"""

import pytest

from jobs.enums import State
from jobs.models import Attempt
from monitoring.ingest import budget as parse_budget
from monitoring.ingest.budget import ParseFailed, ParseTimeout, parse_groups, parse_within
from monitoring.logs.store import log_read
from monitoring.models import AttemptIngest, LogFile
from monitoring.series.read import series_read
from tests import factories
from tests.helpers import store_log
from tests.security.beside import (
    assert_bystander_whole,
    assert_log_exact,
    bystander_is_read_while_it_runs,
    hostile_attempt,
    submit_beside,
)
from tests.security.ingest_helpers import ingest, reply_with, running

SPACES = b"step" + b" " * 65536 + b"\n"  # the attack, verbatim
# Output that takes far longer to read than the budgets below (0.2-0.3 s), by volume: the
# built-in reader is linear, so no single line is slow any more; 40,000 lines take
# seconds even on an idle machine.
SLOW = b"".join(b"step %d loss=0.5 lr=3e-4 tokens_per_sec=5,856\n" % i for i in range(40_000))
GOOD = b"".join(b"step %d loss=%.3f\n" % (i, 1 / i) for i in range(1, 11))


@pytest.fixture
def two_tenants(db: None, project, owner, member, cluster) -> tuple[Attempt, Attempt]:
    _, hostile = factories.job(project, owner, cluster, name="hostile")
    _, other = factories.job(project, member, cluster, name="bystander")
    return running(hostile), running(other)


def _stored(attempt: Attempt) -> bytes:
    return log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=1 << 24).data


def test_a_64k_space_line_is_stored_not_parsed_and_the_other_job_is_read(two_tenants) -> None:
    hostile, other = two_tenants
    ingest(
        [hostile, other],
        reply_with({hostile: {"stdout.log": SPACES + GOOD}, other: {"stdout.log": GOOD}}),
    )
    assert _stored(hostile) == SPACES + GOOD and _stored(other) == GOOD
    # The long line is skipped and counted; the good lines after it still give points.
    assert series_read(attempt_id=hostile.pk, name="loss").xs == [float(i) for i in range(1, 11)]
    assert series_read(attempt_id=other.pk, name="loss").xs == [float(i) for i in range(1, 11)]
    assert AttemptIngest.objects.get(attempt=hostile).skipped_lines == 1


def test_lines_over_the_budget_are_skipped_once_and_never_read_again(two_tenants, settings) -> None:
    settings.INGEST_PARSE_BUDGET = 0.3
    hostile, other = two_tenants
    ingest(
        [hostile, other], reply_with({hostile: {"stdout.log": SLOW}, other: {"stdout.log": GOOD}})
    )
    note = AttemptIngest.objects.get(attempt=hostile)
    assert note.over_budget == 1 and note.skipped_bytes == len(SLOW)
    log_file = LogFile.objects.get(attempt=hostile, name="stdout.log")
    assert log_file.size == log_file.parsed_to == len(SLOW)  # offsets agree: nothing to re-read
    assert series_read(attempt_id=other.pk, name="loss").total == 10

    # The next poll brings only new bytes; they are parsed (the old ones are not again).
    ingest([hostile], reply_with({hostile: {"stdout.log": GOOD}}))
    assert series_read(attempt_id=hostile.pk, name="loss").total == 10
    assert _stored(hostile) == SLOW + GOOD
    assert AttemptIngest.objects.get(attempt=hostile).over_budget == 1


def test_repeatedly_over_budget_the_attempt_stops_being_parsed(two_tenants, settings) -> None:
    settings.INGEST_PARSE_BUDGET = 0.2
    hostile, other = two_tenants
    for _ in range(3):
        ingest([hostile], reply_with({hostile: {"stdout.log": SLOW}}))
    ingest(
        [hostile, other], reply_with({hostile: {"stdout.log": GOOD}, other: {"stdout.log": GOOD}})
    )
    note = AttemptIngest.objects.get(attempt=hostile)
    assert note.metrics_stopped and note.over_budget == 3
    assert _stored(hostile) == SLOW * 3 + GOOD  # the log keeps everything
    assert series_read(attempt_id=hostile.pk, name="loss").total == 0
    assert series_read(attempt_id=other.pk, name="loss").total == 10


def test_a_gap_in_parsing_resumes_at_the_next_whole_line(two_tenants) -> None:
    hostile, _ = two_tenants
    ingest([hostile], reply_with({hostile: {"stdout.log": b"step 1 loss=0.5\nstep 2 lo"}}))
    # Bytes stored by a poll that died before parsing them: parsed_to stays behind.
    LogFile.objects.filter(attempt=hostile, name="stdout.log").update(size=40)
    ingest([hostile], reply_with({hostile: {"stdout.log": b"ss=0.25\nstep 3 loss=0.125\n"}}))
    loss = series_read(attempt_id=hostile.pk, name="loss")
    assert loss.xs == [1.0, 3.0]  # never a number made of two lines' pieces


def test_bytes_a_killed_poll_stored_unparsed_are_parsed_by_the_next(two_tenants) -> None:
    hostile, _ = two_tenants
    ingest([hostile], reply_with({hostile: {"stdout.log": b"step 1 loss=0.5\nstep 2 lo"}}))
    store_log(hostile, b"ss=0.25\nstep 3 loss=0.125\n")  # then its worker was killed -9
    ingest([hostile], reply_with({hostile: {"stdout.log": b"step 4 loss=0.0625\n"}}))
    loss = series_read(attempt_id=hostile.pk, name="loss")
    assert (loss.xs, loss.ys) == ([1.0, 2.0, 3.0, 4.0], [0.5, 0.25, 0.125, 0.0625])
    # The last poll of an ended job died: the next one brings no byte, and parses them.
    store_log(hostile, b"step 5 loss=0.03125\n")
    Attempt.objects.filter(pk=hostile.pk).update(state=State.COMPLETED)
    ingest([Attempt.objects.get(pk=hostile.pk)], reply_with({}))
    assert series_read(attempt_id=hostile.pk, name="loss").xs == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert AttemptIngest.objects.get(attempt=hostile).skipped_bytes == 0


def test_the_parser_process_is_killed_past_its_budget_and_comes_back() -> None:
    with pytest.raises(ParseTimeout):
        parse_within({"kind": "stdout", "lines": SLOW.decode().splitlines()}, 0.2)
    reply = parse_within({"kind": "stdout", "lines": ["step 7 loss=0.5"]}, 30.0)
    assert reply["points"] == [["loss", 7, 0.5, None]]


def _stdout(text: str) -> dict[str, object]:
    return {"kind": "stdout", "lines": text.splitlines()}


def test_one_attempt_over_budget_in_a_poll_costs_only_its_own_requests() -> None:
    good = _stdout("step 7 loss=0.5")
    outcomes = parse_groups(
        [[good], [_stdout(SLOW.decode()), good], [good, {"kind": "nonsense"}], [good]], 0.3
    )
    # The slow attempt's requests time out (its second is never read); the process
    # killed for it is replaced and the attempts after it are parsed, in order.
    assert all(isinstance(o, ParseTimeout) for o in outcomes[1])
    assert isinstance(outcomes[2][1], ParseFailed)  # an error reply fails that request only
    for outcome in (outcomes[0][0], outcomes[2][0], outcomes[3][0]):
        assert not isinstance(outcome, Exception) and outcome["points"] == [["loss", 7, 0.5, None]]


def test_a_poll_larger_than_a_frame_is_sent_in_several(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parse_budget, "MAX_BATCH_BYTES", 200)
    groups = [[_stdout(f"step {i} loss=0.5"), _stdout(f"step {i} acc=0.25")] for i in range(30)]
    outcomes = parse_groups(groups, 30.0)
    assert [[o["points"] for o in g] for g in outcomes] == [  # type: ignore[index]
        [[["loss", i, 0.5, None]], [["acc", i, 0.25, None]]] for i in range(30)
    ]


# --- on the sandbox: the job does it from inside --------------------------------------------

HOSTILE = """python3 - <<'PY'
import sys, time
for round in range(6):
    sys.stdout.write("step" + " " * 65536 + "\\n")
    sys.stdout.write(("step" + " " * 4000 + "\\n") * 40)
    sys.stdout.flush()
    time.sleep(0.5)
print("step 1 loss=0.5", flush=True)
PY"""


@pytest.mark.sandbox
def test_a_job_printing_pathological_lines_costs_only_itself(
    celery_worker, researcher, project, sandbox_cluster, settings
) -> None:
    pair = submit_beside(researcher, project, sandbox_cluster, HOSTILE)
    bystander_is_read_while_it_runs(pair)
    assert_bystander_whole(pair)
    attempt = hostile_attempt(pair)
    assert_log_exact(attempt)  # every byte of the attack is kept
    note = AttemptIngest.objects.get(attempt=attempt)
    assert note.skipped_lines >= 6  # the 64 KiB lines: stored, never read for metrics
    log_file = LogFile.objects.get(attempt=attempt, name="stdout.log")
    assert log_file.parsed_to == log_file.size  # read once, to the end, not again
