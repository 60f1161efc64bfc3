"""The checkpoint registry: what each attempt's trainer saved, and which one a resume uses.

The agent lists `<run dir>/checkpoints` (PORTAL_CHECKPOINT_DIR) in the poll's one call
while an attempt runs and once more when it has ended, and finds the checkpoints trainers
write in the command's working directory at the record finds' pace
(`monitoring.records.cadence`): Hugging Face's `checkpoint-N/` directories under
its output directory, Lightning's `.ckpt` files, DeepSpeed's `global_stepN/`. Sizes are
what `du -sb` counts (the agent's `tree_size`); links are listed, never followed.

A checkpoint is complete when its save has ended: not a temp file of a save in progress
(the example trainer writes `.step-N.pt.<pid>.tmp` and renames it), not empty, not a link,
unchanged for SETTLE_SECONDS by the cluster's clock or its attempt ended (a file written in
place, as `torch.save` to its final name or a copy across filesystems does, grows under
its name: a directory's time is the newest in its tree); a Hugging Face `checkpoint-N/` once it
holds `trainer_state.json` (written after the weights, optimizer and RNG states), a
distributed checkpoint directory (its `__0_0.distcp` shard) once it holds `.metadata`
(written last).
"""

import posixpath
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import transaction

from clusters.agent import AgentReply, Listing, ListingEntry, ListingRead
from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import CHECKPOINT_DIR, RunDir, file_key
from monitoring.models import Checkpoint, RecordSearch
from monitoring.records.cadence import search_due

_NUMBER = re.compile(r"\d+")
_STEP_WORD = re.compile(r"(?:step|iter|iteration|global_step|ckpt|checkpoint)[-_=]?(\d+)", re.I)
_HF_DIR = re.compile(r"^checkpoint-\d+$")
_PARTIAL_SUFFIXES = (".tmp", ".partial", ".incomplete", ".lock", ".part")
_PARTIAL_PREFIXES = (".", "tmp-", "tmp_")  # hidden temp files, HF's staging `tmp-checkpoint-N`
# States in which a trainer may be writing checkpoints (PENDING never has).
_LISTED_STATES = frozenset({State.RUNNING, State.COMPLETING, State.UNKNOWN})
# What a find in the working directory looks for: files, and directories it does not enter.
FOUND_FILES = ("*.ckpt", "checkpoint*.pt", "checkpoint*.pth", "*step*.pt", "*step*.pth")
FOUND_DIRS = ("checkpoint-*", "tmp-checkpoint-*", "global_step*", "step-*", "step_*")
FIND_DEPTH = 5
FIND_VISITS = 2000
HF_STATE = "trainer_state.json"
SETTLE_SECONDS = 5.0
DCP_METADATA, DCP_SHARD = ".metadata", "__0_0.distcp"


def listing_key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, CHECKPOINT_DIR)


def found_key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, f"{CHECKPOINT_DIR}/found")


def checkpoint_dir(attempt: Attempt) -> str:
    return RunDir(attempt.run_dir).file(CHECKPOINT_DIR)


def checkpoint_path(checkpoint: Checkpoint) -> str:
    """Where the checkpoint lies on the cluster (what PORTAL_RESUME_FROM names)."""
    return checkpoint.path or f"{checkpoint_dir(checkpoint.attempt)}/{checkpoint.name}"


def parse_step(name: str) -> int | None:
    """The training step a checkpoint's name carries: `step-200.pt`, `global_step200`,
    `checkpoint-40/`, Lightning's `epoch=0-step=50.ckpt`."""
    name = posixpath.basename(name.rstrip("/"))
    word = _STEP_WORD.search(name)
    if word:
        return int(word[1])
    numbers = _NUMBER.findall(name)
    return int(numbers[-1]) if numbers else None


def is_complete(entry: ListingEntry, *, settled: bool = True) -> bool:
    """`settled`: unchanged for SETTLE_SECONDS, or nothing writes any more."""
    name = posixpath.basename(entry.name)
    lowered = name.lower()
    if not settled or entry.link or entry.size <= 0 or lowered.endswith(_PARTIAL_SUFFIXES):
        return False
    if lowered.startswith(_PARTIAL_PREFIXES):
        return False
    if entry.is_dir and _HF_DIR.match(name):
        return HF_STATE in entry.marks
    if entry.is_dir and DCP_SHARD in entry.marks:
        return DCP_METADATA in entry.marks
    return True


