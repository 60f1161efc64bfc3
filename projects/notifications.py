"""Mails: budget thresholds to project owners, job endings to users who asked for them."""

from django.conf import settings
from django.core.mail import send_mail

from jobs.models import Attempt
from projects.estimate import fmt_hours
from projects.models import BudgetAlert, Membership, Quota
from projects.periods import period_words


def budget_alert_send(*, alert_id: int) -> int:
    """Mail the project's owners that it used `threshold` % of its budget; returns mails sent."""
    alert = BudgetAlert.objects.select_related("project").get(pk=alert_id)
    project = alert.project
    quota = Quota.objects.filter(project=project).first()
    if quota is None:
        return 0
    owners = list(
        Membership.objects.filter(project=project, role=Membership.Role.OWNER)
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if not owners:
        return 0
    when = period_words(quota.period)
    subject = f"[portal] Project {project.slug} has used {alert.threshold} % of its GPU-hours"
    body = (
        f"Project {project.slug} ({project.name}) has used "
        f"{fmt_hours(alert.used_gpu_hours)} of its {fmt_hours(quota.gpu_hours_per_period)} "
        f"GPU-hours {when}.\n"
    )
    if alert.threshold >= 100:
        body += "New jobs are refused until the next period or until an admin raises the budget.\n"
    return send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, owners)


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
