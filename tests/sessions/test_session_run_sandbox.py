"""From a session to a run on the sandbox: the form read over alice's real login, and the
submitted run's code a snapshot of the session's working directory packed there by tar, less
what its .gitignore files leave out.

The session's attempt is recorded as JupyterLab's script leaves it (a run directory whose
workdir file names the directory it started in); no server needs to run for this.
"""

import io
import shlex
import tarfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Connection
from jobs.code.cluster_dir import directory_snapshot, pack_command
from jobs.code.snapshots import snapshot_bytes
from jobs.enums import State, Template
from jobs.errors import JobError
from jobs.models import Attempt, CodeSnapshot, Job
from jobs.rundir import WORKDIR_FILE
from projects.models import Project
from sessions.to_run import run_spec
from web.jobs.forms import JobForm, initial_from_spec

pytestmark = [pytest.mark.sandbox]

FILES = {
    "train.py": "print('trained')\n",
    "analysis.ipynb": '{"cells": []}\n',
    "pkg/model.py": "WIDTH = 8\n",
    # JupyterLab's own copies and Python's caches stay out of the run's code.
    ".ipynb_checkpoints/analysis-checkpoint.ipynb": "{}\n",
    "pkg/__pycache__/model.cpython-311.pyc": "x",
}
PACKED = {"train.py", "analysis.ipynb", "pkg/model.py"}


@pytest.fixture
def place(alice: Connection) -> Iterator[str]:
    """A directory of alice's holding a run directory and a working directory; removed after."""
    home = alice.run('printf "%s" "$HOME"').text.strip()
    base = f"{home}/session-run-{uuid.uuid4().hex[:8]}"
    try:
        yield base
    finally:
        alice.run(f"rm -rf -- {shlex.quote(base)}")


def _session(user: User, project: Project, cluster: Cluster, run_dir: str, setup: str) -> Job:
    session = Job.objects.create(
        project=project,
        user=user,
        cluster=cluster,
        name="notebook",
        template=Template.JUPYTER,
        command="jupyter lab",
        gpus_per_node=1,
        cpus_per_task=1,
        setup=setup,
        state=State.RUNNING,
    )
    Attempt.objects.create(
        job=session,
        number=1,
        state=State.RUNNING,
        started_at=timezone.now(),
        run_dir=run_dir,
        account=ClusterAccount.objects.get(cluster=cluster, user=user),
    )
    return session


def _write(alice: Connection, path: str, text: str) -> None:
    quoted = shlex.quote(path)
    folder = shlex.quote(path.rsplit("/", 1)[0])
    result = alice.run(f"mkdir -p -- {folder} && cat > {quoted}", stdin=text.encode())
    assert result.exit_status == 0, result.text


def _form_data(form: Any) -> dict[str, Any]:
    """What a browser posts back of the rendered form, unchanged."""
    data: dict[str, Any] = {}
    for name in form.fields:
        value = form[name].value()
        if value is None or value is False:
            continue
        data[name] = "on" if value is True else value
    return data


def test_a_run_from_a_session_gets_a_snapshot_of_its_working_directory(
    researcher, project, sandbox_cluster, alice, place, settings, tmp_path, no_submission
) -> None:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    work, run_dir = f"{place}/my notebooks", f"{place}/run"
    for name, text in FILES.items():
        _write(alice, f"{work}/{name}", text)
    _write(alice, f"{run_dir}/{WORKDIR_FILE}", f"{work}\n")
    setup = f"export DATA_ROOT=/data\ncd -- {shlex.quote(work)}"
    session = _session(researcher, project, sandbox_cluster, run_dir, setup)
    client = Client()
    client.force_login(researcher)

    page = client.get(f"/sessions/{session.pk}/run/")
    assert page.status_code == 200
    html = page.content.decode()
    assert work in html and f'From session <a href="/jobs/{session.pk}/">#{session.pk}' in html
    form = page.context["form"]
    assert form["project"].value() == project.pk
    assert form["cluster"].value() == sandbox_cluster.name
    assert form["template"].value() == Template.COMMAND
    assert form["gpus_per_node"].value() == 1 and form["command"].value() == ""
    assert form["setup"].value().splitlines()[0] == "export DATA_ROOT=/data"
    assert form["setup"].value().splitlines()[1].startswith(f"# cd -- {shlex.quote(work)}")

    data = {**_form_data(form), "command": "python train.py"}
    posted = client.post(f"/sessions/{session.pk}/run/", data)
    assert posted.status_code == 302, posted.context["form"].errors if posted.context else posted
    run = Job.objects.exclude(pk=session.pk).get()
    assert posted["Location"] == f"/jobs/{run.pk}/"
    assert run.template == Template.COMMAND and run.command == "python train.py"
    assert run.note == f"From session #{session.pk}: a snapshot of its working directory {work}."
    assert run.code is not None and no_submission == [run.attempts.get().pk]  # attempt ids
    with tarfile.open(fileobj=io.BytesIO(snapshot_bytes(run.code))) as archive:
        files = {m.name.removeprefix("./"): m for m in archive.getmembers() if m.isfile()}
        assert set(files) == PACKED
        assert archive.extractfile(files["train.py"]).read() == FILES["train.py"].encode()  # type: ignore[union-attr]

    # Frozen: what the session saves later is not the run's.
    _write(alice, f"{work}/train.py", "print('changed')\n")
    with tarfile.open(fileobj=io.BytesIO(snapshot_bytes(run.code))) as archive:
        member = archive.extractfile("train.py")
        assert member is not None and member.read() == FILES["train.py"].encode()


