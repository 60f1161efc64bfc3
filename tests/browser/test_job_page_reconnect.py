"""An open job page across a crash of its server: it reconnects by itself and fills in
what was stored meanwhile, then goes on live (issue 18: a page's charts never refilled
the points missed during a restart)."""

from datetime import UTC, datetime
from pathlib import Path

import pytest

from devtools.servers import Daphne
from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.series.write import series_append
from tests import factories
from tests.fixtures.servers import live_env
from tests.helpers import PASSWORD, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _loss_points(page) -> int:
    return int(
        page.evaluate(
            """() => {
            const el = document.getElementById('chart-loss');
            const t = el && el.data ? el.data.find((d) => d.name === 'loss') : null;
            return t ? t.x.length : 0;
        }"""
        )
    )


def _store(attempt: Attempt, steps: range) -> None:
    series_append(points=[(attempt.pk, "loss", float(s), 4.0 / s) for s in steps])
    store_log(attempt, "".join(f"step {s}, loss={4.0 / s:.4f}\n" for s in steps).encode())


def test_a_page_reconnects_after_its_server_crashed_and_fills_the_gap(
    project, member, page, tmp_path: Path
) -> None:
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING, started_at=datetime.now(UTC))
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    _store(attempt, range(1, 6))
    # Its own server, so that killing it touches no other test's.
    server = Daphne(live_env(), tmp_path, name="daphne-crash")
    server.start()
    try:
        page.goto(f"{server.url}/login/?next=/jobs/{job.pk}/")
        page.get_by_label("User name").fill(member.get_username())
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Log in").click()
        wait_for(lambda: _loss_points(page) == 5, 60, "the stored loss on the page")

        server.kill()  # as a crash: the socket drops, nothing is said
        _store(attempt, range(6, 11))  # stored by the polls while the page had no server
        server.start()
        wait_for(lambda: _loss_points(page) == 10, 90, "the gap filled after the reconnect")
        wait_for(
            lambda: "step 10, loss=" in page.locator("#log").inner_text(),
            30,
            "the log's missed lines",
        )
    finally:
        server.stop()
