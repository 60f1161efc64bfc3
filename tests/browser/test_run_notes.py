"""A run's note, tags and group in Chromium against daphne: the submitter writes them on the
job page, a refused tag is marked beside its field, and the tag links to the runs table
filtered by it; a member who did not submit the run reads them and has no form."""

import pytest

from jobs.models import Job
from jobs.services import job_annotate
from tests import factories
from tests.browser.test_runs import _stage
from tests.helpers import browser_log_in, screenshot, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_notes_edited_on_the_job_page_then_the_runs_table_filtered_by_tag(
    asgi_server, project, owner, member, page
) -> None:
    cluster = factories.cluster("alps")
    job, _ = factories.job(project, owner, cluster, name="lr3e-4-seed1")
    factories.job(project, owner, cluster, name="lr1e-3-seed1")
    browser_log_in(page, asgi_server, owner)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    card = page.locator("#run-notes")
    card.get_by_label("Note").fill("The run that mattered: no warm-up, and it still converged.")
    card.get_by_label("Tags").fill("Baseline, no-warmup a/b")
    card.get_by_label("Group").fill("seeds-lr3e-4")
    card.get_by_role("button", name="Save").click()
    error = page.locator("#run-tags-error")
    error.wait_for()
    assert "'a/b': use only letters" in error.inner_text()
    assert page.locator("#run-tags").get_attribute("aria-invalid") == "true"
    assert "Not saved" in page.locator("#run-notes-status").inner_text()
    card.scroll_into_view_if_needed()
    screenshot(page, "run-notes-refused", full_page=False)

    card.get_by_label("Tags").fill("Baseline, no-warmup")
    card.get_by_role("button", name="Save").click()
    page.get_by_text("Saved.").wait_for()
    assert error.is_hidden()
    assert page.locator("#run-tags").input_value() == "baseline, no-warmup"  # as kept
    assert page.locator("#run-labels a").all_inner_texts() == [
        "seeds-lr3e-4",
        "baseline",
        "no-warmup",
    ]
    screenshot(page, "run-notes-saved")

    page.set_viewport_size({"width": 390, "height": 844})  # a phone
    page.reload()  # kept
    assert page.locator("#run-note").input_value().startswith("The run that mattered")
    assert page.locator("#run-group").input_value() == "seeds-lr3e-4"
    card.scroll_into_view_if_needed()
    for part in ("#run-notes", "#run-tags", "#run-group", "#run-notes-save"):
        box = page.locator(part).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, part
    screenshot(page, "run-notes-phone", full_page=False)
    page.set_viewport_size({"width": 1280, "height": 800})

    page.locator("#run-labels a.run-tag", has_text="baseline").click()
    page.wait_for_url("**/runs/?f=tags%3Dbaseline")
    rows = page.locator("#runs-table tbody tr")
    assert rows.count() == 1 and "lr3e-4-seed1" in rows.first.inner_text()
    assert page.locator("#runs-filters").input_value().strip() == "tags=baseline"
    screenshot(page, "run-notes-runs-filtered")
    # The group's quick filter adds to the tag's.
    page.select_option("#runs-group-filter", "seeds-lr3e-4")
    page.wait_for_url("**f=group%3Dseeds-lr3e-4**")
    assert "f=tags%3Dbaseline" in page.url and rows.count() == 1

    # A member who did not submit the run reads the note and has no form.
    page.context.clear_cookies()
    browser_log_in(page, asgi_server, member)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    assert "no warm-up" in page.locator("#run-note-text").inner_text()
    assert page.locator("#run-notes-form").count() == 0
    page.locator("#run-notes").scroll_into_view_if_needed()
    screenshot(page, "run-notes-read-only", full_page=False)


def test_compare_draws_each_runs_group_as_a_mean_and_a_band(
    asgi_server, project, owner, member, page
) -> None:
    ids = _stage(project, owner)  # six runs: lr 0.01 and 0.001, seeds 1 to 3
    for job in Job.objects.filter(pk__in=ids):
        job_annotate(job=job, user=owner, group=f"lr{job.params['lr']}-seeds")
    browser_log_in(page, asgi_server, member)
    runs = ",".join(map(str, ids))
    page.goto(f"{asgi_server}/projects/{project.slug}/compare/?runs={runs}")
    wait_for(lambda: page.locator("#compare-chart .scatterlayer .trace").count() == 6, 60, "runs")
    page.select_option("#compare-group", "@group")  # the toggle: each run, or the groups
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**group=%40group**")
    # Two groups: a band (two edge traces) and a mean line each.
    legend = page.locator("#compare-chart .legendtext")
    wait_for(lambda: legend.count() == 2, 60, "2 groups")
    assert sorted(legend.all_text_contents()) == ["lr0.001-seeds (3 runs)", "lr0.01-seeds (3 runs)"]
    assert "mean ± 1 standard deviation" in page.locator("#compare-note").inner_text()
    screenshot(page, "run-notes-compare-groups")