def test_a_session_in_the_home_directory_is_refused(
    researcher, project, sandbox_cluster, alice, place, no_submission
) -> None:
    run_dir = f"{place}/run"
    _write(alice, f"{run_dir}/{WORKDIR_FILE}", "\n")  # the script writes a blank line for $HOME
    session = _session(researcher, project, sandbox_cluster, run_dir, "")
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/sessions/{session.pk}/run/", follow=True)
    assert page.redirect_chain[-1][0] == f"/jobs/{session.pk}/"
    assert "ran in your home directory" in page.content.decode()
    initial = initial_from_spec(run_spec(session))
    initial.update(project=project.pk, cluster=sandbox_cluster.name)
    data = {**_form_data(JobForm(user=researcher, initial=initial)), "command": "python x.py"}
    posted = client.post(f"/sessions/{session.pk}/run/", data)
    assert posted.status_code == 200, posted
    assert "ran in your home directory" in posted.content.decode()
    assert Job.objects.count() == 1 and no_submission == []


def test_a_directory_over_the_cap_or_gone_is_refused_saying_so(
    researcher, project, alice, place, settings, tmp_path
) -> None:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    big = shlex.quote(f"{place}/big")
    # Random bytes: gzip cannot pack them under the cap.
    assert (
        alice.run(f"mkdir -p {big} && head -c 8192 /dev/urandom > {big}/data.bin").exit_status == 0
    )
    settings.CODE_UPLOAD_MAX_BYTES = 1024
    with pytest.raises(JobError, match="packs to more than the code cap"):
        directory_snapshot(connection=alice, user=researcher, project=project, path=f"{place}/big")
    with pytest.raises(JobError, match=r"could not be packed on the cluster: .*No such file"):
        directory_snapshot(connection=alice, user=researcher, project=project, path=f"{place}/gone")
    assert not CodeSnapshot.objects.exists()


def _packed_names(snapshot: CodeSnapshot) -> set[str]:
    with tarfile.open(fileobj=io.BytesIO(snapshot_bytes(snapshot))) as archive:
        return {m.name for m in archive.getmembers() if m.isfile()}


def test_the_pack_leaves_out_what_gitignore_does_as_git_reads_it(
    researcher, project, alice, place, settings, tmp_path
) -> None:
    """A big file, a `data/` folder and a nested ignore file's pattern stay out; without the
    .gitignore the directory would pack over the cap."""
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    settings.CODE_UPLOAD_MAX_BYTES = 64 * 1024
    work = f"{place}/notebooks"
    texts = {
        ".gitignore": "weights.bin\ndata/\n*.log\n!keep.log\n",
        "train.py": "print('trained')\n",
        "keep.log": "kept by the ! line\n",
        "run.log": "left out\n",
        "pkg/.gitignore": "scratch.py\n",
        "pkg/model.py": "WIDTH = 8\n",
        "pkg/scratch.py": "left out\n",
        "data/readme.txt": "left out with its folder\n",
        "pkg/data/x.txt": "a data/ line matches at every level\n",
    }
    for name, text in texts.items():
        _write(alice, f"{work}/{name}", text)
    quoted = shlex.quote(work)
    # Random bytes, which gzip cannot shrink under the cap: packed, they would refuse it.
    made = alice.run(
        f"head -c 262144 /dev/urandom > {quoted}/weights.bin"
        f" && head -c 262144 /dev/urandom > {quoted}/data/train.npy"
    )
    assert made.exit_status == 0, made.text
    kept = {".gitignore", "train.py", "keep.log", "pkg/.gitignore", "pkg/model.py"}

    snapshot = directory_snapshot(connection=alice, user=researcher, project=project, path=work)
    assert _packed_names(snapshot) == kept

    # In a git checkout, git's own list: a committed file is packed though a later line
    # ignores it, as `git ls-files` and the Python client have it.
    committed = alice.run(
        f"cd {quoted} && git init -q . && git add -- train.py && git -c user.name=a "
        "-c user.email=a@example.org commit -q -m code && echo 'train.py' >> .gitignore"
    )
    assert committed.exit_status == 0, committed.text
    snapshot = directory_snapshot(connection=alice, user=researcher, project=project, path=work)
    assert _packed_names(snapshot) == kept


def test_without_git_on_the_cluster_tar_reads_the_gitignore_files(alice, place) -> None:
    """The fallback's limit, pinned: a `data/` line's folder is packed, a `*.bin` line holds."""
    work, tools = shlex.quote(f"{place}/code"), shlex.quote(f"{place}/tools")
    links = " && ".join(
        f'ln -s "$(command -v {tool})" {tools}/{tool}'
        for tool in ("sh", "tar", "gzip", "ls", "mktemp", "rm")
    )
    made = alice.run(
        f"mkdir -p {work}/data {tools} && {links} && printf 'data/\\n*.bin\\n' > {work}/.gitignore"
        f" && echo x > {work}/train.py && echo x > {work}/weights.bin && echo x > {work}/data/a"
    )
    assert made.exit_status == 0, made.text
    packed = alice.run(f"PATH={tools} {pack_command(f'{place}/code')} | {tools}/tar -tzf -")
    assert packed.exit_status == 0, packed.text
    assert set(packed.text.split()) == {"./", "./.gitignore", "./train.py", "./data/", "./data/a"}
