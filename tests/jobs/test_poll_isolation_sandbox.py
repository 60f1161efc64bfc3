"""On the sandbox: carol's ~/.bashrc cannot slow alice's live log, nor swell a worker.

The pen test's finding (issue 33): a `sleep 25` in carol's ~/.bashrc made every tenant's
logs refresh every ~26 s instead of ~1 s, and the same file printing 150 MB raised a
worker from 161 to 306 MiB. Here the real worker with beat polls the sandbox; alice's
job prints a line every 0.25 s and carol's runs beside it. How often alice's stored log
grows is counted before carol's start-up turns hostile and after, in one test. Then
the sshd settings docs/operations.md asks of a site (a port of the portal's own) keep
carol's ~/.bashrc from running before the agent at all.
"""

import itertools
import os
import pwd
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from clusters.models import ClusterAccount
from devtools.servers import Server
from jobs.models import Attempt
from jobs.poll import accounts, backoff
from jobs.services import job_submit
from monitoring.models import LogFile
from projects.models import Membership
from tests.factories import spec
from tests.fixtures.sandbox import PrivateSshd, descendants, tenant_turn
from tests.helpers import QUEUE_WAIT, Printer, wait_for, worker_tag

# carol's start-up files turn hostile here, and every test that uses her account runs
# them (her polls, submissions, the examples' install): alone on the sandbox.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive, pytest.mark.timeout(600)]

WATCH_SECONDS = 60.0
SITE_KEYS_ROOT = Path("/etc/ssh")
MIB = 1024 * 1024


@pytest.fixture
def carol_user(transactional_db: None, sandbox_cluster, project) -> User:
    """The portal user `carol`, whose jobs run as the cluster user carol."""
    user = User.objects.get(username="carol")
    Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def carol_bashrc(sandbox_cluster) -> Iterator[Path]:
    """carol's ~/.bashrc, as it was again (as root) whatever happens; then, once no read of
    her account is in flight, her account is read as usual again for the tests after."""
    with tenant_turn("carol"):  # one test at a time turns carol hostile
        entry = pwd.getpwnam("carol")
        bashrc = Path(entry.pw_dir) / ".bashrc"
        saved = bashrc.read_bytes() if bashrc.exists() else None
        try:
            yield bashrc
        finally:
            if saved is None:
                bashrc.unlink(missing_ok=True)
            else:
                bashrc.write_bytes(saved)
            account = ClusterAccount.objects.get(cluster=sandbox_cluster, username="carol")
            time.sleep(accounts.READ_BUDGET + 2)  # a read begun before ends within its budget
            wait_for(lambda: backoff.probe_claim(account.pk, 60), 60, "carol's probe to end")
            backoff.delay_clear([account.pk])
            backoff.probe_release(account.pk)


def _hostile(bashrc: Path, line: str) -> None:
    """carol's ~/.bashrc with `line` first, as she could write it."""
    entry = pwd.getpwnam("carol")
    rest = bashrc.read_bytes() if bashrc.exists() else b""
    bashrc.write_bytes(line.encode() + b"\n" + rest)
    os.chown(bashrc, entry.pw_uid, entry.pw_gid)


def _stored(attempt: Attempt) -> int:
    sizes = LogFile.objects.filter(attempt=attempt, name="stdout.log").values_list(
        "size", flat=True
    )
    return next(iter(sizes), 0)


def _refresh_gaps(attempt: Attempt, seconds: float) -> list[float]:
    """Seconds between the times alice's stored log grew, watched for `seconds`."""
    grew: list[float] = []
    size, end = _stored(attempt), time.monotonic() + seconds
    while time.monotonic() < end:
        now = _stored(attempt)
        if now != size:
            size = now
            grew.append(time.monotonic())
        time.sleep(0.1)
    return [b - a for a, b in itertools.pairwise(grew)]


@pytest.fixture
def two_tenants(
    celery_worker, researcher, carol_user, project, sandbox_cluster
) -> Iterator[tuple[Attempt, Attempt]]:
    """alice's printing job and carol's, both running and read; stopped afterwards."""
    printers = [Printer.new(every=0.25), Printer.new(every=1.0, user="carol")]
    attempts: list[Attempt] = []
    try:
        for user, printer in zip((researcher, carol_user), printers, strict=True):
            job = job_submit(
                user=user,
                project=project,
                cluster=sandbox_cluster,
                spec=spec(name=f"{user.username}-printer", command=printer.command),
            )
            attempts.append(Attempt.objects.get(job=job))
        for attempt in attempts:
            wait_for(lambda a=attempt: _stored(a) > 0, QUEUE_WAIT, "both jobs to run and print")
        yield attempts[0], attempts[1]
    finally:
        for printer in printers:
            printer.stop()


def test_a_25_s_bashrc_on_one_account_leaves_anothers_live_log_refreshing(
    two_tenants: tuple[Attempt, Attempt], carol_bashrc: Path
) -> None:
    alice, carol = two_tenants
    usual = _refresh_gaps(alice, 15.0)
    _hostile(carol_bashrc, "sleep 25")
    hostile = _refresh_gaps(alice, WATCH_SECONDS)
    print(f"alice's refresh gaps: usual {sorted(usual)}, carol hostile {sorted(hostile)}")
    # Before: every gap ~26 s (the accounts read one after another). Now carol's first
    # slow read holds one poll up to its budget; then she is left out of the reads.
    assert len(hostile) > WATCH_SECONDS / 4
    assert statistics.median(hostile) <= statistics.median(usual) + 1.0
    assert len([gap for gap in hostile if gap > 5.0]) <= 1
    assert max(hostile) < 15.0
    delay = backoff.account_delay(account_id=carol.account_id)
    assert delay is not None
    assert delay.why in (
        "its read did not finish within 10 s",
        "its shell start-up did not finish within 10 s",
    )


