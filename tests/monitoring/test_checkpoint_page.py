"""The job's checkpoint page and API: the index with steps and losses, a rule's preview before
anything is saved, the controls only for those who may use them, outsiders refused."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.models import Attempt, Job
from monitoring.checkpoints.services import checkpoint_rule_save
from monitoring.checkpoints.storage import checkpoint_rules_apply, project_storage
from monitoring.models import Checkpoint, CheckpointDeletion, CheckpointRule
from monitoring.series.write import series_append

# The `job` fixture's loss is 1/step at steps 1-5; checkpoints at steps 1, 3, 4 and 5.
STEPS = (1, 3, 4, 5)


@pytest.fixture
def saved(job: Job) -> list[Checkpoint]:
    attempt = Attempt.objects.get(job=job, number=1)
    Attempt.objects.filter(pk=attempt.pk).update(run_dir="/home/olivia/.portal/runs/r1")
    series_append(points=[(attempt.pk, "eval_loss", 4.0, 0.5)])
    now = timezone.now()
    return [
        Checkpoint.objects.create(
            attempt=attempt,
            name=f"step-{s}.pt",
            path=f"/home/olivia/.portal/runs/r1/checkpoints/step-{s}.pt",
            step=s,
            size=1000 * s,
            modified_at=now - timedelta(minutes=10 - s),
        )
        for s in STEPS
    ]


def _get(client: Client, user: User, job: Job, **params: str) -> tuple[int, str]:
    client.force_login(user)
    response = client.get(reverse("job-checkpoints", args=[job.pk]), params)
    return response.status_code, response.content.decode()


def test_the_index_shows_each_step_with_its_loss_and_the_rule_preview(
    client: Client, job: Job, saved: list[Checkpoint]
) -> None:
    client.force_login(job.user)
    url = reverse("job-checkpoints", args=[job.pk])
    params = {"keep_last": "1", "keep_best": "1", "best_metric": "loss", "preview": "1"}
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, params)
    status, html = response.status_code, response.content.decode()
    assert status == 200
    for s in STEPS:
        assert f'data-step="{s}"' in html
        assert f"{1.0 / s:.4f}" in html  # the loss at that step
    assert "0.5000" in html  # eval_loss at step 4 only; no stale value at step 5
    assert 'id="rule-preview-note"' in html
    # Keep the last (5, also the best by loss): 1, 3 and 4 would go, 12 kB in all.
    assert 'id="rule-doomed-count">3<' in html and 'data-bytes="8000"' in html
    assert html.count('data-delete="1"') == 3
    assert 'id="checkpoints-delete"' in html and 'id="rule-save"' in html
    # Session, user, job, the rules, the checkpoints, the attempts resuming from them, the
    # attempt's series names, one read per metric (loss, eval_loss), the latest attempt
    # (where a restart resumes), the deletions: eleven, whatever the number of checkpoints.
    assert len(queries) == 11, "\n".join(q["sql"][:90] for q in queries.captured_queries)


def test_saving_a_rule_and_a_member_who_may_not(
    client: Client, job: Job, saved: list[Checkpoint], member: User
) -> None:
    client.force_login(job.user)
    url = reverse("job-checkpoints-rule", args=[job.pk])
    response = client.post(url, {"keep_last": "2"})
    assert response.status_code == 302
    rule = CheckpointRule.objects.get(job=job)
    assert rule.keep_last == 2 and rule.keep_best is None
    status, html = _get(client, job.user, job)
    assert "this job&#x27;s own rule" in html and "keep the last 2" in html
    assert html.count('data-delete="1"') == 2
    # A member who did not submit it sees the index, not the controls; a POST is refused.
    status, html = _get(client, member, job)
    assert status == 200 and 'id="checkpoints-delete"' not in html and 'id="rule-save"' not in html
    client.force_login(member)
    client.post(reverse("job-checkpoints-delete", args=[job.pk]), {"checkpoint": [saved[0].pk]})
    assert Checkpoint.objects.filter(pk=saved[0].pk).exists()
    assert client.post(url, {"keep_last": "1"}).status_code == 200  # the form, with the refusal
    assert CheckpointRule.objects.get(job=job).keep_last == 2


def test_a_protected_checkpoint_has_no_delete_box(
    client: Client, job: Job, saved: list[Checkpoint], member: User
) -> None:
    job2 = Job.objects.create(
        project=job.project,
        user=member,
        cluster=job.cluster,
        name="fork",
        command="x",
        time_limit=timedelta(minutes=5),
    )
    Attempt.objects.create(job=job2, number=1, resume_from=saved[1].path)
    assert _get(client, job.user, job)[0] == 200
    html = _get(client, job.user, job)[1]
    assert f'value="{saved[0].pk}"' in html and f'value="{saved[1].pk}"' not in html
    assert "a queued or running attempt resumes from it" in html


def test_the_api_index_and_preview(client: Client, job: Job, saved: list[Checkpoint]) -> None:
    client.force_login(job.user)
    index = client.get(f"/api/v1/jobs/{job.pk}/checkpoints/").json()
    assert [c["step"] for c in index["checkpoints"]] == [5, 4, 3, 1]
    assert index["checkpoints"][0]["metrics"] == {"loss": pytest.approx(0.2)}
    assert index["storage_bytes"] == 13000 and index["rule"] is None
    preview = client.get(
        f"/api/v1/jobs/{job.pk}/checkpoints/preview/",
        {"keep_best": "2", "best_metric": "loss", "best_mode": "min"},
    ).json()
    assert sorted(preview["delete"]) == sorted(c.pk for c in saved[:2])
    assert preview["rule"] == "keep the best 2 by loss (lowest)"
    bad = client.get(f"/api/v1/jobs/{job.pk}/checkpoints/preview/", {"keep_last": 0})
    assert bad.status_code == 400 and "keep_last" in bad.json()


@pytest.mark.parametrize(
    "name",
    ["job-checkpoints", "job-checkpoints-rule", "job-checkpoints-delete", "job-checkpoints-apply"],
)
def test_the_outsider_gets_404(client: Client, job: Job, outsider: User, name: str) -> None:
    client.force_login(outsider)
    url = reverse(name, args=[job.pk])
    response = client.get(url) if name == "job-checkpoints" else client.post(url)
    assert response.status_code == 404


def test_the_project_page_shows_checkpoint_bytes_and_warns_near_the_quota(
    client: Client, job: Job, saved: list[Checkpoint], owner: User
) -> None:
    client.force_login(owner)
    html = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert 'id="checkpoint-storage-used" data-bytes="13000"' in html
    assert f'<tr data-job="{job.pk}">' in html and "checkpoint-quota" not in html
    response = client.post(
        "/api/v1/projects/vision/checkpoint-rule/", {"keep_last": 1, "quota_gib": 0.001}
    )
    assert response.json()["quota_bytes"] == 1073742 and response.json()["quota_state"] == "ok"
    CheckpointRule.objects.filter(job__isnull=True).update(quota_bytes=14000)
    html = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert 'id="checkpoint-quota-warn"' in html


def test_over_the_quota_the_sweep_applies_the_project_rule(
    job: Job, saved: list[Checkpoint], owner: User
) -> None:
    # The job's own rule keeps everything younger than a year; the project's keeps the last 1.
    checkpoint_rule_save(user=owner, project=job.project, job=job, older_than=timedelta(days=365))
    checkpoint_rule_save(user=owner, project=job.project, keep_last=1, quota_bytes=20000)
    checkpoint_rules_apply()
    assert not CheckpointDeletion.objects.exists()  # under the quota: the job's own rule
    checkpoint_rule_save(user=owner, project=job.project, keep_last=1, quota_bytes=10000)
    assert project_storage(project=job.project).state == "over"
    checkpoint_rules_apply()
    tried = CheckpointDeletion.objects.filter(job=job)
    assert sorted(s or 0 for s in tried.values_list("step", flat=True)) == [1, 3, 4]
    # This test's attempt has no cluster account: nothing is removed, and it says why.
    assert {(d.removed, d.error) for d in tried} == {(False, "no cluster account to act as")}
    assert all("storage quota" in d.reason for d in tried)


def test_project_owners_set_the_project_and_template_rules_on_the_project_page(
    client: Client, job: Job, owner: User, member: User, outsider: User
) -> None:
    url = reverse("project-checkpoint-rule", args=["vision"])
    client.force_login(outsider)
    assert client.post(url, {"keep_last": "3"}).status_code == 404
    client.force_login(member)
    client.post(url, {"keep_last": "3"})
    assert not CheckpointRule.objects.exists()  # a member may not
    client.force_login(owner)
    client.post(url, {"keep_last": "3", "quota_gib": "2"})
    client.post(url, {"template": "torchrun", "keep_best": "2", "best_metric": "eval_loss"})
    rules = {r.template: r for r in CheckpointRule.objects.filter(project=job.project)}
    assert rules[""].keep_last == 3 and rules[""].quota_bytes == 2 * 1024**3
    assert rules["torchrun"].keep_best == 2 and rules["torchrun"].quota_bytes is None
    html = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert 'id="project-rule-form"' in html and '<li data-template="torchrun">' in html
    client.post(url, {"template": "torchrun"})  # all empty: cleared
    assert not CheckpointRule.objects.filter(template="torchrun").exists()
    client.force_login(member)
    html = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert 'id="project-rule-form"' not in html and '<li data-template="">' in html
