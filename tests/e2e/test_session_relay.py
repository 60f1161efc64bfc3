"""A JupyterLab session on the sandbox reached through the srun relay (issue 39): a cell runs
on its kernel through the portal's proxy (HTTP and the kernel's WebSocket), each stream a
step of the session's own job; the cluster's tunnel setting still reaches it too. And a
relayed stream on its own, through the real sshd and srun."""

import json
import os
import shlex
import uuid
from datetime import timedelta

import pytest
from websockets.sync.client import ClientConnection, connect

from clusters.models import Cluster, SessionReach
from clusters.ssh import SSHError
from jobs.models import Job
from jobs.session_reach import SessionWay
from tests.e2e.session_lab import Lab, session_submit
from tests.e2e.test_session_browser import CELL
from tests.helpers import QUEUE_WAIT, sbatch, slurm_name, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(1200)]

# From the submission to the server answering (the first `up` after a pin change installs it).
START_WAIT = QUEUE_WAIT + 300


def _run_cell(ws: ClientConnection, code: str) -> str:
    """Execute `code` on the kernel; what it printed, once the kernel is idle again (its
    output can come after the execute_reply: another channel)."""
    msg_id = uuid.uuid4().hex
    header = {"msg_id": msg_id, "msg_type": "execute_request", "session": uuid.uuid4().hex}
    content = {"code": code, "silent": False, "store_history": False, "allow_stdin": False}
    ws.send(
        json.dumps(
            {
                "header": {**header, "username": "alice", "date": "", "version": "5.3"},
                "parent_header": {},
                "metadata": {},
                "content": {**content, "user_expressions": {}, "stop_on_error": True},
                "channel": "shell",
                "buffers": [],
            }
        )
    )
    printed, replied, idle = "", False, False
    while not (replied and idle):
        message = json.loads(ws.recv(timeout=120))
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            printed += content["text"]
        replied = replied or kind == "execute_reply"
        idle = idle or (kind == "status" and content["execution_state"] == "idle")
    return printed.strip()


def _relay_steps(alice, slurm_job_id: str) -> list[str]:
    """The job's steps running the relay (`python3`), as its owner sees them."""
    listed = alice.run(f"squeue -h -s -j {shlex.quote(slurm_job_id)} -o %j").text.split()
    return [name for name in listed if name == "python3"]


def test_a_session_runs_a_cell_through_the_srun_relay(
    asgi_server, celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    assert sandbox_cluster.session_reach == SessionReach.SRUN_RELAY  # the default
    job = session_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        name="relayed-notebook",
        time_limit=timedelta(minutes=20),
    )
    lab = Lab(asgi_server, job, researcher)
    wait_for(lab.answers, START_WAIT, "JupyterLab through the srun relay")
    attempt = Job.objects.get(pk=job.pk).attempts.get()
    channels = lab.url.replace("http", "ws", 1) + f"api/kernels/{lab.kernel_start()}/channels"
    headers = lab.headers

    with connect(channels, additional_headers=headers, open_timeout=120) as ws:
        printed = _run_cell(ws, CELL)
        # The kernel's socket is a relay step of the session's own job while it is open.
        assert _relay_steps(alice, attempt.slurm_job_id)
        # A long answer with no newline at its end crosses whole (srun --unbuffered).
        assert _run_cell(ws, 'print("é" * 100_000, end="")') == "é" * 100_000
    assert printed.startswith("torch says 2.13.0") and printed.endswith(" 3")

    # A cluster whose login node is its compute node may keep the tunnel: it still works.
    Cluster.objects.filter(pk=sandbox_cluster.pk).update(session_reach=SessionReach.TUNNEL)
    assert lab.answers()
    with connect(channels, additional_headers=headers, open_timeout=120) as ws:
        assert _run_cell(ws, "print(6 * 7)") == "42"


ECHO_SERVER = """
import socket
server = socket.create_server(("127.0.0.1", 0))
with open(NAME + ".port", "w") as out:
    out.write(str(server.getsockname()[1]))
while True:
    connection, _ = server.accept()
    while data := connection.recv(65536):
        connection.sendall(data)
    connection.close()
"""


def test_a_relayed_stream_is_binary_safe_and_stays_in_its_owners_job(
    sandbox_cluster, alice, bob
) -> None:
    """Through the real sshd and srun: every byte back as sent, the end passed on, a port
    nobody listens on refused without harm to the login, and another user's login refused a
    step in the job."""
    name = slurm_name("relay-echo")
    code = f"NAME = {name!r}\n{ECHO_SERVER}"
    wrap = shlex.quote(f"python3 -c {shlex.quote(code)}")
    job_id = sbatch(alice, f"--time=5 --job-name={name} --output=/dev/null --wrap {wrap}")
    try:
        port_file = shlex.quote(f"{name}.port")
        wait_for(lambda: alice.run(f"cat {port_file}").text.strip(), QUEUE_WAIT, "the server")
        port = int(alice.run(f"cat {port_file}").text)
        node = alice.run(f"squeue -h -j {job_id} -o %N").text.strip()
        tools = sandbox_cluster.slurm_tools
        stream = SessionWay(SessionReach.SRUN_RELAY, node, port, job_id, tools).open(alice)
        payload = bytes(range(256)) * 64 + b"\r\n\x00\x04\x03" + os.urandom(200_000)
        stream.sendall(payload)
        echoed = b""
        while len(echoed) < len(payload) and (chunk := stream.recv(65536)):
            echoed += chunk
        assert echoed == payload
        stream.shutdown_write()  # the server sees the end, closes, and so does the stream
        assert stream.recv(1) == b""
        stream.close()

        nobody = SessionWay(SessionReach.SRUN_RELAY, node, 1024, job_id, tools)
        with pytest.raises(SSHError, match="did not connect"):
            nobody.open(alice)
        assert alice.run("true").exit_status == 0
        with pytest.raises(SSHError, match="did not connect"):
            SessionWay(SessionReach.SRUN_RELAY, node, port, job_id, tools).open(bob)
    finally:
        alice.run(f"scancel {job_id}; rm -f -- {shlex.quote(f'{name}.port')}")
