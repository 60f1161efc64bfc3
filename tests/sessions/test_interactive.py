"""A session's batch script, its session file, and the spec rules of the JupyterLab template."""

import pytest

from jobs.enums import Template
from jobs.interactive import lab_base_url, parse_session_file, session_command_lines
from jobs.models import Job
from jobs.rundir import RunDir
from jobs.scripts import render_batch_script
from jobs.specs import JobSpec, validate_spec
from tests import factories

TOKEN = "ab" * 32


@pytest.mark.parametrize(
    "data",
    [
        b'{"port": 80, "token": "' + TOKEN.encode() + b'"}',  # a privileged port
        b'{"port": "8888", "token": "' + TOKEN.encode() + b'"}',  # a string
        b'{"port": true, "token": "' + TOKEN.encode() + b'"}',
        b'{"port": 8888, "token": "not hex at all, or short"}',
        b'{"port": 8888, "token": "' + TOKEN.encode() + b'\\r\\nX-Evil: 1"}',
        b'{"port": 8888}',
        b"[8888]",
        b"not json",
        b'{"port": 8888, "token": "' + TOKEN.encode() + b'", "pad": "' + b"x" * 2000 + b'"}',
    ],
)
def test_a_session_file_the_script_would_not_write_is_refused(data: bytes) -> None:
    assert parse_session_file(data) is None


def test_the_scripts_session_file_is_read() -> None:
    address = parse_session_file(b'{"port": 41234, "token": "' + TOKEN.encode() + b'"}\n')
    assert address is not None
    assert (address.port, address.token) == (41234, TOKEN)
    assert TOKEN not in repr(address)


def test_the_server_gets_its_token_by_environment_and_listens_on_loopback(db: None) -> None:
    job = Job(pk=7, template=Template.JUPYTER, command="jupyter lab")
    lines = session_command_lines(job)
    script = "\n".join(lines)
    start = lines[-1]
    assert start.startswith('JUPYTER_TOKEN="$portal_lab_token" jupyter lab ')
    assert "--ip=127.0.0.1" in start and "--port-retries=0" in start
    assert f"--ServerApp.base_url={lab_base_url(7)}" in start
    # Never on a command line every user of the node reads in ps.
    assert "--IdentityProvider.token" not in script and "--ServerApp.token" not in script
    assert "umask 077" in script and "session.json" in script


def test_a_session_job_script_starts_jupyterlab(project, owner, cluster) -> None:
    job, attempt = factories.job(
        project, owner, cluster, name="lab", template=Template.JUPYTER, command="jupyter lab"
    )
    script = render_batch_script(job=job, attempt=attempt, run_dir=RunDir("/runs/x"))
    assert f"--ServerApp.base_url=/sessions/{job.pk}/lab/" in script
    assert "torchrun" not in script.split("# --- the command")[1]


def _spec(**changes: object) -> JobSpec:
    values = {
        "name": "lab",
        "template": Template.JUPYTER,
        "command": "jupyter lab",
        "partition": "",
    }
    return factories.spec(**{**values, **changes})


def test_a_session_runs_on_one_node_and_one_command_line(db: None) -> None:
    assert validate_spec(spec=_spec(), partitions={}, quota=None) == {}
    errors = validate_spec(spec=_spec(nodes=2, command="a\nb"), partitions={}, quota=None)
    assert "one node" in errors["nodes"][0]
    assert "JupyterLab session" in errors["command"][0]
