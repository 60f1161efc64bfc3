"""A hostile job and a second tenant's job side by side on the sandbox, through the real poll."""

import hashlib
import shlex
from dataclasses import dataclass

from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.logs.store import log_read
from monitoring.series.read import series_read
from projects.models import Membership, Project
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, attempt_shell, wait_for

STEPS = 12
# The bystander: a training loop printing a step every half second.
BYSTANDER = (
    f"for i in $(seq 1 {STEPS}); do "
    'echo "step $i, loss=$(awk "BEGIN{print 1.0/$i}")"; sleep 0.5; done'
)


@dataclass
class Pair:
    hostile: Job
    other: Job


def bob(project: Project) -> User:
    """The portal user `bob` (cluster user bob), a second tenant in the project."""
    user = User.objects.get(username="bob")
    Membership.objects.get_or_create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


def submit_beside(
    researcher: User, project: Project, cluster: Cluster, command: str, **hostile: object
) -> Pair:
    attack = job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(name="hostile", command=command, gpus_per_node=1, **hostile),
    )
    other = job_submit(
        user=bob(project),
        project=project,
        cluster=cluster,
        spec=spec(name="bystander", command=BYSTANDER, gpus_per_node=1),
    )
    return Pair(attack, other)


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.select_related("job").get(job=job, number=1)


def finished(job: Job) -> bool:
    attempt = _attempt(job)
    return attempt.is_finished and attempt.files_complete


def bystander_is_read_while_it_runs(pair: Pair) -> None:
    """The second tenant's points arrive while it runs, not only at its end."""

    def live_points() -> bool:
        attempt = _attempt(pair.other)
        loss = series_read(attempt_id=attempt.pk, name="loss")
        return attempt.state == State.RUNNING and loss.total >= 3

    wait_for(live_points, QUEUE_WAIT, "the bystander's loss points while it runs")


def remote(attempt: Attempt, name: str) -> bytes:
    with attempt_shell(attempt) as shell:
        return shell.run(f"cat {shlex.quote(attempt.run_dir + '/' + name)}").stdout


def assert_log_exact(attempt: Attempt) -> None:
    """The stored log is the cluster's file, byte for byte (compared by size and SHA-256:
    a command's output over SSH is capped, and an attack's log is megabytes)."""
    path = shlex.quote(attempt.run_dir + "/stdout.log")
    with attempt_shell(attempt) as shell:
        size, digest = shell.run(f"stat -c %s {path} && sha256sum < {path}").text.split()[:2]
    stored = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=int(size) + 1)
    assert (len(stored.data), hashlib.sha256(stored.data).hexdigest()) == (int(size), digest)


def assert_bystander_whole(pair: Pair) -> None:
    wait_for(lambda: finished(pair.other), QUEUE_WAIT, "the bystander to finish and be read")
    attempt = _attempt(pair.other)
    assert attempt.state == State.COMPLETED
    assert_log_exact(attempt)
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert loss.xs == [float(i) for i in range(1, STEPS + 1)]


def hostile_attempt(pair: Pair) -> Attempt:
    wait_for(lambda: finished(pair.hostile), QUEUE_WAIT, "the hostile job to finish and be read")
    return _attempt(pair.hostile)
