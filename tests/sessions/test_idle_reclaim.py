"""Idle reclaim of JupyterLab sessions: idle GPUs and kernels that run nothing, warned by
page and mail, then cancelled; a busy kernel holds the ladder back; the card and the
project's goodput count a session's idle GPU-hours."""

import socket
import threading
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.core import mail
from django.test import Client

from jobs.enums import State, Template
from jobs.models import Attempt, JobEvent
from monitoring.goodput.card import attempt_card_compute
from monitoring.goodput.idle import attempt_idle_check
from monitoring.goodput.kernels import (
    ASK_SESSION_KERNELS,
    KERNELS_MAX_BYTES,
    KERNELS_RECHECK_SECONDS,
    KernelActivity,
    kernels_active,
    kernels_answer,
    kernels_ask,
    parse_kernels,
)
from monitoring.goodput.report import project_goodput
from monitoring.models import AttemptActivity, EfficiencyCard
from monitoring.tasks import ask_session_kernels
from tests import factories
from tests.monitoring.test_goodput import RULE, gpu_points, idle_policy_as_rule

KERNELS = Path(__file__).parents[1] / "monitoring" / "fixtures" / "jupyter_kernels"


def answer(name: str) -> KernelActivity:
    parsed = parse_kernels((KERNELS / f"{name}.json").read_bytes())
    assert parsed is not None
    return parsed


IDLE = answer("idle")
assert IDLE.last_activity is not None
QUIET_SINCE: datetime = IDLE.last_activity  # the idle kernel's last activity


class Server:
    """The session's server as the ladder hears it: one verbatim answer, the calls counted."""

    def __init__(self, name: str | None) -> None:
        self.name = name
        self.calls = 0

    def __call__(self, attempt: Attempt) -> KernelActivity | None:
        self.calls += 1
        return None if self.name is None else answer(self.name)


def check(attempt: Attempt, now: datetime, server: Server) -> str | None:
    """The poll's check; when it asks the server, the queued ask runs (as a worker runs it,
    with `server` for the session's) and the next poll acts on the answer."""
    asks: list[dict] = []
    action = attempt_idle_check(attempt=attempt, rule=RULE, now=now, ask=lambda **a: asks.append(a))
    if not asks:
        return action
    assert action is None and len(asks) == 1  # held back until the answer is in
    kernels_ask(**asks[0], read=server)
    return attempt_idle_check(attempt=attempt, rule=RULE, now=now, ask=_never)


def _never(**_: object) -> None:
    raise AssertionError("asked again with an answer in")


def test_the_servers_answers_say_whether_a_kernel_runs_and_when_one_last_did() -> None:
    assert answer("none") == KernelActivity(running=False, last_activity=None)
    assert answer("starting").running and answer("busy").running
    assert IDLE.running is False
    assert QUIET_SINCE.isoformat() == "2026-12-06T20:26:28.765520+00:00"
    for junk in (b"", b"{}", b'{"id": 1}', b"[1]", b"not json", b"[" + b" " * 70_000 + b"]"):
        assert parse_kernels(junk) is None
    # A kernel in a state the portal does not know runs something (it only holds a reclaim).
    assert parse_kernels(b'[{"execution_state": "restarting", "last_activity": 3}]') == (
        KernelActivity(running=True, last_activity=None)
    )


def test_a_session_is_idle_only_when_no_kernel_runs_or_ran_within_the_window() -> None:
    window = timedelta(seconds=30)
    busy, idle = answer("busy"), IDLE
    assert kernels_active(busy, window=window, now=QUIET_SINCE + timedelta(days=1))
    assert kernels_active(idle, window=window, now=QUIET_SINCE + timedelta(seconds=10))
    assert not kernels_active(idle, window=window, now=QUIET_SINCE + timedelta(seconds=31))
    assert not kernels_active(answer("none"), window=window, now=QUIET_SINCE)
    assert not kernels_active(None, window=window, now=QUIET_SINCE)  # no answer: GPUs decide


@pytest.fixture
def session(project, owner):
    idle_policy_as_rule(project, owner)
    job, attempt = factories.job(
        project,
        owner,
        factories.cluster(),
        template=Template.JUPYTER,
        command="jupyter lab",
        gpus_per_node=1,
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING,
        slurm_job_id="78",
        started_at=QUIET_SINCE,
        run_dir="/scratch/run-78",
        node_list="n1",
    )
    attempt.refresh_from_db()
    return job, attempt


