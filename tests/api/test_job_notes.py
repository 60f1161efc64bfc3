"""PATCH /api/v1/jobs/<id>/notes/: a refused value answers 400 naming its field; the job
object carries what was kept. Who may is in test_permissions.py's matrix."""

import json
from typing import Any

import pytest

from jobs.models import Job
from jobs.notes import NOTE_MAX, TAGS_MAX
from tests.helpers import Tokens, bearer

pytestmark = pytest.mark.usefixtures("service_account")


def _patch(token: str, job: Job, body: dict[str, object]) -> Any:
    return bearer(token).patch(
        f"/api/v1/jobs/{job.pk}/notes/", json.dumps(body), content_type="application/json"
    )


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"tags": ["baseline", "two words"]}, "tags", "use only letters"),
        ({"tags": [f"t{n}" for n in range(TAGS_MAX + 1)]}, "tags", f"at most {TAGS_MAX}"),
        ({"tags": "baseline"}, "tags", "list"),
        ({"note": "n" * (NOTE_MAX + 1)}, "note", "4,000 characters"),
        ({"group": "a/b"}, "group", "use only letters"),
    ],
)
def test_a_refused_value_answers_400_naming_the_field(
    tokens: Tokens, job: Job, body: dict[str, object], field: str, says: str
) -> None:
    response = _patch(tokens.owner, job, {"group": "kept?", **body})
    assert response.status_code == 400
    errors = response.json()
    assert list(errors) == [field]
    assert says in errors[field][0]
    assert Job.objects.get(pk=job.pk).group == ""


def test_the_job_object_carries_what_was_kept(tokens: Tokens, job: Job) -> None:
    response = _patch(tokens.owner, job, {"note": "best so far", "tags": ["Best"], "group": "s1"})
    assert response.json() == {"id": job.pk, "note": "best so far", "tags": ["best"], "group": "s1"}
    shown = bearer(tokens.viewer).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (shown["note"], shown["tags"], shown["group"]) == ("best so far", ["best"], "s1")
