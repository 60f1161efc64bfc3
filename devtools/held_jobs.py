"""Many live Slurm jobs at once, for poll-cost tests and benchmarks."""

import shlex
from datetime import timedelta

from django.contrib.auth.models import User

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt, Job
from projects.models import Project


def register(
    *, project: Project, user: User, cluster: Cluster, account: ClusterAccount, count: int
) -> list[Attempt]:
    """Portal rows for `count` pending jobs, as if the portal had submitted them (no ids yet)."""
    home = f"/home/{account.username}/portal-runs"
    jobs = Job.objects.bulk_create(
        Job(
            project=project,
            user=user,
            cluster=cluster,
            name=f"held {number}",
            command="true",
            time_limit=timedelta(minutes=10),
            state=State.PENDING,
        )
        for number in range(1, count + 1)
    )
    return Attempt.objects.bulk_create(
        Attempt(
            job=job,
            number=1,
            account=account,
            run_dir=f"{home}/held-{job.pk}",
            state=State.PENDING,
        )
        for job in jobs
    )


def submit_held(connection: Connection, attempts: list[Attempt], tag: str) -> list[str]:
    """One held (pending) Slurm job per attempt, under the attempt's own job name, made by
    one remote loop; the ids are written to the attempts and returned.

    `tag` goes into each job's output path, where the test run's clean-up looks for it.
    """
    names = " ".join(shlex.quote(attempt.slurm_job_name) for attempt in attempts)
    output = shlex.quote(f"portal-runs/{tag}-%j.out")  # never written: the jobs never run
    script = (
        f"for name in {names}; do "
        f'sbatch --parsable --hold --job-name="$name" --output={output} --wrap true || exit 1; '
        "done"
    )
    result = connection.run(f"sh -c {shlex.quote(script)}", timeout=300)
    if result.exit_status != 0:
        raise RuntimeError(f"sbatch --hold failed: {result.error_text}")
    ids = [line.split(";")[0] for line in result.text.split()]
    for attempt, slurm_id in zip(attempts, ids, strict=True):
        attempt.slurm_job_id = slurm_id
    Attempt.objects.bulk_update(attempts, ["slurm_job_id"])
    return ids
