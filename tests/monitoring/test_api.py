"""Log and series endpoints: personas, query counts, parameter checks."""

from collections.abc import Callable

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpResponseBase
from django.test import Client

from jobs.access import can_view_job, job_for_viewer
from jobs.models import Attempt, Job
from monitoring.logs.store import Delivery, log_files, log_store
from monitoring.series.write import series_append
from projects.models import Membership, Project
from tests import factories
from web.attempts import api

LOG = b"epoch 1 loss 0.9\nepoch 2 loss 0.7\n\xff bad byte\nepoch 3 loss 0.5\n"
# The test client consumes the download's async iterator synchronously, and says so.
consumes_async_stream = pytest.mark.filterwarnings(
    "ignore:StreamingHttpResponse must consume asynchronous iterators"
)


@pytest.fixture
def job_attempt(project: Project, owner: User) -> tuple[Job, Attempt]:
    return factories.job(project, owner, factories.cluster())


def _store(attempt: Attempt, *pieces: bytes, name: str = "stdout.log") -> None:
    files = log_files(attempt_ids=[attempt.pk], names=[name])
    offset = files[(attempt.pk, name)].size
    for piece in pieces:
        log_store(files=files, deliveries=[Delivery(attempt.pk, name, offset, piece)])
        offset += len(piece)


def _log_url(job: Job, number: int = 1, suffix: str = "") -> str:
    return f"/api/v1/jobs/{job.pk}/attempts/{number}/log{suffix}"


def _body(response: HttpResponseBase) -> bytes:
    return b"".join(response)


@pytest.fixture
def as_user(client: Client) -> Callable[[User | None], Client]:
    def login(user: User | None) -> Client:
        if user is not None:
            client.force_login(user)
        return client

    return login


# --- log range ---------------------------------------------------------------


@pytest.mark.parametrize("persona", ["owner", "member", "viewer", "staff"])
def test_anyone_in_the_project_and_staff_read_the_log(
    request: pytest.FixtureRequest, job_attempt: tuple[Job, Attempt], as_user, persona: str
) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG)
    response = as_user(request.getfixturevalue(persona)).get(
        _log_url(job), {"offset": 0, "limit": 17}
    )
    assert response.status_code == 200
    assert response.json() == {
        "offset": 0,
        "end": 17,
        "size": len(LOG),
        "first_offset": 0,
        "text": "epoch 1 loss 0.9\n",
    }


def test_outsider_gets_404_like_a_missing_job(job_attempt, as_user, outsider) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG)
    client = as_user(outsider)
    assert client.get(_log_url(job)).status_code == 404
    assert client.get(_log_url(job, suffix="/download")).status_code == 404
    assert client.get(f"/api/v1/jobs/{job.pk + 1000}/attempts/1/log").status_code == 404


def test_member_of_another_project_gets_404(
    job_attempt, as_user, django_user_model: type[User]
) -> None:
    job, _ = job_attempt
    elsewhere = Project.objects.create(slug="speech", name="Speech")
    stranger = django_user_model.objects.create_user(username="sam")
    Membership.objects.create(user=stranger, project=elsewhere, role=Membership.Role.OWNER)
    client = as_user(stranger)
    assert client.get(_log_url(job)).status_code == 404
    assert client.get(_series_url(job)).status_code == 404


def test_anonymous_gets_401_with_a_bearer_challenge(job_attempt, client: Client) -> None:
    job, _ = job_attempt
    for url in (_log_url(job), _log_url(job, suffix="/download")):
        response = client.get(url)
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")


def test_missing_attempt_is_404(job_attempt, as_user, member) -> None:
    job, _ = job_attempt
    assert as_user(member).get(_log_url(job, number=2)).status_code == 404


def test_tail_and_bad_bytes_are_replaced(job_attempt, as_user, member) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG[:20], LOG[20:])
    body = as_user(member).get(_log_url(job), {"offset": -1, "limit": 28}).json()
    assert body["offset"] == len(LOG) - 28
    assert body["end"] == body["size"] == len(LOG)
    assert body["text"] == "\ufffd bad byte\nepoch 3 loss 0.5\n"


def test_defaults_read_stdout_from_the_start(job_attempt, as_user, member) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG)
    _store(attempt, b"other file", name="metrics.jsonl")
    client = as_user(member)
    assert client.get(_log_url(job)).json()["text"] == LOG.decode(errors="replace")
    assert client.get(_log_url(job), {"file": "metrics.jsonl"}).json()["text"] == "other file"


