"""`manage.py cluster add` and `cluster check` against the real sandbox and second cluster,
and the cluster page's "Check readiness" button through the real Celery task."""

import contextlib
import pwd
import re
import subprocess
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from clusters.hostkeys import fingerprint, parse_host_key
from clusters.models import Cluster, ReadinessReport
from clusters.onboarding import probe
from clusters.sandbox import SandboxInfo, accounting, daemons
from clusters.sandbox.config import Paths
from devtools.servers import wait_until
from tests.fixtures.sandbox import PrivateSshd
from tests.helpers import wait_for, worker_tag

# A report's test jobs may queue behind other tests' jobs for up to WAIT, twice in one test.
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900)]

CHECKS = (
    "Login node",
    "Slurm commands",
    "Partitions and GPUs",
    "Shared run directory",
    "Python on the nodes",
    "GPU sampler",
    "Accounting (sacct)",
    "Portal operator account",
)
WAIT = "240"  # seconds a test job may queue behind the other tests' jobs


def _sha256(info: SandboxInfo) -> str:
    return fingerprint(*parse_host_key(info.host_key)).split()[1]


@pytest.fixture
def operator_key(tmp_path: Path, sandbox_info: SandboxInfo) -> Path:
    path = tmp_path / "portal-svc.key"
    path.write_text(sandbox_info.portal_key)
    path.chmod(0o600)
    return path


def _add(info: SandboxInfo, name: str, key: Path, *extra: str, port: int = 0) -> tuple[str, bool]:
    """`cluster add` as an admin types it; (what it printed, whether it exited 0)."""
    out = StringIO()
    argv = [
        "add", info.ssh_host, "--port", str(port or info.ssh_port), "--name", name,
        "--operator-user", info.portal_user, "--operator-key", str(key),
        "--wait", WAIT, *extra,
    ]  # fmt: skip
    if "--fingerprint" not in extra:
        argv += ["--fingerprint", _sha256(info)]
    try:
        call_command("cluster", *argv, stdout=out)
    except CommandError as exc:
        return f"{out.getvalue()}\n{exc}", False
    return out.getvalue(), True


def _verdicts(output: str) -> dict[str, str]:
    """check name -> 'passed' or 'FAILED', from the lines the command printed."""
    found = {}
    for line in output.splitlines():
        for name in CHECKS:
            if line.startswith(("[passed] ", "[FAILED] ")) and line[9:].startswith(f"{name}:"):
                found[name] = line[1:7]
    return found


def _runs() -> str:
    return f"~/portal-runs/{worker_tag()}-onboarding"


def test_cluster_add_on_the_sandbox_passes_every_check(
    db: None, sandbox_info: SandboxInfo, operator_key: Path
) -> None:
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd here (SANDBOX_ACCOUNTING=0 or no MariaDB)")
    output, ok = _add(sandbox_info, "onb-sandbox", operator_key, "--base-run-dir", _runs())
    assert ok, output
    assert _verdicts(output) == dict.fromkeys(CHECKS, "passed"), output
    assert "All 8 checks passed" in output
    cluster = Cluster.objects.get(name="onb-sandbox")
    assert cluster.host_key == sandbox_info.host_key
    assert cluster.portal_username == sandbox_info.portal_user and cluster.has_portal_account
    assert cluster.slurm_conf == sandbox_info.slurm_conf  # read from the login environment
    assert cluster.accounting_enabled  # sacct answered
    report = ReadinessReport.objects.get(cluster=cluster)
    assert report.passed and [check["name"] for check in report.checks] == list(CHECKS)
    # The report names what it saw: Slurm's version, the GPUs per node, each node's Python.
    assert "GPUs per node" in output and "n1, n2, n3" in output

    out = StringIO()
    call_command("cluster", "check", "onb-sandbox", "--wait", WAIT, stdout=out)
    assert _verdicts(out.getvalue()) == dict.fromkeys(CHECKS, "passed"), out.getvalue()
    assert ReadinessReport.objects.filter(cluster=cluster).count() == 2


