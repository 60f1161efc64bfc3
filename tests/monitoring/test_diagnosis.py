"""Each diagnosis rule on a log shaped as torch, NCCL, srun and slurmstepd print it."""

from pathlib import Path

import pytest

from jobs.enums import FailureClass, State
from jobs.models import Attempt
from monitoring.diagnosis.diagnose import RULES, Diagnosis, diagnose

LOGS = Path(__file__).parent / "fixtures" / "failures"


def _diagnose(
    name: str,
    state: str = State.FAILED,
    exit_code: int | None = 1,
    node_list: list[str] | None = None,
):
    return diagnose(
        state=state, exit_code=exit_code, log_tail=(LOGS / name).read_text(), node_list=node_list
    )


def test_nccl_watchdog_timeout_gives_the_network_advice() -> None:
    found = _diagnose("nccl_timeout.log")
    assert found is not None
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    advice = " ".join(found.fixes)
    for needle in ("MASTER_ADDR", "MASTER_PORT", "firewall", "/etc/hosts", "NCCL_DEBUG=INFO"):
        assert needle in advice
    assert "NCCL_SOCKET_IFNAME" in advice
    assert "Watchdog caught collective operation timeout" in found.evidence
    assert found.rank == 1
    assert found.node == "gpu07"  # srun's node name, not torchrun's host name


def test_a_collective_timeout_on_the_sandbox_is_a_timeout_not_a_crash() -> None:
    # Captured: torchrun with gloo and --timeout 6, rank 1 stopped (SIGSTOP) mid-run;
    # rank 0's all_reduce timed out, and torchrun reports it as the root cause.
    found = _diagnose("gloo_timeout_sandbox.log")
    assert found is not None
    assert found.failure_class == FailureClass.NCCL_TIMEOUT
    assert "Timed out waiting 6000ms for recv operation to complete" in found.evidence
    assert found.rank == 0


def test_cuda_oom_wins_over_the_rank_crash_it_causes() -> None:
    found = _diagnose("cuda_oom.log")
    assert found is not None
    assert found.failure_class == FailureClass.CUDA_OOM
    assert "CUDA out of memory. Tried to allocate 2.00 GiB" in found.evidence
    advice = " ".join(found.fixes).lower()
    assert "micro-batch" in advice
    assert "activation checkpointing" in advice
    assert "fsdp" in advice and "zero" in advice
    assert found.rank == 3 and found.node == "gpu03"


def test_host_oom_from_slurm_state_and_from_the_log() -> None:
    by_state = diagnose(state=State.OUT_OF_MEMORY, exit_code=0, log_tail="step 3\n")
    by_log = _diagnose("host_oom.log")
    assert by_state is not None and by_state.failure_class == FailureClass.HOST_OOM
    assert by_log is not None and by_log.failure_class == FailureClass.HOST_OOM
    assert "oom_kill event" in by_log.evidence
    assert "--mem" in " ".join(by_log.fixes)


def test_node_failure_names_the_node() -> None:
    found = _diagnose("node_failure.log", state=State.NODE_FAIL, exit_code=None)
    assert found is not None
    assert found.failure_class == FailureClass.NODE_FAILURE
    assert found.node == "n1"
    # A single-node job whose log says nothing still blames its node.
    quiet = diagnose(state=State.NODE_FAIL, exit_code=None, log_tail="", node_list=["n2"])
    assert quiet is not None and quiet.node == "n2"


def test_time_limit_and_preemption_from_state_not_the_log() -> None:
    limit = _diagnose("time_limit.log", state=State.TIMEOUT, exit_code=0)
    assert limit is not None and limit.failure_class == FailureClass.TIME_LIMIT
    assert "DUE TO TIME LIMIT" in limit.evidence
    assert any("checkpoint more often" in f.lower() for f in limit.fixes)
    preempted = _diagnose("preemption.log", state=State.PREEMPTED, exit_code=0)
    assert preempted is not None and preempted.failure_class == FailureClass.PREEMPTION
    # The state decides even when the log holds another failure's words.
    oom_then_timeout = diagnose(
        state=State.TIMEOUT, exit_code=None, log_tail=(LOGS / "cuda_oom.log").read_text()
    )
    assert oom_then_timeout is not None
    assert oom_then_timeout.failure_class == FailureClass.TIME_LIMIT


def test_address_in_use_on_the_rendezvous_port() -> None:
    found = _diagnose("address_in_use.log")
    assert found is not None
    assert found.failure_class == FailureClass.ADDRESS_IN_USE
    assert "29500" in found.evidence
    assert "MASTER_PORT" in " ".join(found.fixes)


