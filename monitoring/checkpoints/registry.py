"""The checkpoint registry: what each attempt's trainer saved, and which one a resume uses.

The agent lists `<run dir>/checkpoints` in the poll's one call while an attempt
runs and once more when it has ended. A checkpoint is complete when it is not a
temp file of a save in progress (the example trainer writes `.step-N.pt.<pid>.tmp`
and renames it) and is not empty.
"""

import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction

from clusters.agent import AgentReply, Listing, ListingEntry, ListingRead
from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import CHECKPOINT_DIR, RunDir, file_key
from monitoring.models import Checkpoint

_NUMBER = re.compile(r"\d+")
_STEP_WORD = re.compile(r"(?:step|iter|iteration|global_step|ckpt|checkpoint)[-_]?(\d+)", re.I)
_PARTIAL_SUFFIXES = (".tmp", ".partial", ".incomplete", ".lock", ".part")
# States in which a trainer may be writing checkpoints (PENDING never has).
_LISTED_STATES = frozenset({State.RUNNING, State.COMPLETING, State.UNKNOWN})


def listing_key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, CHECKPOINT_DIR)


def checkpoint_dir(attempt: Attempt) -> str:
    return RunDir(attempt.run_dir).file(CHECKPOINT_DIR)


def checkpoint_path(checkpoint: Checkpoint) -> str:
    """Where the checkpoint lies on the cluster (what PORTAL_RESUME_FROM names)."""
    return f"{checkpoint_dir(checkpoint.attempt)}/{checkpoint.name}"


def parse_step(name: str) -> int | None:
    """The training step a checkpoint's name carries: `step-200.pt`, `global_step200`, `ckpt_9`."""
    word = _STEP_WORD.search(name)
    if word:
        return int(word[1])
    numbers = _NUMBER.findall(name)
    return int(numbers[-1]) if numbers else None


def is_complete(name: str, size: int) -> bool:
    lowered = name.lower()
    return not (name.startswith(".") or lowered.endswith(_PARTIAL_SUFFIXES) or size <= 0)


def listing_requests(attempts: list[Attempt]) -> list[ListingRead]:
    return [
        ListingRead(key=listing_key(a), path=checkpoint_dir(a))
        for a in attempts
        if a.run_dir and (a.state in _LISTED_STATES or (a.is_finished and not a.files_complete))
    ]


def _row(attempt: Attempt, entry: ListingEntry) -> Checkpoint:
    return Checkpoint(
        attempt=attempt,
        name=entry.name,
        step=parse_step(entry.name),
        size=entry.size,
        modified_at=datetime.fromtimestamp(entry.mtime, tz=UTC),
        is_dir=entry.is_dir,
        complete=is_complete(entry.name, entry.size),
    )


def _values(c: Checkpoint) -> tuple[object, ...]:
    return (c.step, c.size, c.modified_at, c.is_dir, c.complete)


def checkpoints_ingest(attempts: list[Attempt], reply: AgentReply) -> None:
    """Make each attempt's rows what its directory holds now (the trainer deletes old ones).

    Part of the poll: one read for all attempts, and writes only for what changed.
    """
    listings: dict[Attempt, Listing] = {}
    for attempt in attempts:
        listing = reply.listings.get(listing_key(attempt))
        # "not found": no checkpoint yet; another error: unreadable now, keep what we knew.
        if listing is not None and listing.error in (None, "not found"):
            listings[attempt] = listing
    if not listings:
        return
    known: dict[int, dict[str, Checkpoint]] = defaultdict(dict)
    for c in Checkpoint.objects.filter(attempt__in=list(listings)).only(
        "attempt_id", "name", "step", "size", "modified_at", "is_dir", "complete"
    ):
        known[c.attempt_id][c.name] = c
    changed: list[Checkpoint] = []
    gone: list[int] = []
    for attempt, listing in listings.items():
        before = known[attempt.pk]
        seen = set()
        for entry in listing.entries if listing.error is None else ():
            row = _row(attempt, entry)
            seen.add(entry.name)
            old = before.get(entry.name)
            if old is None or _values(old) != _values(row):
                changed.append(row)
        if not listing.truncated:
            gone.extend(c.pk for name, c in before.items() if name not in seen)
    if not changed and not gone:
        return
    with transaction.atomic():
        if changed:
            Checkpoint.objects.bulk_create(
                changed,
                update_conflicts=True,
                unique_fields=["attempt", "name"],
                update_fields=["step", "size", "modified_at", "is_dir", "complete"],
            )
        if gone:
            Checkpoint.objects.filter(pk__in=gone).delete()


@dataclass(frozen=True)
class CheckpointRow:
    attempt: int
    name: str
    step: int | None
    size: int
    modified_at: datetime
    complete: bool
    path: str
    resume: bool  # the one a restart would resume from


def latest_complete(*, job_id: int) -> Checkpoint | None:
    """The checkpoint a resume uses: the highest step of any attempt of the job, complete."""
    return (
        Checkpoint.objects.filter(attempt__job_id=job_id, complete=True, step__isnull=False)
        .select_related("attempt")
        .order_by("-step", "-attempt__number", "-modified_at")
        .first()
    )


def job_checkpoints(*, job_id: int) -> list[CheckpointRow]:
    """Every checkpoint of the job, newest step first, the resume candidate marked (1 query)."""
    rows = list(
        Checkpoint.objects.filter(attempt__job_id=job_id)
        .select_related("attempt")
        .order_by("-step", "-attempt__number", "name")
    )
    candidates = [c for c in rows if c.complete and c.step is not None]
    chosen = candidates[0].pk if candidates else None
    return [
        CheckpointRow(
            attempt=c.attempt.number,
            name=c.name,
            step=c.step,
            size=c.size,
            modified_at=c.modified_at,
            complete=c.complete,
            path=checkpoint_path(c),
            resume=c.pk == chosen,
        )
        for c in rows
    ]
