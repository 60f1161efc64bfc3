"""Planning a bigger run in Chromium against daphne: from a finished job's page to the submit
form prefilled from it, where the plan beside the estimate follows the GPUs and the
efficiency typed in. No cluster: it is unreachable, so the form knows no partitions."""

from datetime import timedelta
from decimal import Decimal

import pytest

from jobs.enums import State
from monitoring.models import RunSummary
from tests import factories
from tests.browser.test_page_facts import _log_in
from tests.helpers import screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_plan_a_bigger_run_from_the_job_page(asgi_server, project, member, page) -> None:
    cluster = factories.cluster("alps", ssh_host="127.0.0.1", ssh_port=1)
    cluster.price_per_gpu_hour = Decimal(3)
    cluster.save()
    factories.account(cluster, None)
    job, _ = factories.job(
        project, member, cluster, name="small", state=State.COMPLETED, total_steps=500,
        command="python train.py --steps 500", time_limit=timedelta(minutes=30), cpus_per_task=1,
    )  # fmt: skip
    # 250 samples/s on 1 GPU; 32,000 samples by step 500: 64 a step.
    RunSummary.objects.create(
        job=job,
        project=project,
        throughput=250.0,
        throughput_unit="samples",
        metrics={"samples": [32000.0, 64.0, 32000.0, 500.0]},
    )
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _log_in(page, asgi_server, member, f"/jobs/{job.pk}/")
    page.wait_for_url(f"**/jobs/{job.pk}/")
    page.get_by_role("link", name="Plan a bigger run").click()
    page.wait_for_url(f"**/jobs/new/?plan_from={job.pk}")
    # The same size first: no efficiency needed, 500 steps at 0.256 s = 128 s.
    duration = page.locator("#plan-duration")
    page.locator("#plan-duration", has_text="500 steps").wait_for()
    assert duration.inner_text() == "2 min (500 steps, the last step entered)"
    # 4 GPUs without an efficiency: no number, what to do instead.
    page.locator("#id_nodes").fill("2")
    page.locator("#id_gpus_per_node").fill("2")
    page.locator("#plan-message", has_text="needs a scaling efficiency").wait_for()
    assert "steps" not in duration.inner_text()  # the blank figure
    # At 0.8: 800 samples/s, 0.08 s a step; 10,000 steps = 800 s, 0.89 GPU-h, 2.67.
    page.locator("#id_total_steps").fill("10000")
    page.locator("#id_plan_efficiency").fill("0.8")
    page.locator("#plan-duration", has_text="13 min (10000 steps").wait_for()
    assert page.locator("#plan-gpu-hours").inner_text() == "0.89 on 4 GPUs"
    assert page.locator("#plan-cost").inner_text() == "2.67"
    assert page.locator("#plan-message").inner_text() == "Fits the budget left."
    screenshot(page, "plan-bigger-run")
    assert errors == []
