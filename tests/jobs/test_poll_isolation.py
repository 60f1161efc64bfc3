"""One tenant's login shell cannot hold up another's monitoring (issue 33, point 3).

The polls run the real agent in local shells, one home per cluster account (as in
tests/monitoring/test_backlog.py); only the SSH hop is replaced. carol's shell start-up
is what her hostile ~/.bashrc makes it: it waits, or it floods. The watcher records
which account's reply each read took in, in order, and marks it read on disk.
"""

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.agent import AgentReply, FileRead, ListingRead
from clusters.models import ClusterAccount
from clusters.ssh import Endpoint
from devtools.servers import wait_until
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll import accounts, backoff, pipeline
from jobs.poll import cycle as polling
from jobs.tasks import poll_cluster
from portal_lib.health import HEALTH_KEY, health_redis
from projects.models import Project
from tests import factories
from tests.clusters.test_agent_client import LocalShell
from tests.helpers import METRICS_TOKEN, bearer, metric_samples

pytestmark = pytest.mark.django_db


class Homes:
    """Stands in for the SSH pool: each account's session is a local shell in its own home."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.shells: dict[str, LocalShell] = {}

    def add(self, username: str) -> LocalShell:
        home = self.root / username
        home.mkdir()
        self.shells[username] = LocalShell(home)
        return self.shells[username]

    @contextlib.contextmanager
    def session(self, endpoint: Endpoint) -> Iterator[LocalShell]:
        yield self.shells[endpoint.username]


@dataclass
class Recorder:
    """A watcher that asks for no file and notes, in order, whose replies it took in."""

    root: Path
    reads: list[str] = field(default_factory=list)

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        return [], []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        for username in {a.account.username for a in attempts if a.account}:
            self.reads.append(username)
            (self.root / f"read-{username}").touch()
        return set()


@dataclass
class Tenants:
    alice: ClusterAccount
    carol: ClusterAccount
    alice_attempt: Attempt
    carol_attempt: Attempt
    homes: Homes
    recorder: Recorder

    def poll(self) -> polling.PollResult:
        return polling.cluster_poll(cluster_id=self.alice.cluster_id, parts=(polling.FILES,))


@pytest.fixture
def tenants(
    project: Project, owner: User, member: User, tmp_path: Path, monkeypatch: Any
) -> Iterator[Tenants]:
    """alice's account (olivia's) and carol's (mia's), one running attempt each; carol's
    attempt first, so that a poll going one account after another reads her first."""
    cluster = factories.cluster("isolation")
    homes = Homes(tmp_path)
    recorder = Recorder(tmp_path)
    made: dict[str, tuple[ClusterAccount, Attempt]] = {}
    for username, user in (("carol", member), ("alice", owner)):
        shell = homes.add(username)
        account = ClusterAccount.objects.create(
            cluster=cluster, user=user, username=username, private_key="x"
        )
        _, attempt = factories.job(project, user, cluster, name=f"{username}-train")
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.RUNNING, account=account, slurm_job_id=str(attempt.pk),
            run_dir=str(shell.home),
        )  # fmt: skip
        made[username] = account, attempt
    monkeypatch.setattr(polling, "pool", homes)
    monkeypatch.setattr(
        pipeline, "_registered", pipeline.Pipeline(watchers=(recorder,), page_watchers=())
    )
    (alice, alice_attempt), (carol, carol_attempt) = made["alice"], made["carol"]
    ids = [alice.pk, carol.pk]
    try:
        yield Tenants(alice, carol, alice_attempt, carol_attempt, homes, recorder)
    finally:
        backoff.delay_clear(ids)
        for pk in ids:
            backoff.probe_release(pk)


def _values(samples: list[Any], name: str, labels: dict[str, str]) -> list[float]:
    return [v for sample, found, v in samples if sample == name and labels.items() <= found.items()]


def _overdue(account: ClusterAccount) -> None:
    """The account's wait is over, as it would be some minutes later."""
    delay = backoff.delays_read([account.pk])[account.pk]
    backoff._write(account.pk, backoff.Delay(delay.why, delay.streak, time.time() - 1))


def test_a_login_shell_that_waits_does_not_hold_up_another_accounts_read(
    tenants: Tenants,
) -> None:
    """carol's start-up waits until alice's reply has been taken in: read one account after
    another (carol first), carol would wait out her whole budget and alice come after."""
    tenants.homes.shells[
        "carol"
    ].banner = f"until [ -e {tenants.homes.root}/read-alice ]; do sleep 0.05; done; "
    result = tenants.poll()
    assert tenants.recorder.reads == ["alice", "carol"]
    assert result.unreachable == [] and result.delayed == []


