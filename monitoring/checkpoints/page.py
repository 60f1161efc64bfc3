"""What a job's checkpoint page and its API show: the index, the rule in effect and where it
is set, a rule's preview (the saved one, or values not saved yet), the storage, and the
deletions recorded."""

from dataclasses import dataclass

from django.utils import timezone

from jobs.models import Job
from monitoring.checkpoints.index import IndexRow, checkpoint_index
from monitoring.checkpoints.retention import Verdict, describe, plan, rule_for
from monitoring.models import CheckpointDeletion, CheckpointRule

RECENT_DELETIONS = 100


@dataclass(frozen=True)
class PageLine:
    row: IndexRow
    verdict: Verdict | None
    values: list[float | None]  # the row's metrics, in the page's column order


@dataclass(frozen=True)
class CheckpointPage:
    rows: list[IndexRow]
    rule: CheckpointRule | None  # the rule in effect for the job
    scope: str  # where that rule is set, in words
    previewed: CheckpointRule | None  # the rule the verdicts are of
    verdicts: dict[int, Verdict]  # by checkpoint id
    storage: int  # bytes of all the job's checkpoints
    deletions: list[CheckpointDeletion]
    metric_names: list[str]

    @property
    def doomed(self) -> list[IndexRow]:
        return [v.row for v in self.verdicts.values() if v.delete]

    @property
    def doomed_bytes(self) -> int:
        return sum(r.size for r in self.doomed)

    @property
    def description(self) -> str:
        return describe(self.previewed) if self.previewed else ""

    @property
    def rule_text(self) -> str:
        return describe(self.rule) if self.rule else ""

    @property
    def lines(self) -> list[PageLine]:
        return [
            PageLine(r, self.verdicts.get(r.id), [r.metrics.get(n) for n in self.metric_names])
            for r in self.rows
        ]


def rule_scope(rule: CheckpointRule | None) -> str:
    if rule is None:
        return "none: every checkpoint is kept"
    if rule.job_id:
        return "this job's own rule"
    if rule.template:
        return f"the project's rule for {rule.get_template_display()} jobs"
    return "the project's rule"


def checkpoint_page(*, job: Job, preview: CheckpointRule | None = None) -> CheckpointPage:
    rule = rule_for(job)
    previewed = preview or rule
    wanted = [previewed.best_metric] if previewed is not None else []
    rows = checkpoint_index(job_id=job.pk, metrics=wanted)
    verdicts = {v.row.id: v for v in plan(rows, previewed, now=timezone.now())} if previewed else {}
    names = sorted({name for r in rows for name in r.metrics})
    deletions = list(
        CheckpointDeletion.objects.filter(job=job).select_related("user")[:RECENT_DELETIONS]
    )
    return CheckpointPage(
        rows=rows,
        rule=rule,
        scope=rule_scope(rule),
        previewed=previewed,
        verdicts=verdicts,
        storage=sum(r.size for r in rows),
        deletions=deletions,
        metric_names=names,
    )
