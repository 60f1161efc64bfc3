"""Fair use (issue #13, point 6): login throttling, CPU- and node-hours, concurrent jobs, the
submit rate, what one log request may read.

Before: logins had no throttling; CPU-only jobs reserved and were charged nothing (a
project without GPU-hours left could still run any number of them); 30 submissions in
1.8 s all passed; a project had no limit on its queued and running jobs; the log tail of
a job that printed no newline assembled every stored byte (64 MiB) per request.
"""

import tracemalloc
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from clusters.models import Cluster
from clusters.slurm import parse_sacct
from jobs import accounting
from jobs.accounting import attempt_charge_from_accounting
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.queue.line import line_release
from jobs.services import attempt_start
from jobs.states import attempt_transition
from monitoring.logs.store import MAX_TAIL_BYTES, Delivery, log_files, log_store
from projects.models import Project, Quota, Reservation, UsageCharge
from projects.selectors import project_usage
from tests import factories
from tests.clusters.slurm_output import SACCT_FIELDS_2026_12_01
from tests.helpers import Tokens, bearer

pytestmark = pytest.mark.django_db

SEP = "\x1f"
# The sandbox's sacct for a 2-node job cancelled after 14 s (tests/projects/test_slurm_accounting.py).
SACCT_TWO_NODES = SEP.join(
    ["18", "CANCELLED by 1001", "0:0", "2026-12-01T04:09:46", "2026-12-01T04:10:00",
     "00:00:14", "00:10:00", "2", "n[1-2]", "billing=4,cpu=4,gres/gpu=2,mem=12052M,node=2",
     "", "portal-be829a3a-0abb-4d64-951f-e20b7f795278"]
)  # fmt: skip


def test_logins_are_throttled_per_username_and_address(member: User) -> None:
    member.set_password("right-horse-battery")
    member.save()
    client = Client()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        wrong = client.post("/login/", {"username": member.username, "password": "guess"})
        assert wrong.status_code == 200  # the form again, with its error
    # The failure that reaches the limit locks the pair.
    assert client.post("/login/", {"username": member.username, "password": "x"}).status_code == 429
    # Locked now: even the right password is refused, with a page that says why.
    locked = client.post(
        "/login/", {"username": member.username, "password": "right-horse-battery"}
    )
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session
    # Another address is not locked out by this one's failures.
    elsewhere = Client(REMOTE_ADDR="10.9.8.7")
    ok = elsewhere.post("/login/", {"username": member.username, "password": "right-horse-battery"})
    assert ok.status_code == 302


def _body(cluster: Cluster, **spec: Any) -> dict[str, Any]:
    values = {"nodes": 1, "gpus_per_node": 0, "cpus_per_task": 2, "time_limit": "01:00:00"}
    values.update(spec)
    return {
        "project": "vision",
        "cluster": cluster.name,
        "name": "sweep",
        "command": "python cpu_only.py",
        "partition": "gpu",
        **values,
    }


def _post(token: str, body: dict[str, Any]) -> Any:
    return bearer(token).post("/api/v1/jobs/", body, content_type="application/json")


def test_cpu_only_jobs_reserve_cpu_hours_and_stop_at_the_budget(
    project: Project, cluster: Cluster, service_account, tokens: Tokens, no_submission
) -> None:
    Quota.objects.filter(project=project).update(cpu_hours_per_period=Decimal("5"))
    # 1 node x 2 CPUs x 1 h = 2 CPU-h each, no GPU: two fit in 5 CPU-h, the third does not.
    assert _post(tokens.owner, _body(cluster)).status_code == 201
    assert _post(tokens.owner, _body(cluster)).status_code == 201
    refused = _post(tokens.owner, _body(cluster))
    assert refused.status_code == 400, refused.content
    assert refused.json() == {
        "non_field_errors": ["needs 2 CPU-h, 1 CPU-h left this month in project vision"]
    }
    assert Job.objects.count() == 2
    usage = project_usage(project=project)
    assert (usage.cpu.reserved, usage.cpu.left, usage.reserved_gpu_hours) == (
        Decimal("4"),
        Decimal("1"),
        0,
    )


def test_node_hours_are_limited_like_gpu_hours(
    project: Project, cluster: Cluster, service_account, tokens: Tokens, no_submission
) -> None:
    Quota.objects.filter(project=project).update(node_hours_per_period=Decimal("3"))
    assert _post(tokens.owner, _body(cluster, nodes=2)).status_code == 201  # 2 node-h
    refused = _post(tokens.owner, _body(cluster, nodes=2))
    assert refused.json() == {
        "non_field_errors": ["needs 2 node-h, 1 node-h left this month in project vision"]
    }


