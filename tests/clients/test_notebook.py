"""The example notebook runs top to bottom (nbclient, a real kernel) against the sandbox.

The notebook submits the DDP example on two nodes through the client, with its
code (the examples directory, packed and unpacked into the run directory: nothing
is copied to the cluster beforehand), follows
its log, waits and plots the loss; its last cell prints a JSON summary that
this test checks against the portal's own records.
"""

import json
import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from accounts.services import token_issue
from jobs.enums import State
from jobs.models import Job
from monitoring.series.read import series_read
from tests.helpers import CLIENT_SRC, EXAMPLE

pytestmark = pytest.mark.sandbox

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "portal_client.ipynb"
STEPS = 20


def test_example_notebook_runs_the_ddp_example(
    celery_worker, asgi_server: str, researcher, sandbox_cluster, alice, monkeypatch, tmp_path
) -> None:
    if alice.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    token = token_issue(user=researcher, name="notebook", scope="submit").text
    # The kernel inherits this environment: where the portal is, and the client's source.
    for name, value in {
        "PORTAL_URL": asgi_server,
        "PORTAL_TOKEN": token,
        "PORTAL_PROJECT": "vision",
        "PORTAL_CLUSTER": sandbox_cluster.name,
        "PORTAL_EXAMPLE_STEPS": str(STEPS),
        "PORTAL_EXAMPLE_CODE": str(EXAMPLE.parent),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(CLIENT_SRC), os.environ.get("PYTHONPATH")])
        ),
        # The figure as JSON: no browser, no plotly.js in the output.
        "PLOTLY_RENDERER": "json",
    }.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook,
        timeout=240,
        # The kernel's start: nbclient waits 60 s by default, which a busy machine exceeded
        # once (a fresh clone's CI run with one core kept busy).
        startup_timeout=240,
        kernel_name="python3",
        resources={"metadata": {"path": tmp_path}},
    ).execute()

    outputs = [o for cell in notebook.cells for o in cell.get("outputs", [])]
    printed = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "world_size=2" in printed and f"step {STEPS}, loss=" in printed
    summary = json.loads(printed.strip().splitlines()[-1])
    job = Job.objects.get(pk=summary["job"])
    assert job.state == State.COMPLETED and summary["state"] == "COMPLETED"
    assert job.code is not None and job.code_commit  # the repository's checkout
    assert summary["steps"] == STEPS and summary["last_loss"] < summary["first_loss"]
    stored = series_read(attempt_id=job.attempts.get().pk, name="loss")
    assert stored.ys[-1] == pytest.approx(summary["last_loss"])
    # job.wait() drew its progress in place in the notebook, ending at the final state.
    progress = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("<progress" in html and "COMPLETED" in html for html in progress), progress
    figures = [o for o in outputs if "application/json" in o.get("data", {})]
    assert figures and figures[0]["data"]["application/json"]["data"][0]["name"] == "loss"
