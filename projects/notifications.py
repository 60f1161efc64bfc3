"""Mails: budget thresholds to project owners."""

from django.conf import settings
from django.core.mail import send_mail

from projects.models import BudgetAlert, Membership, Quota
from projects.periods import period_words
from projects.quota import fmt_hours


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
