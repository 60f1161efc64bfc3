"""The index of a job's checkpoints: each with its step, time, size and the job's metrics at
that step, and whether it may be deleted (and if not, why).

A checkpoint's metrics are its attempt's stored series (`monitoring.series`) at its step:
the last point at or before the step and after the attempt's checkpoint before it, so an
evaluation run every 40 steps is not shown again on the checkpoint at step 60. Names are
the loss and evaluation-like series (`is_checkpoint_metric`), plus any the caller asks for.
"""

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Q

from jobs.enums import FINAL_STATES
from jobs.models import Attempt
from jobs.rundir import gpu_series
from monitoring.checkpoints.chosen import Saved, line_point
from monitoring.checkpoints.registry import checkpoint_path
from monitoring.models import Checkpoint
from monitoring.series.read import series_names, series_read

_METRIC = re.compile(r"loss|^eval|^val|^test|acc|perplex|ppl|f1|bleu|rouge|score|reward", re.I)
MAX_METRICS = 8  # series per attempt shown beside its checkpoints
MAX_POINTS = 20000  # of one series read for the index (larger ones are downsampled)

PROTECTED_RESUME = "a queued or running attempt resumes from it"
PROTECTED_LINK = "a symbolic link the job made: never followed or deleted"
PROTECTED_OUTSIDE = "outside the attempt's run directory"
PROTECTED_WRITING = "not complete: a save in progress, or empty"


@dataclass(frozen=True)
class IndexRow:
    id: int
    attempt_id: int
    attempt: int  # its number in the job
    run_dir: str
    name: str
    path: str
    step: int | None
    modified_at: datetime
    size: int
    size_exact: bool
    is_dir: bool
    complete: bool
    link: bool
    metrics: dict[str, float] = field(default_factory=dict)
    resume: bool = False  # what an automatic restart would resume from now
    protected: str = ""  # why it may not be deleted; empty if it may

    @property
    def relative(self) -> str:
        """Its path from the run directory (what the remover is given)."""
        return self.path[len(self.run_dir.rstrip("/")) + 1 :]


def is_checkpoint_metric(name: str) -> bool:
    return gpu_series(name) is None and bool(_METRIC.search(name))


def inside(path: str, run_dir: str) -> bool:
    root = run_dir.rstrip("/")
    return bool(root) and path.startswith(root + "/") and "/../" not in path[len(root) :]


def resumed_from(paths: Iterable[str], run_dirs: Iterable[str]) -> set[str]:
    """Those of `paths` a queued or running attempt (of any job: a fork's too) resumes from."""
    roots = [r.rstrip("/") + "/" for r in run_dirs if r]
    if not roots:
        return set()
    near = Q()
    for root in roots:
        near |= Q(resume_from__startswith=root)
    resumes = set(
        Attempt.objects.exclude(state__in=FINAL_STATES)
        .filter(near)
        .values_list("resume_from", flat=True)
    )
    return {p for p in paths if any(r == p or r.startswith(p + "/") for r in resumes)}


def _metric_names(attempt_ids: set[int], wanted: Iterable[str]) -> dict[int, list[str]]:
    extra = [n for n in wanted if n]
    names = {}
    for attempt_id in attempt_ids:
        have = series_names(attempt_id=attempt_id)
        chosen = [n for n in have if is_checkpoint_metric(n)][:MAX_METRICS]
        names[attempt_id] = chosen + [n for n in extra if n in have and n not in chosen]
    return names


def _metrics_at(rows: list[Checkpoint], names: dict[int, list[str]]) -> dict[int, dict[str, float]]:
    by_attempt: dict[int, list[tuple[int, int]]] = defaultdict(list)  # (checkpoint, step)
    for c in rows:
        if c.step is not None:
            by_attempt[c.attempt_id].append((c.pk, c.step))
    found: dict[int, dict[str, float]] = defaultdict(dict)
    for attempt_id, saved in by_attempt.items():
        steps = sorted({step for _, step in saved})
        for name in names.get(attempt_id, []):
            data = series_read(
                attempt_id=attempt_id, name=name, x_to=float(steps[-1]), max_points=MAX_POINTS
            )
            for pk, step in saved:
                before = bisect.bisect_left(steps, step)
                floor = float(steps[before - 1]) if before else float("-inf")
                at = bisect.bisect_right(data.xs, float(step)) - 1
                if at >= 0 and data.xs[at] > floor:
                    found[pk][name] = data.ys[at]
    return found


def checkpoint_index(*, job_id: int, metrics: Iterable[str] = ()) -> list[IndexRow]:
    """Every checkpoint of the job, newest step first, with its metrics and protection."""
    rows = list(
        Checkpoint.objects.filter(attempt__job_id=job_id)
        .select_related("attempt")
        .order_by("-step", "-attempt__number", "-modified_at", "name")
    )
    paths = {c.pk: checkpoint_path(c) for c in rows}
    resumed = resumed_from(paths.values(), {c.attempt.run_dir for c in rows})
    values = _metrics_at(rows, _metric_names({c.attempt_id for c in rows}, metrics))
    # Where a restart would resume: the latest attempt's own line, as the job page says
    # (after a resume by hand or a fork, not always the job's newest checkpoint).
    saved = [
        Saved(c.attempt.number, c.step, paths[c.pk])
        for c in rows
        if c.complete and c.step is not None
    ]
    latest_attempt = Attempt.objects.filter(job_id=job_id).order_by("-number").first()
    line, _ = line_point(attempt=latest_attempt, saved=saved) if latest_attempt else ("", None)
    out = []
    for c in rows:
        path = paths[c.pk]
        if path in resumed:
            why = PROTECTED_RESUME
        elif c.link:
            why = PROTECTED_LINK
        elif not inside(path, c.attempt.run_dir):
            why = PROTECTED_OUTSIDE
        elif not c.complete:
            why = PROTECTED_WRITING
        else:
            why = ""
        out.append(
            IndexRow(
                id=c.pk,
                attempt_id=c.attempt_id,
                attempt=c.attempt.number,
                run_dir=c.attempt.run_dir,
                name=c.name,
                path=path,
                step=c.step,
                modified_at=c.modified_at,
                size=c.size,
                size_exact=c.size_exact,
                is_dir=c.is_dir,
                complete=c.complete,
                link=c.link,
                metrics=values.get(c.pk, {}),
                resume=bool(line) and paths[c.pk] == line,
                protected=why,
            )
        )
    return out
