"""Clone: every field of a job spec goes through the submit form and comes back unchanged.

The fields are read from the JobSpec definition, so a field added there without
form support fails here. The clone form is submitted as a browser would: the
values its HTML carries (checked boxes, selected options, textarea text).
"""

import dataclasses
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import User
from django.db import models
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster, ClusterAccount
from jobs.enums import FailureClass, State, Template
from jobs.models import CodeSnapshot, Job
from jobs.specs import JobSpec, spec_from_job
from projects.models import Project
from tests import factories

# One non-default value for every field of the spec (each within the test cluster's
# partition and the project's quota).
NON_DEFAULT: dict[str, object] = {
    "name": "base",
    "template": Template.TORCHRUN,
    "command": "train.py --lr 0.1 --name 'a b'",
    "nodes": 2,
    "gpus_per_node": 2,
    "cpus_per_task": 2,
    "memory_mb": 4000,
    "time_limit": timedelta(hours=2, minutes=30, seconds=5),
    "partition": "gpu",
    "setup": "module load cuda\nsource ~/venv/bin/activate",
    "model_params": 125_000_000,
    "total_steps": 500,
    "metric_patterns": "acc=(?P<acc>[0-9.]+)\ntok=(?P<tokens>[0-9]+)",
    "max_restarts": 3,
    "restart_on": (FailureClass.PREEMPTION.value, FailureClass.TIME_LIMIT.value),
    "exclude_failed_nodes": True,
    "preflight": True,
    "hang_multiple": 4.0,
    "hang_floor_seconds": 120,
    "startup_window_seconds": 900,
    # The code: a snapshot fetched from a git URL (made in the test), with where it came from.
    "code": "a CodeSnapshot",
    "code_commit": "c" * 40,
    "code_branch": "feature/lr",
    "code_diff": "-lr = 0.1\n+lr = 0.3\n",
    "code_diff_truncated": True,
    "code_git_url": "https://git.example.org/vision/trainer.git",
    "code_git_ref": "feature/lr",
    "params": {"warmup": 5, "optimizer": "adamw"},
}
# The code travels by reference: the clone form names the original job (`code_from`) and
# the copy takes its snapshot and provenance, never a new upload or fetch.
BY_REFERENCE = {"code", *(name for name in NON_DEFAULT if name.startswith("code_"))}
# Job columns that are not the spec: where it runs, who asked, and what became of it
# (param_sources: where each setting came from, derived at submit and by the poll).
NOT_SPEC = {
    "id",
    "project",
    "user",
    "cluster",
    "state",
    "created_at",
    "updated_at",
    "param_sources",
    # What the researcher writes of a run once it exists (jobs.notes): a clone is a new run
    # and starts without them.
    "note",
    "tags",
    "group",
    # A fork's lineage (jobs.lineage): a clone starts afresh, from no checkpoint.
    "parent",
    "parent_checkpoint",
    "parent_step",
}


