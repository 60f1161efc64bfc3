"""Many live Slurm jobs at once, for poll-cost tests and benchmarks."""

import shlex
from datetime import timedelta

from django.contrib.auth.models import User

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Connection
from jobs.models import Attempt, Job, State
from projects.models import Project


def submit_held(connection: Connection, count: int, tag: str) -> list[str]:
    """`count` held (pending) jobs, made by one remote loop; their Slurm ids."""
    script = (
        f"for i in $(seq {int(count)}); do "
        f"sbatch --parsable --hold --job-name={shlex.quote(tag)}-$i "
        "--output=/dev/null --wrap true || exit 1; done"
    )
    result = connection.run(f"sh -c {shlex.quote(script)}", timeout=300)
    if result.exit_status != 0:
        raise RuntimeError(f"sbatch --hold failed: {result.error_text}")
    return [line.split(";")[0] for line in result.text.split()]


def register(
    *, project: Project, user: User, cluster: Cluster, account: ClusterAccount, slurm_ids: list[str]
) -> list[Attempt]:
    """Portal rows for jobs submitted outside the portal, as if it had submitted them."""
    home = f"/home/{account.username}/portal-runs"
    jobs = Job.objects.bulk_create(
        Job(
            project=project,
            user=user,
            cluster=cluster,
            name=f"held {slurm_id}",
            command="true",
            time_limit=timedelta(minutes=10),
            state=State.PENDING,
        )
        for slurm_id in slurm_ids
    )
    return Attempt.objects.bulk_create(
        Attempt(
            job=job,
            number=1,
            account=account,
            slurm_job_id=slurm_id,
            run_dir=f"{home}/held-{slurm_id}",
            state=State.PENDING,
        )
        for job, slurm_id in zip(jobs, slurm_ids, strict=True)
    )
