"""From a session to a run, on the sandbox in Chromium (issue 39, point 4 and its polish).

alice starts a JupyterLab session in her project's directory. Its server's root is that
directory (not the run directory), and its page config disables the news prompt. Her job
page shows the session's cards, not the training ones, and "Submit as a training job":
the form names the directory, she gives the command, and the run trains on its snapshot.
"""

import shlex
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest

from clusters.ssh import Connection
from jobs.enums import State, Template
from jobs.interactive import ANNOUNCEMENTS_PLUGIN
from jobs.models import Job
from jobs.services import job_cancel, job_submit
from tests.e2e.session_lab import open_button_shown
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, browser_log_in, screenshot, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(1200)]

TRAIN = "import os\nprint('trained on', os.path.basename(os.getcwd()), open('data.txt').read())\n"


@pytest.fixture
def work(alice: Connection) -> Iterator[str]:
    """alice's project directory: a script and its data; removed after the test."""
    home = alice.run('printf "%s" "$HOME"').text.strip()
    base = f"{home}/session-to-run-{uuid.uuid4().hex[:8]}"
    folder = shlex.quote(f"{base}/project")
    made = alice.run(
        f"mkdir -p {folder} && cat > {folder}/train.py && echo 42 > {folder}/data.txt",
        stdin=TRAIN.encode(),
    )
    assert made.exit_status == 0, made.text
    try:
        yield f"{base}/project"
    finally:
        alice.run(f"rm -rf -- {shlex.quote(base)}")


def test_a_session_becomes_a_run_of_its_directory(
    asgi_server, celery_worker, researcher, project, sandbox_cluster, work, page
) -> None:
    session = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="notebook",
            template=Template.JUPYTER,
            command="jupyter lab",
            setup=f"cd -- {shlex.quote(work)}",
            time_limit=timedelta(minutes=15),
        ),
    )
    try:
        browser_log_in(page, asgi_server, researcher)
        page.goto(f"{asgi_server}/jobs/{session.pk}/")
        wait_for(lambda: open_button_shown(page), QUEUE_WAIT, "the Open JupyterLab button")
        # The session's cards: no loss, throughput, MFU, run notes or settings.
        for gone in ("#num-loss", "#num-mfu", "#metrics-section", "#run-notes", "#job-params"):
            assert page.locator(gone).count() == 0, gone
        assert page.locator("#log-section").count() == 1
        screenshot(page, "session-to-run-job-page")

        # The server's root is the directory the session started in, through the portal.
        lab = f"{asgi_server}/sessions/{session.pk}/lab/"
        wait_for(lambda: page.request.get(f"{lab}api/contents").status == 200, 120, "the server")
        listing = page.request.get(f"{lab}api/contents").json()
        assert {item["name"] for item in listing["content"]} >= {"train.py", "data.txt"}
        assert ANNOUNCEMENTS_PLUGIN in page.request.get(f"{lab}lab").text()
        # In Chromium: the file browser opens on the project's files, and no news question.
        lab_page = page.context.new_page()
        try:
            lab_page.goto(f"{lab}lab?reset")
            lab_page.locator(".jp-DirListing-itemText", has_text="train.py").wait_for(
                timeout=120_000
            )
            lab_page.locator(".jp-LauncherCard").first.wait_for(timeout=120_000)
            assert lab_page.get_by_text("Jupyter news").count() == 0
            screenshot(lab_page, "session-to-run-jupyterlab", full_page=False)
        finally:
            lab_page.close()

        page.locator("#session-run").click()
        page.wait_for_url(f"**/sessions/{session.pk}/run/")
        assert page.locator("#run-from-root").inner_text() == work
        page.locator("#id_command").fill("python train.py")
        screenshot(page, "session-to-run-form")
        page.locator("#submit-job").click()
        page.wait_for_url("**/jobs/*/")
        run = Job.objects.exclude(pk=session.pk).get()
        assert page.url.endswith(f"/jobs/{run.pk}/")
        assert run.code is not None and run.note.startswith(f"From session #{session.pk}")
        wait_for(
            lambda: Job.objects.get(pk=run.pk).state in (State.COMPLETED, State.FAILED),
            QUEUE_WAIT,
            "the run to end",
        )
        assert Job.objects.get(pk=run.pk).state == State.COMPLETED
        # It ran in its snapshot (the code directory), on the session's data, as written then.
        page.goto(f"{asgi_server}/jobs/{run.pk}/")
        page.locator("#log", has_text="trained on code 42").wait_for(timeout=120_000)
        screenshot(page, "session-to-run-run-page")
    finally:
        job_cancel(job=Job.objects.get(pk=session.pk), user=researcher)
