"""The job page's charts can be read: the learning rate and gradient norm on their own
charts (never on the loss axis), evaluation metrics apart from training ones, and a
non-finite value drawn as a gap with its step named, the curve never joined across it."""

from datetime import UTC, datetime

import pytest

from jobs.enums import State
from jobs.models import Attempt
from monitoring.series.write import series_append
from tests import factories
from tests.browser.test_job_page_attempts import _log_in, _push, _trace
from tests.helpers import screenshot, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = range(1, 21)


def _y(page, chart: str, name: str) -> list:
    return page.evaluate(
        """([chart, name]) => {
        const t = document.getElementById(chart).data.find((d) => d.name === name);
        return Array.from(t.y);
    }""",
        [chart, name],
    )


def test_lr_grad_norm_and_evaluation_metrics_get_their_own_charts_and_a_nan_is_a_gap(
    asgi_server, project, member, page
) -> None:
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING, started_at=datetime.now(UTC))
    series_append(
        points=[(attempt.pk, "loss", float(s), 2.0 / s) for s in STEPS if s != 12]
        + [(attempt.pk, "learning_rate", float(s), 5e-5 * (1 - s / 40)) for s in STEPS]
        + [(attempt.pk, "grad_norm", float(s), 1.0 + s / 10) for s in STEPS]
        + [(attempt.pk, "eval_loss", float(s), 1.9 / s) for s in (10, 20)]
        + [(attempt.pk, "eval_accuracy", float(s), 0.5 + s / 100) for s in (10, 20)]
    )
    store_log(attempt, b"step 20 loss 0.1\n")
    _log_in(page, asgi_server, member, job.pk)
    wait_for(lambda: _trace(page, "chart-loss", "loss")["n"] == 19, 30, "the loss curve")
    # Step 12's loss was NaN: the live delta says so (y null), as the series read does.
    _push(job.pk, attempt=1, series={"loss": [[12.0, None]]})
    wait_for(lambda: _trace(page, "chart-loss", "loss")["n"] == 20, 30, "the gap")

    assert _y(page, "chart-loss", "loss")[11] is None  # the curve breaks at step 12
    assert not page.evaluate(
        "document.getElementById('chart-loss').data.find((d) => d.name === 'loss').connectgaps"
    )
    marks = page.locator("#chart-loss .annotation-text").all_text_contents()
    assert "NaN at step 12" in marks
    loss_names = {
        t for t in page.evaluate("document.getElementById('chart-loss').data.map((d) => d.name)")
    }
    assert loss_names == {"loss"}  # no lr, grad norm or evaluation metric on the loss axis
    assert _trace(page, "chart-learning_rate", "learning_rate")["n"] == 20
    assert _trace(page, "chart-grad_norm", "grad_norm")["n"] == 20
    assert _trace(page, "chart-eval_loss", "eval_loss")["n"] == 2
    assert _trace(page, "chart-eval", "eval_accuracy")["n"] == 2
    assert page.locator("#num-loss").inner_text() == "0.1000"  # the last finite value
    screenshot(page, "job-page-charts")
