"""Issue 38's acceptance for the index, the rules and storage, on the sandbox.

The example trainer and a Hugging Face Trainer job saving every 20 steps run as alice; while
they run, alice's job plants links pointing out of its run directory (one as a checkpoint,
one inside a checkpoint the rule will delete). The index shows each checkpoint with its step
and loss; the portal's sizes match `du -sb` run over SSH on the same paths; a keep-best-2
and keep-last-1 rule's preview names what it will delete, and applying it deletes exactly
that on the cluster, as alice, recorded, never the checkpoint a queued attempt resumes from,
never a link, and every link's target is whole afterwards.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from django.test import Client

from clusters.ssh import Connection
from jobs.enums import FINAL_STATES, State, Template
from jobs.models import Attempt, Job
from jobs.resume import job_resume
from jobs.services import job_submit
from monitoring.checkpoints.index import PROTECTED_LINK, PROTECTED_RESUME, checkpoint_index
from monitoring.checkpoints.storage import project_storage
from monitoring.models import Checkpoint, CheckpointDeletion
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, upload_example, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
ARTIFACT = ROOT / "test-artifacts" / "checkpoint-du.json"
TRAINER = Path(__file__).with_name("trainers") / "real" / "hf_trainer.py"
EXAMPLE_STEPS = (8, 16, 24, 32, 40)
HF_STEPS = (20, 40, 60, 80, 100, 120)
RULE = {"keep_last": 1, "keep_best": 2, "best_metric": "loss", "best_mode": "min"}


def _finished(job: Job) -> bool:
    attempt = Attempt.objects.filter(job=job).order_by("-number").first()
    return attempt is not None and attempt.state in FINAL_STATES and attempt.files_complete


def _du(alice: Connection, paths: list[str]) -> int:
    out = alice.run("du -sb -- " + " ".join(shlex.quote(p) for p in paths)).text
    return sum(int(line.split("\t")[0]) for line in out.splitlines() if line.strip())


def _exists(alice: Connection, path: str) -> bool:
    return alice.run(f"test -e {shlex.quote(path)} || test -L {shlex.quote(path)}").exit_status == 0


def test_index_rules_and_storage_on_the_cluster(
    celery_worker, researcher, project, sandbox_cluster, alice: Connection
) -> None:
    # Precious files outside every run directory, which links will point at.
    alice.run("mkdir -p -m 700 precious/dir && head -c 100000 /dev/urandom > precious/file.pt")
    alice.run("head -c 50000 /dev/urandom > precious/dir/weights.bin")
    before = alice.run("sha256sum precious/file.pt precious/dir/weights.bin").text
    home = alice.run("pwd").text.strip()
    example = upload_example(alice)
    alice.run("mkdir -p -m 700 portal-hf")
    alice.upload("portal-hf/hf_trainer.py", TRAINER.read_bytes(), mode=0o600)
    plain = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="example trainer",
            template=Template.TORCHRUN,
            command=f"{example} --steps 40 --checkpoint-every 8 --keep 100 --sleep 0.1",
            gpus_per_node=1,
        ),
    )
    hf = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="hf trainer",
            # In its run directory, so its output directory (out/) is inside it.
            setup='cd "$PORTAL_RUN_DIR"\nexport HF_HUB_OFFLINE=1',
            command="python3 $HOME/portal-hf/hf_trainer.py --no-bars --save-steps 20 --pause 0.05",
            cpus_per_task=2,
        ),
    )
    first, hf_attempt = (Attempt.objects.get(job=j) for j in (plain, hf))

    # While they run, the jobs' account plants links out of the run directories.
    wait_for(
        lambda: Checkpoint.objects.filter(attempt=first, complete=True).exists(),
        QUEUE_WAIT,
        "the example trainer's first checkpoint",
    )
    first.refresh_from_db()
    link = f"{first.run_dir}/checkpoints/step-999.pt"
    alice.run(f"ln -s {home}/precious/file.pt {shlex.quote(link)}")
    wait_for(
        lambda: Checkpoint.objects.filter(attempt=hf_attempt, step=20, complete=True).exists(),
        QUEUE_WAIT + 120,
        "HF's checkpoint-20 in the index",
    )
    hf_attempt.refresh_from_db()
    inner = f"{hf_attempt.run_dir}/out/checkpoint-20/planted"
    alice.run(f"ln -s {home}/precious/dir {shlex.quote(inner)}")
    alice.run(
        f"ln -s {home}/precious/dir {shlex.quote(hf_attempt.run_dir + '/out/checkpoint-1000')}"
    )
    wait_for(lambda: _finished(plain) and _finished(hf), 420, "both jobs to finish")
    assert all(Attempt.objects.get(job=j).state == State.COMPLETED for j in (plain, hf))

    # 1. The index: every checkpoint with its step and its loss at that step.
    rows = {j.pk: checkpoint_index(job_id=j.pk, metrics=["loss"]) for j in (plain, hf)}
    complete = {j: {r.step: r for r in rs if r.complete} for j, rs in rows.items()}
    assert set(complete[plain.pk]) == set(EXAMPLE_STEPS)
    assert set(complete[hf.pk]) == set(HF_STEPS)
    for job_rows in complete.values():
        for step, row in job_rows.items():
            assert "loss" in row.metrics, (step, row.name, row.metrics)
    assert {r.name for r in complete[hf.pk].values()} == {f"out/checkpoint-{s}" for s in HF_STEPS}
    links = [r for r in rows[plain.pk] if r.link]
    assert [r.name for r in links] == ["step-999.pt"] and links[0].protected == PROTECTED_LINK
    assert not any("1000" in r.name for r in rows[hf.pk])  # a linked directory is not entered

    # 2. Storage: what the portal counts is what du counts on the cluster.
    figures = {}
    for job in (plain, hf):
        paths = [r.path for r in rows[job.pk]]
        portal, du = sum(r.size for r in rows[job.pk]), _du(alice, paths)
        figures[job.name] = {"portal_bytes": portal, "du_bytes": du, "paths": len(paths)}
        assert abs(portal - du) <= 0.01 * du, figures
    total = project_storage(project=project).used
    figures["project"] = {
        "portal_bytes": total,
        "du_bytes": sum(f["du_bytes"] for f in figures.values()),
    }
    assert abs(total - figures["project"]["du_bytes"]) <= 0.01 * figures["project"]["du_bytes"]
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text(json.dumps(figures, indent=1))

    # 3. The rule, set and previewed over the API; the example job resumed from a
    # checkpoint the rule would delete, so that one stays.
    client = Client()
    client.force_login(researcher)
    previews = {}
    for job in (plain, hf):
        assert client.post(f"/api/v1/jobs/{job.pk}/checkpoints/rule/", RULE).status_code == 200
        previews[job.pk] = client.get(f"/api/v1/jobs/{job.pk}/checkpoints/preview/").json()
    for job in (plain, hf):
        by_id = {c["id"]: c for c in previews[job.pk]["checkpoints"]}
        kept = [
            c
            for c in by_id.values()
            if c["complete"] and not c["link"] and c["id"] not in previews[job.pk]["delete"]
        ]
        ranked = sorted(
            (c for c in by_id.values() if c["complete"] and not c["link"]),
            key=lambda c: c["metrics"]["loss"],
        )
        last = max(c["step"] for c in by_id.values() if c["complete"] and not c["link"])
        assert {c["id"] for c in kept} == {c["id"] for c in ranked[:2]} | {
            c["id"] for c in by_id.values() if c["step"] == last and c["complete"]
        }
    doomed = {
        j: [c for c in previews[j]["checkpoints"] if c["id"] in previews[j]["delete"]]
        for j in previews
    }
    resumed = doomed[plain.pk][0]
    second = job_resume(
        job=plain, user=researcher, checkpoint=resumed["path"], step=resumed["step"]
    )
    applied = {
        j.pk: client.post(f"/api/v1/jobs/{j.pk}/checkpoints/apply/").json()["deletions"]
        for j in (plain, hf)
    }
    assert Attempt.objects.get(pk=second.pk).state not in FINAL_STATES  # still resuming from it

    # 4. Exactly the others are gone on the cluster, recorded; the rest and every link's
    # target are whole.
    for job in (plain, hf):
        expected = {c["path"] for c in doomed[job.pk]} - {resumed["path"]}
        assert {d["path"] for d in applied[job.pk]} == expected
        assert all(d["removed"] and d["size"] > 0 for d in applied[job.pk]), applied[job.pk]
        for c in previews[job.pk]["checkpoints"]:
            assert _exists(alice, c["path"]) == (c["path"] not in expected), c["path"]
        recorded = CheckpointDeletion.objects.filter(job=job, removed=True)
        assert set(recorded.values_list("path", flat=True)) == expected
    assert resumed["path"] in {
        c.path for c in checkpoint_index(job_id=plain.pk) if c.protected == PROTECTED_RESUME
    }
    assert _exists(alice, link) and _exists(alice, hf_attempt.run_dir + "/out/checkpoint-1000")
    assert alice.run("sha256sum precious/file.pt precious/dir/weights.bin").text == before
    page = client.get(f"/jobs/{hf.pk}/checkpoints/").content.decode()
    assert all(f'data-deleted="{d["name"]}"' in page for d in applied[hf.pk])
