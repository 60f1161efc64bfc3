"""The job page's header: the facts a researcher looks for, from the job and its attempts."""

from datetime import UTC, datetime, timedelta

from django.test import Client
from django.urls import reverse

from jobs.enums import State
from jobs.models import Attempt
from monitoring.job_page.header import format_elapsed, header_facts
from tests import factories

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _restarted(project, owner, cluster):
    job, first = factories.job(project, owner, cluster, max_restarts=2, state=State.PENDING)
    Attempt.objects.filter(pk=first.pk).update(
        state=State.FAILED, slurm_job_id="101", node_list="n[1-2]", submitted_at=T0,
        started_at=T0 + timedelta(minutes=1), ended_at=T0 + timedelta(minutes=5),
        run_dir="/home/mia/portal-runs/a1",
    )  # fmt: skip
    second = Attempt.objects.create(
        job=job, number=2, state=State.PENDING, slurm_job_id="102", slurm_reason="Priority",
        submitted_at=T0 + timedelta(minutes=6), run_dir="/home/mia/portal-runs/a2",
    )  # fmt: skip
    return job, first, second


def test_facts_of_a_restarted_job_waiting_in_slurm(project, owner, cluster) -> None:
    job, _, second = _restarted(project, owner, cluster)
    attempts = list(job.attempts.order_by("number"))
    facts = header_facts(job=job, attempts=attempts, now=T0 + timedelta(hours=1))
    assert facts.slurm_ids == [(1, "101"), (2, "102")]
    assert (facts.state, facts.pending_reason) == (State.PENDING, "Priority")
    assert facts.submitted_at == T0  # the job's first submission
    assert facts.started_at is None and facts.elapsed_text == "-"
    assert facts.run_dir == "/home/mia/portal-runs/a2"

    Attempt.objects.filter(pk=second.pk).update(
        state=State.RUNNING, slurm_reason="", node_list="n2", started_at=T0 + timedelta(minutes=7)
    )
    attempts = list(job.attempts.order_by("number"))
    facts = header_facts(
        job=job, attempts=attempts, now=T0 + timedelta(hours=1, minutes=7, seconds=3)
    )
    assert (facts.nodes, facts.pending_reason, facts.elapsed_text) == ("n2", "", "1:00:03")


def test_elapsed_reads_as_squeue_prints_it() -> None:
    assert format_elapsed(timedelta(seconds=59)) == "0:00:59"
    assert format_elapsed(timedelta(days=2, hours=3, minutes=4, seconds=5)) == "2-03:04:05"


def test_the_page_shows_the_facts_and_refuses_outsiders(
    client: Client, project, owner, member, outsider, cluster
) -> None:
    job, _, _ = _restarted(project, owner, cluster)
    client.force_login(member)
    page = client.get(reverse("job-page", args=[job.pk])).content.decode()
    header = page[page.index('id="job-facts"') : page.index("</dl>")]
    assert ">101 <small" in header and ">102 <small" in header
    assert 'id="fact-reason"' in header and "(Priority)" in header
    # No estimate from Slurm stored yet; the history line names the spec it compares.
    assert 'id="fact-expected-start"' in header and "no estimate yet" in header
    assert "similar jobs (1 node x 1 GPU on the default partition)" in header
    assert 'id="fact-run-dir">/home/mia/portal-runs/a2<' in header
    assert "2026-12-01 10:00:00" in header  # submitted
    assert "attempt 2 of at most 3" in page
    client.force_login(outsider)
    assert client.get(reverse("job-page", args=[job.pk])).status_code == 404


def test_an_attempt_that_never_reached_slurm_says_so_once_it_has_ended(
    client: Client, project, owner, cluster
) -> None:
    job, attempt = factories.job(project, owner, cluster)
    client.force_login(owner)

    def slurm_fact() -> str:
        page = client.get(reverse("job-page", args=[job.pk])).content.decode()
        return page[
            page.index('id="fact-slurm-ids"') : page.index("</dd>", page.index("fact-slurm"))
        ]

    assert "not in Slurm yet" in slurm_fact()  # queued for submission
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED, reason="Host key mismatch")
    assert "none (it never reached Slurm)" in slurm_fact()
