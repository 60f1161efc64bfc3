"""A job that forges its Slurm id and hides from its user's own squeue is still tracked and
charged as sacct says.

Against the real stack: the sandbox cluster behind OpenSSH, a real Celery worker polling
through the real agent. The job itself does the attack, as its user carol (a tenant of her own, so no other test
sees her rewritten rc files and PATH; the test shares the sandbox with the rest): a forged agent
under every name in ~/.portal, fake `squeue`/`sacct`/`python3` first on the PATH and shell
functions of those names in ~/.bashrc, and an exit-code file saying "0" while it still runs. Before it is submitted, carol's ~/.bashrc
already shadows `/usr/bin/env` (how the portal starts sbatch) with a function that submits
the job, then a small decoy, and answers with the decoy's id.
"""

import pwd
import re
import shlex
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from clusters.agent import AGENT_HASH
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.poll.authority import VANISH_GRACE
from jobs.services import job_submit
from projects.models import Membership, Reservation, UsageCharge
from tests.factories import spec
from tests.fixtures.sandbox import _slurm, tenant_turn
from tests.helpers import QUEUE_WAIT, slurm_name, wait_for, worker_tag

# carol's start-up files turn hostile here, and every test that uses her account runs
# them (her polls, submissions, the examples' install): alone on the sandbox.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive, pytest.mark.timeout(600)]

FAKE_BIN = ".trust-fake-bin"
FORGED_RAN = ".trust-forged-ran"  # touched by anything forged that the portal runs
DECOY_ID = ".trust-decoy-id"  # the id the forged sbatch answered with
ATTACK_DONE = ".trust-attack-done"
# The job runs until the test has watched it past VANISH_GRACE and several polls (then it
# touches the stop flag, as the fixture's teardown does whatever happened); at most
# STOP_WAIT s. The flag's name carries the run's tag: the run's end removes it.
WATCH_SECONDS = VANISH_GRACE.total_seconds() + 15
STOP_WAIT = 300


def _stop_flag() -> str:
    return f".trust-stop-{worker_tag()}"


# What the old agent's squeue would have said: no jobs at all.
FORGED_REPLY = (
    '{"version": 1, "time": 0, "commands": {"squeue": {"exit": 0, "stdout": "", "stderr": "",'
    ' "truncated": false, "timed_out": false, "seconds": 0}}, "files": {}, "listings": {}}'
)


def _forged_sbatch(decoy_name: str) -> str:
    """~/.bashrc lines: sbatch as the portal starts it submits the job, then answers for a decoy."""
    decoy = (
        f"command /usr/bin/sbatch --parsable --job-name={decoy_name} --output=/dev/null "
        f'--wrap "sleep 20" | tee "$HOME/{DECOY_ID}"'
    )
    return (
        "/usr/bin/env() {\n"
        '  case " $* " in\n'
        f'    *" /usr/bin/sbatch "*) command /usr/bin/env "$@" > /dev/null && {decoy} ;;\n'
        '    *) command /usr/bin/env "$@" ;;\n'
        "  esac\n"
        "}\n"
    )


def _attack_script() -> str:
    forged = f'#!/bin/sh\ntouch "$HOME/{FORGED_RAN}"\necho {shlex.quote(FORGED_REPLY)}\n'
    rc_lines = [
        f'export PATH="$HOME/{FAKE_BIN}:$PATH"',
        "squeue() { :; }",
        "sacct() { :; }",
        f'python3() {{ touch "$HOME/{FORGED_RAN}"; echo {shlex.quote(FORGED_REPLY)}; }}',
    ]
    return "\n".join(
        [
            "set -e",
            f'mkdir -p "$HOME/.portal" "$HOME/{FAKE_BIN}"',
            f"for name in agent.py agent-{AGENT_HASH}.py; do",
            f'  printf %s {shlex.quote(forged)} > "$HOME/.portal/$name"',
            '  chmod 755 "$HOME/.portal/$name"',
            "done",
            "for name in squeue sacct python3 python env; do",
            f'  printf %s {shlex.quote(forged)} > "$HOME/{FAKE_BIN}/$name"',
            f'  chmod 755 "$HOME/{FAKE_BIN}/$name"',
            "done",
            f'{{ printf "%s\\n" {" ".join(shlex.quote(line) for line in rc_lines)};'
            ' cat "$HOME/.bashrc"; } > "$HOME/.bashrc.new"',
            'mv "$HOME/.bashrc.new" "$HOME/.bashrc"',
            'echo 0 > "$PORTAL_RUN_DIR/exit_code"',  # a forged "exited 0" while it runs
            f'touch "$HOME/{ATTACK_DONE}"',
            f'for i in $(seq {STOP_WAIT}); do [ -e "$HOME/{_stop_flag()}" ] && break; sleep 1; done',
        ]
    )


@pytest.fixture
def hostile(transactional_db: None, sandbox_cluster, project) -> User:
    """The portal user `carol`, whose jobs run as the cluster user carol."""
    user = User.objects.get(username="carol")
    Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def carol_home() -> Iterator[Path]:
    """carol's home, with her ~/.bashrc and ~/.portal restored (as root) whatever happens;
    one test at a time changes her start-up files."""
    with tenant_turn("carol"):
        yield from _carol_home()