def _rss(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/statm").read_text().split()
    except OSError:  # gone meanwhile
        return 0
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def _peaks(pids: list[int], seconds: float) -> dict[int, int]:
    """Each process's largest resident size, sampled every 0.05 s for `seconds`."""
    peak = dict.fromkeys(pids, 0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for pid in pids:
            peak[pid] = max(peak[pid], _rss(pid))
        time.sleep(0.05)
    return peak


def test_a_150_mb_shell_flood_does_not_grow_a_worker_past_its_cap(
    two_tenants: tuple[Attempt, Attempt], carol_bashrc: Path, celery_worker: Server
) -> None:
    """The worker's processes are sampled before and while carol's login floods: each
    grows by less than the cap on what a read of carol takes (a few MiB) and slack."""
    alice, carol = two_tenants
    assert celery_worker.proc is not None
    pids = [celery_worker.proc.pid, *descendants(celery_worker.proc.pid)]
    before = _peaks(pids, 3.0)
    _hostile(carol_bashrc, "head -c 150000000 /dev/zero")
    during = _peaks(pids, 20.0)
    growth = max(during[pid] - before[pid] for pid in pids)
    print(f"worker processes' largest growth: {growth / MIB:.1f} MiB")
    delay = backoff.account_delay(account_id=carol.account_id)
    assert delay is not None and delay.why.startswith("it sent more than ")
    assert growth < 48 * MIB  # was 145 MiB: the whole flood read until the deadline
    assert _refresh_gaps(alice, 10.0)  # alice's log still arrives


def _site_config(sshd: PrivateSshd, keys: Path) -> Path:
    """The sandbox's sshd_config and the block docs/operations.md asks of a site: keys from
    root's files only, no ~/.ssh/rc, and bash counting itself a second-level shell."""
    text = sshd.config.read_text()
    global_env = next(line for line in text.splitlines() if line.startswith("SetEnv "))
    config = sshd.config.with_name(f"sshd_config-site-{worker_tag()}")
    config.write_text(
        f"{text}Match LocalPort {sshd.port}\n"
        f"    AuthorizedKeysFile {keys}/%u\n"
        "    PermitUserRC no\n"
        f"    {global_env} SHLVL=1\n"
        "    DisableForwarding yes\n"
        "    PermitTTY no\n"
    )
    return config


@pytest.fixture
def site_sshd(sandbox_cluster) -> Iterator[PrivateSshd]:
    """A private sshd with the site's settings; the cluster row points at it meanwhile."""
    sshd = PrivateSshd(settings.SANDBOX_STATE_DIR, f"site-{worker_tag()}")
    # Where a site keeps them: root's directories all the way up. sshd's StrictModes refuses
    # a key file under a group- or world-writable directory (a checkout under /tmp).
    keys = SITE_KEYS_ROOT / f"portal-keys-{worker_tag()}"
    keys.mkdir(mode=0o755, exist_ok=True)
    for user in ("alice", "bob", "carol", "portal-svc"):
        home = Path(pwd.getpwnam(user).pw_dir)
        (keys / user).write_bytes((home / ".ssh" / "authorized_keys").read_bytes())
        (keys / user).chmod(0o644)
    sshd.config = _site_config(sshd, keys)
    port = sandbox_cluster.ssh_port
    sshd.start()
    sandbox_cluster.ssh_port = sshd.port
    sandbox_cluster.save(update_fields=["ssh_port"])
    try:
        yield sshd
    finally:
        sandbox_cluster.ssh_port = port
        sandbox_cluster.save(update_fields=["ssh_port"])
        sshd.stop()
        sshd.config.unlink(missing_ok=True)
        for path in keys.iterdir():
            path.unlink()
        keys.rmdir()


def test_with_the_sites_sshd_settings_a_bashrc_never_runs_before_the_agent(
    two_tenants: tuple[Attempt, Attempt], carol_bashrc: Path, site_sshd: PrivateSshd
) -> None:
    alice, carol = two_tenants
    ran = carol_bashrc.with_name(f"bashrc-ran-{worker_tag()}")
    ran.unlink(missing_ok=True)
    usual = _refresh_gaps(alice, 10.0)
    _hostile(carol_bashrc, f"touch {ran}; sleep 25")
    try:
        alice_gaps = _refresh_gaps(alice, 20.0)
        carol_size = _stored(carol)
        wait_for(lambda: _stored(carol) > carol_size, 60, "carol's own log to grow")
        assert not ran.exists()  # no poll of carol ran her ~/.bashrc
    finally:
        ran.unlink(missing_ok=True)
    # Nothing held alice's reads: no gap near the 10 s a first slow read of carol would cost.
    assert max(alice_gaps) <= max(usual) + 5.0
    assert backoff.account_delay(account_id=carol.account_id) is None
