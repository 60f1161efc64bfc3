"""Series links (issue #13): a metric name a job printed is one percent-encoded URL segment.

Before: names went into URLs raw, so `a/../../cancel?x#y` pointed at another path.
"""

import pytest

from jobs.models import Job
from monitoring.series.write import series_append
from tests.helpers import Tokens, bearer
from web.attempts.links import series_url

HOSTILE = ["a/../../cancel?x=1#frag", "100%", "<b>loss</b>", "loss 2", "ü/δ", "..x"]


@pytest.mark.parametrize("name", HOSTILE)
def test_a_name_is_one_segment(name: str) -> None:
    url = series_url(job_id=7, number=2, name=name)
    assert url is not None
    base, _, segment = url.rpartition("/")
    assert base == "/api/v1/jobs/7/attempts/2/series"
    assert all(c.isalnum() or c in "-._~%" for c in segment), segment


@pytest.mark.parametrize("name", [".", "..", ""])
def test_dots_alone_have_no_link(name: str) -> None:
    assert series_url(job_id=7, number=2, name=name) is None


@pytest.mark.django_db
def test_the_names_endpoint_links_each_series_and_each_link_reads_it(
    job: Job, tokens: Tokens
) -> None:
    attempt = job.attempts.get()
    series_append(points=[(attempt.pk, name, 1.0, 0.5) for name in [*HOSTILE, ".."]])
    client = bearer(tokens.owner)
    body = client.get(f"/api/v1/jobs/{job.pk}/attempts/1/series").json()
    assert set(HOSTILE) | {".."} <= set(body["names"])
    assert ".." not in body["urls"]
    for name in HOSTILE:
        read = client.get(body["urls"][name])
        assert read.status_code == 200, (name, read.status_code)
        assert read.json()["name"] == name and read.json()["y"] == [0.5]