def test_an_idle_session_is_warned_by_page_and_mail_then_cancelled(
    session, owner, eager_celery, django_capture_on_commit_callbacks
) -> None:
    job, attempt = session
    server = Server("idle")
    gpu_points(attempt, QUIET_SINCE, [2.0] * 35)
    now = QUIET_SINCE + timedelta(seconds=40)
    with django_capture_on_commit_callbacks(execute=True):
        assert check(attempt, now, server) == "warn"
    assert server.calls == 1
    (warning,) = mail.outbox
    assert "JupyterLab session" in warning.body and "will be cancelled at" in warning.body
    event = JobEvent.objects.get(attempt=attempt, reason__startswith="GPUs idle")
    assert "no kernel of the session ran anything" in event.reason
    client = Client()
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="idle-warned-at"' in page and 'id="idle-cancel-at"' in page
    # GPUs and kernels still idle past both windows: cancelled through the portal's cancel.
    gpu_points(attempt, QUIET_SINCE + timedelta(seconds=35), [1.0] * 30)
    later = now + timedelta(seconds=21)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert check(attempt, later, server) == "cancel"
    assert len(queued) == 1  # the scancel task
    attempt.refresh_from_db()
    assert attempt.cancel_requested_at is not None
    assert JobEvent.objects.filter(attempt=attempt, reason__contains="idle-GPU policy").count() == 1


def test_a_session_running_a_busy_cell_is_neither_warned_nor_cancelled(session) -> None:
    _, attempt = session
    server = Server("busy")
    gpu_points(attempt, QUIET_SINCE, [0.0] * 120)  # GPUs idle all along: a CPU cell
    for seconds in (40, 45, 80):
        now = QUIET_SINCE + timedelta(seconds=seconds)
        assert check(attempt, now, server) is None
    assert server.calls == 1  # asked once, then not again for a while (the poll runs often)
    activity = AttemptActivity.objects.get(attempt=attempt)
    assert activity.warned_at is None and activity.idle_since_x is not None
    attempt.refresh_from_db()
    assert attempt.cancel_requested_at is None
    assert not mail.outbox


def test_a_kernel_that_ran_within_the_window_holds_the_warning_back(session) -> None:
    _, attempt = session
    gpu_points(attempt, QUIET_SINCE - timedelta(seconds=60), [0.0] * 75)
    now = QUIET_SINCE + timedelta(seconds=10)  # GPUs idle 75 s, the kernel ran 10 s ago
    assert check(attempt, now, Server("idle")) is None
    assert AttemptActivity.objects.get(attempt=attempt).warned_at is None


def test_a_kernel_busy_again_lifts_the_warning_instead_of_a_cancel(session) -> None:
    _, attempt = session
    gpu_points(attempt, QUIET_SINCE, [0.0] * 70)
    now = QUIET_SINCE + timedelta(seconds=40)
    assert check(attempt, now, Server("idle")) == "warn"
    later = now + timedelta(seconds=21)
    busy = Server("busy")
    assert check(attempt, later, busy) == "clear"
    attempt.refresh_from_db()
    assert attempt.cancel_requested_at is None
    assert JobEvent.objects.filter(attempt=attempt, reason__startswith="A kernel").exists()


def test_busy_gpus_are_never_warned_and_the_server_is_not_asked(session) -> None:
    _, attempt = session
    server = Server("idle")
    gpu_points(attempt, QUIET_SINCE, [85.0] * 60)
    now = QUIET_SINCE + timedelta(seconds=60)
    assert check(attempt, now, server) is None
    assert server.calls == 0  # kernels never make GPUs look idle, nor busy


def test_a_session_that_cannot_be_asked_is_judged_by_its_gpus(session) -> None:
    _, attempt = session
    gpu_points(attempt, QUIET_SINCE, [0.0] * 35)
    now = QUIET_SINCE + timedelta(seconds=40)
    assert check(attempt, now, Server(None)) == "warn"


