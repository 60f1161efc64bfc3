"""`submit(code=".")` against a live portal and the sandbox: the job runs a module of the
working tree (uncommitted change included), records commit, branch and diff, and a clone
runs the very same snapshot, stored once."""

import subprocess
from pathlib import Path

import pytest
from portal_client import Portal

from accounts.services import token_issue
from jobs.code.snapshots import snapshot_path
from jobs.models import Attempt, CodeSnapshot

pytestmark = pytest.mark.sandbox

MODULE = """import pathlib, sys

from trainer.settings import LR

# Run from the unpacked code directory, as a module of it.
print(f"cwd={pathlib.Path.cwd().name} lr={LR}")
for step in range(1, 4):
    print(f"step {step}, loss={LR / step:.3f}")
"""


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "research"
    (repo / "trainer").mkdir(parents=True)
    (repo / "trainer" / "__init__.py").write_text("")
    (repo / "trainer" / "main.py").write_text(MODULE)
    (repo / "trainer" / "settings.py").write_text("LR = 0.1\n")
    (repo / ".gitignore").write_text("data/\n")
    (repo / "data").mkdir()
    (repo / "data" / "shard.bin").write_bytes(b"\0" * 4096)  # ignored: never sent
    _git(repo, "init", "-q", "-b", "lr-sweep")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=Alice", "-c", "user.email=a@x", "commit", "-qm", "baseline")
    # The change under test, not committed yet.
    (repo / "trainer" / "settings.py").write_text("LR = 0.3\n")
    return repo


def test_submit_code_runs_the_working_tree_and_a_clone_reuses_its_snapshot(
    celery_worker, asgi_server: str, researcher, sandbox_cluster, repo: Path, monkeypatch
) -> None:
    monkeypatch.chdir(repo)
    token = token_issue(user=researcher, name="code test", scope="submit").text
    started = []
    with Portal(asgi_server, token) as portal:
        try:
            job = portal.submit(
                project="vision",
                cluster=sandbox_cluster.name,
                name="from my checkout",
                command="python3 -m trainer.main",
                code=".",
                gpus_per_node=1,
                cpus_per_task=1,
                time_limit=600,
            )
            started.append(job)
            assert job.wait(timeout=240, progress=False).state == "COMPLETED", job.events()
            assert "".join(job.logs()).splitlines() == [
                "cwd=code lr=0.3",
                "step 1, loss=0.300",
                "step 2, loss=0.150",
                "step 3, loss=0.100",
            ]
            data = job.refresh().data
            assert data["code_commit"] == _git(repo, "rev-parse", "HEAD")
            assert data["code_branch"] == "lr-sweep"
            assert "-LR = 0.1\n+LR = 0.3" in data["code_diff"]
            sha = data["code"]["sha256"]
            assert data["code"]["files"] == 4  # .gitignore and trainer/*: no data/

            clone = job.clone(name="same code again")
            started.append(clone)
            assert clone.data["code"]["sha256"] == sha
            assert clone.data["code_diff"] == data["code_diff"]
            assert clone.wait(timeout=240, progress=False).state == "COMPLETED", clone.events()
            assert "".join(clone.logs()).splitlines()[0] == "cwd=code lr=0.3"

            # Submitting the same tree again uploads nothing new.
            again = portal.upload_code("vision", ".")
            assert again["code"] == sha
            assert CodeSnapshot.objects.filter(sha256=sha).count() == 1
            assert snapshot_path(sha).is_file()
            run_dirs = set(
                Attempt.objects.filter(job_id__in=[job.id, clone.id]).values_list(
                    "run_dir", flat=True
                )
            )
            assert len(run_dirs) == 2  # each attempt unpacks into its own run directory
        finally:
            for each in started:
                if not each.refresh().is_finished:
                    each.cancel()