def test_cluster_add_on_the_second_cluster_passes_every_check(
    db: None, second_sandbox: SandboxInfo, operator_key: Path
) -> None:
    """The second cluster keeps its own accounting (its slurmdbd, through its own munged):
    its test jobs run on its nodes and its own sacct and sacctmgr answer for them."""
    if not second_sandbox.accounting:
        pytest.skip("the sandbox runs without slurmdbd here (SANDBOX_ACCOUNTING=0 or no MariaDB)")
    output, ok = _add(second_sandbox, "onb-second", operator_key, "--base-run-dir", _runs())
    assert ok, output
    assert _verdicts(output) == dict.fromkeys(CHECKS, "passed"), output
    assert "All 8 checks passed" in output
    assert "b1, b2" in output  # its own nodes ran the test jobs
    cluster = Cluster.objects.get(name="onb-second")
    assert cluster.accounting_enabled and cluster.slurm_conf == second_sandbox.slurm_conf


@contextlib.contextmanager
def _slurmdbd_stopped(state_dir: Path) -> Iterator[None]:
    """The second cluster's slurmdbd stopped, and started again after."""
    paths = Paths.second(state_dir)
    slurmdbd = daemons.slurmdbd(paths)
    assert daemons.stop(slurmdbd)
    try:
        yield
    finally:
        daemons.start(slurmdbd, paths)
        wait_for(
            lambda: accounting.sacctmgr(paths, "list", "cluster").returncode == 0,
            60, "the second cluster's slurmdbd to answer again",
        )  # fmt: skip


@pytest.mark.sandbox_exclusive  # no other test may find the second cluster's slurmdbd down
def test_the_second_clusters_slurmdbd_down_is_named_with_its_fix(
    db: None, second_sandbox: SandboxInfo, operator_key: Path
) -> None:
    """A cluster whose slurmdbd does not run: the report says accounting failed and what
    to check, and that the operator account waits on it; everything else passes."""
    if not second_sandbox.accounting:
        pytest.skip("the sandbox runs without slurmdbd here (SANDBOX_ACCOUNTING=0 or no MariaDB)")
    with _slurmdbd_stopped(settings.SANDBOX_STATE_DIR):
        output, ok = _add(second_sandbox, "onb-nodbd", operator_key, "--base-run-dir", _runs())
    assert not ok
    assert _verdicts(output) == {
        **dict.fromkeys(CHECKS, "passed"),
        "Accounting (sacct)": "FAILED",
        "Portal operator account": "FAILED",
    }, output
    assert "Check that slurmdbd runs and slurmctld reaches it" in output
    assert "Turn accounting on (see above), then: sacctmgr -i add user portal-svc" in output
    assert not Cluster.objects.get(name="onb-nodbd").accounting_enabled


