"""The cluster page's "Check readiness" button in Chromium, against daphne, a real Celery
worker and the sandbox: a staff member presses it and, a reload later, reads the report."""

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster, ReadinessReport
from tests.helpers import browser_log_in, screenshot, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(600)]

WAIT = 300  # seconds: the worker's report, its test jobs queued behind other tests' jobs


def test_staff_presses_check_readiness_and_reads_the_report(
    transactional_db: None,
    asgi_server: str,
    celery_worker: object,
    staff: User,
    sandbox_cluster: Cluster,
    page,
) -> None:
    browser_log_in(page, asgi_server, staff)

    page.goto(f"{asgi_server}/clusters/{sandbox_cluster.name}/")
    page.get_by_text("Not checked yet.").wait_for()
    page.get_by_role("button", name="Check readiness").click()
    page.get_by_text(f"Readiness check of {sandbox_cluster.name} started").wait_for()
    wait_for(
        lambda: ReadinessReport.objects.filter(
            cluster=sandbox_cluster, state=ReadinessReport.State.DONE
        ).exists(),
        WAIT,
        "the worker's readiness report",
    )
    page.reload()
    checks = page.locator("#readiness-checks li")
    checks.first.wait_for()
    names = checks.evaluate_all("items => items.map(i => [i.dataset.check, i.dataset.passed])")
    verdicts = dict(names)
    for name in ("Login node", "Shared run directory", "Python on the nodes", "GPU sampler"):
        assert verdicts[name] == "true", page.locator("#readiness").inner_text()
    assert "by root-admin" in page.locator("#readiness-state").inner_text()
    screenshot(page, "cluster-readiness")
