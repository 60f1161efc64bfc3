"""Retention rules: which of a job's checkpoints a rule keeps and which it would delete.

A rule is set for one job, for a project's jobs of one template, or for all of a project's
jobs; the most specific one applies (`rule_for`). It keeps the last `keep_last` checkpoints
by step and the best `keep_best` by a metric (lowest or highest); a checkpoint outside every
keep set it has is deleted, and with `older_than` only once it is older than that (a rule
with only `older_than` deletes whatever is older). The keep sets are counted over all of
the job's complete checkpoints; only those the index says may go are ever deleted (never
one a queued or running attempt resumes from, a link, a save in progress, or anything
outside its run directory).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.template.defaultfilters import filesizeformat

from jobs.models import Job
from monitoring.checkpoints.index import IndexRow
from monitoring.models import BestMode, CheckpointDeletion, CheckpointRule

MAX_NAMED = 20  # checkpoints named in one timeline entry; the rest are counted


@dataclass(frozen=True)
class Verdict:
    row: IndexRow
    delete: bool
    why: str  # why it is kept or deleted, in words


def describe(rule: CheckpointRule) -> str:
    parts = []
    if rule.keep_last is not None:
        parts.append(f"keep the last {rule.keep_last}")
    if rule.keep_best is not None:
        best = "lowest" if rule.best_mode == BestMode.MIN else "highest"
        parts.append(f"keep the best {rule.keep_best} by {rule.best_metric} ({best})")
    if rule.older_than is not None:
        parts.append(f"delete those older than {_period(rule.older_than)}")
    return ", ".join(parts) or "keep everything"


def _period(period: timedelta) -> str:
    hours = period.total_seconds() / 3600
    return f"{hours / 24:g} days" if hours >= 24 else f"{hours:g} hours"


def _last(rows: list[IndexRow], n: int) -> set[int]:
    ordered = sorted(rows, key=lambda r: (r.step, r.modified_at), reverse=True)
    return {r.id for r in ordered[:n]}


def _best(rows: list[IndexRow], rule: CheckpointRule) -> set[int]:
    scored = [
        (r.metrics[rule.best_metric], r)
        for r in rows
        if rule.best_metric in r.metrics and math.isfinite(r.metrics[rule.best_metric])
    ]
    sign = -1.0 if rule.best_mode == BestMode.MAX else 1.0
    scored.sort(key=lambda p: (sign * p[0], -(p[1].step or 0)))  # a tie: the newer one
    return {r.id for _, r in scored[: rule.keep_best or 0]}


def plan(rows: list[IndexRow], rule: CheckpointRule, *, now: datetime) -> list[Verdict]:
    """Each checkpoint with whether the rule deletes it; deletes nothing it may not."""
    ranked = [r for r in rows if r.complete and not r.link and r.step is not None]
    keeps = []
    if rule.keep_last is not None:
        keeps.append((_last(ranked, rule.keep_last), f"among the last {rule.keep_last}"))
    if rule.keep_best is not None and rule.best_metric:
        keeps.append((_best(ranked, rule), f"among the best {rule.keep_best}"))
    verdicts = []
    for row in rows:
        kept = [why for ids, why in keeps if row.id in ids]
        old = rule.older_than is None or now - row.modified_at > rule.older_than
        if row.protected:
            verdicts.append(Verdict(row, False, f"kept: {row.protected}"))
        elif kept:
            verdicts.append(Verdict(row, False, "kept: " + " and ".join(kept)))
        elif not old:
            verdicts.append(Verdict(row, False, "kept: newer than the age limit"))
        elif not keeps and rule.older_than is None:
            verdicts.append(Verdict(row, False, "kept: the rule deletes nothing"))
        else:
            verdicts.append(Verdict(row, True, f"deleted by the rule: {describe(rule)}"))
    return verdicts


def rule_for(job: Job) -> CheckpointRule | None:
    """The rule that applies to the job: its own, else its template's in its project, else
    its project's (one query)."""
    rules = CheckpointRule.objects.filter(
        Q(job_id=job.pk)
        | Q(project_id=job.project_id, job__isnull=True, template__in=[job.template, ""])
    )
    ranked = sorted(rules, key=lambda r: (r.job_id is None, r.template == ""))
    return ranked[0] if ranked else None


def _named(items: Sequence[tuple[int | None, str]]) -> str:
    """`steps 10, 20, 30` (or the names of checkpoints without a step), at most MAX_NAMED."""
    shown = [str(step) if step is not None else name for step, name in items[:MAX_NAMED]]
    more = f" and {len(items) - MAX_NAMED} more" if len(items) > MAX_NAMED else ""
    if all(step is not None for step, _ in items):
        return f"step{'s' if len(items) > 1 else ''} {', '.join(shown)}{more}"
    return ", ".join(shown) + more


def _count(n: int) -> str:
    return f"{n} checkpoint{'' if n == 1 else 's'}"


def rules_pass_note(
    *, done: list[CheckpointDeletion], kept: list[Verdict], rule: CheckpointRule, why: str = ""
) -> str:
    """One attempt's timeline entry for one pass of the rules: what went, what stayed."""
    removed = sorted((d for d in done if d.removed), key=lambda d: (d.step is None, d.step))
    failed = [d for d in done if not d.removed]
    head = f"Checkpoint rules ({why})" if why else "Checkpoint rules"
    if removed:
        freed = filesizeformat(sum(d.size for d in removed)).replace("\xa0", " ")
        items = [(d.step, d.name) for d in removed]
        text = f"{head} removed {_count(len(removed))} ({_named(items)}; {freed})"
    else:
        text = f"{head} removed no checkpoints"
    if kept:
        stay = sorted(kept, key=lambda v: (v.row.step is None, v.row.step))
        text += f", kept {len(kept)} ({_named([(v.row.step, v.row.name) for v in stay])})"
    text += f": {describe(rule)}."
    if failed:
        errors = "; ".join(f"{d.name}: {d.error or 'not removed'}" for d in failed[:MAX_NAMED])
        text += f" Not removed: {_count(len(failed))} ({errors})."
    return text
