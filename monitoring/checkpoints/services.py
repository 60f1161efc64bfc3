"""Deleting checkpoints (by hand or by a rule), and setting the rules.

Deletion runs `clusters.agent.checkpoint_remove` over the job's own account's connection,
once per attempt, with names relative to that attempt's run directory; it never holds a
transaction open across the SSH call. Protection is read again just before (the index),
so a checkpoint an attempt was queued to resume from since the preview stays. Every
checkpoint tried is recorded (`CheckpointDeletion`), removed or not.
"""

import logging
from collections import defaultdict
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from clusters.agent.removal import Removal, remove_on_cluster
from clusters.errors import ClusterError
from clusters.selectors import account_endpoint
from clusters.ssh import pool
from jobs.access import can_cancel
from jobs.errors import JobError, JobPermissionRefused
from jobs.models import Attempt, Job
from jobs.states import attempt_note
from monitoring.checkpoints.index import IndexRow, checkpoint_index
from monitoring.checkpoints.retention import describe, plan, rule_for, rules_pass_note
from monitoring.models import BestMode, Checkpoint, CheckpointDeletion, CheckpointRule
from projects.access import owns
from projects.models import Project

logger = logging.getLogger(__name__)


def _remove(attempt: Attempt, rows: list[IndexRow]) -> dict[int, Removal]:
    if attempt.account is None:
        return {r.id: Removal(False, 0, "no cluster account to act as") for r in rows}
    try:
        with pool.session(account_endpoint(account=attempt.account)) as connection:
            done = remove_on_cluster(
                connection, root=attempt.run_dir, names=[r.relative for r in rows]
            )
    except ClusterError as exc:
        logger.warning("checkpoints of attempt %s not removed: %s", attempt.pk, exc)
        return {r.id: Removal(False, 0, str(exc)[:500]) for r in rows}
    return {r.id: done.get(r.relative, Removal(False, 0, "no answer")) for r in rows}


def _require_deleter(user: User | None, job: Job) -> None:
    """A person acting (not the periodic task) must be the job's submitter or a project owner."""
    if user is not None and not can_cancel(user=user, job=job):
        raise JobPermissionRefused(
            "Only the job's submitter or a project owner can delete its checkpoints."
        )


def checkpoints_delete(
    *, job: Job, ids: list[int], reason: str, user: User | None = None
) -> list[CheckpointDeletion]:
    """Delete these checkpoints of the job on the cluster; refuses any that may not go."""
    _require_deleter(user, job)
    rows = [r for r in checkpoint_index(job_id=job.pk) if r.id in set(ids)]
    if len(rows) != len(set(ids)):
        raise JobError("Some of these checkpoints are no longer listed: reload the page.")
    refused = [f"{r.name} ({r.protected})" for r in rows if r.protected]
    if refused:
        raise JobError("Not deleted: " + "; ".join(refused) + ".")
    by_attempt: dict[int, list[IndexRow]] = defaultdict(list)
    for row in rows:
        by_attempt[row.attempt_id].append(row)
    attempts = Attempt.objects.select_related("account__cluster").in_bulk(list(by_attempt))
    outcome: dict[int, Removal] = {}
    for attempt_id, group in by_attempt.items():
        outcome.update(_remove(attempts[attempt_id], group))
    now = timezone.now()
    records = [
        CheckpointDeletion(
            job=job,
            attempt_id=r.attempt_id,
            name=r.name,
            path=r.path,
            step=r.step,
            size=outcome[r.id].bytes,
            metrics=r.metrics,
            reason=reason[:500],
            user=user,
            removed=outcome[r.id].removed,
            error=(outcome[r.id].error or "")[:500],
            at=now,
        )
        for r in rows
    ]
    gone = [r.id for r in rows if outcome[r.id].removed or outcome[r.id].error == "not found"]
    with transaction.atomic():
        CheckpointDeletion.objects.bulk_create(records)
        Checkpoint.objects.filter(pk__in=gone).delete()
    return records


def retention_apply(
    *, job: Job, rule: CheckpointRule | None = None, why: str = "", user: User | None = None
) -> list[CheckpointDeletion]:
    """Apply `rule` (else the rule in effect for the job) now: delete what its preview would."""
    _require_deleter(user, job)
    rule = rule or rule_for(job)
    if rule is None:
        return []
    rows = checkpoint_index(job_id=job.pk, metrics=[rule.best_metric])
    verdicts = plan(rows, rule, now=timezone.now())
    doomed = [v.row.id for v in verdicts if v.delete]
    if not doomed:
        return []
    reason = f"{why or 'retention rule'}: {describe(rule)}"
    done = checkpoints_delete(job=job, ids=doomed, reason=reason, user=user)
    # One timeline entry per attempt for the pass, not one per checkpoint.
    by_attempt: dict[int, list[CheckpointDeletion]] = defaultdict(list)
    for record in done:
        by_attempt[record.attempt_id].append(record)
    for attempt in Attempt.objects.filter(pk__in=list(by_attempt)).order_by("number"):
        kept = [v for v in verdicts if not v.delete and v.row.attempt_id == attempt.pk]
        note = rules_pass_note(done=by_attempt[attempt.pk], kept=kept, rule=rule, why=why)
        attempt_note(attempt=attempt, reason=note)
    return done


def _require_rule_setter(*, user: User, project: Project, job: Job | None) -> None:
    if job is not None and can_cancel(user=user, job=job):
        return
    if job is None and owns(user=user, project_id=project.pk):
        return
    raise JobPermissionRefused(
        "Only the job's submitter or a project owner can set its checkpoint rule."
        if job is not None
        else "Only a project owner can set the project's checkpoint rules."
    )


def checkpoint_rule_save(
    *,
    user: User,
    project: Project,
    job: Job | None = None,
    template: str = "",
    keep_last: int | None = None,
    keep_best: int | None = None,
    best_metric: str = "",
    best_mode: str = BestMode.MIN,
    older_than: timedelta | None = None,
    quota_bytes: int | None = None,
) -> CheckpointRule | None:
    """Set (or, with nothing to keep or delete and no quota, clear) the rule of one scope."""
    _require_rule_setter(user=user, project=project, job=job)
    errors: dict[str, list[str]] = {}
    if keep_best is not None and not best_metric:
        errors["best_metric"] = ["Name the metric that ranks the best checkpoints."]
    if best_mode not in BestMode.values:
        errors["best_mode"] = ["Choose min (lowest is best) or max (highest is best)."]
    if quota_bytes is not None and (job is not None or template):
        errors["quota_bytes"] = ["A storage quota is set on the project's own rule."]
    for name, value in (("keep_last", keep_last), ("keep_best", keep_best)):
        if value is not None and value < 1:
            errors[name] = ["Keep at least one, or leave it empty."]
    if older_than is not None and older_than <= timedelta(0):
        errors["older_than"] = ["Give a period longer than zero, or leave it empty."]
    if errors:
        raise JobError("The checkpoint rule needs changes: see the fields.", errors=errors)
    template = "" if job else template
    if keep_last is None and keep_best is None and older_than is None and quota_bytes is None:
        CheckpointRule.objects.filter(project=project, job=job, template=template).delete()
        return None
    rule, _ = CheckpointRule.objects.update_or_create(
        project=project,
        job=job,
        template=template,
        defaults={
            "keep_last": keep_last,
            "keep_best": keep_best,
            "best_metric": best_metric if keep_best is not None else "",
            "best_mode": best_mode,
            "older_than": older_than,
            "quota_bytes": quota_bytes,
            "updated_by": user,
        },
    )
    return rule
