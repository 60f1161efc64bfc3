"""The job page's header: the facts a researcher looks for, from the job and its attempts."""

from datetime import UTC, datetime, timedelta

from django.test import Client
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape

from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.reasons import explain_reason
from monitoring.job_page.header import format_elapsed, header_facts
from monitoring.models import AttemptProgress, LogFile
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
    words = header[header.index('id="fact-reason-words"') :]
    assert words.split("<", 1)[0].endswith(explain_reason("Priority").text), "the code in words"
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


def _running(project, owner, cluster) -> Attempt:
    _, attempt = factories.job(project, owner, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, slurm_job_id="103", node_list="n1", run_dir="/runs/a1",
        started_at=timezone.now() - timedelta(hours=1),
    )  # fmt: skip
    attempt.refresh_from_db()
    return attempt


def _flagged(attempt: Attempt, verdict: str, quiet: float, why: str, *, written_ago: float) -> None:
    AttemptProgress.objects.create(attempt=attempt, verdict=verdict, why=why, quiet_seconds=quiet)
    AttemptProgress.objects.filter(attempt=attempt).update(
        updated_at=timezone.now() - timedelta(seconds=written_ago)
    )


def test_a_hung_running_job_says_so_in_its_state_and_at_the_top(
    client: Client, project, owner, outsider, cluster
) -> None:
    attempt = _running(project, owner, cluster)
    why = "No step in its output for 170 s (this job's limit: 30 s); the last step was 41."
    # The poll saw 170 s without a step when it last wrote, 10 s ago.
    _flagged(attempt, "hang", 170.0, why, written_ago=10)
    facts = header_facts(job=attempt.job, attempts=[attempt], now=timezone.now())
    assert facts.state_label == "Running, no step for 3 min"
    client.force_login(owner)
    page = client.get(reverse("job-page", args=[attempt.job_id])).content.decode()
    assert 'id="fact-state" data-state="RUNNING">Running, no step for 3 min' in page
    # The verdict opens the page, right under the header: before the numbers and the charts.
    banner = page.index('id="hang-banner"')
    assert page.index("</header>") < banner < page.index('aria-label="Live numbers"')
    assert "Attempt 1 looks hung: no step for 3 min" in page and escape(why) in page
    assert 'href="#hang-1"' in page and 'id="hang-1"' in page  # its card, lower down
    client.force_login(outsider)
    assert client.get(reverse("job-page", args=[attempt.job_id])).status_code == 404


def test_a_startup_stall_and_the_end_of_a_run_read_as_they_are(project, owner, cluster) -> None:
    attempt = _running(project, owner, cluster)
    _flagged(attempt, "startup", 1860.0, "No first step ...", written_ago=0)
    facts = header_facts(job=attempt.job, attempts=[attempt], now=timezone.now())
    assert facts.state_label == "Running, no first step after 31 min"
    assert facts.stall is not None and facts.stall.verdict == "startup"
    # Ended (cancelled for its hang): the failure banner speaks, not this one.
    Attempt.objects.filter(pk=attempt.pk).update(state=State.CANCELLED)
    attempt.refresh_from_db()
    facts = header_facts(job=attempt.job, attempts=[attempt], now=timezone.now())
    assert (facts.state_label, facts.stall) == ("Cancelled", None)
    # A healthy running job: its state alone.
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING)
    AttemptProgress.objects.filter(attempt=attempt).update(verdict="", why="")
    attempt.refresh_from_db()
    facts = header_facts(job=attempt.job, attempts=[attempt], now=timezone.now())
    assert (facts.state_label, facts.stall) == ("Running", None)


def test_records_without_a_printed_step_are_never_shown_as_steps(
    client: Client, project, owner, cluster
) -> None:
    """HF Trainer with disable_tqdm prints dicts and no step: the reader numbers its records."""
    attempt = _running(project, owner, cluster)
    log = LogFile.objects.create(
        attempt=attempt, name="stdout.log", last_step=25, reader_state={"counted": 25}
    )
    client.force_login(owner)

    def step_cell() -> str:
        page = client.get(reverse("job-page", args=[attempt.job_id])).content.decode()
        start = page.index('aria-label="Live numbers"')
        return page[start : page.index("</div>", page.index('id="num-step"'))]

    cell = step_cell()
    assert '<span class="label">Record</span>' in cell and 'data-x="records"' in cell
    assert ">Step<" not in cell
    log.reader_state = {"counted": 25, "step": 120}  # a step printed: steps are steps
    log.save()
    cell = step_cell()
    assert '<span class="label">Step</span>' in cell and "data-x" not in cell