def listing_requests(attempts: list[Attempt]) -> list[ListingRead]:
    listed = [
        a
        for a in attempts
        if a.run_dir and (a.state in _LISTED_STATES or (a.is_finished and not a.files_complete))
    ]
    reads = [ListingRead(key=listing_key(a), path=checkpoint_dir(a)) for a in listed]
    searches = {
        s.attempt_id: s for s in RecordSearch.objects.filter(attempt__in=listed).exclude(workdir="")
    }
    now = datetime.now(tz=UTC).timestamp()
    for attempt in listed:
        search = searches.get(attempt.pk)
        if search is None or attempt.started_at is None:
            continue
        since = attempt.started_at.timestamp()
        due = search_due(
            finished=attempt.is_finished,
            final=search.final,
            searched_at=search.searched_at,
            since=since,
            now=now,
        )
        if due:
            reads.append(
                ListingRead(
                    key=found_key(attempt),
                    path=search.workdir,
                    patterns=FOUND_FILES,
                    dirs=FOUND_DIRS,
                    since=since,
                    depth=FIND_DEPTH,
                    visits=FIND_VISITS,
                )
            )
    return reads


def _row(attempt: Attempt, entry: ListingEntry, path: str, now: float) -> Checkpoint:
    settled = attempt.is_finished or now - entry.mtime >= SETTLE_SECONDS
    return Checkpoint(
        attempt=attempt,
        name=entry.name,
        path=path,
        step=parse_step(entry.name),
        size=entry.size,
        size_exact=entry.exact,
        modified_at=datetime.fromtimestamp(entry.mtime, tz=UTC),
        is_dir=entry.is_dir,
        link=entry.link,
        complete=is_complete(entry, settled=settled),
    )


_FIELDS = ["path", "step", "size", "size_exact", "modified_at", "is_dir", "link", "complete"]


def _values(c: Checkpoint) -> tuple[object, ...]:
    return tuple(getattr(c, f) for f in _FIELDS)


def _usable(listing: Listing | None) -> bool:
    # "not found": no checkpoint yet; another error: unreadable now, keep what we knew.
    return listing is not None and listing.error in (None, "not found")


def _entries(
    attempt: Attempt, reply: AgentReply, workdir: str
) -> dict[bool, tuple[Listing, dict[str, str]]]:
    """Per origin (True: the checkpoint directory, False: found in the working directory),
    the listing this reply holds and each entry's path on the cluster."""
    out: dict[bool, tuple[Listing, dict[str, str]]] = {}
    directory = checkpoint_dir(attempt)
    listed = reply.listings.get(listing_key(attempt))
    if listed is not None and _usable(listed):
        out[True] = (listed, {e.name: f"{directory}/{e.name}" for e in listed.entries})
    found = reply.listings.get(found_key(attempt))
    if found is not None and _usable(found) and workdir:
        root = workdir.rstrip("/")
        paths = {e.name: f"{root}/{e.name}" for e in found.entries}
        # The checkpoint directory's entries are its listing's, whatever the find saw.
        out[False] = (found, {n: p for n, p in paths.items() if not p.startswith(directory + "/")})
    return out


def _from_directory(attempt: Attempt, checkpoint: Checkpoint) -> bool:
    return not checkpoint.path or checkpoint.path.startswith(checkpoint_dir(attempt) + "/")


def checkpoints_ingest(attempts: list[Attempt], reply: AgentReply) -> None:
    """Make each attempt's rows what its directories hold now (trainers delete old ones).

    Part of the poll: one read for all attempts, and writes only for what changed.
    """
    workdirs: dict[int, str] = {}
    if any(found_key(a) in reply.listings for a in attempts):
        workdirs = dict(
            RecordSearch.objects.filter(attempt__in=attempts).values_list("attempt_id", "workdir")
        )
    listings = {a: _entries(a, reply, workdirs.get(a.pk, "")) for a in attempts}
    listings = {a: found for a, found in listings.items() if found}
    if not listings:
        return
    known: dict[int, dict[str, Checkpoint]] = defaultdict(dict)
    for c in Checkpoint.objects.filter(attempt__in=list(listings)).only(
        "attempt_id", "name", *_FIELDS
    ):
        known[c.attempt_id][c.name] = c
    changed: list[Checkpoint] = []
    gone: list[int] = []
    for attempt, origins in listings.items():
        before = known[attempt.pk]
        for origin, (listing, paths) in origins.items():
            seen = set()
            for entry in listing.entries if listing.error is None else ():
                if entry.name not in paths or (not origin and entry.name in seen):
                    continue
                old = before.get(entry.name)
                if not origin and old is not None and _from_directory(attempt, old):
                    continue  # a name the checkpoint directory has too: its entry wins
                row = _row(attempt, entry, paths[entry.name], reply.time)
                seen.add(entry.name)
                if old is None or _values(old) != _values(row):
                    changed.append(row)
            if not listing.truncated:
                gone.extend(
                    c.pk
                    for name, c in before.items()
                    if name not in seen and _from_directory(attempt, c) == origin
                )
    if not changed and not gone:
        return
    with transaction.atomic():
        if changed:
            Checkpoint.objects.bulk_create(
                changed,
                update_conflicts=True,
                unique_fields=["attempt", "name"],
                update_fields=_FIELDS,
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
