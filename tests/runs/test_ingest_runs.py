"""The poll's ingest fills the runs table: what the helper wrote reaches the job's settings
and summary, with the real portal_metrics writing the file and MonitoringWatcher reading it."""

from pathlib import Path

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.models import Job
from jobs.params import SOURCE_COMMAND, SOURCE_LOGGED, params_for_spec
from jobs.rundir import METRICS_FILE
from monitoring.models import RunSummary
from monitoring.on_cluster import portal_metrics
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running


def test_logged_settings_and_metrics_reach_the_runs_table(
    project: Project, owner: User, cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    command = "python train.py --lr 0.1 --epochs 3"
    params, sources = params_for_spec(command=command, given={})
    job, attempt = factories.job(
        project, owner, cluster, command=command, params=params, param_sources=sources
    )
    metrics = tmp_path / METRICS_FILE
    monkeypatch.setenv("PORTAL_METRICS_FILE", str(metrics))
    monkeypatch.delenv("RANK", raising=False)
    assert portal_metrics.log_params({"lr": 0.05, "optimizer": "adamw"}, warmup=100)
    for step, loss in enumerate((2.0, 1.2, 1.4), 1):
        assert portal_metrics.log(step=step, loss=loss, eval_accuracy=0.5 + step / 10)
    attempt = running(attempt)
    ingest([attempt], reply_with({attempt: {METRICS_FILE: metrics.read_bytes()}}))

    job = Job.objects.get(pk=job.pk)
    assert job.params == {"lr": 0.05, "epochs": 3, "optimizer": "adamw", "warmup": 100}
    assert job.param_sources["lr"] == SOURCE_LOGGED
    assert job.param_sources["epochs"] == SOURCE_COMMAND
    summary = RunSummary.objects.get(job=job)
    assert (summary.loss_last, summary.loss_best) == (1.4, 1.2)
    assert summary.eval_name == "eval_accuracy" and summary.eval_best == pytest.approx(0.8)


def test_a_later_poll_updates_the_summary_it_made(
    project: Project, owner: User, cluster: Cluster
) -> None:
    _, attempt = factories.job(project, owner, cluster)
    attempt = running(attempt)
    first = b'{"step": 1, "loss": 2.0, "eval_loss": 1.5}\n{"step": 2, "loss": 1.2}\n'
    ingest([attempt], reply_with({attempt: {METRICS_FILE: first}}))
    later = b'{"step": 3, "loss": 1.4, "eval_loss": 1.1, "tokens_per_sec": 900.0}\n'
    ingest([attempt], reply_with({attempt: {METRICS_FILE: later}}))

    summary = RunSummary.objects.get(job=attempt.job)
    assert (summary.loss_last, summary.loss_best) == (1.4, 1.2)
    assert summary.eval_name == "eval_loss" and summary.eval_best == 1.1
    assert (summary.throughput, summary.throughput_unit) == (900.0, "tokens")
    assert summary.metrics["loss"] == [1.4, 1.2, 2.0, 3.0]
