"""The Python client's checkpoint calls: the index, a rule's preview, deletion, applying the
rule, and the rules of a job and of a project, against the portal in-process."""

from pathlib import Path

import pytest
from portal_client import Portal, PortalError

from jobs.models import Attempt, Job
from monitoring.checkpoints import services
from monitoring.models import Checkpoint, CheckpointRule
from tests.clients.test_client import _portal, portal, same_connection  # noqa: F401  (fixtures)
from tests.helpers import Tokens
from tests.jobs.test_lineage import parent  # noqa: F401  (the fixture)
from tests.monitoring.test_checkpoint_retention import _LocalPool

GIB = 1024**3


@pytest.fixture
def on_disk(parent: Job, tmp_path: Path, monkeypatch) -> Path:  # noqa: F811
    """The parent's checkpoints 20, 40, 60 as files; the remover runs on them as it would on
    the cluster (a local shell in place of the SSH session)."""
    root = tmp_path / "run"
    for step in (20, 40, 60):
        (root / "checkpoints").mkdir(parents=True, exist_ok=True)
        (root / "checkpoints" / f"step-{step}.pt").write_bytes(b"x" * 1000)
    Attempt.objects.filter(job=parent).update(run_dir=str(root))
    monkeypatch.setattr(services, "pool", _LocalPool(tmp_path))
    monkeypatch.setattr(services, "account_endpoint", lambda account: None)
    return root


def test_a_jobs_checkpoints_and_its_rule(
    portal: Portal,  # noqa: F811
    parent: Job,  # noqa: F811
    on_disk: Path,
) -> None:
    run = portal.job(parent.pk)
    index = run.checkpoints()
    assert [c["step"] for c in index["checkpoints"]] == [60, 40, 20]
    assert index["rule"] is None and index["deletions"] == []
    ids = {c["step"]: c["id"] for c in index["checkpoints"]}
    # A preview deletes nothing.
    preview = run.checkpoint_preview(keep_last=1)
    assert sorted(preview["delete"]) == sorted([ids[20], ids[40]])
    assert preview["rule"] == "keep the last 1"
    assert Checkpoint.objects.filter(attempt__job=parent).count() == 3

    rule = run.set_checkpoint_rule(keep_last=2)
    assert rule is not None and (rule["keep_last"], rule["text"]) == (2, "keep the last 2")
    assert run.checkpoint_rule() == rule
    assert run.checkpoint_preview()["delete"] == [ids[20]]  # the rule in effect
    done = run.apply_checkpoint_rule()
    assert [(d["step"], d["removed"]) for d in done] == [(20, True)]
    assert sorted(p.name for p in (on_disk / "checkpoints").iterdir()) == [
        "step-40.pt",
        "step-60.pt",
    ]
    done = run.delete_checkpoints([ids[40]])
    assert [(d["name"], d["removed"], d["size"]) for d in done] == [("step-40.pt", True, 1000)]
    assert [d["step"] for d in run.checkpoints()["deletions"]] == [40, 20]
    with pytest.raises(PortalError) as refused:
        run.set_checkpoint_rule(keep_best=2)  # no metric to rank by
    assert refused.value.status == 400 and "best_metric" in refused.value.errors
    assert run.set_checkpoint_rule() is None  # all empty: no rule of its own
    assert not CheckpointRule.objects.filter(job=parent).exists()


def test_a_projects_rules_and_who_may_set_them(
    tokens: Tokens,
    parent: Job,  # noqa: F811
    on_disk: Path,
    same_connection: None,  # noqa: F811
) -> None:
    owner, member = _portal(tokens.owner), _portal(tokens.member)
    slug = parent.project.slug
    answer = owner.set_checkpoint_rule(slug, keep_last=3, older_than_days=7, quota_gib=10)
    assert answer["rule"]["keep_last"] == 3 and answer["quota_bytes"] == 10 * GIB
    assert answer["rule"]["text"] == "keep the last 3, delete those older than 7 days"
    assert answer["storage_bytes"] == 3 * 31277 and answer["jobs"][0]["job"] == parent.pk
    assert member.checkpoint_rule(slug)["rule"] == answer["rule"]
    by_template = owner.set_checkpoint_rule(slug, template=parent.template, keep_last=1)
    assert by_template["rule"]["template"] == parent.template
    assert owner.checkpoint_rule(slug, template=parent.template)["rule"]["keep_last"] == 1
    # The template's rule is the more specific one: the job's index says so.
    assert member.job(parent.pk).checkpoints()["rule"]["keep_last"] == 1
    with pytest.raises(PortalError) as refused:
        member.set_checkpoint_rule(slug, keep_last=1)
    assert refused.value.status == 403
    with pytest.raises(PortalError) as refused:
        member.job(parent.pk).apply_checkpoint_rule()  # the owner's job
    assert refused.value.status == 403
    assert Checkpoint.objects.filter(attempt__job=parent).count() == 3
