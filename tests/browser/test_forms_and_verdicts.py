"""The portal's forms and a failed job's verdict in Chromium, at a laptop's size and a
phone's (390x844): the sweep form's words and its only cluster chosen, alert rules laid out
like the other forms and refusing a second copy of a rule, the DDP template offering the
example trainer, the token page's snippet with the user's own names, a failed job's banner
open on its error line with words true for its class, and the ETA from the command's steps.
No cluster: the rows are staged as the poll leaves them."""

from datetime import UTC, datetime, timedelta

import pytest

from clusters.examples import EXAMPLE_COMMAND
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from jobs.params import params_from_command
from monitoring.diagnosis.diagnose import diagnose
from monitoring.series.write import series_append
from tests import factories
from tests.helpers import browser_log_in, screenshot, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1440, "height": 900}
OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.19 GiB of which 1.10 GiB is free."
)
FAILED_LOG = (
    "".join(f"step {s}, loss={2 / s:.4f}, tokens_per_sec=5100.0\n" for s in range(1, 31))
    + """Traceback (most recent call last):
  File "/home/mia/train.py", line 88, in <module>
    main()
  File "/home/mia/train.py", line 61, in main
    loss = model(batch).loss
  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1553, in _call_impl
    return forward_call(*args, **kwargs)
  File "/home/mia/model.py", line 40, in forward
    h = self.mlp(h)
"""
    + OOM
    + """
[2026-12-06 10:02:11,407] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 0 (pid: 4242) of binary: /usr/bin/python3
Traceback (most recent call last):
  File "/usr/bin/torchrun", line 8, in <module>
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED
"""
)


def _both_sizes(page, path: str, name: str) -> None:
    """A shot at the laptop's size and at the phone's, where nothing is wider than the screen."""
    page.set_viewport_size(DESKTOP)
    page.wait_for_timeout(300)
    screenshot(page, f"{name}-desktop")
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(300)
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{path} is {width} px wide on a phone"
    screenshot(page, f"{name}-phone")
    page.set_viewport_size(DESKTOP)


def test_the_sweep_form_has_human_labels_and_its_only_cluster(
    asgi_server, project, owner, page
) -> None:
    cluster = factories.cluster("alps")
    factories.account(cluster, owner)
    browser_log_in(page, asgi_server, owner)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{asgi_server}/projects/{project.slug}/sweeps/new/")
    chosen = page.locator("#id_cluster")
    assert chosen.input_value() == str(cluster.pk)  # no empty choice before it
    assert chosen.locator("option").all_text_contents() == ["alps"]
    labels = page.locator("#sweep-form label").all_inner_texts()
    for words in ("GPUs per node", "CPUs per node", "Memory per node (MB)", "Trials at once"):
        assert any(label.startswith(words) for label in labels), (words, labels)
    assert not any(label.startswith(("Gpus", "Memory mb", "Cpus")) for label in labels)
    _both_sizes(page, "/sweeps/new/", "issue36-sweep-form")


def test_alert_rules_refuse_a_copy_and_show_only_their_own_settings(
    asgi_server, owner, page
) -> None:
    browser_log_in(page, asgi_server, owner)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{asgi_server}/alerts/rules/")
    form = page.locator("#alert-rule-form")
    # The webhook box is as wide as the form's other boxes, not a tiny one.
    width = page.locator("#id_webhook_url").bounding_box()["width"]
    assert width > 0.8 * form.bounding_box()["width"]
    assert page.locator("#id_kind option:checked").inner_text() == "Choose when to be told"
    page.get_by_label("When").select_option(label="Job ended")
    for name in ("series", "threshold", "step", "factor"):
        assert form.locator(f'[data-field="{name}"]').is_hidden(), name
    page.get_by_role("button", name="Add rule").click()
    page.get_by_text("Alert rule added: Job ended.").wait_for()
    table = page.locator("#alert-rules")
    assert "Series" not in table.locator("thead").inner_text()

    page.get_by_label("When").select_option(label="Job ended")
    page.get_by_role("button", name="Add rule").click()
    error = page.locator("#err-__all__")
    error.get_by_text("You have this rule already: #").wait_for()
    assert "(Job ended; your jobs)" in error.inner_text()
    _both_sizes(page, "/alerts/rules/", "issue36-alert-rule-refused")

    page.get_by_label("When").select_option(label="Time limit close")
    assert form.locator('[data-field="threshold"] label').inner_text() == "Minutes left"
    assert form.locator('[data-field="series"]').is_hidden()
    page.get_by_label("When").select_option(label="Loss above a bound after a step")
    assert form.locator('[data-field="series"]').is_visible()
    assert form.locator('[data-field="factor"]').is_hidden()
    page.get_by_label("Series", exact=True).fill("loss")
    page.get_by_label("Bound").fill("2.5")
    page.get_by_role("button", name="Add rule").click()
    page.get_by_text("Alert rule added: Loss above a bound after a step.").wait_for()
    assert "Series" in table.locator("thead").inner_text()
    rows = {
        row.get_attribute("data-kind"): row.locator("td").all_inner_texts()
        for row in table.locator("tbody tr").all()
    }
    assert rows["ended"][1] == "\N{EN DASH}" and rows["loss_above"][1] == "loss"
    assert rows["loss_above"][2] == "above 2.5"
    _both_sizes(page, "/alerts/rules/", "issue36-alert-rules")


