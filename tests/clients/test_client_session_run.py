"""`Portal.session_run` against the portal in-process, with the sandbox cluster: a run from a
session whose working directory alice's login packs there, less what .gitignore leaves out.

The session's attempt is recorded as JupyterLab's script leaves it, as in
tests/sessions/test_session_run_sandbox.py; no server needs to run for this.
"""

import io
import shlex
import tarfile
from datetime import timedelta

import pytest
from portal_client import PortalError

from accounts.services import token_issue
from jobs.code.snapshots import snapshot_bytes
from jobs.enums import Template
from jobs.models import Job
from jobs.rundir import WORKDIR_FILE
from tests.clients.test_client import _portal
from tests.sessions.test_session_run_sandbox import _session, _write, place  # noqa: F401

pytestmark = [pytest.mark.sandbox]


def test_a_run_from_a_session_through_the_client(
    researcher,
    project,
    sandbox_cluster,
    alice,
    place,  # noqa: F811
    settings,
    tmp_path,
    no_submission,
) -> None:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    work, run_dir = f"{place}/notebooks", f"{place}/run"
    for name, text in {
        ".gitignore": "data/\n",
        "train.py": "print('trained')\n",
        "data/shard-0.txt": "left out\n",
    }.items():
        _write(alice, f"{work}/{name}", text)
    _write(alice, f"{run_dir}/{WORKDIR_FILE}", f"{work}\n")
    session = _session(researcher, project, sandbox_cluster, run_dir, f"cd {shlex.quote(work)}")
    portal = _portal(token_issue(user=researcher, name="notebook", scope="submit").text)

    run = portal.session_run(
        session.pk,
        command="python train.py --steps 60",
        name="from the notebook",
        time_limit=timedelta(minutes=10),
        params={"lr": 0.001},
    )

    assert run.id != session.pk and run.name == "from the notebook" and run.state == "QUEUED"
    row = Job.objects.get(pk=run.id)
    assert row.template == Template.COMMAND and row.command == "python train.py --steps 60"
    assert row.time_limit == timedelta(minutes=10) and row.gpus_per_node == session.gpus_per_node
    assert row.project == project and row.cluster == sandbox_cluster
    assert row.params == {"lr": 0.001, "steps": 60}  # given, and the command's flags
    assert run.note == f"From session #{session.pk}: a snapshot of its working directory {work}."
    assert no_submission == [row.attempts.get().pk]
    assert row.code is not None
    with tarfile.open(fileobj=io.BytesIO(snapshot_bytes(row.code))) as archive:
        assert {m.name for m in archive.getmembers() if m.isfile()} == {".gitignore", "train.py"}

    # A refusal names the field to change; nothing more is submitted.
    with pytest.raises(PortalError) as refused:
        portal.session_run(session.pk, command="python train.py", project="no-such-project")
    assert refused.value.status == 400 and "project" in refused.value.errors
    with pytest.raises(PortalError) as not_a_session:
        portal.session_run(run.id, command="python train.py")
    assert not_a_session.value.status == 404
    assert Job.objects.count() == 2
