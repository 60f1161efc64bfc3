"""Resume a job from a checkpoint chosen by hand: a new attempt of the same job.

Like a restart (jobs.restart), but asked for by a person, from any checkpoint of the job
rather than the latest, and only once the job has ended (a live job is cancelled first,
or forked). The attempt's `resume_from` records the checkpoint, which the batch script
exports as `PORTAL_RESUME_FROM` and which checkpoint retention keeps while it runs.
"""

import logging

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from jobs.errors import JobError
from jobs.lineage import at_step, require_resumer
from jobs.models import Attempt, Job
from jobs.services import attempt_start, submit_account

logger = logging.getLogger(__name__)


def job_resume(*, job: Job, user: User, checkpoint: str, step: int | None) -> Attempt:
    """Start the job's next attempt from `checkpoint` (its path on the cluster).

    Runs as the account the job's attempts ran as; the quota and the project's line
    apply as to any attempt.
    """
    require_resumer(user=user, job=job)
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job.pk)
        latest = Attempt.objects.filter(job=locked).order_by("-number").first()
        if latest is not None and not latest.is_finished:
            raise JobError(
                f"Job #{job.pk} is still {latest.get_state_display().lower()}: cancel it "
                "first, or fork it to run beside it."
            )
        # The cluster must take jobs; the attempts' own account goes on (it wrote the checkpoints).
        usable = submit_account(user=job.user, cluster=job.cluster)
        account = latest.account if latest and latest.account else usable
        number = latest.number + 1 if latest else 1
        new = attempt_start(
            job=locked,
            number=number,
            account=account,
            reason=f"Resumed by {user.get_username()}{at_step(step)} ({checkpoint}).",
            resume_from=checkpoint,
        )
        Job.objects.filter(pk=job.pk).update(state=new.state, updated_at=timezone.now())
        job.state = new.state
    logger.info("job %s: attempt %s resumes from %s", job.pk, new.number, checkpoint)
    return new
