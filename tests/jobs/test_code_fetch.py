"""A job's code from a git URL: fetched once, in the submission, under the portal's fences."""

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from jobs.code.fetch import git_fetch
from jobs.code.snapshots import job_code_fetch, snapshot_path
from jobs.enums import State
from jobs.errors import JobError
from jobs.models import Attempt, CodeSnapshot
from jobs.submission import attempt_submit
from tests import factories


@pytest.fixture
def origin(tmp_path: Path) -> tuple[Path, str]:
    repo = tmp_path / "origin"
    (repo / "trainer").mkdir(parents=True)
    (repo / "trainer" / "main.py").write_text("print('from git')\n")

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "first")
    return repo, git("rev-parse", "HEAD")


@pytest.fixture
def local_git(settings, tmp_path: Path) -> None:
    # file:// stands in for an https server here; production allows https only.
    settings.CODE_GIT_ALLOW_LOCAL = True
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"


def test_a_git_url_becomes_a_snapshot_with_its_commit_once(
    local_git, origin, project, member, cluster
) -> None:
    repo, commit = origin
    job, _ = factories.job(
        project, member, cluster, code_git_url=f"file://{repo}", code_git_ref="main"
    )
    job_code_fetch(job=job)
    assert (job.code_commit, job.code_branch) == (commit, "main")
    assert job.code is not None and job.code.files == 1
    with tarfile.open(fileobj=io.BytesIO(snapshot_path(job.code.sha256).read_bytes())) as archive:
        assert archive.getnames() == ["trainer", "trainer/main.py"]
    # A second fetch (a redelivered task) keeps the first snapshot.
    first = job.code_id
    job_code_fetch(job=job)
    assert job.code_id == first and CodeSnapshot.objects.count() == 1


def test_a_failed_fetch_fails_the_attempt_with_gits_words(
    local_git, tmp_path, project, member, cluster
) -> None:
    _, attempt = factories.job(
        project, member, cluster, code_git_url=f"file://{tmp_path / 'nowhere'}"
    )
    attempt_submit(attempt_id=attempt.pk)
    attempt = Attempt.objects.get(pk=attempt.pk)
    assert attempt.state == State.FAILED
    assert "git could not fetch the code" in attempt.reason


@pytest.mark.parametrize("url", ["https://127.0.0.1/repo.git", "https://localhost/repo.git"])
def test_a_host_on_the_portals_own_network_is_not_fetched(settings, url: str) -> None:
    settings.CODE_GIT_ALLOW_LOCAL = False
    with pytest.raises(JobError, match="private or local address"):
        git_fetch(url=url, ref="main", store=lambda chunks: None)


def test_file_urls_are_refused_outside_the_tests(settings, origin) -> None:
    settings.CODE_GIT_ALLOW_LOCAL = False
    with pytest.raises(JobError, match="https://"):
        git_fetch(url=f"file://{origin[0]}", ref="main", store=lambda chunks: None)


def test_a_repository_over_the_cap_is_stopped(local_git, settings, origin) -> None:
    settings.CODE_GIT_MAX_BYTES = 10
    with pytest.raises(JobError, match="passes the cap"):
        git_fetch(url=f"file://{origin[0]}", ref="main", store=lambda chunks: list(chunks))


@pytest.fixture
def long_link_origin(tmp_path: Path) -> Path:
    """A repository with a symbolic link to 20,000 digits: `git archive` writes its target
    into a pax header, which a vulnerable tarfile parses in quadratic time (issue 33).
    Made with plumbing, as no file system holds such a link."""
    repo = tmp_path / "hostile"
    repo.mkdir()

    def git(*args: str, data: bytes | None = None) -> str:
        return (
            subprocess.run(
                ["git", "-C", str(repo), *args], input=data, check=True, capture_output=True
            )
            .stdout.decode()
            .strip()
        )

    git("init", "-q", "-b", "main")
    for mode, name, data in [("120000", "link", b"7" * 20_000), ("100644", "a.py", b"x = 1\n")]:
        blob = git("hash-object", "-w", "--stdin", data=data)
        git("update-index", "--add", "--cacheinfo", f"{mode},{blob},{name}")
    commit = git(
        "-c", "user.name=t", "-c", "user.email=t@x", "commit-tree", git("write-tree"), "-m", "x"
    )
    git("update-ref", "refs/heads/main", commit)
    return repo


def test_a_fetched_tree_gets_the_archive_check(
    local_git, long_link_origin, project, member, cluster
) -> None:
    _, attempt = factories.job(
        project, member, cluster, code_git_url=f"file://{long_link_origin}", code_git_ref="main"
    )
    attempt_submit(attempt_id=attempt.pk)
    attempt = Attempt.objects.get(pk=attempt.pk)
    assert attempt.state == State.FAILED
    assert "over the limit of 16384 bytes (16 KiB) for one header" in attempt.reason
    assert not CodeSnapshot.objects.exists()