class _FormValues(HTMLParser):
    """The name/value pairs a browser submits for the form with id `job-form`."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: list[tuple[str, str]] = []
        self._in_form = False
        self._select: str | None = None
        self._select_value: str | None = None
        self._first_option: str | None = None
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form" and a.get("id") == "job-form":
            self._in_form = True
        if not self._in_form or "disabled" in a:
            return
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.pairs.append((a["name"], a.get("value", "on")))
            elif kind not in ("submit", "button"):
                self.pairs.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self._select, self._select_value, self._first_option = a.get("name"), None, None
        elif tag == "option" and self._select:
            value = a.get("value", "")
            self._first_option = value if self._first_option is None else self._first_option
            if "selected" in a:
                self._select_value = value
        elif tag == "textarea":
            self._textarea, self._text = a.get("name"), ""

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False
        elif tag == "select" and self._select:
            value = self._select_value if self._select_value is not None else self._first_option
            self.pairs.append((self._select, value or ""))
            self._select = None
        elif tag == "textarea" and self._textarea is not None:
            # Browsers drop the one newline that follows <textarea>; forms send CRLF.
            text = self._text.removeprefix("\r").removeprefix("\n")
            self.pairs.append((self._textarea, text.replace("\r\n", "\n").replace("\n", "\r\n")))
            self._textarea = None


def _submitted(html: str) -> dict[str, list[str]]:
    parser = _FormValues()
    parser.feed(html)
    values: dict[str, list[str]] = {}
    for name, value in parser.pairs:
        values.setdefault(name, []).append(value)
    return values


def test_the_test_sets_every_spec_field_to_a_non_default_value() -> None:
    spec_fields = {f.name: f for f in dataclasses.fields(JobSpec)}
    missing = sorted(set(spec_fields) - set(NON_DEFAULT))
    assert not missing, f"give {missing} a non-default value here and a field in the form"
    for name, field in spec_fields.items():
        if field.default is not dataclasses.MISSING:
            assert NON_DEFAULT[name] != field.default, name
        value = NON_DEFAULT[name]
        column = Job._meta.get_field(name)
        assert isinstance(column, models.Field)
        assert (list(value) if isinstance(value, tuple) else value) != column.get_default(), name


def test_every_job_column_that_is_not_where_or_who_is_in_the_spec() -> None:
    columns = {f.name for f in Job._meta.concrete_fields} - NOT_SPEC
    assert columns == {f.name for f in dataclasses.fields(JobSpec)}


def test_clone_submits_the_same_spec_field_by_field(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount, django_capture_on_commit_callbacks,
) -> None:  # fmt: skip
    snapshot = CodeSnapshot.objects.create(
        project=project, sha256="ab" * 32, size=1, unpacked_size=1, files=1, created_by=owner
    )
    original, _ = factories.job(
        project, owner, cluster, state=State.COMPLETED,
        **{**NON_DEFAULT, "restart_on": list(NON_DEFAULT["restart_on"]), "code": snapshot},  # type: ignore[call-overload]
        param_sources={"warmup": "given", "optimizer": "given"},
    )  # fmt: skip
    client.force_login(member)
    page = client.get(reverse("job-new"), {"clone": original.pk})
    assert page.status_code == 200
    data = _submitted(page.content.decode())
    assert data["code_from"] == [str(original.pk)]
    for field in dataclasses.fields(JobSpec):
        if field.type is not bool and field.name not in BY_REFERENCE:
            assert field.name in data, f"the clone form has no field {field.name!r}"
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), data)
    assert response.status_code == 302, response.context["form"].errors
    clone = Job.objects.exclude(pk=original.pk).get()
    before, after = spec_from_job(original), spec_from_job(clone)
    for field in dataclasses.fields(JobSpec):
        expected = getattr(before, field.name)
        if field.name == "name":
            expected = f"{expected} copy"
        assert getattr(after, field.name) == expected, field.name
    assert (clone.project, clone.cluster) == (original.project, original.cluster)


@pytest.mark.parametrize("max_restarts", ["", "0"])
def test_a_blank_restart_count_never_restarts(
    client: Client, member: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount, django_capture_on_commit_callbacks, max_restarts: str,
) -> None:  # fmt: skip
    client.force_login(member)
    data = _submitted(client.get(reverse("job-new")).content.decode())
    data.update(command=["python train.py"], max_restarts=[max_restarts])
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), data)
    assert response.status_code == 302, response.context["form"].errors
    job = Job.objects.get()
    assert job.max_restarts == 0
    # The form starts from the default policy, ready for a count above 0.
    assert tuple(job.restart_on) == JobSpec.restart_on


def test_a_class_that_never_restarts_is_refused_with_a_message(
    client: Client, member: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount,
) -> None:  # fmt: skip
    client.force_login(member)
    data = _submitted(client.get(reverse("job-new")).content.decode())
    data.update(command=["python train.py"], max_restarts=["2"], restart_on=["cuda_oom"])
    response = client.post(reverse("job-new"), data)
    assert response.status_code == 200
    assert "restart_on" in response.context["form"].errors
    assert not Job.objects.exists()


def test_the_form_does_not_offer_a_preflight_failure_as_a_restart_reason(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    service_account: ClusterAccount, django_capture_on_commit_callbacks,
) -> None:  # fmt: skip
    # A preflight that finds a faulty node resubmits without it by itself (jobs.preflight).
    client.force_login(member)
    page = client.get(reverse("job-new")).content.decode()
    assert 'name="restart_on" value="node_failure"' in page
    assert 'value="preflight"' not in page and FailureClass.PREFLIGHT.label not in page
    data = _submitted(page)
    data.update(command=["python train.py"], max_restarts=["2"], restart_on=["preflight"])
    refused = client.post(reverse("job-new"), data)
    assert refused.status_code == 200 and "restart_on" in refused.context["form"].errors
    # A job submitted while the form offered it clones without it (it never restarted a job).
    original, _ = factories.job(
        project, owner, cluster, state=State.COMPLETED, max_restarts=2,
        restart_on=["node_failure", "preflight"], cpus_per_task=1,
    )  # fmt: skip
    data = _submitted(client.get(reverse("job-new"), {"clone": original.pk}).content.decode())
    assert data["restart_on"] == ["node_failure"]
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("job-new"), data)
    assert response.status_code == 302, response.context["form"].errors
    assert Job.objects.exclude(pk=original.pk).get().restart_on == ["node_failure"]
