"""The chaos suite (issue 18): faults injected while real sandbox jobs run.

Each test kills or stops one component while jobs print steps, then checks every
attempt (`tests/chaos/harness.py`): exactly one Slurm job, the stored log byte for
byte the file on the cluster, every printed step in the loss series, COMPLETED with
status 0. Each prints `CHAOS <fault>: recovered in X.X s`, the time from the
component's return until polling stores new data again (tests/fixtures/chaos.py).

- test_worker_kill: the Celery worker (with beat) kill -9 in and between polls
- test_redis_restart: Redis kill -9, started again empty, twice
- test_postgres_stop: PostgreSQL `pg_ctl -m immediate stop` (a private instance)
- test_sshd_kill: the login node's sshd and all its sessions killed
- test_slurmctld_restart: slurmctld stopped and started again (holds the sandbox alone)
- test_log_flood: a 53 MiB burst beside another tenant's job

Elsewhere: daphne kill -9 with a job page open (tests/browser/test_job_page_reconnect.py),
a worker killed mid-submission (tests/e2e/test_job_resilience.py), and the poll
lease of a worker killed mid-poll (tests/jobs/test_poll_lease.py).
"""