def test_a_file_not_yet_seen_reads_empty(job_attempt, as_user, member) -> None:
    job, _ = job_attempt
    body = as_user(member).get(_log_url(job)).json()
    assert body == {"offset": 0, "end": 0, "size": 0, "first_offset": 0, "text": ""}


@pytest.mark.parametrize(
    ("params", "bad"),
    [
        ({"offset": "ten"}, "offset"),
        ({"offset": -2}, "offset"),
        ({"limit": "lots"}, "limit"),
        ({"limit": api.MAX_LOG_LIMIT + 1}, "limit"),
        ({"limit": -1}, "limit"),
        ({"file": "../../etc/passwd"}, "file"),
        ({"file": "a/b.log"}, "file"),
    ],
)
def test_bad_parameters_are_400_naming_them(
    job_attempt, as_user, member, params: dict[str, object], bad: str
) -> None:
    job, _ = job_attempt
    response = as_user(member).get(_log_url(job), params)
    assert response.status_code == 400
    assert list(response.json()) == [bad]


def test_log_range_query_count(job_attempt, as_user, member, django_assert_num_queries) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG)
    client = as_user(member)
    # session, user, attempt joined to its job with the membership check,
    # the log file row, its chunks in the range
    with django_assert_num_queries(5):
        assert client.get(_log_url(job), {"offset": 5, "limit": 10}).status_code == 200


# --- log download ------------------------------------------------------------


@consumes_async_stream
def test_download_is_the_raw_bytes_as_an_attachment(
    job_attempt, as_user, member, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG[:10], LOG[10:30], LOG[30:])
    # Small reads, so the download has to stitch several together.
    monkeypatch.setattr(api, "DOWNLOAD_CHUNK_BYTES", 7)
    response = as_user(member).get(_log_url(job, suffix="/download"))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == (
        f'attachment; filename="job-{job.pk}-attempt-1-stdout.log"'
    )
    assert _body(response) == LOG


@consumes_async_stream
def test_download_without_a_cluster_copy_has_what_is_stored(
    job_attempt, as_user, member, settings
) -> None:
    # No cluster account to read trimmed bytes back with: the stored tail is what there is.
    settings.LOG_KEEP_BYTES = 10
    job, attempt = job_attempt
    _store(attempt, b"a" * 10, b"b" * 10, b"c" * 10)
    response = as_user(member).get(_log_url(job, suffix="/download"))
    assert _body(response) == b"c" * 10


@consumes_async_stream
def test_download_of_an_unseen_file_is_empty(job_attempt, as_user, member) -> None:
    job, _ = job_attempt
    response = as_user(member).get(_log_url(job, suffix="/download"), {"file": "gpu-n1.csv"})
    assert response.status_code == 200
    assert 'filename="job-' in response["Content-Disposition"]
    assert response["Content-Disposition"].endswith('-attempt-1-gpu-n1.csv"')
    assert _body(response) == b""


def test_download_query_count(job_attempt, as_user, member, django_assert_num_queries) -> None:
    job, attempt = job_attempt
    _store(attempt, LOG)
    client = as_user(member)
    # session, user, attempt with the membership check, the log file's bounds;
    # the bytes are read while the response streams, a query per megabyte
    with django_assert_num_queries(4):
        assert client.get(_log_url(job, suffix="/download")).status_code == 200


# --- series ------------------------------------------------------------------


def _series_url(job: Job, name: str | None = None) -> str:
    base = f"/api/v1/jobs/{job.pk}/attempts/1/series"
    return base if name is None else f"{base}/{name}"


@pytest.fixture
def charted(job_attempt: tuple[Job, Attempt]) -> Job:
    job, attempt = job_attempt
    series_append(
        points=[(attempt.pk, "loss", step, 1.0 / (step + 1)) for step in range(100)]
        + [(attempt.pk, "gpu/n1/0/utilization", 1764547200.0 + t, 80.0 + t) for t in range(3)]
    )
    return job


def test_series_names(charted: Job, as_user, member) -> None:
    response = as_user(member).get(_series_url(charted))
    base = _series_url(charted)
    body = response.json()
    assert body["names"] == ["gpu/n1/0/utilization", "loss"]
    # Each name one percent-encoded segment (tests/monitoring/test_links.py).
    assert body["urls"] == {
        "gpu/n1/0/utilization": f"{base}/gpu%2Fn1%2F0%2Futilization",
        "loss": f"{base}/loss",
    }
    # The chart each goes on, the progress and the MFU terms the page shows.
    assert body["kinds"] == {"gpu/n1/0/utilization": "gpu", "loss": "loss"}
    assert body["total_steps"] is None
    assert body["mfu"]["source"] == "missing"


