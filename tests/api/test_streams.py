"""Server-sent event streams: what they send, where they end, and resuming after a drop."""

import asyncio
import json

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.live.slots import slots_clear
from monitoring.series.write import series_append
from tests.helpers import LOG, Tokens, bearer
from web.live import streams
from web.live.streams import utf8_complete


def _finish(job: Job) -> Attempt:
    attempt = Attempt.objects.get(job=job)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, files_complete=True)
    return attempt


STREAM_TIMEOUT = 60  # seconds for a whole finished stream


def _events(response) -> list[tuple[str | None, str, dict]]:
    """(id, event, data) of each event of a finished stream."""
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream"

    async def read_all() -> bytes:
        return b"".join([chunk async for chunk in response.streaming_content])

    async def read() -> bytes:
        # A stream that does not end fails this test, rather than hanging the run.
        return await asyncio.wait_for(read_all(), STREAM_TIMEOUT)

    events = []
    for block in async_to_sync(read)().decode().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if fields:
            events.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return events


def _stream(client: Client, job: Job, what: str, headers=None, **params):
    return client.get(
        f"/api/v1/jobs/{job.pk}/attempts/1/{what}/stream", params, headers=headers or {}
    )


def test_log_stream_sends_the_log_then_ends(job: Job, tokens: Tokens) -> None:
    _finish(job)
    events = _events(_stream(bearer(tokens.viewer), job, "log"))
    assert [e[1] for e in events] == ["log", "state", "end"]
    assert events[0][2] == {"offset": 0, "end": len(LOG), "text": LOG.decode()}
    assert events[0][0] == str(len(LOG))
    assert events[-1][2] == {"state": "COMPLETED", "offset": len(LOG)}


def test_log_stream_resumes_from_the_last_event_id(job: Job, tokens: Tokens) -> None:
    _finish(job)
    client = bearer(tokens.viewer)
    resumed = _events(_stream(client, job, "log", headers={"Last-Event-ID": "16"}))
    assert resumed[0][2]["text"] == LOG[16:].decode()
    by_param = _events(_stream(client, job, "log", offset=32))
    assert by_param[0][2]["text"] == LOG[32:].decode()


def test_a_character_cut_at_a_chunk_end_is_kept_for_the_next_event() -> None:
    assert utf8_complete("tempé".encode()[:5]) == 4
    assert utf8_complete("tempé".encode()) == 6
    assert utf8_complete("日本".encode()[:4]) == 3
    assert utf8_complete(b"plain") == 5


def test_metrics_stream_sends_new_points_and_resumes(job: Job, tokens: Tokens) -> None:
    attempt = _finish(job)
    client = bearer(tokens.viewer)
    events = _events(_stream(client, job, "metrics", name="loss"))
    points = [e for e in events if e[1] == "points"]
    assert points[0][2] == {
        "name": "loss",
        "x": [1.0, 2.0, 3.0, 4.0, 5.0],
        "y": [1.0, 0.5, 1 / 3, 0.25, 0.2],
        "nonfinite": [],
    }
    assert events[-1][1] == "end"
    last_id = points[-1][0]
    assert last_id is not None and json.loads(last_id) == {"loss": 5.0}
    # Points stored while disconnected come after the last id, and only they do.
    series_append(points=[(attempt.pk, "loss", 6.0, 0.1)])
    again = _events(_stream(client, job, "metrics", headers={"Last-Event-ID": last_id}))
    assert [e[2] for e in again if e[1] == "points"] == [
        {"name": "loss", "x": [6.0], "y": [0.1], "nonfinite": []}
    ]


def test_metrics_stream_leaves_out_gpu_samples_unless_named(job: Job, tokens: Tokens) -> None:
    _finish(job)
    names = {
        e[2]["name"]
        for e in _events(_stream(bearer(tokens.viewer), job, "metrics"))
        if e[1] == "points"
    }
    assert names == {"loss"}


def test_stream_parameters_are_checked(job: Job, tokens: Tokens) -> None:
    client = bearer(tokens.viewer)
    bad = _stream(client, job, "log", file="../../etc/passwd")
    assert bad.status_code == 400 and "file" in bad.json()
    assert _stream(client, job, "log", headers={"Last-Event-ID": "-5"}).status_code == 400
    refused = _stream(client, job, "metrics", headers={"Last-Event-ID": "[1]"})
    assert refused.status_code == 400


def test_streams_refuse_bad_tokens_and_outsiders(job: Job, tokens: Tokens) -> None:
    for token, status in (
        (None, 401),
        (tokens.expired, 401),
        (tokens.revoked, 401),
        (tokens.outsider, 404),
    ):
        for what in ("log", "metrics"):
            response = _stream(bearer(token), job, what)
            assert response.status_code == status, (token, what)
            assert "streaming_content" not in vars(response)


def test_the_browser_session_can_follow_too(job: Job, client: Client, member) -> None:
    _finish(job)
    client.force_login(member)
    assert _events(_stream(client, job, "log"))[-1][1] == "end"


def test_metrics_stream_after_a_given_x(job: Job, tokens: Tokens) -> None:
    _finish(job)
    events = _events(_stream(bearer(tokens.viewer), job, "metrics", after=3))
    assert [e[2]["x"] for e in events if e[1] == "points"] == [[4.0, 5.0]]


def test_streams_count_against_the_tokens_budget(job: Job, tokens: Tokens, settings) -> None:
    cache.clear()
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"token": "2/min"},
    }
    _finish(job)
    client = bearer(tokens.viewer)
    assert client.get("/api/v1/projects/").status_code == 200
    assert _stream(client, job, "log").status_code == 200
    refused = _stream(client, job, "metrics")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_open_streams_per_user_are_bounded_and_given_back(
    job: Job, tokens: Tokens, viewer: User
) -> None:
    _finish(job)
    slots_clear(kind=streams.SLOT_KIND, user_id=viewer.pk)
    client = bearer(tokens.viewer)
    # Opened but not yet read: each holds a slot (its thread and database connection).
    held = [_stream(client, job, "log") for _ in range(streams.OPEN_STREAMS_PER_USER)]
    refused = _stream(client, job, "log")
    assert refused.status_code == 429 and "live streams open" in refused.json()["detail"]
    _events(held[0])  # read to its end: the slot comes back
    assert _events(_stream(client, job, "log"))[-1][1] == "end"
