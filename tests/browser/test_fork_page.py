"""Fork and resume from the job page's checkpoint list in Chromium: the owner forks step 20
with a new learning rate through the prefilled form, the fork's page names its parent, and
the ended original is resumed from step 20; the list fits a phone's width."""

import pytest
from django.core.cache import cache

from jobs.enums import State
from jobs.models import Attempt, Job
from tests import factories
from tests.helpers import browser_log_in, screenshot
from tests.jobs.test_lineage import _saved

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

RUN_DIR = "/home/svc/portal-runs/a1"


def _ended_run(project, owner) -> Job:
    cluster = factories.cluster("alps")
    cache.set(f"clusters:partitions:{cluster.pk}", {"gpu": factories.GPU_PARTITION}, 600)
    account = factories.account(cluster, None)
    job, attempt = factories.job(
        project,
        owner,
        cluster,
        name="base",
        command="python train.py --steps 60 --lr 0.01",
        partition="gpu",
        cpus_per_task=1,
        state=State.COMPLETED,
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.COMPLETED, account=account, run_dir=RUN_DIR, files_complete=True
    )
    _saved(attempt, 20, 40, 60)
    return job


def test_fork_from_the_list_with_a_new_learning_rate_then_resume(
    asgi_server, project, owner, page, monkeypatch
) -> None:
    monkeypatch.setattr("jobs.services._queue_submission", lambda attempt_id: None)
    parent = _ended_run(project, owner)
    browser_log_in(page, asgi_server, owner)
    page.goto(f"{asgi_server}/jobs/{parent.pk}/")
    rows = page.locator("#checkpoints tbody tr")
    step_20 = rows.filter(has_text="step-20.pt")
    step_20.get_by_role("link", name="Fork…").click()
    page.locator("#fork-from").wait_for()
    assert "at step 20 (attempt 1)" in page.locator("#fork-from").inner_text()
    command = page.locator("#id_command")
    assert command.input_value() == "python train.py --steps 60 --lr 0.01"
    command.fill("python train.py --steps 60 --lr 0.003")
    screenshot(page, "fork-form", full_page=False)
    page.locator("#job-form button[type=submit]").last.click()
    page.locator("#job-parent").wait_for()
    fork = Job.objects.get(parent=parent)
    assert page.url.endswith(f"/jobs/{fork.pk}/")
    assert (
        page.locator("#job-parent")
        .inner_text()
        .startswith(f"Forked from base (#{parent.pk}) at step 20")
    )
    assert fork.params["lr"] == 0.003
    screenshot(page, "fork-page", full_page=False)

    page.locator("#job-parent a").click()
    page.locator("#checkpoints").wait_for()
    page.locator("#checkpoints tbody tr", has_text="step-20.pt").get_by_role(
        "button", name="Resume"
    ).click()
    page.get_by_text(f"Attempt 2 resumes from {RUN_DIR}/checkpoints/step-20.pt").wait_for()
    assert Attempt.objects.get(job=parent, number=2).resume_from.endswith("step-20.pt")
    assert page.locator("#checkpoints").get_by_role("button", name="Resume").count() == 0

    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.reload()
    card = page.locator("#checkpoints")
    card.scroll_into_view_if_needed()
    # The page keeps a phone's width; the list scrolls sideways to its buttons.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    fork = card.get_by_role("link", name="Fork…").first
    fork.scroll_into_view_if_needed()
    box = fork.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390
    screenshot(page, "checkpoints-phone", full_page=False)
