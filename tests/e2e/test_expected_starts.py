"""The submit form's expected starts, asked of the sandbox's real scheduler.

bob's job holds every GPU for its 3-minute limit: Slurm's `sbatch --test-only`, asked as
the researcher's account (alice), places a 2-GPU job at the end of that limit and the same
job with a shorter limit no sooner; an impossible size is answered with Slurm's reason.
All the options of a cluster cost one SSH command, and the same ask again costs none.
"""

import shlex
from datetime import datetime, timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from clusters.sandbox.config import GPUS_PER_NODE, NODES
from clusters.selectors import portal_endpoint
from clusters.slurm import Slurm
from clusters.ssh import Connection, stats
from jobs.models import Attempt
from tests.helpers import sbatch, wait_for
from tests.jobs.test_views import _form

# Its blocker holds every GPU; while it does no other test's job could start.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive]


def _starts(client: Client, data: dict) -> dict:
    answer = client.post(reverse("job-starts"), data)
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_expected_starts_come_from_the_scheduler_in_one_command_per_cluster(
    researcher, project, sandbox_cluster: Cluster, bob: Connection, client: Client
) -> None:
    client.force_login(researcher)
    data = _form(sandbox_cluster, project, partition="", gpus_per_node=2, time_limit="0:40:00")
    client.post(reverse("job-preview"), data)  # the partitions, read once and cached
    cache.clear()  # no answer from an earlier run within the minute
    # The sandbox to itself: a free node, so Slurm would start it now.
    free = _starts(client, data)["options"][0]
    assert (free["label"], free["slurm"], free["expected"]) == ("As chosen", "now", "now")
    assert datetime.fromisoformat(free["expected_at"]) <= timezone.now() + timedelta(seconds=30)

    blocker = sbatch(
        bob,
        f"--nodes={len(NODES)} --ntasks-per-node=1 --gres=gpu:{GPUS_PER_NODE} "
        "--time=3 --job-name=blocker --output=/dev/null --wrap 'sleep 170'",
    )
    try:
        endpoint = portal_endpoint(cluster=sandbox_cluster)
        assert endpoint is not None
        with Connection(endpoint) as portal:
            slurm = Slurm(portal, tools=sandbox_cluster.slurm_tools)

            def running() -> bool:
                (row,) = slurm.queue([blocker])
                return row.start_time is not None and row.state == "RUNNING"

            wait_for(running, 60, "bob's blocker to hold every GPU")
            (row,) = slurm.queue([blocker])
        assert row.start_time is not None and row.time_limit is not None
        blocker_end = row.start_time + row.time_limit
        data["cpus_per_task"] = 1  # another ask than the one answered "now" above
        before = stats.commands
        first = _starts(client, data)
        assert stats.commands - before == 1  # every option of the cluster in one command
        options = {o["label"]: o for o in first["options"]}
        assert list(options) == [
            "As chosen",
            "1 GPU per node instead of 2",
            "Time limit 20 min instead of 40 min",
        ]
        chosen = options["As chosen"]
        assert chosen["problem"] == "" and chosen["slurm"].startswith("in ")
        expected_at = datetime.fromisoformat(chosen["expected_at"])
        # No history of estimates on the sandbox yet: Slurm's answer as it is.
        assert abs(expected_at - blocker_end) <= timedelta(seconds=5)
        assert chosen["basis"] == "Slurm's own, uncorrected: no past estimates here yet"
        assert not Attempt.objects.exists()  # asking submits nothing

        before = stats.commands
        again = _starts(client, data)["options"]
        assert [o["expected_at"] for o in again] == [o["expected_at"] for o in first["options"]]
        assert stats.commands == before  # the same ask within a minute: from the cache

        too_big = _form(sandbox_cluster, project, partition="", nodes=len(NODES) + 1)
        before = stats.commands
        refused = _starts(client, too_big)
        # The form itself refuses more nodes than the partition has, before asking Slurm.
        assert refused["options"] == [] and stats.commands == before
    finally:
        bob.run(f"scancel {shlex.quote(blocker)}")