def _live(job_ids: list[str]) -> list[str]:
    """Those of the sandbox's jobs still queued or running, as root on this machine sees them."""
    listed = subprocess.run(
        ["squeue", "--noheader", "--format=%i", f"--jobs={','.join(job_ids)}",
         "--states=PENDING,CONFIGURING,RUNNING,COMPLETING,SUSPENDED"],
        env=daemons.slurm_env(Paths.of(settings.SANDBOX_STATE_DIR)),
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    return listed.stdout.split()


def test_test_jobs_past_the_wait_are_cancelled_and_their_directory_removed(
    db: None, sandbox_info: SandboxInfo, operator_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Test jobs that would outlive the wait (each sleeps before it writes, as on a node
    whose filesystem hangs) are cancelled when it ends; nothing of them stays."""
    real_script = probe.probe_script

    def slow_script(*args: Any, **kwargs: Any) -> str:
        return real_script(*args, **kwargs).replace("\ndir=", "\nsleep 600\ndir=", 1)

    monkeypatch.setattr(probe, "probe_script", slow_script)
    runs = f"{_runs()}-hurry"
    output, ok = _add(
        sandbox_info, "onb-hurry", operator_key, "--base-run-dir", runs, "--wait", "3"
    )
    assert not ok
    assert _verdicts(output)["Shared run directory"] == "FAILED", output
    assert "; cancelled" in output and "with a longer --wait" in output
    job_ids = re.findall(r"job (\d+) ", output)
    assert len(job_ids) == 3, output
    wait_for(lambda: not _live(job_ids), 60, f"the test jobs {job_ids} to end")
    home = pwd.getpwnam(sandbox_info.portal_user).pw_dir
    assert list(Path(home, runs.removeprefix("~/")).glob(".readiness-*")) == []


class LoginOnlySshd(PrivateSshd):
    """The sandbox's sshd in a mount namespace of its own, with a tmpfs at `mount`.

    What a login node sees there, the nodes do not: a login node's local disk.
    """

    def __init__(self, state_dir: Path, name: str, mount: Path) -> None:
        super().__init__(state_dir, name)
        self.mount = mount

    def start(self) -> None:
        self.pid_file.unlink(missing_ok=True)
        sshd = (
            f"/usr/sbin/sshd -f {self.config} -E {self.log_file} -p {self.port} "
            f"-o PidFile={self.pid_file}"
        )
        script = (
            f"mount -t tmpfs -o mode=0755,size=16m tmpfs {self.mount} && "
            f"mkdir -m 1777 {self.mount}/runs && exec {sshd}"
        )
        subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
            check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        wait_until(self._listening, 15, f"the login-only sshd on port {self.port}")


@pytest.fixture
def login_only_sshd(sandbox_info: SandboxInfo) -> Iterator[LoginOnlySshd]:
    mount = Path(f"/tmp/portal-onboarding-{worker_tag()}-login-local")
    mount.mkdir(mode=0o755, exist_ok=True)
    sshd = LoginOnlySshd(settings.SANDBOX_STATE_DIR, f"{worker_tag()}-onboarding", mount)
    sshd.start()
    try:
        yield sshd
    finally:
        sshd.stop()
        with contextlib.suppress(OSError):
            mount.rmdir()


def test_a_run_directory_the_nodes_cannot_see_is_named_with_its_fix(
    db: None, sandbox_info: SandboxInfo, operator_key: Path, login_only_sshd: LoginOnlySshd
) -> None:
    """The login node is the sandbox's own sshd started in a private mount namespace with a
    tmpfs over a directory: its sessions (and sbatch, which reads the script there) see the
    tmpfs, while slurmd, outside the namespace, runs the test jobs on the host's empty
    directory below it. That is a run directory on a login node's local disk, the mistake
    this check is for, made on one machine without faking any answer."""
    output, ok = _add(
        sandbox_info, "onb-local", operator_key,
        "--base-run-dir", f"{login_only_sshd.mount}/runs", port=login_only_sshd.port,
    )  # fmt: skip
    assert not ok
    verdicts = _verdicts(output)
    assert verdicts["Shared run directory"] == "FAILED", output
    assert verdicts["Login node"] == verdicts["Slurm commands"] == "passed", output
    assert "reached the login node" in output
    assert "on a filesystem that the login node and every compute node mount" in output


def test_a_wrong_fingerprint_is_refused_and_nothing_is_recorded(
    db: None, sandbox_info: SandboxInfo, operator_key: Path
) -> None:
    wrong = "SHA256:" + "A" * 43
    output, ok = _add(sandbox_info, "onb-wrong", operator_key, "--fingerprint", wrong)
    assert not ok
    assert f"not the expected {wrong}" in output and "Nothing was recorded" in output
    assert _sha256(sandbox_info) in output  # what the server did present
    assert not Cluster.objects.filter(name="onb-wrong").exists()
    # Neither given nor asked (no terminal): refused, not taken on trust.
    out = StringIO()
    with pytest.raises(CommandError, match="Not confirmed, nothing recorded"):
        call_command("cluster", "add", sandbox_info.ssh_host, "--port", str(sandbox_info.ssh_port),
                     "--name", "onb-unconfirmed", stdout=out)  # fmt: skip
    assert _sha256(sandbox_info) in out.getvalue()
    assert not Cluster.objects.filter(name__startswith="onb-").exists()
    assert not ReadinessReport.objects.exists()


def test_staff_check_readiness_from_the_cluster_page(
    client: Client,
    staff: User,
    member: User,
    sandbox_cluster: Cluster,
    eager_celery: None,
    django_capture_on_commit_callbacks,
) -> None:
    page = reverse("cluster-page", args=[sandbox_cluster.name])
    button = reverse("cluster-readiness", args=[sandbox_cluster.name])
    client.force_login(member)
    assert client.post(button).status_code == 403
    assert b"check-readiness" not in client.get(page).content
    assert not ReadinessReport.objects.exists()

    client.force_login(staff)
    assert b"Not checked yet" in client.get(page).content
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(button)
    assert response.status_code == 302 and response["Location"].endswith("#readiness")
    report = ReadinessReport.objects.get(cluster=sandbox_cluster)
    assert report.state == ReadinessReport.State.DONE and report.requested_by == staff
    html = client.get(page).content.decode()
    assert 'id="readiness-checks"' in html and "root-admin" in html
    for name in ("Shared run directory", "GPU sampler", "Python on the nodes"):
        assert f'data-check="{name}" data-passed="true"' in html, html
