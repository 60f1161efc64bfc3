"""The weekly goodput mail to each project's owners: last week's GPU-hours by part, goodput,
and the jobs that wasted most (hung, idle, lost), with links to their pages.

Sent once per project and week: the digest row is claimed (a unique constraint) in the
transaction that sends, so a re-run, or two beats at once, sends nothing new, and a mail
that fails leaves no row, to be tried again at the next run.
"""

import logging
from datetime import date, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from monitoring.goodput.efficiency import PARTS
from monitoring.goodput.report import (
    PART_TITLES,
    GoodputRow,
    WastedJob,
    cards_in_weeks,
    goodput_rows,
    hours_text,
    iso_week,
    share_text,
    wasted_jobs,
    week_start,
)
from monitoring.models import GoodputDigest
from projects.models import Membership, Project

logger = logging.getLogger(__name__)

DIGEST_JOBS = 5


def last_week(today: date | None = None) -> date:
    """The Monday of the last complete ISO week."""
    return week_start(today or timezone.localdate()) - timedelta(weeks=1)


def job_url(job_id: int) -> str:
    return settings.PORTAL_URL.rstrip("/") + reverse("job-page", args=[job_id])


def digest_text(project: Project, row: GoodputRow, jobs: list[WastedJob]) -> str:
    lines = [
        f"Project {project.slug} ({project.name}), week {row.iso_week} "
        f"({row.week:%b %d} to {row.week + timedelta(days=6):%b %d}): "
        f"{hours_text(row.gpu_hours)} GPU-hours charged over {row.attempts} attempts, "
        f"goodput {share_text(row.goodput) or '-'} % (productive over charged).",
        "",
        "GPU-hours by part:",
        *(f"  {PART_TITLES[part]:<16} {hours_text(row.parts[part]):>12}" for part in PARTS),
        f"  {'Queued':<16} {hours_text(row.queued_gpu_hours):>12}  (waiting, not charged)",
        "",
    ]
    if jobs:
        lines.append("The jobs that wasted most (hung + idle + lost GPU-hours):")
        for job in jobs:
            detail = ", ".join(
                f"{part} {hours_text(job.parts[part])}" for part in job.parts if job.parts[part]
            )
            lines.append(
                f"  {job.name} (#{job.job_id}) by {job.user}: "
                f"{hours_text(job.wasted_gpu_hours)} of {hours_text(job.gpu_hours)} GPU-h "
                f"({detail}) {job_url(job.job_id)}"
            )
    else:
        lines.append("No job wasted GPU-hours to hangs, idle GPUs or redone work.")
    lines += [
        "",
        "You get this mail as an owner of the project; the project page shows every week.",
    ]
    return "\n".join(lines) + "\n"


def project_digest_send(*, project: Project, row: GoodputRow) -> int:
    """Claim the project's digest for the week and mail its owners; mails sent (0: sent before)."""
    owners = list(
        Membership.objects.filter(project=project, role=Membership.Role.OWNER)
        .exclude(user__email="")
        .order_by("user__username")
        .values_list("user__email", flat=True)
    )
    with transaction.atomic():
        _, created = GoodputDigest.objects.get_or_create(
            project=project, week=row.week, defaults={"recipients": len(owners)}
        )
        if not created or not owners:
            return 0
        jobs = wasted_jobs(project_id=project.pk, week=row.week, limit=DIGEST_JOBS)
        subject = (
            f"[portal] Project {project.slug}, week {iso_week(row.week)}: "
            f"goodput {share_text(row.goodput) or '-'} %"
        )
        return send_mail(
            subject, digest_text(project, row, jobs), settings.DEFAULT_FROM_EMAIL, owners
        )


def goodput_digests_send(*, today: date | None = None) -> int:
    """Last week's digest of every project with ended attempts that week, once each."""
    week = last_week(today)
    rows = goodput_rows(cards_in_weeks(first=week, last=week), by=("project",))
    done = set(GoodputDigest.objects.filter(week=week).values_list("project__slug", flat=True))
    pending = {row.project: row for row in rows if row.project not in done}
    sent = 0
    for project in Project.objects.filter(slug__in=pending).order_by("slug"):
        try:
            sent += project_digest_send(project=project, row=pending[project.slug])
        except Exception:  # one project's mail must not stop the others'
            logger.exception("goodput digest of project %s failed", project.slug)
    return sent
