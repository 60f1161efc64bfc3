"""An open portal page shows a browser notification for a new alert, and the top bar
counts it; the notification leads to the job at the moment it fired."""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobs.models import Attempt
from monitoring.alerts.evaluate import alert_fire
from monitoring.alerts.rules import Fire
from monitoring.models import AlertKind, AlertRule
from projects.models import Project
from tests import factories
from tests.helpers import PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Records each notification the page makes, then makes it: the page's own code is unchanged.
SPY = """
window.__notified = [];
const Real = window.Notification;
window.Notification = class extends Real {
  constructor(title, options) { super(title, options); window.__notified.push([title, options.body]); }
};
Object.defineProperty(window.Notification, "permission", { get: () => Real.permission });
"""


def test_open_page_notifies_a_new_alert(page, live_server, owner: User, project: Project) -> None:
    _, attempt = factories.job(project, owner, factories.cluster())
    page.context.grant_permissions(["notifications"], origin=live_server.url)
    page.add_init_script(SPY)
    page.goto(live_server.url + "/")
    page.get_by_label("User name").fill(owner.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.goto(live_server.url + "/alerts/")
    page.get_by_text("No alerts yet.").wait_for()
    # The first poll has set what was seen before (nothing): later alerts pop up.
    page.wait_for_function("localStorage.getItem('portal.alerts.seen') !== null")

    rule = AlertRule.objects.create(owner=owner, kind=AlertKind.LOSS_NONFINITE)
    alert = alert_fire(
        rule=rule,
        attempt=Attempt.objects.get(pk=attempt.pk),
        fire=Fire("train (attempt 1): loss is NaN or infinite by step 40", 40.0),
        now=timezone.now(),
    )
    assert alert is not None
    page.wait_for_function("window.__notified.length > 0", timeout=40_000)
    assert page.evaluate("window.__notified") == [
        ["GPU portal alert", "train (attempt 1): loss is NaN or infinite by step 40"]
    ]
    assert page.locator("#alerts-count").inner_text() == "1"
    page.reload()
    link = page.get_by_role("link", name=f"train #{attempt.job_id}")
    assert link.get_attribute("href") == f"/jobs/{attempt.job_id}/?attempt=1&at=40"
