"""The facts a researcher looks for, in Chromium against daphne: the job page's header and
log search, the cluster page's queue, the project's burn-down, the tokens page; and no
page here scrolls sideways at phone width. No cluster: rows are staged with factories."""

import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import job_group
from projects.models import UsageCharge
from tests import factories
from tests.helpers import PASSWORD, screenshot, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
LOG = (
    "ddp_train: world_size=2 backend=gloo start_step=0\n"
    "step 1, loss=0.9000\n"
    "NCCL WARN net: slow link\n"
    "step 2, loss=0.7000\n"
    "nccl warn retrying\n"
    "step 3, loss=0.5000\n"
    "Warning: lr scheduler\n"
)


def _log_in(page, server: str, user, path: str) -> None:
    page.goto(f"{server}/login/?next={path}")
    page.get_by_label("User name").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**{path}")


def _push(job_id: int, **delta: object) -> None:
    """What the poll sends after it stored the rows (monitoring.ingest.watch)."""
    send = async_to_sync(get_channel_layer().group_send)
    message = {"type": "job.delta", "job": job_id, **delta}
    # Playwright's loop runs in this thread, and async_to_sync needs one without.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(send, job_group(job_id), message).result(timeout=30)


def _unreachable_cluster() -> Cluster:
    """A cluster whose status read fails at once (nothing listens): the page still shows."""
    cluster = factories.cluster("alps")
    Cluster.objects.filter(pk=cluster.pk).update(ssh_host="127.0.0.1", ssh_port=1)
    factories.account(cluster, None)
    return cluster


def _no_sideways_scroll(page, path: str, server: str) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{server}{path}")
    page.wait_for_timeout(300)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"{path} is {width} px wide at 390"


def test_job_header_facts_and_log_search(asgi_server, project, member, page) -> None:
    cluster = _unreachable_cluster()
    started = datetime.now(UTC) - timedelta(minutes=3)
    job, attempt = factories.job(project, member, cluster, max_restarts=2, state=State.RUNNING)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, slurm_job_id="4242", node_list="n[1-2]",
        submitted_at=started - timedelta(minutes=1), started_at=started,
        run_dir="/home/mia/portal-runs/r1",
    )  # fmt: skip
    store_log(attempt, LOG.encode())
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _log_in(page, asgi_server, member, f"/jobs/{job.pk}/")

    facts = page.locator("#job-facts")
    assert "4242" in facts.locator("#fact-slurm-ids").inner_text()
    assert facts.locator("#fact-nodes").inner_text() == "n[1-2]"
    assert page.locator("#attempt-of").inner_text() == "attempt 1 of at most 3"
    assert facts.locator("#fact-run-dir").inner_text() == "/home/mia/portal-runs/r1"
    assert facts.locator("#fact-state").inner_text() == "Running"
    # Elapsed ticks in the page: about three minutes, in squeue's H:MM:SS.
    wait_for(
        lambda: re.fullmatch(r"0:0[34]:\d\d", page.locator("#fact-elapsed").inner_text()),
        10,
        "the elapsed time",
    )

    log = page.locator("#log")
    wait_for(lambda: "Warning: lr" in log.inner_text(), 30, "the log")
    search = page.locator("#log-search")
    search.fill("warn")  # any case
    assert page.locator("#log mark").count() == 3
    assert page.locator("#log-matches").inner_text() == "1 of 3 matches"
    page.locator("#log-next").click()
    assert page.locator("#log-matches").inner_text() == "2 of 3 matches"
    assert page.locator("#log mark.current").inner_text() == "warn"  # the second: "nccl warn"
    page.locator("#log-prev").click()
    page.locator("#log-prev").click()  # past the first: around to the last
    assert page.locator("#log mark.current").inner_text() == "Warn"
    assert page.locator("#log-matches").inner_text().startswith("3 of 3")
    # Only the matching lines.
    page.locator("#log-filter").check()
    assert log.inner_text().splitlines() == [
        "NCCL WARN net: slow link",
        "nccl warn retrying",
        "Warning: lr scheduler",
    ]
    assert page.locator("#log-matches").inner_text() == "1 of 3 matches in 3 lines"
    # A regular expression, still any case.
    page.locator("#log-regex").check()
    search.fill(r"LOSS=0\.[5-7]")
    assert log.inner_text().splitlines() == ["step 2, loss=0.7000", "step 3, loss=0.5000"]
    search.fill("loss=(")
    assert "Not a regular expression" in page.locator("#log-matches").inner_text()
    search.fill("")
    page.locator("#log-filter").uncheck()
    assert "ddp_train: world_size=2" in log.inner_text()
    assert not errors, errors
    screenshot(page, "job-page-facts")
    _no_sideways_scroll(page, f"/jobs/{job.pk}/", asgi_server)

    # A job Slurm keeps waiting shows why, as Slurm says it.
    waiting, attempt = factories.job(project, member, cluster, name="waits", state=State.PENDING)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING, slurm_job_id="4243", slurm_reason="QOSMaxGRESPerUser"
    )
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{asgi_server}/jobs/{waiting.pk}/")
    assert page.locator("#fact-reason").inner_text() == "(QOSMaxGRESPerUser)"
    assert page.locator("#fact-elapsed").inner_text() == "-"
    page.wait_for_timeout(1000)  # the socket joins its group
    # It starts while the page is open: the poll stores it and tells the page; no reload.
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, slurm_reason="", node_list="n2", started_at=datetime.now(UTC)
    )
    type(waiting).objects.filter(pk=waiting.pk).update(state=State.RUNNING)
    _push(waiting.pk, attempt=1, state=State.RUNNING)
    page.locator("#fact-nodes", has_text="n2").wait_for()
    assert page.locator("#fact-reason").count() == 0
    assert re.fullmatch(r"0:00:\d\d", page.locator("#fact-elapsed").inner_text())


