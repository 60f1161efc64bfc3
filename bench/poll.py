"""Poll cost with 10, 100 and 1000 live jobs: the portal's one agent call against one
`squeue` per job (Open OnDemand's Job Composer way), measured in the same run.

Needs root and the sandbox cluster (`manage.py sandbox up`); uses its own database
`portal_bench` on the local PostgreSQL.  Run: `.venv/bin/python bench/poll.py [--quick]`.
"""

import shlex
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK, bench_cluster, delete_jobs_without_charges, ensure_database  # noqa: E402


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from clusters.models import ClusterAccount
    from clusters.selectors import account_endpoint
    from clusters.ssh import Connection, stats
    from devtools import held_jobs
    from jobs.poll.cycle import cluster_poll
    from projects.models import Project

    call_command("migrate", verbosity=0)
    cluster = bench_cluster()
    user = User.objects.get(username="alice")
    project, _ = Project.objects.get_or_create(slug="bench", defaults={"name": "Bench"})
    account = ClusterAccount.objects.get(cluster=cluster, username="alice")
    alice = Connection(account_endpoint(account=account))

    header = ("live jobs", "portal s", "portal cmds", "naive s", "naive cmds")
    print(" | ".join(f"{title:>11}" for title in header))
    print("-" * 71)
    for count in (10,) if QUICK else (10, 100, 1000):
        delete_jobs_without_charges(project=project)
        attempts = held_jobs.register(
            project=project, user=user, cluster=cluster, account=account, count=count
        )
        ids = held_jobs.submit_held(alice, attempts, f"bench-{uuid.uuid4().hex[:6]}")
        try:
            cluster_poll(cluster_id=cluster.pk)  # warm: connection and agent
            times = []
            for _ in range(3):
                stats.reset()
                started = time.perf_counter()
                cluster_poll(cluster_id=cluster.pk)
                times.append(time.perf_counter() - started)
            portal_cmds = stats.commands

            stats.reset()
            started = time.perf_counter()
            for slurm_id in ids:
                alice.run(
                    f"squeue --noheader --states=all --format=%T --jobs={shlex.quote(slurm_id)}"
                )
            naive = time.perf_counter() - started
            naive_cmds = stats.commands
            row = (
                count,
                f"{statistics.median(times):.3f}",
                portal_cmds,
                f"{naive:.2f}",
                naive_cmds,
            )
            print(" | ".join(f"{cell:>11}" for cell in row))
        finally:
            alice.run(f"scancel {' '.join(ids)}", timeout=120)
    delete_jobs_without_charges(project=project)
    alice.close()


if __name__ == "__main__":
    main()