def test_an_account_past_its_budget_is_left_out_and_its_jobs_pages_say_why(
    tenants: Tenants, monkeypatch: Any, owner: User
) -> None:
    monkeypatch.setattr(accounts, "READ_BUDGET", 1.0)
    tenants.homes.shells["carol"].banner = "sleep 30; "
    first = tenants.poll()
    assert tenants.recorder.reads == ["alice"]
    assert first.unreachable == ["carol"]
    delay = backoff.account_delay(account_id=tenants.carol.pk)
    assert delay is not None and delay.why == "its read did not finish within 1 s"
    assert delay.until > time.time() + backoff.FIRST_WAIT - 5

    carol_calls = len(tenants.homes.shells["carol"].commands)
    second = tenants.poll()
    assert second.delayed == ["carol"] and second.unreachable == []
    assert tenants.recorder.reads == ["alice", "alice"]
    assert len(tenants.homes.shells["carol"].commands) == carol_calls  # not even tried

    client = Client()
    client.force_login(owner)
    carol_page = client.get(f"/jobs/{tenants.carol_attempt.job_id}/").content.decode()
    alice_page = client.get(f"/jobs/{tenants.alice_attempt.job_id}/").content.decode()
    assert "Monitoring of this account is delayed: its read did not finish within 1 s" in carol_page
    assert 'id="account-delay"' not in alice_page


def test_a_flooding_login_shell_is_cut_at_its_cap_left_out_and_counted(
    tenants: Tenants, settings: Any
) -> None:
    """A read that asks for no file may bring a megabyte of banner besides the reply."""
    settings.PORTAL_METRICS_TOKEN = METRICS_TOKEN
    health_redis().delete(HEALTH_KEY)
    tenants.homes.shells["carol"].banner = "head -c 20000000 /dev/zero; "
    poll_cluster(tenants.alice.cluster_id, polling.FILES)
    assert tenants.recorder.reads == ["alice"]
    delay = backoff.account_delay(account_id=tenants.carol.pk)
    assert delay is not None and delay.why == "it sent more than 1 MiB, which is cut"
    poll_cluster(tenants.alice.cluster_id, polling.FILES)
    assert tenants.recorder.reads == ["alice", "alice"]

    response = bearer(METRICS_TOKEN).get("/metrics")
    samples = metric_samples(response.content.decode())
    on = {"cluster": "isolation", "part": "files"}
    assert _values(samples, "portal_cluster_output_capped_total", on) == [1.0]
    assert _values(samples, "portal_cluster_accounts_delayed_total", on) == [1.0]


def test_a_probe_times_the_bare_start_up_and_reopens_the_account_once_it_is_quick(
    tenants: Tenants, monkeypatch: Any
) -> None:
    monkeypatch.setattr(accounts, "READ_BUDGET", 1.0)
    carol = tenants.homes.shells["carol"]
    carol.banner = "sleep 30; "
    tenants.poll()
    _overdue(tenants.carol)
    result = tenants.poll()  # left out, and a probe started in the background
    assert result.delayed == ["carol"] and tenants.recorder.reads == ["alice", "alice"]
    wait_until(
        lambda: backoff.delays_read([tenants.carol.pk])[tenants.carol.pk].streak == 2,
        30,
        "the probe's note",
    )
    delay = backoff.account_delay(account_id=tenants.carol.pk)
    assert delay is not None
    assert delay.why == "its shell start-up did not finish within 1 s"
    assert delay.until - time.time() > 2 * backoff.FIRST_WAIT - 5  # twice as long

    carol.banner = ""  # carol fixed her ~/.bashrc
    _overdue(tenants.carol)
    assert tenants.poll().delayed == ["carol"]
    wait_until(lambda: backoff.account_delay(account_id=tenants.carol.pk) is None, 30, "reopen")
    assert tenants.poll().delayed == []
    assert sorted(tenants.recorder.reads[-2:]) == ["alice", "carol"]
    assert backoff.delays_read([tenants.carol.pk]) == {}  # a quick read of its own clears it


def test_a_slow_read_is_not_waited_for_and_its_account_left_out_after(
    tenants: Tenants, monkeypatch: Any
) -> None:
    """Past SLOW_READ (its commands' timeouts aside) the poll goes on without the call: carol's
    start-up waits for a file the test makes only once the poll has returned, so the poll
    returning at all, well within carol's 10 s budget, is what is tested."""
    monkeypatch.setattr(accounts, "SLOW_READ", 0.5)
    release = tenants.homes.root / "release-carol"
    tenants.homes.shells["carol"].banner = f"until [ -e {release} ]; do sleep 0.05; done; "
    try:
        result = tenants.poll()
    finally:
        release.touch()
    assert tenants.recorder.reads == ["alice"]  # carol's call ends in the background, unread
    assert result.unreachable == ["carol"]
    delay = backoff.account_delay(account_id=tenants.carol.pk)
    assert delay is not None and delay.why == "its read did not finish within 0.5 s"
    assert tenants.poll().delayed == ["carol"]
    assert tenants.recorder.reads == ["alice", "alice"]
