"""The archive check runs in a child process under limits (issue 33, point 1).

`portal_lib.sandboxed.run_limited` sets CPU, memory, file and wall-time limits on the
child before it reads its input; `jobs.code.checker.archive_check` runs the unpacker's
check there, and a snapshot's unpacked size is capped by its project's code quota.
"""

import signal
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from devtools.archives import END, finding_tar, regular, slow_pax_tar, xz_bomb
from jobs.code import checker
from jobs.code.checker import archive_check, unpacked_cap
from jobs.code.snapshots import snapshot_store
from jobs.errors import JobError
from jobs.models import CodeSnapshot
from portal_lib.sandboxed import Limits, run_limited
from projects.models import Project

MIB = 1024 * 1024
TIGHT = Limits(cpu_seconds=1, memory_bytes=256 * MIB, wall_seconds=30.0)


def _python(code: str, limits: Limits = TIGHT) -> tuple[int, bytes, bool]:
    """`code` in a limited child, begun once its input ends, as the archive check's child
    begins with its request: the limits are set between its start and its input, so code
    run straight from argv could outrun them on a busy machine."""
    waits = f"import sys\nsys.stdin.read()\n{code}"
    outcome = run_limited([sys.executable, "-I", "-c", waits], stdin=b"go", limits=limits)
    return outcome.returncode, outcome.stderr, outcome.past_limits


def test_a_child_spinning_is_killed_at_its_cpu_limit() -> None:
    code, _, past = _python("while True: pass")
    assert past and code in (-signal.SIGXCPU, -signal.SIGKILL)


def test_a_child_cannot_take_more_memory_than_its_limit() -> None:
    code, stderr, past = _python("bytearray(1024 * 1024 * 1024)")
    assert code == 1 and b"MemoryError" in stderr and not past


def test_a_child_writes_no_file(tmp_path: Path) -> None:
    target = tmp_path / "written"
    code, stderr, _ = _python(f"with open({str(target)!r}, 'w') as f: f.write('x' * 10)")
    assert code == 1 and b"File too large" in stderr
    assert target.stat().st_size == 0


def test_a_child_past_its_wall_time_is_killed() -> None:
    sleeper = run_limited(
        [sys.executable, "-I", "-c", "import time; time.sleep(60)"],
        stdin=b"",
        limits=Limits(cpu_seconds=60, memory_bytes=256 * MIB, wall_seconds=0.5),
    )
    assert sleeper.timed_out and sleeper.past_limits and sleeper.returncode == -signal.SIGKILL


def test_the_findings_archive_is_refused_by_the_check_under_its_field(tmp_path: Path) -> None:
    path = tmp_path / "finding.tar"
    path.write_bytes(finding_tar())
    with pytest.raises(JobError) as refused:
        archive_check(path, max_bytes=MIB, max_files=10)
    assert "over the limit of 16384 bytes (16 KiB)" in refused.value.errors["archive"][0]
    assert refused.value.status == 400


def test_a_check_past_its_limits_is_refused_naming_them(monkeypatch, tmp_path: Path) -> None:
    # Each header is under the limit; together they cost a vulnerable tarfile seconds.
    path = tmp_path / "slow.tar"
    path.write_bytes(slow_pax_tar(members=8, digits=16_000))
    monkeypatch.setattr(checker, "CHECK_LIMITS", TIGHT)
    with pytest.raises(JobError) as refused:
        archive_check(path, max_bytes=MIB, max_files=100)
    assert "passed the check's limits (30 s, 1 s of CPU and 256 MiB of memory)" in str(
        refused.value.errors["archive"][0]
    )


def test_a_good_archive_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "good.tar"
    path.write_bytes(regular("a.py", b"x = 1\n") + regular("b.py", b"y = 2\n") + END)
    assert archive_check(path, max_bytes=MIB, max_files=10) == {"files": 2, "bytes": 12}


@pytest.mark.django_db
def test_the_unpacked_size_is_capped_by_the_projects_code_quota(
    settings, tmp_path: Path, project: Project, member: User
) -> None:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    assert unpacked_cap(project) == settings.CODE_UNPACKED_MAX_BYTES  # the site's, by default
    project.code_quota_mib = 64
    project.save()
    assert unpacked_cap(project) == 64 * MIB
    bomb = xz_bomb(1024 * MIB)
    with pytest.raises(JobError) as refused:
        snapshot_store(user=member, project=project, chunks=[bomb])
    assert f"the files pass the cap of {64 * MIB} bytes" in refused.value.errors["archive"][0]
    assert not CodeSnapshot.objects.exists()
    assert not [p for p in Path(settings.CODE_SNAPSHOT_DIR).rglob("*") if p.is_file()]


@pytest.mark.django_db
def test_the_findings_bomb_is_refused_by_its_ratio_under_the_default_caps(
    settings, tmp_path: Path, project: Project, member: User
) -> None:
    """The pen test's 152 KiB xz of 1 GiB fits the site's cap and the project's quota, so
    only its ratio refuses it: nothing kept, nothing written per job."""
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    bomb = xz_bomb(1024 * MIB)
    assert unpacked_cap(project) >= 1024 * MIB  # the byte cap alone would take it
    with pytest.raises(JobError) as refused:
        snapshot_store(user=member, project=project, chunks=[bomb])
    said = refused.value.errors["archive"][0]
    assert f"over 100 times the archive's {len(bomb)} bytes" in said
    assert "compression bomb" in said
    assert not CodeSnapshot.objects.exists()
    assert not [p for p in Path(settings.CODE_SNAPSHOT_DIR).rglob("*") if p.is_file()]


@pytest.mark.django_db
def test_a_small_archive_may_unpack_to_the_floor_at_any_ratio(
    settings, tmp_path: Path, project: Project, member: User
) -> None:
    """Under CODE_UNPACKED_RATIO_FLOOR_BYTES the ratio is no rule: 8 MiB of zeros (a few
    KiB of xz) is kept; with the floor lowered the same archive is refused."""
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    zeros = xz_bomb(8 * MIB)
    snapshot, created = snapshot_store(user=member, project=project, chunks=[zeros])
    assert created and snapshot.unpacked_size == 8 * MIB
    settings.CODE_UNPACKED_RATIO_FLOOR_BYTES = MIB
    with pytest.raises(JobError, match="compression bomb"):
        snapshot_store(user=member, project=project, chunks=[xz_bomb(4 * MIB)])
