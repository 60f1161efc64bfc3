"""Alert delivery: the webhook's Slack-compatible payload from a Celery task, the SSRF
refusals, the mail, and the alert pages that only their owner sees."""

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import Attempt
from monitoring.alerts.delivery import (
    WebhookRefused,
    alert_deliver,
    webhook_check,
    webhook_send,
)
from monitoring.alerts.evaluate import alert_fire
from monitoring.alerts.rules import Fire
from monitoring.models import Alert, AlertKind, AlertRule
from projects.models import Project
from tests import factories
from tests.webhook_receiver import tls_server, webhook_receiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with webhook_receiver() as found:
        yield found


@pytest.fixture
def attempt(project: Project, owner: User) -> Attempt:
    _, attempt = factories.job(project, owner, factories.cluster())
    return attempt


def _alert(owner: User, attempt: Attempt, **rule_fields: object) -> Alert:
    rule = AlertRule.objects.create(owner=owner, kind=AlertKind.LOSS_NONFINITE, **rule_fields)
    alert = alert_fire(
        rule=rule,
        attempt=attempt,
        fire=Fire("train (attempt 1): loss is NaN", 120.0),
        now=timezone.now(),
    )
    assert alert is not None
    return alert


def test_webhook_gets_slack_json_once(
    owner: User, attempt: Attempt, receiver: tuple[str, list[dict[str, Any]]]
) -> None:
    url, bodies = receiver
    alert = _alert(owner, attempt, webhook_url=url)
    alert_deliver(alert_id=alert.pk)
    alert_deliver(alert_id=alert.pk)  # a retried task: claimed already
    (body,) = bodies
    assert set(body) == {"text"}
    assert body["text"].startswith("train (attempt 1): loss is NaN <http")
    assert f"/jobs/{attempt.job_id}/?attempt=1&at=120|open the job>" in body["text"]
    alert.refresh_from_db()
    assert alert.webhook_at is not None and alert.webhook_error == ""


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.org/hook",
        "http://10.0.0.5/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data/",  # cloud metadata
        "http://[fd00::1]/hook",
        "http://0.0.0.0/hook",
        "http://user:pw@example.org/hook",
    ],
)
def test_webhook_refuses_private_targets(url: str) -> None:
    with pytest.raises(WebhookRefused):
        webhook_check(url)


def test_loopback_only_where_the_setting_allows(settings: Any) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    with pytest.raises(WebhookRefused, match="not a public address"):
        webhook_check("http://127.0.0.1:9/hook")
    with pytest.raises(WebhookRefused):
        webhook_check("http://localhost:9/hook")
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = True
    assert webhook_check("http://127.0.0.1:9/hook") == ["127.0.0.1"]


def test_a_name_resolving_to_a_private_address_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def resolve(host: str, port: int, **kwargs: object) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(WebhookRefused, match=r"10\.1\.2\.3"):
        webhook_check("https://hooks.example.org/x")


class RebindingResolver:
    """The resolver a rebinding attacker runs: each lookup of `name` gets the next answer
    (the last one ever after); every other host is resolved as usual."""

    def __init__(self, name: str, answers: list[str]) -> None:
        self.name, self.answers, self.asked = name, answers, 0
        self.real = socket.getaddrinfo

    def __call__(self, host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != self.name:
            return self.real(host, port, *args, **kwargs)
        answer = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answer, int(port)))]


