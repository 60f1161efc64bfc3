"""Schemathesis against our own OpenAPI schema: no 5xx, every response as documented.

Every operation of the schema is fuzzed in-process (WSGI, on the test database)
with a submit-scoped token of the project's owner. Path parameters point at real
rows (a job with a log, a loss series and GPU samples; a sweep) so the fuzzing reaches
past the 404; query strings and bodies are generated. Bounded: a few examples
per operation (MAX_EXAMPLES), no shrinking, so the whole module takes seconds.
The SSE streams are plain Django views outside the schema (tests/api/test_streams.py).
"""

import os
import re
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from jobs.models import Job
from tests import factories
from tests.helpers import Tokens

MAX_EXAMPLES = 10
# Schemathesis's coverage cases (boundary and invalid values of every parameter) are
# hundreds of requests: ~25 s more. They run with API_FUZZ_FULL=1.
PHASES = [Phase.explicit, Phase.generate] if os.environ.get("API_FUZZ_FULL") else [Phase.generate]
# The log download streams from an async iterator, which WSGI consumes synchronously.
pytestmark = pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous")

schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = WSGIHandler()


@pytest.fixture
def same_connection() -> Iterator[None]:
    # As Django's test client does: a request must not close the test's transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    phases=PHASES,
    suppress_health_check=list(HealthCheck),
)
def test_api_matches_its_schema(case, job: Job, tokens: Tokens, same_connection) -> None:
    if "job_id" in (case.path_parameters or {}):
        case.path_parameters["job_id"] = job.pk
    if "sweep_id" in (case.path_parameters or {}):
        case.path_parameters["sweep_id"] = factories.sweep(job).pk
    if "number" in (case.path_parameters or {}):
        case.path_parameters["number"] = 1
    if "slug" in (case.path_parameters or {}):
        case.path_parameters["slug"] = "vision"
    case.call_and_validate(
        headers={"Authorization": f"Bearer {tokens.owner}"},
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )


def test_the_docs_page_loads_swagger_ui_from_our_static_files(client, owner) -> None:
    client.force_login(owner)
    page = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in page and "cdn." not in page
    bundle = re.search(r'src="(/static/[^"]*swagger-ui-bundle\.js)"', page)
    assert bundle, page
    assert client.get(bundle[1]).status_code == 200
    assert client.get("/api/schema/").status_code == 200


def test_an_operation_with_a_body_documents_the_415_drf_gives_for_a_type_it_does_not_read(
    client, tokens: Tokens
) -> None:
    """Schemathesis sent the code upload a multipart body whose part had no headers, and DRF
    answered 415, which the schema did not list (a failure one run in a few)."""
    paths = SchemaGenerator().get_schema(request=None, public=True)["paths"]
    upload = paths["/api/v1/projects/{slug}/code/"]["post"]["responses"]
    assert "415" in upload
    assert "415" not in paths["/api/v1/jobs/"]["get"]["responses"]
    response = client.post(
        "/api/v1/projects/vision/code/",
        data="{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {tokens.owner}",
    )
    assert response.status_code == 415