def _ran(attempt: Attempt, *, minutes: int) -> None:
    start = timezone.now() - timedelta(hours=1)
    attempt_transition(attempt=attempt, to=State.SUBMITTING)
    attempt_transition(attempt=attempt, to=State.PENDING, slurm_job_id="18", submitted_at=start)
    attempt_transition(attempt=attempt, to=State.RUNNING, started_at=start)
    attempt_transition(
        attempt=attempt, to=State.COMPLETED, ended_at=start + timedelta(minutes=minutes)
    )


def test_a_cpu_only_job_is_charged_its_cpu_and_node_hours_and_their_price(
    project: Project, cluster: Cluster, service_account, tokens: Tokens, no_submission
) -> None:
    cluster.price_per_cpu_hour = Decimal("0.05")
    cluster.save()
    created = _post(tokens.owner, _body(cluster, nodes=2))
    attempt = Attempt.objects.get(job_id=created.json()["id"])
    _ran(attempt, minutes=30)
    charge = UsageCharge.objects.get(attempt=attempt)
    # 2 nodes x 2 CPUs for half an hour.
    assert (charge.gpu_hours, charge.cpus, charge.cpu_hours) == (0, 4, Decimal("2"))
    assert (charge.nodes, charge.node_hours, charge.cost) == (2, Decimal("1"), Decimal("0.1"))
    usage = project_usage(project=project)
    assert (usage.cpu.used, usage.node.used, usage.cpu.reserved) == (
        Decimal("2"),
        Decimal("1"),
        0,
    )


def test_sacct_charges_the_cpus_and_nodes_slurm_allocated(
    project: Project, cluster: Cluster, service_account, tokens: Tokens, no_submission, monkeypatch
) -> None:
    # The job asked for 1 node x 2 CPUs; Slurm's record (not the job's word) is what is charged.
    cluster.accounting_enabled = True
    cluster.save()
    created = _post(tokens.owner, _body(cluster))
    attempt = Attempt.objects.get(job_id=created.json()["id"])
    Attempt.objects.filter(pk=attempt.pk).update(
        slurm_job_id="18", state=State.CANCELLED, submitted_at=timezone.now()
    )
    (row,) = parse_sacct(SACCT_TWO_NODES, fields=SACCT_FIELDS_2026_12_01)
    # Captured before sacct was asked for the user and submit time: the attempt's own.
    assert attempt.account is not None
    row = replace(row, user=attempt.account.username, submit_time=timezone.now())
    monkeypatch.setattr(accounting, "job_accounting", lambda *args, **kwargs: [row])

    @contextmanager
    def session(endpoint: object) -> Any:
        yield None

    monkeypatch.setattr(accounting.pool, "session", session)
    assert attempt_charge_from_accounting(attempt_id=attempt.pk)
    charge = UsageCharge.objects.get(attempt=attempt)
    assert (charge.source, charge.elapsed_seconds, charge.gpus) == ("sacct", 14, 2)
    assert (charge.cpus, charge.cpu_hours) == (4, Decimal("0.0156"))  # 4 x 14 s
    assert (charge.nodes, charge.node_hours) == (2, Decimal("0.0078"))


def test_a_project_runs_at_most_its_concurrent_jobs(
    project: Project, cluster: Cluster, service_account, tokens: Tokens, no_submission
) -> None:
    Quota.objects.filter(project=project).update(max_concurrent_jobs=3)
    ids = [_post(tokens.owner, _body(cluster)).json()["id"] for _ in range(3)]
    # The fourth is accepted, waiting in the project's line: the API says where and why.
    fourth = _post(tokens.owner, _body(cluster))
    assert fourth.status_code == 201
    assert fourth.json()["state"] == "WAITING"
    assert fourth.json()["waiting"] == {
        "place": 1,
        "line_length": 1,
        "words": "Next in project vision's line (1 waiting).",
        "reason": "Waiting for room: project vision has 3 of its 3 jobs at once queued or "
        "running. It goes to Slurm when a job of the project ends.",
    }
    assert Reservation.objects.filter(ended_at__isnull=True).count() == 3
    # One ends: its slot goes to the waiting job, in the line's order.
    assert bearer(tokens.owner).post(f"/api/v1/jobs/{ids[0]}/cancel/").status_code == 202
    line_release(project_id=project.pk)
    assert Job.objects.get(pk=fourth.json()["id"]).state == State.QUEUED
    assert Reservation.objects.filter(ended_at__isnull=True).count() == 3