def test_series_read_with_a_path_name(charted: Job, as_user, viewer) -> None:
    response = as_user(viewer).get(_series_url(charted, "gpu/n1/0/utilization"))
    assert response.json() == {
        "name": "gpu/n1/0/utilization",
        "x": [1764547200.0, 1764547201.0, 1764547202.0],
        "y": [80.0, 81.0, 82.0],
        "nonfinite": [],
        "total": 3,
        "downsampled": False,
    }


def test_series_range_and_downsampling(charted: Job, as_user, member) -> None:
    client = as_user(member)
    ranged = client.get(_series_url(charted, "loss"), {"x_from": 10, "x_to": 12.5}).json()
    assert ranged["x"] == [10.0, 11.0, 12.0]
    assert ranged["total"] == 3
    small = client.get(_series_url(charted, "loss"), {"max_points": 10}).json()
    assert len(small["x"]) <= 10
    assert small["x"][0] == 0.0 and small["x"][-1] == 99.0
    assert small["total"] == 100
    assert small["downsampled"] is True


def test_series_max_points_is_capped(job_attempt, as_user, member) -> None:
    job, attempt = job_attempt
    many = api.MAX_POINTS_CAP + 2000
    series_append(points=[(attempt.pk, "loss", step, float(step % 7)) for step in range(many)])
    body = as_user(member).get(_series_url(job, "loss"), {"max_points": 50_000}).json()
    assert body["total"] == many
    assert len(body["x"]) <= api.MAX_POINTS_CAP
    assert body["downsampled"] is True


def test_an_unknown_series_reads_empty(charted: Job, as_user, member) -> None:
    body = as_user(member).get(_series_url(charted, "accuracy")).json()
    assert body == {
        "name": "accuracy",
        "x": [],
        "y": [],
        "nonfinite": [],
        "total": 0,
        "downsampled": False,
    }


@pytest.mark.parametrize(
    ("params", "bad"),
    [
        ({"x_from": "yesterday"}, "x_from"),
        ({"x_to": "nan"}, "x_to"),
        ({"x_from": 5, "x_to": 1}, "x_to"),
        ({"max_points": "all"}, "max_points"),
        ({"max_points": 1}, "max_points"),
    ],
)
def test_bad_series_parameters_are_400_naming_them(
    charted: Job, as_user, member, params: dict[str, object], bad: str
) -> None:
    response = as_user(member).get(_series_url(charted, "loss"), params)
    assert response.status_code == 400
    assert list(response.json()) == [bad]


def test_series_refuse_outsiders_and_anonymous(charted: Job, client: Client, outsider) -> None:
    assert client.get(_series_url(charted)).status_code == 401
    assert client.get(_series_url(charted, "loss")).status_code == 401
    client.force_login(outsider)
    assert client.get(_series_url(charted)).status_code == 404
    assert client.get(_series_url(charted, "loss")).status_code == 404


def test_series_query_counts(charted: Job, as_user, member, django_assert_num_queries) -> None:
    client = as_user(member)
    # session, user, attempt with the membership check, the names; for the page: the
    # stdout reader's state (total steps), the attempt's ingest note (a printed MFU), the
    # sources of its series (trainers' record files), the cluster
    with django_assert_num_queries(8):
        client.get(_series_url(charted))
    # session, user, attempt with the membership check, chunk bounds with the attempt's
    # blocks (one append: all its points are in a block, no chunk blobs to read)
    with django_assert_num_queries(4):
        client.get(_series_url(charted, "loss"))


# --- the rule itself ---------------------------------------------------------


@pytest.mark.parametrize(
    ("persona", "allowed"),
    [("owner", True), ("member", True), ("viewer", True), ("staff", True), ("outsider", False)],
)
def test_can_view_job_matches_the_endpoints(
    request: pytest.FixtureRequest, job_attempt, persona: str, allowed: bool
) -> None:
    job, _ = job_attempt
    user = request.getfixturevalue(persona)
    assert can_view_job(user=user, job=job) is allowed
    assert (job_for_viewer(user=user, job_id=job.pk) is not None) is allowed
    assert can_view_job(user=AnonymousUser(), job=job) is False
