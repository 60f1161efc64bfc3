"""The staff overview in Chromium at a laptop's size and a phone's (390x844): budgets against
their period with the project on course to run out named first, the week's goodput and
waste, an idle policy edited in its row and saved, the queues linked. Screenshots under
test-artifacts/."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from jobs.enums import State
from projects.models import IdlePolicy, Project, Quota, Reservation
from tests import factories
from tests.helpers import browser_log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}


def _spend(project, user, cluster, hours: str, *, wasted: dict[str, float]) -> None:
    _, attempt = factories.job(
        project, user, cluster, name=f"train-{project.slug}", state=State.FAILED
    )
    ended = timezone.now()  # in this week and this period, whatever the day
    factories.usage_charge(attempt, gpu_hours=hours, ended_at=ended)
    factories.efficiency_card(attempt, ended_at=ended, productive=float(hours) / 2, **wasted)


@pytest.fixture
def portal(project, owner, member):
    cluster = factories.cluster("alps")
    _spend(project, owner, cluster, "96", wasted={"idle": 30.0, "hung": 18.0})
    # Four more held by a live job: vision is out of budget now, whatever the day.
    _, live = factories.job(project, owner, cluster, name="live", state=State.RUNNING)
    Reservation.objects.create(
        attempt=live, project=project, gpus=4, gpu_hours=Decimal(4), created_at=timezone.now()
    )
    speech = Project.objects.create(slug="speech", name="Speech", slurm_account="speech")
    Quota.objects.create(project=speech, gpu_hours_per_period=Decimal("2000"))
    _spend(speech, member, cluster, "12", wasted={"lost": 6.0})
    Project.objects.create(slug="robotics", name="Robotics")  # no quota
    IdlePolicy.objects.create(project=speech, threshold_percent=15)
    factories.job(speech, member, cluster, name="waiting", state=State.PENDING)
    return project


def _no_wider_than_the_phone(page) -> None:
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the overview is {width} px wide on a phone"


def _save_row(page, slug: str, **values: str) -> None:
    row = page.locator(f"#policy-{slug}")
    for label, value in values.items():
        row.get_by_label(f"{label}, {slug}").fill(value)
    row.get_by_role("button", name="Save").click()
    page.get_by_text(f"{slug}: idle policy saved").wait_for()


def test_staff_read_the_overview_and_edit_idle_policies_in_place(
    page, live_server, staff, portal
) -> None:
    page.set_viewport_size(DESKTOP)
    browser_log_in(page, live_server.url, staff)
    page.get_by_role("link", name="Overview").click()
    page.get_by_role("heading", name="Budgets this period").wait_for()
    at_risk = page.locator("#at-risk").inner_text()
    assert "Vision models: out of budget now" in at_risk and "Speech" not in at_risk
    vision = page.locator("#budget-table tr[data-project=vision]")
    assert vision.locator("[data-col=held]").inner_text() == "4.0"
    assert vision.locator("[data-col=left]").inner_text() == "0.0"
    assert "100 % spent" in vision.locator("[data-col=burn]").inner_text()
    robotics = page.locator("#budget-table tr[data-project=robotics]").inner_text()
    assert "no quota" in robotics
    assert (
        page.locator("#goodput-table tr[data-project=vision] [data-col=goodput]").inner_text()
        == "50.0 %"
    )
    wasted = page.locator("#wasted-table tbody tr")
    assert wasted.first.get_attribute("data-job") is not None
    assert "train-vision" in wasted.first.inner_text() and "48.000" in wasted.first.inner_text()
    alps = page.locator("#queue-links tr[data-cluster=alps]")
    assert alps.locator("[data-col=waiting]").inner_text() == "1"
    assert (
        alps.get_by_role("link", name="Queue →").get_attribute("href") == "/clusters/alps/#h-queue"
    )
    screenshot(page, "staff-overview-desktop")

    # Vision has no policy: switch it on in its row, warn after 20 min, cancel 10 later.
    vision_row = page.locator("#policy-vision")
    vision_row.get_by_label("Watch idle GPUs, vision").check()
    _save_row(page, "vision", **{"Warn after (min)": "20", "Cancel after (min more)": "10"})
    policy = IdlePolicy.objects.get(project=portal)
    assert (policy.warn_after, policy.cancel_after) == (
        timedelta(minutes=20),
        timedelta(minutes=10),
    )
    assert (
        page.locator("#policy-vision").get_by_label("Warn after (min), vision").input_value()
        == "20"
    )
    screenshot(page, "staff-overview-saved-desktop")

    page.set_viewport_size(PHONE)
    page.reload()
    page.get_by_role("heading", name="Idle-GPU policies").wait_for()
    _no_wider_than_the_phone(page)
    screenshot(page, "staff-overview-phone")
    page.locator("#budget-table").scroll_into_view_if_needed()
    screenshot(page, "staff-overview-budgets-phone", full_page=False)
    # A refused value stays in its row with the reason, and nothing changes.
    speech = page.locator("#policy-speech")
    speech.get_by_label("Warn after (min), speech").fill("0.1")
    speech.get_by_role("button", name="Save").click()
    page.get_by_text("speech: the idle policy was not saved").wait_for()
    assert "0:00:10" in page.locator("#policy-speech").inner_text()
    assert IdlePolicy.objects.get(project__slug="speech").warn_after == timedelta(hours=1)
    _no_wider_than_the_phone(page)
    _save_row(page, "speech", **{"Idle under (% utilisation)": "30", "Warn after (min)": "45"})
    saved = IdlePolicy.objects.get(project__slug="speech")
    assert (saved.threshold_percent, saved.warn_after) == (30, timedelta(minutes=45))
    page.locator("#policy-speech").scroll_into_view_if_needed()
    screenshot(page, "staff-overview-saved-phone", full_page=False)