def _carol_home() -> Iterator[Path]:
    home = Path(pwd.getpwnam("carol").pw_dir)
    bashrc = home / ".bashrc"
    saved = bashrc.read_bytes() if bashrc.exists() else None
    portal = home / ".portal"
    kept = {p: p.read_bytes() for p in portal.iterdir()} if portal.is_dir() else {}
    try:
        yield home
    finally:
        if saved is None:
            bashrc.unlink(missing_ok=True)
        else:
            bashrc.write_bytes(saved)
        for path in portal.iterdir() if portal.is_dir() else []:
            if path not in kept:
                path.unlink()
        for path, data in kept.items():
            path.write_bytes(data)
        shutil.rmtree(home / FAKE_BIN, ignore_errors=True)
        (home / _stop_flag()).touch()  # a job still waiting for it ends
        for name in (FORGED_RAN, ATTACK_DONE, DECOY_ID, "trust-attack.sh"):
            (home / name).unlink(missing_ok=True)


def _sacct(job_id: str) -> dict[str, str]:
    """sacct as root on the cluster host: read independently of the portal and of carol."""
    fields = ["ElapsedRaw", "AllocTRES", "State", "Start", "End"]
    proc = _slurm(
        settings.SANDBOX_STATE_DIR,
        *("sacct", "-X", "-n", "-P", "-j", job_id, f"--format={','.join(fields)}"),
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    return dict(zip(fields, line.split("|"), strict=True))


def _tres_gpus(tres: str) -> int:
    parts = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
    return int(parts.get("gres/gpu", "0"))


def test_a_job_hiding_from_its_users_squeue_is_tracked_and_charged_as_sacct_says(
    celery_worker, hostile, project, sandbox_cluster, sandbox_info, carol, carol_home
) -> None:
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd (no MariaDB or slurmdbd installed)")
    assert sandbox_cluster.has_portal_account  # the sandbox registers portal-svc
    sandbox_cluster.accounting_enabled = True
    sandbox_cluster.save()
    script = carol_home / "trust-attack.sh"
    carol.upload(str(script), _attack_script().encode(), mode=0o700)
    bashrc = carol_home / ".bashrc"
    rc = bashrc.read_bytes() if bashrc.exists() else b""
    carol.upload(str(bashrc), _forged_sbatch(slurm_name("decoy")).encode() + rc, mode=0o644)
    job: Job = job_submit(
        user=hostile,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(name="hide", command=f"bash {shlex.quote(str(script))}", gpus_per_node=1),
    )
    attempt = Attempt.objects.get(job=job, number=1)

    # tee creates the file before sbatch's answer is in it.
    def decoy_answer() -> str:
        path = carol_home / DECOY_ID
        return path.read_text().split(";")[0].strip() if path.exists() else ""

    wait_for(lambda: decoy_answer() != "", QUEUE_WAIT, "the forged sbatch to answer")
    decoy_id = decoy_answer()

    # The portal took the decoy's id from sbatch, then followed the job of the attempt's name.
    def real_id() -> str:
        listed = _slurm(
            settings.SANDBOX_STATE_DIR,
            "squeue",
            "-h",
            f"--name={attempt.slurm_job_name}",
            "-o",
            "%i",
        )
        return listed.stdout.strip()

    wait_for(lambda: real_id() != "", QUEUE_WAIT, "the real job in Slurm's queue")
    job_id = real_id()
    assert job_id != decoy_id
    wait_for(
        lambda: Attempt.objects.get(pk=attempt.pk).slurm_job_id == job_id,
        30,
        "the portal to follow the job of the attempt's name",
    )
    followed = JobEvent.objects.filter(attempt=attempt, reason__contains="following job").get()
    # A forged answer's id (the decoy's; a retried submission forges a second one) is named.
    named = re.search(
        r"Slurm job (\d+) is carol's job submitted at .*named 'decoy-", followed.reason
    )
    assert named is not None and named[1] != job_id, followed.reason
    wait_for(lambda: (carol_home / ATTACK_DONE).exists(), QUEUE_WAIT, "the attack to land")
    attempt.refresh_from_db()

    # The attack works on carol's own session: her squeue and sacct no longer show the job.
    assert carol.run(f"squeue --noheader --jobs={job_id}").text.strip() == ""
    assert carol.run(f"sacct -n -X -j {job_id}").text.strip() == ""
    assert carol.run("echo $PATH").text.startswith(f"{carol_home}/{FAKE_BIN}:")

    # Yet the portal sees it run (the next poll) and keeps it running and reserved, past
    # the grace after which a job gone from squeue used to be failed.
    wait_for(lambda: Attempt.objects.get(pk=attempt.pk).state == State.RUNNING, 30, "RUNNING")
    watched_until = time.monotonic() + WATCH_SECONDS
    while time.monotonic() < watched_until:
        attempt.refresh_from_db()
        reservation = Reservation.objects.get(attempt=attempt)
        assert attempt.state == State.RUNNING, attempt.reason
        assert reservation.released_at is None
        assert not UsageCharge.objects.filter(attempt=attempt).exists()
        time.sleep(2)
    (carol_home / _stop_flag()).touch()  # on a failure, carol_home's teardown does

    wait_for(
        lambda: UsageCharge.objects.filter(attempt=attempt).exists(),
        120,
        "the charge from sacct",
    )
    attempt.refresh_from_db()
    charge = UsageCharge.objects.get(attempt=attempt)
    truth = _sacct(job_id)
    assert truth["State"] == "COMPLETED" and attempt.state == State.COMPLETED
    assert charge.source == UsageCharge.Source.SACCT
    assert charge.elapsed_seconds == int(truth["ElapsedRaw"]) >= WATCH_SECONDS
    assert charge.gpus == _tres_gpus(truth["AllocTRES"]) == 1
    assert Reservation.objects.get(attempt=attempt).released_at is not None
    # Nothing the job left in carol's home or PATH ever ran as the portal's agent.
    assert not (carol_home / FORGED_RAN).exists()
