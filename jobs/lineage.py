"""A run's lineage: forking a new job from a checkpoint of another, and who may resume or fork.

A fork is a new job, submitted like any other, whose first attempt resumes from a
checkpoint in its parent's run directory (`PORTAL_RESUME_FROM`). That directory is
mode 0700 on the cluster: only the cluster account that wrote it can read it, so a fork
runs on the parent's cluster, as the same account. A resume is a new attempt of the same
job from a checkpoint chosen by hand (jobs.resume).
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from clusters.models import Cluster, ClusterAccount
from jobs.access import can_cancel, jobs_visible_to
from jobs.errors import JobError, JobPermissionRefused
from jobs.models import Job
from portal_lib.viewers import Viewer
from projects.models import Project


@dataclass(frozen=True)
class ForkPoint:
    """The checkpoint a fork starts from: its parent job, its path on the cluster, its step,
    and the cluster account that wrote it."""

    parent: Job
    checkpoint: str
    step: int | None
    account: ClusterAccount | None

    def check_place(self, *, user: User, project: Project, cluster: Cluster) -> None:
        """Refuse a fork into another cluster, or out of the parent's project for someone
        else's run; each refusal says what to change."""
        parent = self.parent
        if parent.user_id != user.pk and parent.project_id != project.pk:
            message = (
                f"Job #{parent.pk} is not yours: a fork of it stays in its project "
                f"{parent.project.slug}."
            )
            raise JobPermissionRefused(message, errors={"project": [message]})
        if parent.cluster_id != cluster.pk:
            message = (
                f"Job #{parent.pk}'s checkpoint lies on cluster {parent.cluster.name}, in its "
                f"run directory: a fork runs there too, not on {cluster.name}."
            )
            raise JobError(message, errors={"cluster": [message]})

    def check_account(self, account: ClusterAccount) -> None:
        """Refuse a fork whose job could not read the checkpoint (a 0700 run directory)."""
        parent = self.parent
        if self.account is None or self.account.pk != account.pk:
            owner = self.account.username if self.account else "another account"
            raise JobPermissionRefused(
                f"Job #{parent.pk}'s checkpoint lies in a run directory only the cluster "
                f"account {owner} can read; your jobs on {parent.cluster.name} run as "
                f"{account.username}. Ask {parent.user.get_username()} to fork it."
            )

    def job_fields(self) -> dict[str, Any]:
        return {
            "parent": self.parent,
            "parent_checkpoint": self.checkpoint,
            "parent_step": self.step,
        }

    def reason(self, user: User) -> str:
        return (
            f"Forked by {user.get_username()} from job #{self.parent.pk}{at_step(self.step)} "
            f"({self.checkpoint})."
        )


def fork_name(parent: Job) -> str:
    """What a fork is called until its submitter names it."""
    return f"{parent.name[:123]} fork"


def at_step(step: int | None) -> str:
    return f" at step {step}" if step is not None else ""


def forks_for_viewer(*, user: Viewer | None, job: Job) -> list[Job]:
    """The job's forks the viewer may see (a fork may sit in another project), by step, in
    one query."""
    return list(
        jobs_visible_to(user=user)
        .filter(parent=job)
        .only("pk", "name", "parent_step", "state")
        .order_by("parent_step", "pk")
    )


def can_resume(*, user: Viewer | None, job: Job) -> bool:
    """Who may resume a job from a checkpoint of their choice: whoever may cancel it."""
    return can_cancel(user=user, job=job)


def require_resumer(*, user: Viewer | None, job: Job) -> None:
    if not can_resume(user=user, job=job):
        raise JobPermissionRefused(
            "Only the job's submitter or a project owner can resume it; fork it instead."
        )