def test_the_submit_rate_answers_429_with_retry_after(
    project: Project,
    cluster: Cluster,
    service_account,
    member: User,
    tokens: Tokens,
    no_submission,
    settings: Any,
) -> None:
    settings.SUBMIT_RATE_LIMIT = 20
    settings.SUBMIT_RATE_WINDOW = 60
    Quota.objects.filter(project=project).update(max_concurrent_jobs=None)
    answers = [_post(tokens.owner, _body(cluster, time_limit="00:01:00")) for _ in range(30)]
    assert [a.status_code for a in answers] == [201] * 20 + [429] * 10
    refused = answers[-1]
    assert 1 <= int(refused["Retry-After"]) <= 60
    assert refused.json()["detail"].startswith(
        "You may submit at most 20 jobs in a minute; try again in "
    )
    assert Job.objects.count() == 20
    # Another person of the same project has their own count.
    assert _post(tokens.member, _body(cluster, time_limit="00:01:00")).status_code == 201
    # A minute later the window has room again.
    Job.objects.update(created_at=timezone.now() - timedelta(seconds=61))
    assert _post(tokens.owner, _body(cluster, time_limit="00:01:00")).status_code == 201


def test_the_submit_rate_is_a_form_error_on_the_page(
    project: Project, cluster: Cluster, service_account, owner: User, no_submission, settings: Any
) -> None:
    settings.SUBMIT_RATE_LIMIT = 2
    settings.SUBMIT_RATE_WINDOW = 3600
    client = Client()
    client.force_login(owner)
    form = {
        "name": "sweep",
        "project": project.pk,
        "cluster": cluster.name,
        "partition": "gpu",
        "template": "command",
        "nodes": 1,
        "gpus_per_node": 0,
        "cpus_per_task": 1,
        "time_limit": "0:10:00",
        "command": "python cpu_only.py",
    }
    assert client.post("/jobs/new/", form).status_code == 302
    assert client.post("/jobs/new/", form).status_code == 302
    page = client.post("/jobs/new/", form)
    assert page.status_code == 200
    errors = page.context["form"].non_field_errors()
    assert len(errors) == 1 and errors[0].startswith(
        "You may submit at most 2 jobs in an hour; try again in "
    )
    assert Job.objects.count() == 2


def test_restarts_are_not_submissions(
    project: Project, cluster: Cluster, owner: User, service_account, no_submission, settings: Any
) -> None:
    # The rate counts what people submit; a job's own restart is not held back by it.
    settings.SUBMIT_RATE_LIMIT = 1
    job, _ = factories.job(project, owner, cluster)
    assert Job.objects.filter(user=owner).count() == 1
    attempt_start(job=job, number=2, account=service_account, reason="restart")
    assert job.attempts.count() == 2


def _no_newlines(attempt: Attempt, mib: int) -> None:
    """`mib` MiB of stdout without a newline (the fixture's short log becomes its start)."""
    chunk = b"A" * (1 << 20)
    files = log_files(attempt_ids=[attempt.pk], names=["stdout.log"])
    log_store(
        files=files,
        deliveries=[Delivery(attempt.pk, "stdout.log", n << 20, chunk) for n in range(mib)],
    )


def test_the_log_tail_reads_at_most_its_cap_whatever_the_log(
    job: Job, tokens: Tokens, settings: Any
) -> None:
    # A job printed 40 MiB without a newline; a viewer asks for the most lines allowed.
    settings.LOG_KEEP_BYTES = 64 << 20
    attempt = job.attempts.get()
    _no_newlines(attempt, 40)
    client = bearer(tokens.owner)
    tracemalloc.start()
    try:
        answer = client.get(f"/api/v1/jobs/{job.pk}/attempts/1/log", {"lines": 10_000})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert answer.status_code == 200
    body = answer.json()
    assert len(body["text"]) == MAX_TAIL_BYTES and body["end"] == body["size"]
    # The cap, a chunk and the JSON copies; the whole log would be 80 MiB and more.
    assert peak < 8 * MAX_TAIL_BYTES, peak
    # A byte range stays within its limit, however large the limit asked for.
    huge = client.get(f"/api/v1/jobs/{job.pk}/attempts/1/log", {"limit": 1 << 40})
    assert huge.status_code == 400 and "limit" in huge.json()


@pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous")
def test_a_log_download_streams_in_bounded_pieces(job: Job, tokens: Tokens, settings: Any) -> None:
    settings.LOG_KEEP_BYTES = 64 << 20
    _no_newlines(job.attempts.get(), 5)
    answer = bearer(tokens.owner).get(f"/api/v1/jobs/{job.pk}/attempts/1/log/download")
    assert answer.status_code == 200 and answer.streaming
    pieces = list(answer)  # each piece as the view yielded it
    assert max(len(piece) for piece in pieces) <= 1 << 20
    data = b"".join(pieces)
    assert len(data) == 5 << 20 and data.endswith(b"A" * (1 << 20))
