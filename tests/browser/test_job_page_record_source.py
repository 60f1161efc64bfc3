"""The job page names where a series came from when a trainer's own record file gave it."""

from datetime import UTC, datetime

import pytest

from jobs.enums import State
from jobs.models import Attempt
from monitoring.models import AttemptIngest
from monitoring.records.names import TFEVENTS
from monitoring.series.write import series_append
from tests import factories
from tests.browser.test_job_page_attempts import _log_in, _trace
from tests.helpers import store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _names(page, chart: str) -> set[str]:
    return set(page.evaluate(f"document.getElementById('{chart}').data.map((d) => d.name)"))


def test_a_series_from_tensorboard_events_says_so_in_the_legend(
    asgi_server, project, member, page
) -> None:
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING, started_at=datetime.now(UTC))
    series_append(
        points=[(attempt.pk, "loss", float(s), 2.0 / s) for s in range(1, 11)]
        + [(attempt.pk, "train_loss", float(s), 2.1 / s) for s in range(1, 11)]
    )
    AttemptIngest.objects.update_or_create(
        attempt_id=attempt.pk, defaults={"series_sources": {"loss": TFEVENTS}}
    )
    store_log(attempt, b"step 10 loss 0.2\n")
    _log_in(page, asgi_server, member, job.pk)

    sourced = "loss (from TensorBoard events)"
    wait_for(lambda: _trace(page, "chart-loss", sourced)["n"] == 10, 30, "the named loss curve")
    # The page draws the series as their points arrive: train_loss may come a moment later.
    wait_for(lambda: "train_loss" in _names(page, "chart-loss"), 30, "the train_loss curve")
    assert _names(page, "chart-loss") == {sourced, "train_loss"}  # stdout's keeps its name
    legend = page.locator("#chart-loss .legendtext").all_text_contents()
    assert sourced in legend
