"""Integers bounded everywhere (issue #13, point 6): a 30-digit number is a 400 or a form
error naming the field and its range, never a 500.

Before: a 30-digit model size on the submit form was `bigint out of range` (500), a
30-digit time limit raised OverflowError on the form and its live preview (500), a log
`offset` or stream offset of any size was taken, a series' `max_points` had no bound.

The API is walked from its own OpenAPI schema: every integer path, query and body
parameter of every operation, so a new endpoint is covered the day it is added.
"""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from drf_spectacular.generators import SchemaGenerator

from jobs.models import Job
from tests.helpers import Tokens, bearer
from web.jobs.forms import JobForm, ModelSizeField, TimeLimitField

pytestmark = [
    pytest.mark.django_db,
    # The log download streams from an async iterator, which the test client reads synchronously.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous"),
]

BIG = "1" + "0" * 29  # 30 digits
SCHEMA = SchemaGenerator().get_schema(request=None, public=True)


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _resolve(SCHEMA["components"]["schemas"][name])
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            merged.setdefault("properties", {}).update(_resolve(part).get("properties", {}))
        return merged
    return schema


def _is_integer(schema: dict[str, Any]) -> bool:
    schema = _resolve(schema)
    return schema.get("type") == "integer" or any(
        _resolve(option).get("type") == "integer" for option in schema.get("oneOf", [])
    )


def _integer_inputs() -> list[tuple[str, str, str, str]]:
    """(method, path, where, name) of every integer a request may carry."""
    found = []
    for path, operations in SCHEMA["paths"].items():
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if _is_integer(parameter.get("schema", {})):
                    found.append((method, path, parameter["in"], parameter["name"]))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body:
                for name, prop in _resolve(body["schema"]).get("properties", {}).items():
                    if not prop.get("readOnly") and _is_integer(prop):
                        found.append((method, path, "body", name))
    return found


INTEGER_INPUTS = _integer_inputs()


def test_the_walk_finds_the_integers_we_know_of() -> None:
    names = {(path, where, name) for _, path, where, name in INTEGER_INPUTS}
    assert ("/api/v1/jobs/", "body", "model_params") in names
    assert ("/api/v1/jobs/{job_id}/attempts/{number}/log", "query", "offset") in names
    assert ("/api/v1/jobs/{job_id}/attempts/{number}/series/{name}", "query", "max_points") in (
        names
    )
    assert ("/api/v1/jobs/{job_id}/clone/", "body", "total_steps") in names
    assert len(INTEGER_INPUTS) >= 20


def _path(template: str, job: Job, override: tuple[str, str] | None = None) -> str:
    values = {"job_id": str(job.pk), "number": "1", "slug": "vision", "name": "loss"}
    if override:
        values[override[0]] = override[1]
    for key, value in values.items():
        template = template.replace("{" + key + "}", value)
    return template


def _body(path: str, job: Job) -> dict[str, Any]:
    if path == "/api/v1/jobs/":
        return {"project": "vision", "cluster": job.cluster.name, "name": "x", "command": "true"}
    return {}


@pytest.mark.parametrize(("method", "path", "where", "name"), INTEGER_INPUTS)
def test_a_30_digit_integer_is_a_400_naming_the_field(
    method: str, path: str, where: str, name: str, job: Job, tokens: Tokens, no_submission
) -> None:
    client = bearer(tokens.owner)
    client.raise_request_exception = False
    if where == "path":
        answer = getattr(client, method)(_path(path, job, (name, BIG)))
        # A number no row can have: nothing is there.
        assert answer.status_code == 404, answer
        return
    if where == "query":
        answer = getattr(client, method)(_path(path, job), {name: BIG})
    else:
        body = {**_body(path, job), name: int(BIG)}
        answer = getattr(client, method)(_path(path, job), body, content_type="application/json")
    assert answer.status_code == 400, (answer.status_code, getattr(answer, "content", b""))
    messages = answer.json()[name]
    assert any("less than or equal to" in message for message in messages), messages


def test_a_30_digit_time_limit_in_the_api_names_its_range(
    job: Job, tokens: Tokens, no_submission
) -> None:
    body = {**_body("/api/v1/jobs/", job), "time_limit": BIG}
    answer = bearer(tokens.owner).post("/api/v1/jobs/", body, content_type="application/json")
    assert answer.status_code == 400
    assert "time_limit" in answer.json()
    year = {**_body("/api/v1/jobs/", job), "time_limit": "400 00:00:00"}
    answer = bearer(tokens.owner).post("/api/v1/jobs/", year, content_type="application/json")
    assert answer.json() == {
        "time_limit": ["Ensure this value is less than or equal to 365 days, 0:00:00."]
    }


def _form(job: Job) -> dict[str, Any]:
    return {
        "name": "x",
        "project": job.project_id,
        "cluster": job.cluster.name,
        "partition": "gpu",
        "template": "command",
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_task": 1,
        "time_limit": "1:00:00",
        "command": "true",
    }


def _numeric_form_fields() -> list[str]:
    kinds = (ModelSizeField, TimeLimitField)
    return [
        name
        for name, field in JobForm.base_fields.items()
        if isinstance(field, kinds) or type(field).__name__ in ("IntegerField", "FloatField")
    ]


def test_the_form_walk_finds_every_number() -> None:
    assert set(_numeric_form_fields()) == {
        "nodes",
        "gpus_per_node",
        "cpus_per_task",
        "memory_mb",
        "model_params",
        "total_steps",
        "time_limit",
        "max_restarts",
        "hang_multiple",
        "hang_floor_seconds",
        "startup_window_seconds",
        "code_from",
    }


@pytest.mark.parametrize("field", _numeric_form_fields())
@pytest.mark.parametrize("url", ["/jobs/new/", "/jobs/new/preview/"])
@pytest.mark.parametrize("value", [BIG, BIG + "T", "9" * 400, "1e400"])
def test_a_30_digit_number_on_the_submit_form_is_a_form_error(
    field: str, url: str, value: str, job: Job, owner: User, no_submission
) -> None:
    client = Client()
    client.raise_request_exception = False
    client.force_login(owner)
    answer = client.post(url, {**_form(job), field: value})
    assert answer.status_code == 200
    if url.endswith("preview/"):
        errors = answer.json()["errors"][field]
    else:
        errors = answer.context["form"].errors[field]
    assert errors, errors
    assert Job.objects.count() == 1  # only the fixture's


def test_the_token_form_bounds_its_days(owner: User) -> None:
    client = Client()
    client.force_login(owner)
    answer = client.post("/account/tokens/", {"name": "x", "scope": "read", "days": BIG})
    assert answer.status_code == 200
    assert "less than or equal to" in str(answer.context["form"].errors["days"])


def test_the_quota_admin_bounds_its_integers(staff: User, job: Job) -> None:
    staff.is_superuser = True
    staff.save()
    client = Client()
    client.force_login(staff)
    quota = job.project.quota
    answer = client.post(
        f"/admin/projects/quota/{quota.pk}/change/",
        {
            "project": job.project_id,
            "gpu_hours_per_period": "100",
            "period": "month",
            "max_wall_time": "12:00:00",
            "max_concurrent_jobs": BIG,
            "max_concurrent_gpus": BIG,
            "cpu_hours_per_period": BIG,
        },
    )
    assert answer.status_code == 200
    errors = answer.context["adminform"].form.errors
    assert {"max_concurrent_jobs", "max_concurrent_gpus", "cpu_hours_per_period"} <= set(errors)
