"""Sizing from past runs in Chromium against daphne: three past runs of the same command
(10, 11 and 12 min on 2 GPUs, one of them never busy; efficiency cards from their GPU
samples) make the form warn about a time limit five times their p95 and about the idle
GPU, and its buttons set the fields only when clicked. No cluster: it is unreachable, so
the form knows no partitions."""

import pytest

from jobs.enums import State
from monitoring.goodput.card import attempt_card_compute
from tests import factories
from tests.helpers import browser_log_in, screenshot
from tests.monitoring.test_sizing import COMMAND, _gpu_samples, _ran

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_warns_of_a_time_limit_five_times_past_runs_p95_and_offers_theirs(
    asgi_server, project, member, page
) -> None:
    cluster = factories.cluster("alps", ssh_host="127.0.0.1", ssh_port=1)
    factories.account(cluster, None)
    for minutes in (10, 11, 12):
        attempt = _ran(project, member, cluster, minutes, gpus_per_node=2, partition="")
        _gpu_samples(attempt, 80.0, 0.0)
        assert attempt_card_compute(attempt=attempt) is not None
    _ran(project, member, cluster, 600, state=State.FAILED, partition="")  # not a past run
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    browser_log_in(page, asgi_server, member)
    page.goto(f"{asgi_server}/jobs/new/")
    page.locator("#id_name").fill("resnet")
    page.locator("#id_gpus_per_node").fill("2")
    page.locator("#id_command").fill(COMMAND)
    page.locator("#id_time_limit").fill("1:00:00")

    sizing = page.locator("#sizing")
    warnings = page.locator("#sizing-warnings li")
    page.locator("#sizing-warnings li[data-kind='time_limit']").wait_for()
    assert sizing.get_by_role("heading").inner_text() == "From past runs"
    assert warnings.nth(0).inner_text() == (
        "The time limit, 1 h, is 5.0 times the p95 of your 3 past runs (12 min): a limit near "
        "15 min reserves fewer GPU-hours and can start sooner (Slurm backfills short jobs)."
    )
    assert warnings.nth(1).inner_text() == (
        "You ask for 2 GPUs; your 3 past runs with 2 or more kept at most 1 GPU busy: "
        "the others would sit idle."
    )
    assert page.locator("#sizing-basis").inner_text() == (
        "p95 of your 3 past runs: 12 min; suggested 15 min (+25%, rounded up)."
    )
    assert "GPU memory peaked at 25.0 GiB per GPU over 3 runs." in sizing.inner_text()
    assert page.locator("#id_time_limit").input_value() == "1:00:00"  # untouched until asked
    screenshot(page, "submit-sizing")

    page.get_by_role("button", name="use 15 min").click()
    page.locator("#sizing-warnings li[data-kind='time_limit']").wait_for(state="detached")
    assert page.locator("#id_time_limit").input_value() == "0:15:00"
    assert page.get_by_role("button", name="use 15 min").count() == 0  # it is what is asked
    page.get_by_role("button", name="use 1 GPU").click()
    page.locator("#sizing-warnings li").first.wait_for(state="detached")
    assert page.locator("#id_gpus_per_node").input_value() == "1"
    assert page.locator("#id_nodes").input_value() == "1"
    assert errors == []
