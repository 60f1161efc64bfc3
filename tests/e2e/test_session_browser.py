"""A JupyterLab session on the sandbox, opened through the portal in Chromium (issue 39).

Its owner opens it from the job page, runs a cell that imports torch and sees the output,
through the portal's proxy (HTTP and the kernel's WebSocket over the owner's SSH login).
Another member's browser is refused its URLs; after the owner logs out, the old cookie is
refused and the open kernel socket is closed.
"""

import json
import re
import shlex
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobs.interactive import SESSION_FILE
from jobs.models import Job
from monitoring.models import AttemptActivity
from projects.models import Membership
from tests.e2e.session_lab import open_button_shown, session_submit
from tests.helpers import PASSWORD, QUEUE_WAIT, screenshot, wait_for

# The first `up` after the job python changed installs JupyterLab into it (minutes).
pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(1500)]

# The status bar's kernel item once the notebook's kernel is connected and waiting.
KERNEL_IDLE = re.compile(r"\(ipykernel\) \| Idle")
CELL = 'import torch; print("torch says", torch.__version__, int(torch.ones(3).sum()))'
# A socket of the page's own to the kernel, its close code kept: the logout must close it.
OPEN_KERNEL_SOCKET = """async (url) => {
    window.__kernelSocket = {open: false, code: null};
    const ws = new WebSocket(url);
    ws.onopen = () => { window.__kernelSocket.open = true; };
    ws.onclose = (event) => { window.__kernelSocket.code = event.code; };
    for (let i = 0; i < 300 && !window.__kernelSocket.open && window.__kernelSocket.code === null; i++) {
        await new Promise((r) => setTimeout(r, 100));
    }
    return window.__kernelSocket;
}"""


def _log_in(page, server: str, username: str, next_path: str) -> None:
    page.goto(f"{server}/login/?next={next_path}")
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"**{next_path}")


def _member(project, username: str) -> User:
    user = User.objects.get(username=username)
    user.set_password(PASSWORD)
    user.save()
    Membership.objects.get_or_create(
        user=user, project=project, defaults={"role": Membership.Role.MEMBER}
    )
    return user


