"""The job page across attempts: failure first, a log tab per attempt, charts that read."""

import json
import re

import pytest

from jobs.enums import State
from jobs.models import Attempt
from monitoring.diagnosis.diagnose import diagnose
from monitoring.job_page.facts import attempt_total_steps, mfu_terms
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.kinds import series_kind
from tests import factories
from tests.helpers import store_log


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("loss", "loss"),
        ("lm_loss", "loss"),
        ("val_loss", "eval_loss"),
        ("tokens_per_sec", "token_rate"),
        ("tps", "token_rate"),
        ("tokens_per_s", "token_rate"),
        ("samples_per_sec", "sample_rate"),
        ("train_samples_per_second", "sample_rate"),
        ("it_per_s", "step_rate"),
        ("s_per_it", "step_time"),
        # Running totals never share the rates' axis.
        ("samples", "total"),
        ("num_input_tokens_seen", "total"),
        ("mfu", "mfu"),
        ("steps_per_sec/n2", "pace"),
        ("gpu/n1/0/utilization", "gpu"),
        ("lr", "learning_rate"),
        ("grad_norm", "grad_norm"),
        ("eval_accuracy", "eval"),
        ("<b>x</b>", "other"),
    ],
)
def test_each_series_goes_on_the_chart_of_its_kind(name: str, kind: str) -> None:
    assert series_kind(name) == kind


def test_total_steps_from_the_spec_else_from_the_log(project, owner) -> None:
    job, attempt = factories.job(project, owner, factories.cluster())
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) is None
    LogFile.objects.create(attempt=attempt, name="stdout.log", reader_state={"total_steps": 1000})
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) == 1000
    job.total_steps = 600  # what the researcher said wins over a bar's total
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) == 600


def test_mfu_terms_say_what_is_missing_the_peak_used_or_printed(project, owner) -> None:
    job, attempt = factories.job(project, owner, factories.cluster(), nodes=2, gpus_per_node=4)
    missing = mfu_terms(job=job, attempt_id=attempt.pk)
    assert missing["source"] == "missing"
    assert any("model size" in m for m in missing["missing"])
    assert any("GPU peak of cluster alps" in m for m in missing["missing"])
    job.model_params = 124_000_000
    job.cluster.gpu_peak_bf16_tflops = 989.0
    computed = mfu_terms(job=job, attempt_id=attempt.pk)
    assert computed == {
        "source": "computed",
        "peak_tflops": 989.0,
        "gpus": 8,
        "model_params": 124_000_000,
        "gpu_model": job.cluster.gpu_model,
    }
    AttemptIngest.objects.create(attempt=attempt, series_names=["loss", "mfu"])
    assert mfu_terms(job=job, attempt_id=attempt.pk) == {"source": "printed"}


def _failed(attempt: Attempt, log: str) -> None:
    found = diagnose(state=State.FAILED, exit_code=1, log_tail=log)
    assert found is not None
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        exit_code=1,
        failure_class=found.failure_class,
        diagnosis=found.as_json(),
    )


def _config(page: str) -> dict:
    found = re.search(r'<script id="job-config" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_a_failed_job_opens_with_its_diagnosis_above_everything(
    project, owner, member, client
) -> None:
    job, attempt = factories.job(project, owner, factories.cluster())
    log = "step 3, loss=0.4\nModuleNotFoundError: No module named 'flash_attn'\n"
    _failed(attempt, log)
    store_log(attempt, log.encode())
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    banner = page.index('id="failure-banner"')
    # Before the actions, the numbers, the charts and the log: the first thing on the page.
    assert banner < page.index('aria-label="Job actions"') < page.index('id="metrics-section"')
    assert "No module named" in page[banner:]
    assert page.count("No module named &#x27;flash_attn&#x27;") >= 1
    # Shown once: the banner, not a second card further down.
    assert 'id="diagnosis-1"' not in page
    # A known failure too shows the end of its log, after the fixes.
    fixes, end = page.index("What to try", banner), page.index("The end of the log", banner)
    assert fixes < end and "step 3, loss=0.4" in page[end:]
    # Charts start hidden: drawn only once they have data.
    assert re.search(r'id="metrics-section"[^>]*hidden', page)


def test_a_restarted_job_has_no_banner_and_a_log_tab_per_attempt(
    project, owner, member, client
) -> None:
    job, first = factories.job(project, owner, factories.cluster(), max_restarts=2)
    _failed(first, "Traceback (most recent call last):\nRuntimeError: boom\n")
    Attempt.objects.create(job=job, number=2, state=State.RUNNING)
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="failure-banner"' not in page
    assert 'id="diagnosis-1"' in page  # attempt 1's diagnosis stays, below
    for n in (1, 2):
        assert f'id="log-tab-{n}"' in page
        assert f'href="/api/v1/jobs/{job.pk}/attempts/{n}/log/download"' in page
    assert 'aria-selected="true">Attempt 2<' in page
    assert "attempt 2 of at most 3" in page
    config = _config(page)
    assert config["attempt"] == 2
    assert [a["number"] for a in config["attempts"]] == [1, 2]
    assert config["urls"]["log"] == f"/api/v1/jobs/{job.pk}/attempts/{{n}}/log"
    assert config["urls"]["series"] == f"/api/v1/jobs/{job.pk}/attempts/{{n}}/series"
    # The partial Plotly bundle, served from the portal itself.
    assert "vendor/plotly-basic/plotly-basic.min.js" in page
    assert not re.search(r'(?:src|href)="(?:https?:)?//', page)  # nothing from elsewhere


def test_a_failed_attempt_without_its_diagnosis_yet_says_it_is_coming(
    project, owner, member, client
) -> None:
    job, attempt = factories.job(project, owner, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED, exit_code=1)
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-pending="1"' in page and "Attempt 1 failed" in page
