"""The Python client against the portal in-process (httpx's WSGI transport, test database).

The live-server run with a worker and the sandbox cluster is test_client_live.py.
"""

import sys
from collections.abc import Iterator

import httpx
import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from portal_client import Portal, PortalError
from portal_client.progress import Progress
from portal_client.sse import parse_events

from jobs.enums import State
from jobs.models import Attempt, Job
from sweeps.tick import sweep_advance
from tests.helpers import LOG, Tokens, store_log
from tests.runs.test_runs_table import _run
from web.live import streams

pytestmark = [
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous"),
    pytest.mark.usefixtures("service_account"),  # the shared account every submitter uses
]


@pytest.fixture
def same_connection() -> Iterator[None]:
    # As Django's test client does: a request must not close the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _portal(token: str, transport: httpx.BaseTransport | None = None) -> Portal:
    return Portal(
        "http://testserver", token, transport=transport or httpx.WSGITransport(app=WSGIHandler())
    )


@pytest.fixture
def portal(tokens: Tokens, same_connection) -> Portal:
    return _portal(tokens.owner)


def _finish(job: Job) -> None:
    Attempt.objects.filter(job=job).update(state=State.COMPLETED, files_complete=True)
    Job.objects.filter(pk=job.pk).update(state=State.COMPLETED)


def test_submit_wait_cancel_clone(portal: Portal, job: Job) -> None:
    submitted = portal.submit(
        project="vision",
        cluster="alps",
        name="from-python",
        command="python train.py",
        partition="gpu",
        cpus_per_task=1,
        time_limit=600,
    )
    assert submitted.state == "QUEUED" and submitted.attempt == 1
    assert Job.objects.get(pk=submitted.id).time_limit.total_seconds() == 600
    copy = submitted.clone(name="copy")
    assert copy.id != submitted.id and copy.name == "copy"
    assert submitted.cancel().state == "CANCELLED"
    assert submitted.wait(timeout=5, progress=False).is_finished
    assert [e["to_state"] for e in submitted.events()] == ["QUEUED", "CANCELLED"]


def test_wait_returns_once_the_ended_jobs_output_is_read(portal: Portal, job: Job) -> None:
    Attempt.objects.filter(job=job).update(state=State.COMPLETED, slurm_job_id="7")
    Job.objects.filter(pk=job.pk).update(state=State.COMPLETED)
    followed = portal.job(job.pk)
    assert not followed.is_finished  # ended in Slurm, its last output not yet read
    with pytest.raises(TimeoutError, match="reading output"):
        followed.wait(timeout=0.1, poll=0.05, progress=False)
    _finish(job)
    assert followed.wait(timeout=5, poll=0.05, progress=False).is_finished


def test_submit_with_settings(portal: Portal, job: Job) -> None:
    submitted = portal.submit(
        project="vision",
        cluster="alps",
        name="with-settings",
        command="python train.py --lr 0.1",
        partition="gpu",
        cpus_per_task=1,
        params={"seed": 7, "optimizer": "adamw"},
    )
    stored = Job.objects.get(pk=submitted.id)
    assert stored.params == {"lr": 0.1, "seed": 7, "optimizer": "adamw"}
    assert stored.param_sources["seed"] == "given"
    # A clone carries the given settings; its flags come from its own command.
    copy = Job.objects.get(pk=submitted.clone(command="python train.py --lr 0.2").id)
    assert copy.params == {"lr": 0.2, "seed": 7, "optimizer": "adamw"}


def test_refusals_raise_with_the_fields_to_change(portal: Portal, job: Job) -> None:
    with pytest.raises(PortalError) as refused:
        portal.submit(project="vision", cluster="alps", name="big", command="x", gpus_per_node=9)
    assert refused.value.status == 400
    assert "gpus_per_node" in refused.value.errors and "gpus_per_node" in str(refused.value)
    with pytest.raises(PortalError, match="Unknown token"):
        _portal("ptk_000000000000_nope").projects()


def test_lists(portal: Portal, job: Job) -> None:
    assert [p["slug"] for p in portal.projects()] == ["vision"]
    assert [j.id for j in portal.jobs(project="vision")] == [job.pk]
    assert list(portal.jobs(state="RUNNING")) == []
    assert portal.job(job.pk).name == "resnet"


def test_runs_table_rows(portal: Portal, project, owner, cluster) -> None:
    for i, lr in enumerate(("0.3", "0.03", "0.003")):
        _run(project, owner, cluster, f"lr-{i}", f"t.py --lr {lr}", [2.0, 1.2 - 0.3 * i])
    rows = list(portal.runs("vision", columns=["name", "loss_best"], sort="loss_best", size=2))
    assert [r["name"] for r in rows] == ["lr-2", "lr-1", "lr-0"]
    assert set(rows[0]) == {"id", "name", "loss_best"}
    assert [r["name"] for r in portal.runs("vision", filters=["p.lr=0.03"])] == ["lr-1"]
    assert len(list(portal.runs("vision", limit=1))) == 1
    with pytest.raises(PortalError, match="not a number"):
        list(portal.runs("vision", filters=["loss_best<abc"]))


def test_logs_whole_tail_and_followed(portal: Portal, job: Job) -> None:
    handle = portal.job(job.pk)
    assert handle.logs() == LOG.decode()
    assert handle.logs(lines=1) == "step 3 loss 0.5\n"
    _finish(job)
    assert "".join(handle.logs(follow=True)) == LOG.decode()


