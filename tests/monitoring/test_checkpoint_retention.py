"""The checkpoint index and retention rules on real files: the agent lists a run directory
holding the layouts trainers write, the index gives each checkpoint its step and loss, a
keep-best-2 and keep-last-1 rule deletes exactly the others through the real remover (run
by a local shell standing in for the job's SSH session), never the one a queued attempt
resumes from, never a link, never anything outside the run directory."""

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from clusters.agent import AgentRequest, ListingEntry, run_agent
from jobs.enums import State
from jobs.models import Attempt, JobEvent
from monitoring.checkpoints import services
from monitoring.checkpoints.index import PROTECTED_LINK, PROTECTED_RESUME, checkpoint_index
from monitoring.checkpoints.registry import (
    checkpoints_ingest,
    is_complete,
    listing_requests,
    parse_step,
)
from monitoring.checkpoints.retention import plan
from monitoring.checkpoints.services import (
    checkpoint_rule_save,
    checkpoints_delete,
    retention_apply,
)
from monitoring.models import Checkpoint, CheckpointDeletion, RecordSearch
from monitoring.series.write import series_append
from tests import factories
from tests.clusters.test_agent_client import LocalShell

LOSS = {10: 2.0, 20: 1.2, 30: 0.7, 40: 0.9, 50: 1.1}  # best: 30 then 40; last: 50


def _du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _write(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))


def _age(root: Path, *, seconds: float) -> None:
    """Everything under `root` last written `seconds` ago (links themselves, not targets)."""
    then = time.time() - seconds
    for path in [root, *root.rglob("*")]:
        os.utime(path, (then, then), follow_symlinks=False)


