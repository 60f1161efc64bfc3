"""Whether a running job's stdout arrives in bursts, counted poll by poll.

A job whose output is block-buffered (a Python that set PYTHONUNBUFFERED=0, a C++
trainer's stdio, a pipe through `tee`) reaches the log in 4 or 8 KiB blocks: records late
and bars out of step with them. The page says so (templates/monitoring/_ingest_notice.html)
with the fix. The rule is monitoring.logs.bursts; this keeps its counters on the stdout
LogFile and writes only when they change (an idle job's silent polls cost nothing).
"""

from collections.abc import Iterable

from jobs.models import Attempt
from jobs.rundir import STDOUT_FILE
from monitoring.logs.bursts import Growth, Tally
from monitoring.logs.store import Delivery, Stored
from monitoring.models import AttemptIngest, LogFile
from portal_lib.bulk import bulk_update


def bursts_count(
    attempts: Iterable[Attempt],
    files: dict[tuple[int, str], LogFile],
    deliveries: Iterable[Delivery],
    stored: Iterable[Stored],
) -> None:
    """Count this poll's stdout growth of each running attempt that was read."""
    running = {a.pk for a in attempts if not a.is_finished}
    read = {d.attempt_id for d in deliveries if d.name == STDOUT_FILE and d.attempt_id in running}
    grown = {s.log_file.attempt_id: s.data for s in stored if s.log_file.name == STDOUT_FILE}
    changed: list[LogFile] = []
    newly: list[int] = []
    for attempt_id in read:
        log_file = files.get((attempt_id, STDOUT_FILE))
        if log_file is None:
            continue
        tally = Tally.from_json(log_file.growth)
        was = tally.bursty
        data = grown.get(attempt_id, b"")
        if tally.add(Growth(len(data), data.count(b"\n"))):
            log_file.growth = tally.to_json()
            changed.append(log_file)
        if tally.bursty and not was:
            newly.append(attempt_id)
    if changed:
        bulk_update(LogFile, changed, ["growth"])
    for attempt_id in newly:
        AttemptIngest.objects.update_or_create(
            attempt_id=attempt_id, defaults={"output_in_bursts": True}
        )
