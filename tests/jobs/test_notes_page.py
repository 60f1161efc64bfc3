"""The job page's Notes card: a form for those who may change the note, the text for others."""

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from jobs.models import Job
from jobs.services import job_annotate


def _page(client: Client, user: User, job: Job) -> tuple[int, str]:
    client.force_login(user)
    response = client.get(reverse("job-page", args=[job.pk]))
    return response.status_code, response.content.decode()


def test_the_submitter_gets_the_form_filled_in(client: Client, job: Job) -> None:
    job_annotate(job=job, user=job.user, note="lr 3e-4 <b>", tags=["best", "v1"], group="seeds")
    status, html = _page(client, job.user, job)
    assert status == 200
    assert 'id="run-notes-form"' in html and "js/run-notes.js" in html
    assert f'data-url="/api/v1/jobs/{job.pk}/notes/"' in html
    assert ">lr 3e-4 &lt;b&gt;</textarea>" in html  # escaped
    assert 'id="run-tags" name="tags" value="best, v1"' in html
    assert 'href="/projects/vision/runs/?f=tags%3Dbest"' in html
    assert 'href="/projects/vision/runs/?f=group%3Dseeds"' in html


def test_a_member_who_did_not_submit_it_reads_the_note(
    client: Client, job: Job, member: User
) -> None:
    job_annotate(job=job, user=job.user, note="first line\nsecond <i>", tags=["best"])
    status, html = _page(client, member, job)
    assert status == 200
    assert 'id="run-notes-form"' not in html and "js/run-notes.js" not in html
    assert "first line\nsecond &lt;i&gt;" in html
    assert 'class="run-tag"' in html


def test_a_run_without_notes_says_so_to_a_viewer(client: Client, job: Job, viewer: User) -> None:
    status, html = _page(client, viewer, job)
    assert status == 200 and "No notes on this run." in html


def test_the_outsider_gets_404(client: Client, job: Job, outsider: User) -> None:
    assert _page(client, outsider, job)[0] == 404
