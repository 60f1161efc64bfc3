"""The error family: each member's one translation to HTTP (the DRF handler) and to forms."""

import pytest
from django import forms
from django.test import Client
from django.urls import reverse
from rest_framework.exceptions import NotFound

from accounts.services import TokenError
from clusters.drain import DrainError
from jobs.errors import JobError, JobPermissionRefused
from portal_lib.drf import exception_handler
from portal_lib.errors import PortalError, form_add_error
from projects.mirror import MirrorError
from projects.quota import QuotaRefusal
from tests import factories


@pytest.mark.parametrize(
    ("error", "status", "body"),
    [
        (
            JobError("Cluster alps is not taking jobs."),
            400,
            {"non_field_errors": ["Cluster alps is not taking jobs."]},
        ),
        (
            JobError("The job cannot be submitted.", errors={"nodes": ["Ask for one."]}),
            400,
            {"nodes": ["Ask for one."]},
        ),
        (
            JobPermissionRefused("Only the job's submitter or a project owner can cancel it."),
            403,
            {"detail": "Only the job's submitter or a project owner can cancel it."},
        ),
        (TokenError("Name the token."), 400, {"non_field_errors": ["Name the token."]}),
        (DrainError("Cannot drain 'n1'."), 400, {"non_field_errors": ["Cannot drain 'n1'."]}),
        (MirrorError("Mirroring is off."), 400, {"non_field_errors": ["Mirroring is off."]}),
        (
            QuotaRefusal("needs 4 GPU-h, 1 GPU-h left", errors={"time_limit": ["Shorten it."]}),
            400,
            {"time_limit": ["Shorten it."]},
        ),
    ],
)
def test_each_member_answers_with_its_status_and_message(
    error: PortalError, status: int, body: dict[str, object]
) -> None:
    assert isinstance(error, PortalError)
    response = exception_handler(error, {})
    assert response is not None
    assert response.status_code == status
    assert response.data == body


def test_other_exceptions_are_left_to_drf() -> None:
    response = exception_handler(NotFound(), {})
    assert response is not None and response.status_code == 404
    assert exception_handler(ValueError("a bug"), {}) is None  # a 500, as before


def test_the_handler_is_the_apis(client: Client, owner, member, project) -> None:
    """Cancelling another member's job over REST: the 403 comes from the one handler."""
    job, _ = factories.job(project, owner, factories.cluster())
    client.force_login(member)
    response = client.post(reverse("api-job-cancel", args=[job.pk]))
    assert response.status_code == 403
    assert response.json() == {
        "detail": "Only the job's submitter or a project owner can cancel it."
    }


class _Form(forms.Form):
    nodes = forms.IntegerField()


def test_form_errors_go_under_their_fields_or_on_top() -> None:
    form = _Form({"nodes": "1"})
    assert form.is_valid()
    form_add_error(form, JobError("x", errors={"nodes": ["Ask for one."], "cluster": ["Pick."]}))
    assert form.errors == {"nodes": ["Ask for one."], "__all__": ["Pick."]}
    form = _Form({"nodes": "1"})
    assert form.is_valid()
    form_add_error(form, TokenError("Name the token."))
    assert form.non_field_errors() == ["Name the token."]