def test_a_session_opens_in_the_portal_for_its_owner_only(
    asgi_server, celery_worker, researcher, project, sandbox_cluster, alice, browser, page
) -> None:
    job = session_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        name="notebook",
        time_limit=timedelta(minutes=20),
    )
    _member(project, "alice")
    _member(project, "bob")
    lab_url = f"{asgi_server}/sessions/{job.pk}/lab/"

    _log_in(page, asgi_server, "alice", f"/jobs/{job.pk}/")
    wait_for(lambda: open_button_shown(page), QUEUE_WAIT, "the Open JupyterLab button")
    assert "Time left" in page.locator("#session-card").inner_text()
    screenshot(page, "session-job-page")

    # The port and token are the user's only: mode 0600 in the run directory.
    run_dir = Job.objects.get(pk=job.pk).attempts.get().run_dir
    mode = alice.run(f"stat -c %a -- {shlex.quote(f'{run_dir}/{SESSION_FILE}')}").text.strip()
    assert mode == "600"

    # torch's first import reads about a gigabyte: on CI's loaded machine it alone took over
    # the cell's two minutes. Read once here, the kernel's import is the one under test.
    warmed = alice.run("python3 -c 'import torch'", timeout=600)
    assert warmed.exit_status == 0, warmed.text
    with page.context.expect_page() as opened:
        page.locator("#session-open").click()
    lab = opened.value
    lab.set_default_timeout(120_000)
    said: list[str] = []
    lab.on("console", lambda m: said.append(f"console {m.type}: {m.text[:300]}"))
    lab.on("response", lambda r: said.extend([f"{r.status} {r.url}"] if r.status >= 400 else []))
    output = lab.locator(".jp-OutputArea-output", has_text="torch says")
    try:
        # The proxy's "starting" page reloads itself until the server answers; then a fresh
        # workspace (alice's saved one may hold an earlier run's notebook, not the launcher).
        lab.wait_for_url("**/lab/lab*")
        lab.goto(f"{lab_url}lab?reset")
        lab.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
        # As its user does, wait for the notebook's kernel: JupyterLab clears a cell run
        # before the notebook has its kernel (no request is sent; "[ ]" stays empty).
        lab.get_by_text(KERNEL_IDLE).wait_for()
        lab.locator(".jp-Notebook .jp-Cell .cm-content").first.click()
        lab.keyboard.type(CELL)
        lab.keyboard.press("Shift+Enter")
        output.wait_for()
    except Exception:
        screenshot(lab, "session-jupyterlab-failed", full_page=False)
        print("\n".join(said[-60:]))
        print(alice.run(f"tail -c 4000 -- {shlex.quote(f'{run_dir}/stdout.log')}").text)
        raise
    printed = output.inner_text().strip()
    assert printed.startswith("torch says 2.13.0") and printed.endswith(" 3")
    screenshot(lab, "session-jupyterlab", full_page=False)

    # The idle ladder's warning reaches JupyterLab's own page (the ladder itself is
    # tests/e2e/test_session_idle.py's): the portal's box says when it stops the session.
    attempt = Job.objects.get(pk=job.pk).attempts.get()
    stop_at = timezone.now() + timedelta(minutes=20)
    AttemptActivity.objects.update_or_create(
        attempt=attempt, defaults={"warned_at": timezone.now(), "cancel_at": stop_at}
    )
    notice = lab.locator("#portal-session-notice")
    notice.get_by_text(f"stops the session at {stop_at:%H:%M} UTC").wait_for()
    screenshot(lab, "session-jupyterlab-idle-notice", full_page=False)
    notice.get_by_role("button", name="Hide").click()
    assert notice.is_hidden()
    # The token never reached the browser.
    token = json.loads(alice.run(f"cat -- {shlex.quote(f'{run_dir}/{SESSION_FILE}')}").stdout)[
        "token"
    ]
    assert token not in lab.content()
    assert all(token not in c["value"] for c in lab.context.cookies())

    kernels = lab.request.get(f"{lab_url}api/kernels").json()
    ws_url = lab_url.replace("http", "ws", 1) + f"api/kernels/{kernels[0]['id']}/channels"
    assert lab.evaluate(OPEN_KERNEL_SOCKET, ws_url)["open"] is True

    # Another member of the project: refused every URL of the session, socket included.
    other = browser.new_context()
    try:
        bobs = other.new_page()
        _log_in(bobs, asgi_server, "bob", "/")
        for path in ("", "lab", "api/kernels", f"api/kernels/{kernels[0]['id']}"):
            assert bobs.request.get(f"{lab_url}{path}").status in (403, 404), path
        bobs.goto(f"{asgi_server}/jobs/{job.pk}/")
        assert bobs.locator("#session-open").count() == 0
        assert bobs.evaluate(OPEN_KERNEL_SOCKET, ws_url)["open"] is False
    finally:
        other.close()

    # Log out: the old cookie is refused, and the open socket is closed.
    old = next(c for c in page.context.cookies() if c["name"] == "sessionid")
    page.goto(f"{asgi_server}/")
    page.get_by_role("button", name="Log out").click()
    wait_for(
        lambda: all(c["name"] != "sessionid" for c in page.context.cookies()), 30, "logged out"
    )
    wait_for(
        lambda: lab.evaluate("() => window.__kernelSocket.code") is not None,
        30,
        "the kernel socket closed at logout",
    )
    replay = browser.new_context()
    try:
        replay.add_cookies([{**old}])
        answer = replay.request.get(f"{lab_url}api/kernels", max_redirects=0)
        assert answer.status in (302, 403)
        assert "kernels" not in answer.text() or answer.status == 302
    finally:
        replay.close()
