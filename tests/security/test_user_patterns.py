"""A job's own metric patterns run in linear time, and only so many of them.

Attack (issue 13): `(?P<loss>(?:(?:a|a))*b)` passed the backtracking check and
25 `a`s stalled everyone's updates for 6 s; 5,000 patterns were accepted.
"""

import pytest

from jobs.errors import JobError
from jobs.patterns import MAX_PATTERNS
from monitoring.models import AttemptIngest
from monitoring.reading.parsers import parse_stdout_metrics
from monitoring.reading.user_patterns import user_patterns
from monitoring.series.read import series_read
from tests import factories
from tests.security.beside import (
    assert_bystander_whole,
    assert_log_exact,
    bystander_is_read_while_it_runs,
    hostile_attempt,
    submit_beside,
)
from tests.security.ingest_helpers import ingest, reply_with, running

EVIL = r"(?P<loss>(?:(?:a|a))*b)"


def test_the_exponential_pattern_runs_on_re2_and_still_matches() -> None:
    # On a backtracking engine 64 `a`s without a `b` would take longer than the universe.
    assert parse_stdout_metrics(["a" * 4000], extra_patterns=[EVIL], last_step=0) == []
    assert parse_stdout_metrics(["step 3 qq=1"], extra_patterns=[r"qq=(?P<qq>\d)"])[0].value == 1.0


def test_only_the_first_patterns_up_to_the_cap_are_used() -> None:
    patterns = [f"m{i}=(?P<m{i}>\\d+)" for i in range(MAX_PATTERNS + 5)]
    assert len(user_patterns(tuple(patterns))) == MAX_PATTERNS


@pytest.mark.django_db
def test_an_evil_pattern_of_an_old_job_costs_nobody(project, owner, member, cluster) -> None:
    _, hostile = factories.job(project, owner, cluster, metric_patterns=EVIL)
    _, other = factories.job(project, member, cluster)
    hostile, other = running(hostile), running(other)
    good = b"".join(b"step %d loss=%.2f\n" % (i, 1 / i) for i in range(1, 6))
    ingest(
        [hostile, other],
        reply_with(
            {hostile: {"stdout.log": b"a" * 4000 + b"\n" + good}, other: {"stdout.log": good}}
        ),
    )
    assert series_read(attempt_id=other.pk, name="loss").total == 5
    assert series_read(attempt_id=hostile.pk, name="loss").total == 5


# --- on the sandbox: the job does it from inside --------------------------------------------


@pytest.mark.sandbox
def test_5000_patterns_are_refused_at_submit(researcher, project, sandbox_cluster) -> None:
    with pytest.raises(JobError) as refused:
        submit_beside(
            researcher,
            project,
            sandbox_cluster,
            "true",
            metric_patterns="\n".join(f"m{i}=(?P<m{i}>\\d+)" for i in range(5000)),
        )
    assert f"keep at most {MAX_PATTERNS}" in str(refused.value.errors["metric_patterns"])


@pytest.mark.sandbox
def test_an_exponential_pattern_matches_in_linear_time_beside_another_tenant(
    celery_worker, researcher, project, sandbox_cluster
) -> None:
    command = (
        "for i in $(seq 1 8); do "
        'python3 -c \'print("a" * 25); print("a" * 4000)\'; echo "step $i aab"; sleep 0.3; done'
    )
    pair = submit_beside(researcher, project, sandbox_cluster, command, metric_patterns=EVIL)
    bystander_is_read_while_it_runs(pair)
    assert_bystander_whole(pair)
    attempt = hostile_attempt(pair)
    assert_log_exact(attempt)
    # RE2 still does the pattern's job: `aab` gives its `b`-terminated match, no number, no points;
    # the point is that 4,000 `a`s cost nothing: the attempt was never over budget.
    assert not AttemptIngest.objects.filter(attempt=attempt, over_budget__gt=0).exists()
