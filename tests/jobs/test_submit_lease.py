"""One try of an attempt's submission at a time: a second waits while the first holds its lease.

The chaos suite found two Slurm jobs for one attempt: its sbatch waited on a stopped
slurmctld past SUBMIT_STUCK_AFTER, the reconciler queued a second try, which found no
job yet and submitted beside the first (tests/chaos/test_slurmctld_restart.py).
"""

import pytest
import redis
from django.conf import settings

from jobs.poll.lease import lease, submit_lease_key
from jobs.submission import SubmitRetry
from jobs.tasks import submit_attempt
from tests import factories


def test_a_second_try_beside_a_running_one_waits_and_submits_nothing(
    member, project, cluster, monkeypatch
) -> None:
    _, attempt = factories.job(project, member, cluster)
    tries: list[int] = []
    monkeypatch.setattr("jobs.tasks.attempt_submit", lambda *, attempt_id: tries.append(attempt_id))
    client = redis.Redis.from_url(settings.REDIS_URL)
    with lease(client, submit_lease_key(attempt.pk)) as held:  # the first try, sbatch waiting
        assert held
        with pytest.raises(SubmitRetry, match="being submitted by another try"):
            submit_attempt(attempt.pk)
        assert tries == []
    submit_attempt(attempt.pk)  # the second try's retry, once the first has ended
    assert tries == [attempt.pk]
    assert client.get(submit_lease_key(attempt.pk)) is None