def test_the_webhook_connects_to_the_address_it_checked_not_a_second_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The name answers 127.0.0.1 (allowed here by the test-only loopback setting), then
    127.0.0.2 where another receiver waits: a client that resolved the name again would
    deliver there. The real connection path runs against both receivers."""
    checked_hosts: list[str] = []
    with webhook_receiver("127.0.0.1", hosts=checked_hosts) as (checked_url, checked_bodies):
        port = int(checked_url.rsplit(":", 1)[1].split("/")[0])
        with webhook_receiver("127.0.0.2", port) as (_, rebound_bodies):
            resolver = RebindingResolver("hooks.example.test", ["127.0.0.1", "127.0.0.2"])
            monkeypatch.setattr(socket, "getaddrinfo", resolver)
            error = webhook_send(f"http://hooks.example.test:{port}/hook", {"text": "hi"})
    assert error == ""
    assert checked_bodies == [{"text": "hi"}]
    assert rebound_bodies == []
    assert resolver.asked == 1
    assert checked_hosts == [f"hooks.example.test:{port}"]


def test_a_name_that_rebinds_to_a_refused_address_reaches_nothing(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """The same rebinding with loopback refused, as in production: the check's one answer is
    the address used, and it is refused before any connection."""
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    with webhook_receiver("127.0.0.1") as (url, bodies):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        resolver = RebindingResolver("hooks.example.test", ["127.0.0.1", "8.8.8.8"])
        monkeypatch.setattr(socket, "getaddrinfo", resolver)
        error = webhook_send(f"http://hooks.example.test:{port}/hook", {"text": "hi"})
    assert "127.0.0.1, which is not a public address" in error
    assert bodies == []
    assert resolver.asked == 1


def test_https_to_the_pinned_address_sends_the_name_and_verifies_its_certificate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """TLS to the checked address still says the name (SNI, Host) and checks the
    certificate against the name: one for the name passes, one for another name fails."""
    monkeypatch.setattr(
        socket, "getaddrinfo", RebindingResolver("hooks.example.test", ["127.0.0.1"])
    )
    for cert_name, delivered in [("hooks.example.test", True), ("other.example.test", False)]:
        server_names: list[str] = []
        hosts: list[str] = []
        folder = tmp_path / cert_name
        folder.mkdir()
        context, ca_file = tls_server(folder, cert_name, server_names)
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # httpx's trust store
        with webhook_receiver("127.0.0.1", hosts=hosts, tls=context) as (url, bodies):
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            error = webhook_send(f"https://hooks.example.test:{port}/hook", {"text": "hi"})
        assert server_names == ["hooks.example.test"]
        if delivered:
            assert error == ""
            assert bodies == [{"text": "hi"}]
            assert hosts == [f"hooks.example.test:{port}"]
        else:
            assert "CERTIFICATE_VERIFY_FAILED" in error or "certificate verify failed" in error
            assert bodies == []


def test_refused_at_send_time_is_recorded(owner: User, attempt: Attempt, settings: Any) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    alert = _alert(owner, attempt, webhook_url="http://127.0.0.1:9/hook")
    alert_deliver(alert_id=alert.pk)
    alert.refresh_from_db()
    assert "not a public address" in alert.webhook_error


def test_mail_once(owner: User, attempt: Attempt) -> None:
    alert = _alert(owner, attempt, to_mail=True)
    alert_deliver(alert_id=alert.pk)
    alert_deliver(alert_id=alert.pk)
    (sent,) = mail.outbox
    assert sent.to == [owner.email]
    assert "loss is NaN" in sent.subject
    assert f"/jobs/{attempt.job_id}/?attempt=1&at=120" in sent.body


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_alert_pages_show_only_the_owners_alerts(
    owner: User, outsider: User, attempt: Attempt
) -> None:
    alert = _alert(owner, attempt)
    page = _client(owner).get(reverse("alerts"))
    assert page.status_code == 200
    assert f"/jobs/{attempt.job_id}/?attempt=1&amp;at=120" in page.content.decode()
    unread = _client(owner).get(reverse("alerts-unread")).json()
    assert unread["count"] == 1 and unread["alerts"][0]["id"] == alert.pk

    outsiders = _client(outsider)
    assert "loss is NaN" not in outsiders.get(reverse("alerts")).content.decode()
    assert outsiders.get(reverse("alerts-unread")).json() == {"count": 0, "alerts": []}
    outsiders.post(reverse("alerts-read"), {"alert": alert.pk})
    alert.refresh_from_db()
    assert alert.read_at is None  # not theirs to mark
    assert Client().get(reverse("alerts")).status_code == 302  # to the login page

    _client(owner).post(reverse("alerts-read"), {"alert": alert.pk})
    alert.refresh_from_db()
    assert alert.read_at is not None


def test_rules_page_adds_with_clear_errors_and_guards_projects(
    owner: User, member: User, project: Project, settings: Any
) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    client = _client(member)
    page = client.post(
        reverse("alert-rules"),
        {"kind": AlertKind.LOSS_ABOVE, "series": "loss", "to_portal": "on"},
    )
    assert "Give the bound the series must stay under." in page.content.decode()
    page = client.post(
        reverse("alert-rules"),
        {"kind": AlertKind.STARTED, "series": "loss", "to_portal": "on", "project": project.pk},
    )
    assert "Select a valid choice" in page.content.decode()  # members may not set project rules
    page = client.post(
        reverse("alert-rules"),
        {"kind": AlertKind.ENDED, "series": "loss", "webhook_url": "http://127.0.0.1/x"},
    )
    assert "not a public address" in page.content.decode()
    assert not AlertRule.objects.exists()

    done = _client(owner).post(
        reverse("alert-rules"),
        {"kind": AlertKind.ENDED, "series": "loss", "to_mail": "on", "project": project.pk},
    )
    assert done.status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.owner, rule.project) == (owner, project)
    assert client.post(reverse("alert-rule-delete", args=[rule.pk])).status_code == 302
    assert AlertRule.objects.filter(pk=rule.pk).exists()  # not the member's to delete


def test_alert_list_queries_do_not_grow(
    owner: User, attempt: Attempt, django_assert_num_queries: Any
) -> None:
    for number in range(3):
        rule = AlertRule.objects.create(owner=owner, kind=AlertKind.STARTED, series=str(number))
        alert_fire(rule=rule, attempt=attempt, fire=Fire(f"started {number}"), now=timezone.now())
    client = _client(owner)
    with django_assert_num_queries(3):  # the session, the user, the alerts with jobs and attempts
        assert client.get(reverse("alerts")).status_code == 200
    with django_assert_num_queries(4):  # the session, the user, the newest unread, their count
        assert client.get(reverse("alerts-unread")).json()["count"] == 3


def test_admin_lists_rules_and_alerts(owner: User, attempt: Attempt, staff: User) -> None:
    _alert(owner, attempt)
    client = _client(staff)
    assert "loss is NaN" in client.get("/admin/monitoring/alert/").content.decode()
    assert client.get("/admin/monitoring/alertrule/").status_code == 200