def test_missing_module_and_missing_file() -> None:
    module = _diagnose("missing_module.log")
    assert module is not None and module.failure_class == FailureClass.MISSING_MODULE
    assert "No module named 'transformers'" in module.evidence
    missing = _diagnose("missing_file.log", exit_code=2)
    assert missing is not None and missing.failure_class == FailureClass.MISSING_FILE
    assert "trian.py" in missing.evidence


def test_a_killed_rank_names_the_rank_and_the_node() -> None:
    found = _diagnose("rank_crash.log")
    assert found is not None
    assert found.failure_class == FailureClass.RANK_CRASH
    assert found.rank == 2  # the root cause, not rank 3 that torchrun stopped afterwards
    assert found.node == "n2"  # the first task srun reports, not the one it then killed
    assert "First to fail: rank 2 on node n2 (killed by SIGKILL)." in found.explanation


def test_a_rank_killed_on_the_sandbox_as_torch_2_13_reports_it() -> None:
    # Captured from tests/e2e/test_resume.py: rank 1 (on n1) got SIGKILL; the other
    # node's torchrun was then stopped by srun, and srun reported both tasks.
    found = _diagnose("rank_killed_sandbox.log")
    assert found is not None
    assert found.failure_class == FailureClass.RANK_CRASH
    assert (found.rank, found.node) == (1, "n1")
    assert "First to fail: rank 1 on node n1 (killed by SIGKILL)." in found.explanation
    # The failure table's exit-code line of the first failure, not the launcher's exception.
    assert found.evidence.startswith("exitcode  : -9")


def test_unrecognised_failure_points_at_the_last_error_and_the_signal() -> None:
    found = _diagnose("segfault.log", exit_code=139)
    assert found is not None
    assert found.failure_class == FailureClass.UNKNOWN
    assert "Segmentation fault" in found.evidence
    assert "SIGSEGV" in found.explanation


def test_a_clean_stop_at_the_time_limit_warning_is_a_time_limit() -> None:
    log = (
        "step 41, loss=0.1\n"
        "portal: SIGUSR1 before the time limit, passed to the steps\n"
        "checkpoint step-42.pt saved (31277 bytes)\n"
        "stopping after step 42 on SIGUSR1 (another rank's or ours)\n"
    )
    found = diagnose(state=State.COMPLETED, exit_code=0, log_tail=log)
    assert found is not None and found.failure_class == FailureClass.TIME_LIMIT
    assert found.title == "Stopped at the time-limit warning"
    assert found.evidence == "portal: SIGUSR1 before the time limit, passed to the steps"


def test_cancelled_and_completed() -> None:
    cancelled = diagnose(state=State.CANCELLED, exit_code=None, log_tail="step 4\n")
    assert cancelled is not None and cancelled.failure_class == FailureClass.CANCELLED
    assert diagnose(state=State.COMPLETED, exit_code=0, log_tail="done\n") is None


def test_a_finished_log_mentioning_an_error_only_counts_when_the_job_failed() -> None:
    # A job that printed "No such file or directory" but exited 0 failed of nothing.
    assert (
        diagnose(state=State.COMPLETED, exit_code=0, log_tail="x: No such file or directory\n")
        is None
    )
    warned = diagnose(
        state=State.CANCELLED,
        exit_code=None,
        log_tail="ls: cannot access 'x': No such file or directory\n",
    )
    assert warned is not None and warned.failure_class == FailureClass.CANCELLED


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.failure_class)
def test_every_rule_explains_itself_and_says_what_to_do(rule) -> None:
    assert rule.title and rule.explanation.endswith(".")
    assert rule.fixes and all(fix.endswith(".") for fix in rule.fixes)
    assert rule.states or rule.patterns or rule.weaker


def test_a_diagnosis_survives_json() -> None:
    found = _diagnose("rank_crash.log")
    assert found is not None
    assert Diagnosis.from_json(found.as_json()) == found


# --- on the job page and in the API ---------------------------------------------------


@pytest.fixture
def oom_job(project, owner, member):
    """A job whose attempt died of CUDA OOM, diagnosed, with two checkpoints."""
    from datetime import UTC, datetime

    from monitoring.models import Checkpoint
    from tests import factories

    job, attempt = factories.job(project, owner, factories.cluster(), max_restarts=2)
    found = _diagnose("cuda_oom.log")
    assert found is not None
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        exit_code=1,
        run_dir="/home/olivia/runs/a1",
        failure_class=found.failure_class,
        diagnosis=found.as_json(),
    )
    at = datetime(2026, 12, 1, 4, 0, tzinfo=UTC)
    Checkpoint.objects.create(
        attempt=attempt, name="step-10.pt", step=10, size=31277, modified_at=at
    )
    Checkpoint.objects.create(
        attempt=attempt, name="step-20.pt", step=20, size=31277, modified_at=at
    )
    Checkpoint.objects.create(
        attempt=attempt, name=".step-30.pt.7.tmp", step=30, size=100, modified_at=at, complete=False
    )
    return job


