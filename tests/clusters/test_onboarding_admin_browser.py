"""The admin's Clusters -> Add in Chromium, against daphne, a real Celery worker and the
sandbox's sshd: a staff member gives the host, confirms the fingerprint shown, and lands
on the cluster's page, where a reload later the readiness report reads as passed."""

import pytest
from django.contrib.auth.models import User

from clusters.hostkeys import fingerprint, parse_host_key
from clusters.models import Cluster, ReadinessReport
from tests.helpers import browser_log_in, screenshot, wait_for, worker_tag

pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(600)]

WAIT = 300  # seconds: the worker's report, its test jobs queued behind other tests' jobs


def test_staff_add_a_cluster_in_the_admin_by_its_fingerprint(
    transactional_db: None,
    asgi_server: str,
    celery_worker: object,
    staff: User,
    sandbox_info,
    page,
) -> None:
    browser_log_in(page, asgi_server, staff)

    page.goto(f"{asgi_server}/admin/clusters/cluster/add/")
    page.get_by_label("SSH host").fill(sandbox_info.ssh_host)
    page.get_by_label("SSH port").fill(str(sandbox_info.ssh_port))
    page.locator("#id_name").fill("adm-browser")  # its label, "Name:", is no exact match
    page.get_by_label("Portal (operator) account").fill(sandbox_info.portal_user)
    page.get_by_label("Base run dir").fill(f"~/portal-runs/{worker_tag()}-admin-browser")
    page.get_by_role("button", name="Fetch the host key").click()

    shown = fingerprint(*parse_host_key(sandbox_info.host_key))
    assert page.locator("#host-key-fingerprint").inner_text() == shown
    assert not Cluster.objects.filter(name="adm-browser").exists()
    page.get_by_label("Fingerprint the site gave you").fill(shown.split()[1])
    page.get_by_label("Portal account's private key").fill(sandbox_info.portal_key)
    screenshot(page, "cluster-add-confirm")
    page.get_by_role("button", name="Confirm and add the cluster").click()

    page.get_by_text("Cluster adm-browser recorded").wait_for()
    assert page.url.endswith("/clusters/adm-browser/#readiness")
    cluster = Cluster.objects.get(name="adm-browser")
    wait_for(
        lambda: ReadinessReport.objects.filter(
            cluster=cluster, state=ReadinessReport.State.DONE
        ).exists(),
        WAIT,
        "the worker's readiness report of the added cluster",
    )
    page.reload()
    checks = page.locator("#readiness-checks li")
    checks.first.wait_for()
    verdicts = dict(
        checks.evaluate_all("items => items.map(i => [i.dataset.check, i.dataset.passed])")
    )
    for name in ("Login node", "Slurm commands", "Shared run directory", "Python on the nodes"):
        assert verdicts[name] == "true", page.locator("#readiness").inner_text()
    assert "by root-admin" in page.locator("#readiness-state").inner_text()