def test_the_ddp_template_offers_the_example_trainer(asgi_server, project, owner, page) -> None:
    factories.account(factories.cluster("alps"), owner)
    browser_log_in(page, asgi_server, owner)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{asgi_server}/jobs/new/")
    offer = page.locator("#use-example")
    assert offer.is_hidden()  # the command template runs shell lines: nothing to offer
    page.locator("#id_command").fill("")
    page.locator("#id_template").select_option("torchrun")
    offer.wait_for()
    assert page.locator("#id_command").get_attribute("placeholder") == EXAMPLE_COMMAND
    _both_sizes(page, "/jobs/new/", "issue36-torchrun-example-offered")
    offer.click()
    assert page.locator("#id_command").input_value() == EXAMPLE_COMMAND
    assert offer.is_hidden()


def test_the_token_snippet_names_the_users_project_cluster_and_needs(
    asgi_server, project, owner, page
) -> None:
    factories.account(factories.cluster("alps"), owner)
    browser_log_in(page, asgi_server, owner)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{asgi_server}/account/tokens/")
    snippet = page.locator("#python-snippet").inner_text()
    assert f'project="{project.slug}",' in snippet and 'cluster="alps",' in snippet
    assert "your-project" not in snippet and "your-cluster" not in snippet
    needs = page.locator("#client-needs").inner_text()
    assert "which installs httpx and pathspec" in needs
    _both_sizes(page, "/account/tokens/", "issue36-token-snippet")


def test_a_failed_job_opens_on_its_error_line_with_true_words(
    asgi_server, project, member, page
) -> None:
    job, attempt = factories.job(
        project, member, factories.cluster(), max_restarts=2, state=State.FAILED
    )
    store_log(attempt, FAILED_LOG.encode())
    found = diagnose(state=State.FAILED, exit_code=1, log_tail=FAILED_LOG)
    assert found is not None and found.failure_class == FailureClass.CUDA_OOM
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        exit_code=1,
        files_complete=True,
        started_at=datetime.now(UTC) - timedelta(minutes=4),
        ended_at=datetime.now(UTC),
        failure_class=found.failure_class,
        diagnosis=found.as_json(),
    )
    browser_log_in(page, asgi_server, member)
    for size, name in ((DESKTOP, "desktop"), (PHONE, "phone")):
        page.set_viewport_size(size)
        page.goto(f"{asgi_server}/jobs/{job.pk}/")
        assert page.locator("#attempt-of").inner_text() == "attempt 1, not restarted"
        banner = page.locator("#failure-banner")
        assert "would fail again the same way" in banner.locator("#restart-note").inner_text()
        assert page.locator("#job-plan").count() == 0  # no bigger run from an OOM
        box = banner.locator(".last-lines")
        line = box.locator("mark.diagnosed")
        assert line.inner_text() == OOM
        # The box opens on the error line: scrolled to it, the line inside what shows.
        wait_for(lambda b=box: b.evaluate("el => el.scrollTop") > 0, 10, "the box's scroll")
        outer, inner = box.bounding_box(), line.bounding_box()
        assert outer is not None and inner is not None
        assert outer["y"] <= inner["y"] and inner["y"] + 10 <= outer["y"] + outer["height"]
        page.wait_for_timeout(300)
        screenshot(page, f"issue36-failure-banner-{name}", full_page=size == PHONE)
        if size == PHONE:
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_the_eta_reads_the_commands_last_step(asgi_server, project, member, page) -> None:
    command = f"{EXAMPLE_COMMAND} --checkpoint-every 50"
    job, attempt = factories.job(
        project,
        member,
        factories.cluster(),
        command=command,
        params=params_from_command(command),
        state=State.RUNNING,
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, started_at=datetime.now(UTC) - timedelta(seconds=40)
    )
    series_append(points=[(attempt.pk, "loss", float(s), 2.0 / s) for s in range(1, 21)])
    store_log(attempt, "".join(f"step {s}, loss={2 / s:.4f}\n" for s in range(1, 21)).encode())
    browser_log_in(page, asgi_server, member)
    page.set_viewport_size(DESKTOP)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    text = page.locator("#progress-text")
    wait_for(lambda: "step 20 of 200" in text.inner_text(), 30, "the progress line")
    assert "ETA" in text.inner_text()
    page.locator("#progress").scroll_into_view_if_needed()
    screenshot(page, "issue36-eta-from-command-desktop", full_page=False)
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(300)
    page.locator("#progress").scroll_into_view_if_needed()
    screenshot(page, "issue36-eta-from-command-phone", full_page=False)