def test_the_job_page_shows_the_diagnosis_its_fixes_and_the_checkpoints(
    oom_job, member, client
) -> None:
    client.force_login(member)
    page = client.get(f"/jobs/{oom_job.pk}/").content.decode()
    assert "CUDA out of memory" in page
    assert "smaller micro-batch" in page.lower() or "micro-batch" in page
    assert "activation checkpointing" in page
    assert "Rank 3" in page and "gpu03" in page
    # The resume candidate: the highest complete step, not the temp file of a save.
    assert "A restart resumes from <code>/home/olivia/runs/a1/checkpoints/step-20.pt</code>" in page
    assert "incomplete" in page
    assert "Drain" not in page  # no stragglers, and no staff


def test_the_failures_api_serves_diagnosis_checkpoints_and_resume(oom_job, member, client) -> None:
    client.force_login(member)
    body = client.get(f"/api/v1/jobs/{oom_job.pk}/failures").json()
    (diagnosed,) = body["diagnoses"]
    assert diagnosed["failure_class"] == "cuda_oom"
    assert any("FSDP" in fix for fix in diagnosed["diagnosis"]["fixes"])
    assert body["resume_from"] == "/home/olivia/runs/a1/checkpoints/step-20.pt"
    assert [c["step"] for c in body["checkpoints"]] == [30, 20, 10]
    assert [c["resume"] for c in body["checkpoints"]] == [False, True, False]
    assert body["stragglers"] == []


def test_outsiders_and_anonymous_see_no_diagnosis(oom_job, outsider, client) -> None:
    assert client.get(f"/api/v1/jobs/{oom_job.pk}/failures").status_code == 401
    page = client.get(f"/jobs/{oom_job.pk}/")
    assert page.status_code == 302 and "/login/" in page["Location"]
    client.force_login(outsider)
    assert client.get(f"/api/v1/jobs/{oom_job.pk}/failures").status_code == 404
    assert client.get(f"/jobs/{oom_job.pk}/").status_code == 404


def test_the_failures_api_query_count(oom_job, member, client, django_assert_num_queries) -> None:
    client.force_login(member)
    # session, user, the job with its viewer check, its attempts, its checkpoints, the
    # nodes its submissions avoided, its hangs
    with django_assert_num_queries(7):
        assert client.get(f"/api/v1/jobs/{oom_job.pk}/failures").status_code == 200


def test_the_job_page_shows_an_unknown_failures_last_lines_escaped(
    project, owner, member, client
) -> None:
    from tests import factories

    job, attempt = factories.job(project, owner, factories.cluster())
    log = "step 41, loss=0.1\n<script>alert(1)</script>\nValueError: bad shape\n"
    found = diagnose(state=State.FAILED, exit_code=1, log_tail=log)
    assert found is not None and found.failure_class == FailureClass.UNKNOWN
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        exit_code=1,
        failure_class=found.failure_class,
        diagnosis=found.as_json(),
    )
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "The end of the log" in page
    # The line the diagnosis quotes is marked: the box opens on it.
    assert (
        "step 41, loss=0.1\n&lt;script&gt;alert(1)&lt;/script&gt;\n"
        '<mark class="diagnosed">ValueError: bad shape</mark>'
    ) in page
    assert "<script>alert(1)" not in page


def test_a_diagnosis_stored_before_the_new_fields_still_renders(
    project, owner, member, client
) -> None:
    from tests import factories

    job, attempt = factories.job(project, owner, factories.cluster())
    stored = {  # as attempts diagnosed before local_rank, failed_at and last_lines stored it
        "failure_class": "rank_crash",
        "title": "A rank crashed",
        "explanation": "One training process ended with an error.",
        "fixes": ["Resume from the latest checkpoint."],
        "evidence": "srun: error: n2: task 1: Exited with exit code 1",
        "rank": None,
        "node": "",
        "exit_code": 1,
    }
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED, exit_code=1, failure_class="rank_crash", diagnosis=stored
    )
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "A rank crashed" in page
    assert "Local rank" not in page and "The end of the log" not in page
