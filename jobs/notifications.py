"""Mail to a job's submitter when its attempt ends, for users who asked for it."""

from django.conf import settings
from django.core.mail import send_mail

from jobs.models import Attempt
from portal_lib.queueing import queue_on_commit
from projects.services import wants_job_end_mail

SEND_JOB_END_MAIL = "jobs.tasks.send_job_end_mail"
JOB_END_MAIL_DELAY = 15  # seconds


def queue_job_end_mail(attempt: Attempt) -> None:
    """After commit, if the submitter opted in (the attempt comes with its job and user)."""
    job = attempt.job
    if wants_job_end_mail(user_id=job.user_id) and job.user.email:
        # A little later, so that an automatic restart is seen and no mail goes out for it.
        queue_on_commit(SEND_JOB_END_MAIL, attempt.pk, countdown=JOB_END_MAIL_DELAY)


def job_end_send(*, attempt_id: int) -> int:
    """Tell the submitter how their job's attempt ended."""
    attempt = Attempt.objects.select_related("job", "job__user", "job__project").get(pk=attempt_id)
    job = attempt.job
    if not job.user.email:
        return 0
    if Attempt.objects.filter(job=job, number__gt=attempt.number).exists():
        return 0  # restarted: the mail comes when the job's last attempt ends
    state = attempt.get_state_display()
    subject = f"[portal] Job {job.name} (#{job.pk}) {state.lower()}"
    lines = [
        f"Your job {job.name} (#{job.pk}) in project {job.project.slug}, attempt "
        f"{attempt.number}, ended: {state}.",
    ]
    if attempt.reason:
        lines.append(f"Reason: {attempt.reason}")
    if attempt.exit_code is not None:
        lines.append(f"Exit status: {attempt.exit_code}")
    lines.append("You get this mail because you asked for it; switch it off in your settings.")
    return send_mail(
        subject, "\n".join(lines) + "\n", settings.DEFAULT_FROM_EMAIL, [job.user.email]
    )