def test_a_dropped_stream_resumes_where_it_stopped(
    tokens: Tokens, job: Job, same_connection, monkeypatch
) -> None:
    monkeypatch.setattr(streams, "LOG_EVENT_BYTES", 16)  # several events for a short log
    _finish(job)
    transport = _DropFirstStream(httpx.WSGITransport(app=WSGIHandler()))
    handle = _portal(tokens.viewer, transport).job(job.pk)
    assert "".join(handle.logs(follow=True)) == LOG.decode()
    # The second request asked for the bytes after the first (and only) event received.
    assert transport.last_event_ids == ["0", "16"]


class _Broken(httpx.SyncByteStream):
    def __init__(self, first: bytes) -> None:
        self.first = first

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.ReadError("connection dropped")


class _DropFirstStream(httpx.BaseTransport):
    """Passes requests to the portal; the first stream breaks after its first event."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.last_event_ids: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if not request.url.path.endswith("/stream"):
            return response
        self.last_event_ids.append(request.headers.get("Last-Event-ID"))
        if len(self.last_event_ids) > 1:
            return response
        first = response.read().split(b"\n\n")[0] + b"\n\n"
        return httpx.Response(200, headers=response.headers, stream=_Broken(first))


def test_metrics_as_rows_without_pandas(portal: Portal, job: Job, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas fails
    rows = portal.job(job.pk).metrics("loss")
    assert rows[0] == {"step": 1.0, "loss": 1.0} and len(rows) == 5
    assert portal.job(job.pk).metric_names() == ["gpu/n1/0/utilization", "loss"]
    gpus = portal.job(job.pk).gpus()
    assert gpus[0]["node"] == "n1" and gpus[0]["metrics"]["utilization"]["y"][0] == 90.0


def test_metrics_as_a_dataframe_with_pandas(portal: Portal, job: Job) -> None:
    pandas = pytest.importorskip("pandas")
    frame = portal.job(job.pk).metrics("loss")
    assert isinstance(frame, pandas.DataFrame)
    assert list(frame.columns) == ["step", "loss"] and len(frame) == 5


def test_followed_metrics(portal: Portal, job: Job) -> None:
    _finish(job)
    points = list(portal.job(job.pk).follow_metrics(["loss"]))
    assert [p["x"] for p in points] == [1.0, 2.0, 3.0, 4.0, 5.0]


def test_event_parser_skips_keep_alives_and_joins_data_lines() -> None:
    lines = [": keep-alive", "", "id: 7", "event: log", 'data: {"a":', "data: 1}", ""]
    [event] = list(parse_events(lines))
    assert (event.id, event.event, event.data) == ("7", "log", {"a": 1})


def test_progress_line_outside_a_notebook(capsys) -> None:
    progress = Progress()
    assert not progress.notebook
    progress.update("ddp", "RUNNING", 12.0, 30)
    progress.close()
    assert "ddp: RUNNING step 12/30" in capsys.readouterr().err


def test_portal_needs_a_url_and_token(monkeypatch) -> None:
    monkeypatch.delenv("PORTAL_URL", raising=False)
    monkeypatch.delenv("PORTAL_TOKEN", raising=False)
    with pytest.raises(ValueError, match="PORTAL_TOKEN"):
        Portal()


def test_a_followed_log_goes_on_into_a_restart(portal: Portal, job: Job) -> None:
    _finish(job)
    restart = Attempt.objects.create(job=job, number=2, state=State.COMPLETED, files_complete=True)
    store_log(restart, b"resumed from step-3.pt\n")
    handle = portal.job(job.pk)
    handle.data["latest_attempt"] = 1  # as it was when the first attempt was running
    assert "".join(handle.logs(follow=True)) == LOG.decode() + "resumed from step-3.pt\n"


def test_a_sweep_from_a_directory_runs_every_trial_from_its_snapshot(
    portal: Portal, project, cluster, settings, tmp_path, no_submission
) -> None:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    code = tmp_path / "research"
    code.mkdir()
    (code / "train.py").write_text("print('step 1, loss=1')\n")
    made = portal.sweep(
        project="vision",
        cluster="alps",
        name="from python",
        command="python train.py --lr {lr}",
        space={"lr": [0.1, 0.01]},
        sampler="grid",
        max_trials=2,
        partition="gpu",
        time_limit=600,
        code=code,
    )
    assert made["state"] == "running" and made["code"]["files"] == 1
    sweep_advance(sweep_id=made["id"])
    jobs = Job.objects.filter(sweep_trial__sweep_id=made["id"])
    assert jobs.count() == 2
    assert {j.code.sha256 if j.code else None for j in jobs} == {made["code"]["sha256"]}


def test_expected_starts_ask_and_submit_nothing(portal: Portal, cluster) -> None:
    cluster.ssh_host, cluster.ssh_port = "127.0.0.1", 1  # unreachable: a problem per option
    cluster.save(update_fields=["ssh_host", "ssh_port"])
    options = portal.expected_starts(
        project="vision",
        cluster="alps",
        name="x",
        command="python t.py",
        time_limit=1800,
        cpus_per_task=1,
    )
    assert [o["label"] for o in options] == ["As chosen", "Time limit 15 min instead of 30 min"]
    assert options[0]["problem"].startswith("alps did not answer")
    assert not Job.objects.exists()
    with pytest.raises(PortalError) as refused:
        portal.expected_starts(
            project="vision",
            cluster="alps",
            name="x",
            command="python t.py",
            gpus_per_node=64,
            cpus_per_task=1,
        )
    assert "gpus_per_node" in (refused.value.errors or {})
