"""Every attempt runs the job's one snapshot: a restart unpacks the same bytes into its own
run directory (through the real unpacker and bootstrap), and its script starts there."""

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from clusters.agent.client import AgentError
from clusters.ssh import CommandResult, Endpoint
from jobs.code.snapshots import snapshot_path, snapshot_store
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from jobs.restart import attempt_restart
from jobs.rundir import RunDir
from jobs.scripts import render_batch_script
from jobs.submission import _upload_code
from tests import factories


class LocalCluster:
    """A connection whose commands run here with sh and whose uploads are plain writes."""

    def __init__(self) -> None:
        self.endpoint = Endpoint("local", "localhost", 22, "ssh-ed25519 AAAA", "mia", "")
        self.uploads: list[str] = []

    def run(
        self, command: str, *, stdin: bytes = b"", timeout: float = 30, max_output: int = 0
    ) -> CommandResult:
        proc = subprocess.run(
            ["sh", "-c", command], input=stdin, capture_output=True, timeout=timeout
        )
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)

    def upload(self, remote_path: str, data: bytes, *, mode: int = 0o600) -> None:
        self.uploads.append(remote_path)
        Path(remote_path).write_bytes(data)
        Path(remote_path).chmod(mode)


def _tar(*members: tuple[str, bytes]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


@pytest.fixture
def coded_job(settings, tmp_path, project, member):
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    snapshot, _ = snapshot_store(
        user=member, project=project, chunks=[_tar(("trainer/main.py", b"print('v2')\n"))]
    )
    cluster = factories.cluster()
    account = factories.account(cluster, member)
    job, attempt = factories.job(
        project, member, cluster, code=snapshot, max_restarts=1, command="python -m trainer.main"
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        account=account, state=State.FAILED, run_dir=str(tmp_path / "run1")
    )
    attempt.refresh_from_db()
    return job, attempt


def test_a_restart_unpacks_the_same_snapshot_and_starts_in_it(coded_job, tmp_path) -> None:
    job, first = coded_job
    second = attempt_restart(attempt=first, failure_class=FailureClass.NODE_FAILURE, resume_from="")
    assert second is not None and second.job.code_id == job.code_id
    for attempt, directory in ((first, "run1"), (second, "run2")):
        run_dir = RunDir(str(tmp_path / directory))
        Path(run_dir.path).mkdir()
        cluster = LocalCluster()
        _upload_code(
            Attempt.objects.select_related("job__code").get(pk=attempt.pk), cluster, run_dir
        )
        assert (Path(run_dir.path) / "code" / "trainer" / "main.py").read_text() == "print('v2')\n"
        assert not (Path(run_dir.path) / "code.tar").exists()  # removed once unpacked
        script = render_batch_script(job=job, attempt=attempt, run_dir=run_dir)
        assert f"export PORTAL_CODE_DIR={run_dir.path}/code" in script
        # The set-up and command run after the cd, inside the job's subshell.
        assert script.index('cd -- "$PORTAL_CODE_DIR" || exit 1') < script.index(
            "python -m trainer.main"
        )


def test_an_unsafe_archive_on_the_cluster_is_refused_by_the_unpacker(
    coded_job, tmp_path, settings
) -> None:
    """A snapshot file changed behind the portal's back is still refused where it unpacks."""
    job, first = coded_job
    snapshot_path(job.code.sha256).write_bytes(_tar(("../../escape", b"evil")))
    run_dir = RunDir(str(tmp_path / "run1"))
    Path(run_dir.path).mkdir()
    with pytest.raises(AgentError, match=r"'\.\.' component") as refused:
        _upload_code(
            Attempt.objects.select_related("job__code").get(pk=first.pk), LocalCluster(), run_dir
        )
    assert refused.value.retryable is False
    assert not (tmp_path / "escape").exists()


def test_without_code_the_command_starts_where_it_always_did(project, member) -> None:
    cluster = factories.cluster()
    job, attempt = factories.job(project, member, cluster)
    script = render_batch_script(job=job, attempt=attempt, run_dir=RunDir("/home/mia/r"))
    assert "PORTAL_CODE_DIR" not in script