@pytest.fixture
def run(tmp_path: Path, project, member) -> tuple[Attempt, Path, Path]:
    """An attempt whose run directory holds the example trainer's files, HF Trainer's
    directories, a Lightning file, a distributed checkpoint, saves in progress and a link."""
    root, outside = tmp_path / "run", tmp_path / "elsewhere"
    _write(outside / "precious.pt", 5000)
    ckpt, out = root / "checkpoints", root / "code" / "out"
    for step in LOSS:
        _write(ckpt / f"step-{step}.pt", 1000 + step)
    _write(ckpt / ".step-60.pt.4242.tmp", 300)  # the example trainer's save in progress
    (ckpt / "step-999.pt").symlink_to(outside / "precious.pt")  # planted by the job
    for step in (20, 40):  # HF Trainer's, whole: trainer_state.json is written last
        _write(out / f"checkpoint-{step}" / "model.safetensors", 4000)
        _write(out / f"checkpoint-{step}" / "optimizer.pt", 8000)
        (out / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    _write(out / "checkpoint-60" / "model.safetensors", 4000)  # HF, still saving
    _write(
        root / "code" / "lightning_logs" / "version_0" / "checkpoints" / "epoch=0-step=50.ckpt", 700
    )
    _write(ckpt / "dcp-70" / "__0_0.distcp", 900)  # a distributed checkpoint, no .metadata yet
    _write(ckpt / "dcp-80" / "__0_0.distcp", 900)
    (ckpt / "dcp-80" / ".metadata").write_text("m")
    _age(root, seconds=60)
    _, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(
        run_dir=str(root), state=State.RUNNING, started_at=timezone.now() - timedelta(hours=1)
    )
    attempt.refresh_from_db()
    RecordSearch.objects.create(attempt=attempt, workdir=str(root / "code"))
    series_append(points=[(attempt.pk, "loss", float(s), v) for s, v in LOSS.items()])
    return attempt, root, outside


def _poll(attempt: Attempt, tmp_path: Path) -> None:
    attempt = Attempt.objects.select_related("job").get(pk=attempt.pk)
    reads = listing_requests([attempt])
    assert len(reads) == 2  # the checkpoint directory, and a find in the working directory
    reply = run_agent(LocalShell(tmp_path), AgentRequest(listings=reads), python="python3")
    checkpoints_ingest([attempt], reply)


def test_the_index_holds_each_layout_with_its_step_size_and_loss(run, tmp_path: Path) -> None:
    attempt, root, _ = run
    _poll(attempt, tmp_path)
    rows = {r.name: r for r in checkpoint_index(job_id=attempt.job_id)}
    complete = {name for name, r in rows.items() if r.complete}
    assert complete == {
        *(f"step-{s}.pt" for s in LOSS),
        "out/checkpoint-20",
        "out/checkpoint-40",
        "lightning_logs/version_0/checkpoints/epoch=0-step=50.ckpt",
        "dcp-80",
    }
    assert not rows["out/checkpoint-60"].complete and not rows["dcp-70"].complete
    assert not rows[".step-60.pt.4242.tmp"].complete
    assert rows["step-999.pt"].link and rows["step-999.pt"].protected == PROTECTED_LINK
    assert rows["lightning_logs/version_0/checkpoints/epoch=0-step=50.ckpt"].step == 50
    assert rows["out/checkpoint-40"].step == 40 and rows["out/checkpoint-40"].is_dir
    for name, row in rows.items():
        assert row.size == _du(Path(row.path)), name  # what du counts, a tree's whole
        assert row.path.startswith(str(root) + "/")
    for step, loss in LOSS.items():
        assert rows[f"step-{step}.pt"].metrics == {"loss": pytest.approx(loss)}


def test_keep_best_2_and_last_1_deletes_exactly_the_others(
    run, tmp_path: Path, member, monkeypatch
) -> None:
    attempt, root, outside = run
    _poll(attempt, tmp_path)
    # Only the example trainer's files: the HF and other layouts have their own test above.
    Checkpoint.objects.filter(attempt=attempt).exclude(name__startswith="step-").delete()
    job = attempt.job
    # Another job's queued attempt resumes from step 10 (a fork): it stays whatever the rule.
    _, queued = factories.job(job.project, member, job.cluster, name="fork")
    Attempt.objects.filter(pk=queued.pk).update(resume_from=str(root / "checkpoints/step-10.pt"))
    rule = checkpoint_rule_save(
        user=member, project=job.project, job=job, keep_last=1, keep_best=2, best_metric="loss"
    )
    assert rule is not None
    verdicts = {
        v.row.name: v
        for v in plan(checkpoint_index(job_id=job.pk, metrics=["loss"]), rule, now=timezone.now())
    }
    assert {n for n, v in verdicts.items() if v.delete} == {"step-20.pt"}
    assert verdicts["step-10.pt"].why == f"kept: {PROTECTED_RESUME}"
    assert not verdicts["step-999.pt"].delete

    monkeypatch.setattr(services, "pool", _LocalPool(tmp_path))
    monkeypatch.setattr(services, "account_endpoint", lambda account: None)
    Attempt.objects.filter(pk=attempt.pk).update(account=factories.account(job.cluster, member))
    before = _du(root / "checkpoints" / "step-20.pt")
    done = retention_apply(job=job)
    assert [(d.name, d.removed, d.size) for d in done] == [("step-20.pt", True, before)]
    assert sorted(p.name for p in (root / "checkpoints").glob("step-*")) == [
        "step-10.pt",
        "step-30.pt",
        "step-40.pt",
        "step-50.pt",
        "step-999.pt",
    ]
    assert (outside / "precious.pt").stat().st_size == 5000  # the link's target is whole
    record = CheckpointDeletion.objects.get(job=job)
    assert record.step == 20 and record.metrics == {"loss": pytest.approx(1.2)}
    assert "keep the last 1, keep the best 2 by loss" in record.reason
    assert not Checkpoint.objects.filter(attempt=attempt, name="step-20.pt").exists()

    # Once the fork's attempt has ended, step 10 may go too; a link never.
    Attempt.objects.filter(pk=queued.pk).update(state=State.COMPLETED)
    assert [d.name for d in retention_apply(job=job)] == ["step-10.pt"]
    with pytest.raises(Exception, match="symbolic link"):
        link = Checkpoint.objects.get(attempt=attempt, name="step-999.pt")
        checkpoints_delete(job=job, ids=[link.pk], reason="by hand", user=member)
    assert (root / "checkpoints" / "step-999.pt").is_symlink()


def test_a_rules_pass_is_one_timeline_entry_per_attempt(
    run, tmp_path: Path, member, monkeypatch
) -> None:
    first, root, _ = run
    _poll(first, tmp_path)
    Checkpoint.objects.filter(attempt=first).exclude(name__startswith="step-").delete()
    job = first.job
    # A restart's attempt with its own run directory and two checkpoints.
    second = Attempt.objects.create(job=job, number=2, run_dir=str(tmp_path / "run2"))
    for step in (60, 70):
        _write(tmp_path / "run2" / "checkpoints" / f"step-{step}.pt", 2000)
        Checkpoint.objects.create(
            attempt=second, name=f"step-{step}.pt", step=step, size=2000,
            modified_at=timezone.now() - timedelta(minutes=5),
        )  # fmt: skip
    account = factories.account(job.cluster, member)
    Attempt.objects.filter(job=job).update(account=account)
    monkeypatch.setattr(services, "pool", _LocalPool(tmp_path))
    monkeypatch.setattr(services, "account_endpoint", lambda account: None)
    rule = checkpoint_rule_save(user=member, project=job.project, job=job, keep_last=1)
    assert rule is not None
    freed = sum(_du(root / "checkpoints" / f"step-{s}.pt") for s in LOSS)
    before = JobEvent.objects.filter(job=job).count()

    done = retention_apply(job=job)

    assert sorted(d.step or 0 for d in done) == [10, 20, 30, 40, 50, 60]
    notes = JobEvent.objects.filter(job=job).order_by("id")[before:]
    assert [n.attempt_id for n in notes] == [first.pk, second.pk]  # not one per checkpoint
    size = filesizeformat(freed).replace("\xa0", " ")
    assert notes[0].reason == (
        f"Checkpoint rules removed 5 checkpoints (steps 10, 20, 30, 40, 50; {size}), "
        "kept 1 (step 999): keep the last 1."
    )
    assert notes[1].reason == (
        "Checkpoint rules removed 1 checkpoint (step 60; 2.0 KB), kept 1 (step 70): "
        "keep the last 1."
    )
    assert notes[0].from_state == notes[0].to_state == State.RUNNING  # a note, no change
    # A pass that deletes nothing says nothing.
    assert retention_apply(job=job) == []
    assert JobEvent.objects.filter(job=job).count() == before + 2


class _LocalPool:
    """The connection pool's `session`, giving a local shell in place of an SSH session."""

    def __init__(self, home: Path) -> None:
        self.home = home

    @contextlib.contextmanager
    def session(self, endpoint: object) -> Iterator[LocalShell]:
        yield LocalShell(self.home)


def test_names_say_the_step_and_saves_in_progress_are_not_complete() -> None:
    assert parse_step("epoch=3-step=1200.ckpt") == 1200
    assert parse_step("out/checkpoint-500") == 500
    assert parse_step("global_step300") == 300
    assert parse_step("last.ckpt") is None
    entry = ListingEntry("tmp-checkpoint-40", 10, 0.0, True, marks=("trainer_state.json",))
    assert not is_complete(entry)
    assert not is_complete(ListingEntry("step-1.pt", 0, 0.0, False))


def test_a_file_still_growing_is_complete_only_once_settled_or_ended(run, tmp_path: Path) -> None:
    attempt, root, _ = run
    _write(root / "checkpoints" / "step-60.pt", 2000)  # torch.save to its final name, now
    _poll(attempt, tmp_path)
    row = Checkpoint.objects.get(attempt=attempt, name="step-60.pt")
    assert not row.complete and row.step == 60
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED)
    _poll(attempt, tmp_path)  # the last listing after the end: nothing writes any more
    assert Checkpoint.objects.get(attempt=attempt, name="step-60.pt").complete
