"""The submit form's wait by cluster in Chromium against daphne: the clusters the project
may use with how long similar jobs waited (recorded history, factories), and a click on the
soonest one chooses it. No cluster: both are unreachable, so the form knows no partitions
and the spec is on each cluster's default partition."""

import pytest

from clusters.models import Cluster
from tests import factories
from tests.helpers import PASSWORD, screenshot
from tests.jobs.test_form_waits import _waited

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _unreachable(name: str) -> Cluster:
    cluster = factories.cluster(name, ssh_host="127.0.0.1", ssh_port=1)
    factories.account(cluster, None)
    return cluster


def test_the_form_offers_the_cluster_where_similar_jobs_started_sooner(
    asgi_server, project, member, page
) -> None:
    alps, bern = _unreachable("alps"), _unreachable("bern")
    _waited(project, member, alps, 20, 30, 40, partition="")
    _waited(project, member, bern, 1, 2, 3, partition="")
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{asgi_server}/login/?next=/jobs/new/")
    page.get_by_label("User name").fill(member.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/jobs/new/")
    page.locator("#id_cluster").select_option("alps")
    page.locator("#id_name").fill("resnet")
    page.locator("#id_command").fill("python train.py")
    page.locator("#id_time_limit").fill("0:30:00")

    rows = page.locator("#est-waits-rows tr")
    page.locator("#est-waits").wait_for(state="visible")
    assert rows.nth(0).inner_text().split("\t")[0] == "alps (chosen)"
    assert "30 min median" in rows.nth(0).inner_text()
    assert "2 min median" in rows.nth(1).inner_text() and "soonest" in rows.nth(1).inner_text()
    sooner = page.locator("#est-sooner")
    assert sooner.inner_text() == (
        "Similar jobs started sooner on bern: 2 min median (30 min on alps)."
    )
    screenshot(page, "submit-waits")

    page.get_by_role("button", name="use bern").click()
    page.locator("#est-waits-rows tr", has_text="bern (chosen)").wait_for()
    assert page.locator("#id_cluster").input_value() == "bern"
    assert sooner.inner_text() == ""
    assert errors == []