def test_the_poll_never_waits_on_the_sessions_server(
    session, django_capture_on_commit_callbacks
) -> None:
    """The server is the tenant's: the poll only queues an ask, once, and waits for its
    answer before it warns; a slow server holds back no one's poll but its own warning."""
    _, attempt = session
    server = Server("idle")
    gpu_points(attempt, QUIET_SINCE, [0.0] * 35)
    now = QUIET_SINCE + timedelta(seconds=40)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        for seconds in (0, 1, 2):
            later = now + timedelta(seconds=seconds)
            assert attempt_idle_check(attempt=attempt, rule=RULE, now=later) is None
    assert len(queued) == 1 and ask_session_kernels.name == ASK_SESSION_KERNELS
    assert server.calls == 0  # the poll asked no server itself
    assert AttemptActivity.objects.get(attempt=attempt).warned_at is None
    assert kernels_ask(attempt_id=attempt.pk, window=RULE.warn_after, now=now, read=server) is False
    assert attempt_idle_check(attempt=attempt, rule=RULE, now=now, ask=_never) == "warn"
    # An attempt that no longer runs is not asked.
    Attempt.objects.filter(pk=attempt.pk).update(state=State.CANCELLED)
    assert kernels_ask(attempt_id=attempt.pk, window=RULE.warn_after, read=server) is None
    assert server.calls == 1


def test_an_ask_not_taken_before_the_next_is_dropped(
    session, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    """A tenants' worker that cannot keep up is behind by one ask per session at most:
    each message expires when the next ask may be queued."""
    _, attempt = session
    gpu_points(attempt, QUIET_SINCE, [0.0] * 35)
    sent: list[dict[str, object]] = []
    monkeypatch.setattr(ask_session_kernels, "apply_async", lambda args, **kw: sent.append(kw))
    with django_capture_on_commit_callbacks(execute=True):
        attempt_idle_check(attempt=attempt, rule=RULE, now=QUIET_SINCE + timedelta(seconds=40))
    assert [message["expires"] for message in sent] == [KERNELS_RECHECK_SECONDS]


def test_a_sessions_idle_gpu_hours_are_in_its_card_and_the_projects_goodput(
    session, project
) -> None:
    _, attempt = session
    ended = QUIET_SINCE + timedelta(seconds=600)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.CANCELLED, ended_at=ended, files_complete=True
    )
    attempt.refresh_from_db()
    # Busy for 400 s, idle for the last 200 s; a session logs no step.
    gpu_points(attempt, QUIET_SINCE, [70.0] * 400 + [0.0] * 200)
    attempt_card_compute(attempt=attempt)
    card = EfficiencyCard.objects.get(attempt=attempt)
    parts = card.data["parts"]
    assert parts["startup"] == 0
    assert parts["idle"] * 3600 == pytest.approx(200, abs=2)
    assert parts["productive"] * 3600 == pytest.approx(400, abs=2)
    goodput = project_goodput(project_id=project.pk, first=ended.date(), last=ended.date())
    assert goodput.total.attempts == 1
    assert goodput.total.parts["idle"] == pytest.approx(parts["idle"])


class _Lab(BaseHTTPRequestHandler):
    """JupyterLab's `api/kernels` as it answers (the verbatim busy answer), token checked."""

    body = (KERNELS / "busy.json").read_bytes()

    def do_GET(self) -> None:
        ok = self.path == "/sessions/5/lab/api/kernels"
        ok = ok and self.headers.get("Authorization") == "token " + "ab" * 32
        self.send_response(200 if ok else 403)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def lab():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Lab)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    _Lab.body = (KERNELS / "busy.json").read_bytes()


def _ask(port: int, token: str) -> bytes | None:
    request = (
        f"GET /sessions/5/lab/api/kernels HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: token {token}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as stream:
        return kernels_answer(stream, request)


def test_the_answer_is_read_with_the_token_and_refused_past_its_cap(lab) -> None:
    body = _ask(lab, "ab" * 32)
    assert body is not None and parse_kernels(body) == answer("busy")
    assert _ask(lab, "cd" * 32) is None  # refused: not the server's kernels
    _Lab.body = b"[" + b" " * (KERNELS_MAX_BYTES + 8192) + b"]"
    assert _ask(lab, "ab" * 32) is None  # read no further than the cap
