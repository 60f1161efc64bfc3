"""jobs.notes and jobs.services.job_annotate: a run's note, tags and group, checked and kept.

Real rows; the six personas of tests/jobs/test_access.py. The job is another member's, so
the member persona is one who may see it and not change it.
"""

import pytest
from django.contrib.auth.models import User

from jobs.errors import JobError, JobPermissionRefused
from jobs.models import Job
from jobs.notes import NOTE_MAX, TAGS_MAX, clean_tags, tags_from_text
from jobs.services import job_annotate
from projects.models import Membership, Project
from tests import factories


@pytest.fixture
def sams_job(project: Project, django_user_model: type[User]) -> Job:
    submitter = django_user_model.objects.create_user(username="sam")
    Membership.objects.create(user=submitter, project=project, role=Membership.Role.MEMBER)
    job, _ = factories.job(project, submitter, factories.cluster())
    return job


def test_the_submitter_writes_note_tags_and_group_and_they_are_stored(sams_job: Job) -> None:
    job_annotate(
        job=sams_job,
        user=sams_job.user,
        note="  The run that mattered: lr 3e-4 without warm-up.\r\nSee seed 2.  ",
        tags=["Baseline", "lr-sweep", "baseline", "v1.2"],
        group="seeds_lr3e-4",
    )
    stored = Job.objects.get(pk=sams_job.pk)
    assert stored.note == "The run that mattered: lr 3e-4 without warm-up.\nSee seed 2."
    # Lower-cased, each once, in the order given.
    assert stored.tags == ["baseline", "lr-sweep", "v1.2"]
    assert stored.group == "seeds_lr3e-4"
    assert sams_job.tags == stored.tags  # the object passed in says the same


def test_a_value_left_out_is_kept_and_an_empty_one_clears(sams_job: Job) -> None:
    job_annotate(job=sams_job, user=sams_job.user, note="keep", tags=["a"], group="g")
    job_annotate(job=sams_job, user=sams_job.user, tags=[])
    stored = Job.objects.get(pk=sams_job.pk)
    assert (stored.note, stored.tags, stored.group) == ("keep", [], "g")


def test_a_project_owner_may_annotate_anothers_run(sams_job: Job, owner: User) -> None:
    job_annotate(job=sams_job, user=owner, group="ablation")
    assert Job.objects.get(pk=sams_job.pk).group == "ablation"


@pytest.mark.parametrize("persona", ["member", "viewer", "outsider", "staff"])
def test_others_are_refused_and_nothing_changes(
    request: pytest.FixtureRequest, sams_job: Job, persona: str
) -> None:
    user = request.getfixturevalue(persona)
    with pytest.raises(JobPermissionRefused, match="submitter or a project owner"):
        job_annotate(job=sams_job, user=user, note="mine now", tags=["x"])
    stored = Job.objects.get(pk=sams_job.pk)
    assert (stored.note, stored.tags) == ("", [])


@pytest.mark.parametrize(
    ("changes", "field", "says"),
    [
        ({"tags": ["good", "has space"]}, "tags", "use only letters"),
        ({"tags": [f"t{n}" for n in range(TAGS_MAX + 1)]}, "tags", f"at most {TAGS_MAX} tags"),
        ({"tags": ["x" * 41]}, "tags", "40 characters"),
        ({"note": "n" * (NOTE_MAX + 1)}, "note", "4,000 characters"),
        ({"group": "two words"}, "group", "use only letters"),
        ({"group": "g" * 65}, "group", "64 characters"),
    ],
)
def test_a_refused_value_names_its_field_and_writes_nothing(
    sams_job: Job, changes: dict[str, object], field: str, says: str
) -> None:
    with pytest.raises(JobError) as refused:
        job_annotate(job=sams_job, user=sams_job.user, **{"group": "kept?", **changes})  # type: ignore[arg-type]
    assert list(refused.value.errors) == [field]
    assert says in refused.value.errors[field][0]
    assert Job.objects.get(pk=sams_job.pk).group == ""


def test_a_browsers_line_ends_count_once(sams_job: Job) -> None:
    note = "\r\n".join(["x" * 99] * 40)  # 3,960 characters and 39 line ends, sent as CR LF
    job_annotate(job=sams_job, user=sams_job.user, note=note)
    assert Job.objects.get(pk=sams_job.pk).note == note.replace("\r\n", "\n")


def test_tags_typed_in_one_box_split_on_commas_and_spaces() -> None:
    assert tags_from_text(" baseline, lr-sweep  v2,,") == ["baseline", "lr-sweep", "v2"]
    assert clean_tags(tags_from_text("A a B")) == ["a", "b"]