def test_cluster_queue_burn_down_and_tokens(
    asgi_server, project, member, owner, outsider, page
) -> None:
    cluster = _unreachable_cluster()
    _, attempt = factories.job(project, owner, cluster, name="waits", state=State.PENDING)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING, slurm_job_id="5150", slurm_reason="Resources"
    )
    _, done = factories.job(project, member, cluster, name="finished", state=State.COMPLETED)
    ended = datetime.now(UTC)
    UsageCharge.objects.create(
        attempt=done, project=project, user=member, cluster=cluster, gpus=4,
        started_at=ended - timedelta(hours=5), ended_at=ended, elapsed_seconds=18000,
        gpu_hours=Decimal("20"), cost=Decimal("0"), source=UsageCharge.Source.PORTAL,
    )  # fmt: skip
    _log_in(page, asgi_server, member, "/")

    # The navigation's Clusters link, then the cluster's queue as the portal knows it.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Clusters").click()
    page.wait_for_url("**/clusters/")
    page.get_by_role("link", name="alps").click()
    row = page.locator("#pending-table tr[data-job]", has_text="waits")
    assert "5150" in row.inner_text() and "Waiting for resources" in row.inner_text()
    assert row.locator("[data-reason-code]").get_attribute("title") == "Slurm's reason: Resources"
    for table in ("#line-table", "#pending-table", "#queue-table"):
        assert "finished" not in page.locator(table).inner_text()
    _no_sideways_scroll(page, "/clusters/alps/", asgi_server)
    _no_sideways_scroll(page, "/clusters/", asgi_server)
    _no_sideways_scroll(page, "/jobs/new/", asgi_server)

    # The project's burn-down: drawn, labelled, with the budget line.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{asgi_server}/projects/{project.slug}/")
    chart = page.locator("#chart-usage")
    chart.locator(".main-svg").first.wait_for()
    traces = page.evaluate(
        """() => document.getElementById('chart-usage').data.map((t) =>
        ({name: t.name, y: Array.from(t.y)}))"""
    )
    by_name = {t["name"]: t["y"] for t in traces}
    assert by_name["budget (100 GPU-h)"] == [100, 100]
    assert by_name["GPU-h left"][0] == 100 and by_name["GPU-h left"][-1] == 80
    assert "GPU-hours left this period: 80 of 100" in (chart.text_content() or "")
    assert "budget (100 GPU-h)" in (chart.locator(".legend").text_content() or "")
    screenshot(page, "project-burn-down")
    _no_sideways_scroll(page, f"/projects/{project.slug}/", asgi_server)

    # Tokens: a new one's copy button puts it on the clipboard; the snippet uses it.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{asgi_server}/account/tokens/")
    page.get_by_label("Name").fill("notebook")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").inner_text()
    page.get_by_role("button", name="Copy the token").click()
    assert page.evaluate("navigator.clipboard.readText()") == token
    snippet = page.locator("#python-snippet").inner_text()
    assert f'Portal("{asgi_server}", token="{token}")' in snippet
    page.get_by_role("button", name="Copy the Python snippet").click()
    assert page.evaluate("navigator.clipboard.readText()") == snippet
    screenshot(page, "tokens")
    _no_sideways_scroll(page, "/account/tokens/", asgi_server)

    # An outsider sees neither the cluster's queue nor the project.
    page.context.clear_cookies()
    _log_in(page, asgi_server, outsider, "/clusters/")
    assert "alps" not in page.locator("main").inner_text()
    assert page.goto(f"{asgi_server}/clusters/alps/").status == 404
    assert page.goto(f"{asgi_server}/projects/{project.slug}/").status == 404
