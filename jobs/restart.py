"""The restart policy: whether a failed attempt is retried, and the new attempt that does it.

A restart is a new Attempt of the same job, submitted like the first, with
`PORTAL_RESUME_FROM` naming the latest complete checkpoint and, when the job
asks for it, the GPU hardware failed or the node held a hang's culprit, that node
excluded. Each decision, taken or not, is an event on the job's timeline.
"""

import logging
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from jobs.avoidance import own_exclusions
from jobs.enums import NEVER_RESTART, FailureClass
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.services import attempt_start
from jobs.states import attempt_note

logger = logging.getLogger(__name__)

_NODE = re.compile(r"^[A-Za-z0-9_.-]+$")
_SUSPECT_NODE = frozenset({FailureClass.GPU_HARDWARE, FailureClass.HANG})


@dataclass(frozen=True)
class RestartDecision:
    restart: bool
    why: str


def _label(failure_class: str) -> str:
    try:
        return str(FailureClass(failure_class).label)
    except ValueError:
        return failure_class


def restart_decision(*, job: Job, attempt: Attempt, failure_class: str) -> RestartDecision:
    """Whether the job's policy restarts after this failure, and why (for the timeline)."""
    label = _label(failure_class)
    used = attempt.number - 1 - attempt.preflight_resubmits  # preflight's are not restarts
    if failure_class == FailureClass.CANCELLED:
        return RestartDecision(False, "")  # someone meant it: nothing to explain
    if failure_class in NEVER_RESTART:
        return RestartDecision(False, f"Not restarted: {label} would fail again the same way.")
    if job.max_restarts == 0:
        return RestartDecision(False, f"Not restarted after {label}: the job allows no restarts.")
    if failure_class not in (job.restart_on or []):
        return RestartDecision(
            False, f"Not restarted: the job's policy does not restart after {label}."
        )
    if used >= job.max_restarts:
        return RestartDecision(
            False, f"Not restarted after {label}: all {job.max_restarts} restarts are used."
        )
    return RestartDecision(True, "")


def _excluded(previous: Attempt, failed_node: str, exclude: bool) -> str:
    # The job's own exclusions go on; the cluster's avoided nodes are read afresh when the
    # restart is handed to Slurm (jobs.avoidance), so a node put back is used again.
    nodes = own_exclusions(previous)
    if exclude and failed_node and _NODE.match(failed_node) and failed_node not in nodes:
        nodes.append(failed_node)
    return ",".join(nodes)


def attempt_restart(
    *,
    attempt: Attempt,
    failure_class: str,
    resume_from: str,
    resume_step: int | None = None,
    failed_node: str = "",
) -> Attempt | None:
    """Start the next attempt if the policy allows it; the timeline records the decision.

    Idempotent: an attempt that is no longer the job's latest was restarted
    already, and is left alone.
    """
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=attempt.job_id)
        latest = Attempt.objects.filter(job=job).order_by("-number").first()
        if latest is None or latest.pk != attempt.pk or not attempt.is_finished:
            return None
        decision = restart_decision(job=job, attempt=attempt, failure_class=failure_class)
        if not decision.restart:
            if decision.why:
                attempt_note(attempt=attempt, reason=decision.why)
            return None
        # A GPU fault or a hang's culprit makes the node suspect: the restart never goes
        # back to it.
        exclude = job.exclude_failed_nodes or failure_class in _SUSPECT_NODE
        excluded = _excluded(attempt, failed_node, exclude)
        where = f"from {resume_from}" if resume_from else "from the start (no checkpoint yet)"
        if resume_step is not None and resume_from:
            where = f"from step {resume_step} ({resume_from})"
        without = f", without node {failed_node}" if failed_node in excluded.split(",") else ""
        reason = (
            f"Restart {attempt.number - attempt.preflight_resubmits}/{job.max_restarts} "
            f"after {_label(failure_class)} "
            f"on attempt {attempt.number}: resuming {where}{without}."
        )
        try:
            # The same start as the first submission: row, reservation, event, queued task.
            new = attempt_start(
                job=job,
                number=attempt.number + 1,
                account=attempt.account,
                reason=reason,
                resume_from=resume_from,
                excluded_nodes=excluded,
            )
        except JobError as exc:
            attempt_note(attempt=attempt, reason=f"Not restarted: {exc.message}")
            return None
        if attempt.preflight_resubmits:
            Attempt.objects.filter(pk=new.pk).update(
                preflight_resubmits=attempt.preflight_resubmits
            )
        Job.objects.filter(pk=job.pk).update(state=new.state, updated_at=timezone.now())
    logger.info("job %s: attempt %s restarts attempt %s", job.pk, new.number, attempt.number)
    return new
