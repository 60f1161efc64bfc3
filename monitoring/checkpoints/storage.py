"""Checkpoint storage per job and project, the project's optional quota, and the periodic
application of retention rules.

The figures are the sizes the agent listed (what `du -sb` counts on the cluster) of every
checkpoint the index holds, links at their own size. A project's quota lives on its
project-wide rule: at WARN_FRACTION of it the project page warns, and over it the sweep
applies the project's rule to each of its jobs (a job's own or template rule does not
stand in the way: the quota is the project's).
"""

import logging
from dataclasses import dataclass

from django.db.models import Q, Sum

from jobs.models import Job
from monitoring.checkpoints.services import retention_apply
from monitoring.models import Checkpoint, CheckpointRule
from projects.models import Project

logger = logging.getLogger(__name__)

WARN_FRACTION = 0.9
MAX_JOBS_PER_SWEEP = 500


@dataclass(frozen=True)
class ProjectStorage:
    used: int  # bytes of every checkpoint of the project's jobs
    quota: int | None
    by_job: list[tuple[Job, int]]  # the jobs holding any, largest first
    rules: list[CheckpointRule]  # the project's own and its templates' rules

    @property
    def state(self) -> str:
        """'ok', 'warn' (near the quota) or 'over'."""
        if self.quota is None:
            return "ok"
        if self.used > self.quota:
            return "over"
        return "warn" if self.used >= WARN_FRACTION * self.quota else "ok"


def job_checkpoint_bytes(*, job_ids: list[int]) -> dict[int, int]:
    rows = (
        Checkpoint.objects.filter(attempt__job_id__in=job_ids)
        .values("attempt__job_id")
        .annotate(total=Sum("size"))
    )
    return {r["attempt__job_id"]: r["total"] or 0 for r in rows}


def project_storage(*, project: Project) -> ProjectStorage:
    """The project's checkpoint bytes in all and by job, its rules and quota (three queries)."""
    totals = (
        Checkpoint.objects.filter(attempt__job__project=project)
        .values("attempt__job_id")
        .annotate(total=Sum("size"))
        .order_by("-total")
    )
    sizes = {r["attempt__job_id"]: r["total"] or 0 for r in totals}
    jobs = Job.objects.in_bulk(list(sizes))
    by_job = [(jobs[j], size) for j, size in sizes.items() if j in jobs]
    by_job.sort(key=lambda pair: -pair[1])
    rules = list(CheckpointRule.objects.filter(project=project, job__isnull=True))
    rules.sort(key=lambda r: r.template)
    quota = next((r.quota_bytes for r in rules if not r.template), None)
    return ProjectStorage(sum(sizes.values()), quota, by_job, rules)


def checkpoint_rules_apply() -> int:
    """Apply each job's rule, then each over-quota project's rule; checkpoints deleted."""
    deleted = 0
    ruled = CheckpointRule.objects.values("project_id")
    jobs = (
        Job.objects.filter(Q(project_id__in=ruled), attempts__checkpoints__complete=True)
        .select_related("project")
        .distinct()
        .order_by("id")[:MAX_JOBS_PER_SWEEP]
    )
    for job in jobs:
        try:
            deleted += sum(d.removed for d in retention_apply(job=job))
        except Exception:  # one job's trouble never stops the others'
            logger.exception("checkpoint rule of job %s failed", job.pk)
    quotas = CheckpointRule.objects.filter(
        job__isnull=True, template="", quota_bytes__isnull=False
    ).select_related("project")
    for rule in quotas:
        storage = project_storage(project=rule.project)
        if storage.state != "over":
            continue
        logger.warning("project %s is over its checkpoint storage quota", rule.project.slug)
        for job, _ in storage.by_job:
            try:
                deleted += sum(
                    d.removed
                    for d in retention_apply(
                        job=job, rule=rule, why="over the project's checkpoint storage quota"
                    )
                )
            except Exception:
                logger.exception("quota rule of job %s failed", job.pk)
    return deleted
