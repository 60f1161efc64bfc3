"""When a job would start: for the form's choice and a few alternatives, before submitting.

The answer is the scheduler's own (`sbatch --test-only`, clusters.slurm.test_only), asked as
the user's cluster account, corrected by the portal's history of estimates against actual
starts on that cluster and partition (jobs.queue.accuracy).

Alternatives, at most MAX_OPTIONS rows with the choice first: the same job on each other
cluster the project may use, on another partition of the chosen cluster that fits it,
with half the GPUs, and with half the time limit (a shorter limit can backfill into a gap).

A project whose concurrency limit is full would hold the job in its line first (jobs.queue.
line): such an option says so, with Slurm's start as the earliest it could be.

Cost: every option of one cluster is asked in one SSH command, and each answer is cached
for ANSWER_SECONDS by cluster, account and options; the form asks only once a burst of
typing has settled (static/js/starts.js), so a page open or a keystroke costs no query.
"""

import contextlib
import dataclasses
import hashlib
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.cache import cache

from clusters.errors import ClusterError
from clusters.inventory import PartitionLimits
from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint, account_for
from clusters.slurm import Slurm, TestOnly, scheduling_options
from clusters.ssh import pool
from jobs.estimate import project_room, spec_request
from jobs.preview import script_preview
from jobs.queue.accuracy import StartHistory, start_history
from jobs.queue.waits import format_wait
from jobs.specs import JobSpec
from portal_lib.cache import CACHE_DOWN
from projects.models import Project
from projects.quota import concurrency_verdict

logger = logging.getLogger(__name__)

ANSWER_SECONDS = 60
MAX_OPTIONS = 6
# A shorter time limit is offered only down to this; below it a job rarely does real work.
MIN_SHORTER_LIMIT = timedelta(minutes=10)
ANSWER_KEY = "jobs:forecast:{digest}"


@dataclass(frozen=True)
class Option:
    """One way to run the job: what changed from the form's choice, and the spec."""

    label: str
    cluster: Cluster
    spec: JobSpec
    chosen: bool = False


@dataclass(frozen=True)
class Forecast:
    option: Option
    slurm_start: datetime | None  # Slurm's answer; None with `problem`
    expected_start: datetime | None  # corrected by the history
    history: StartHistory | None
    problem: str = ""  # why there is no start: no account, Slurm refused, unreachable
    # Why it would first wait in its project's line (jobs.queue.line): Slurm's start is then
    # the earliest it could start, once the project has room.
    line: str = ""

    def as_json(self, now: datetime) -> dict[str, Any]:
        def wait(at: datetime | None) -> str:
            if at is None:
                return ""
            return "now" if at <= now + timedelta(seconds=30) else f"in {format_wait(at - now)}"

        expected = wait(self.expected_start)
        if self.line and expected:
            expected = f"after the project's line ({expected} at the earliest)"
        return {
            "label": self.option.label,
            "cluster": self.option.cluster.name,
            "partition": self.option.spec.partition,
            "gpus_per_node": self.option.spec.gpus_per_node,
            "nodes": self.option.spec.nodes,
            "time_limit_minutes": int(self.option.spec.time_limit.total_seconds() // 60),
            "chosen": self.option.chosen,
            "expected": expected,
            "expected_at": self.expected_start.isoformat() if self.expected_start else None,
            "slurm": wait(self.slurm_start),
            "basis": self.history.text if self.history else "",
            "problem": self.problem,
            "line": self.line,
        }


def start_options(
    *,
    spec: JobSpec,
    cluster: Cluster,
    partitions: dict[str, PartitionLimits],
    others: dict[Cluster, dict[str, PartitionLimits]],
) -> list[Option]:
    """The choice, then alternatives (see the module docstring), at most MAX_OPTIONS."""
    options = [Option("As chosen", cluster, spec, chosen=True)]
    for other, limits in others.items():
        # The same partition where it has one of that name, else that cluster's default.
        place = spec.partition if spec.partition in limits else ""
        if _fits(spec, limits.get(place or _default(limits) or "")):
            moved = dataclasses.replace(spec, partition=place)
            options.append(Option(f"On cluster {other.name}", other, moved))
    for name, partition in sorted(partitions.items()):
        if name != (spec.partition or _default(partitions)) and _fits(spec, partition):
            options.append(
                Option(f"Partition {name}", cluster, dataclasses.replace(spec, partition=name))
            )
    # Half the GPUs per node; a job with one per node, half the nodes.
    field, unit = (
        ("gpus_per_node", "GPU{} per node") if spec.gpus_per_node >= 2 else ("nodes", "node{}")
    )
    asked = getattr(spec, field)
    if asked >= 2:
        half = asked // 2
        label = f"{half} {unit.format('s' if half != 1 else '')} instead of {asked}"
        options.append(Option(label, cluster, dataclasses.replace(spec, **{field: half})))
    shorter = _shorter(spec.time_limit)
    if shorter is not None:
        options.append(
            Option(
                f"Time limit {format_wait(shorter)} instead of {format_wait(spec.time_limit)}",
                cluster,
                dataclasses.replace(spec, time_limit=shorter),
            )
        )
    return options[:MAX_OPTIONS]


def _default(partitions: dict[str, PartitionLimits]) -> str | None:
    return next((name for name, p in partitions.items() if p.is_default), None)


def _fits(spec: JobSpec, limits: PartitionLimits | None) -> bool:
    if limits is None:
        return False
    if limits.gpus_per_node < spec.gpus_per_node or limits.nodes < spec.nodes:
        return False
    return limits.max_time is None or limits.max_time >= spec.time_limit


def _shorter(limit: timedelta) -> timedelta | None:
    """Half the limit, in whole minutes, if that is still a useful run."""
    half = timedelta(minutes=int(limit.total_seconds() // 120))
    return half if half >= MIN_SHORTER_LIMIT else None


def expected_starts(
    *, user: Any, project: Project, options: list[Option], now: datetime
) -> list[Forecast]:
    """Each option's start from Slurm (cached, one command per cluster), corrected."""
    answers: dict[int, TestOnly | str] = {}
    by_cluster: dict[int, list[int]] = {}
    for index, option in enumerate(options):
        by_cluster.setdefault(option.cluster.pk, []).append(index)
    for indices in by_cluster.values():
        cluster = options[indices[0]].cluster
        account = account_for(user=user, cluster=cluster)
        if account is None:
            answers.update((i, f"you have no account on {cluster.name}") for i in indices)
            continue
        asks = [scheduling_options(_script(project, options[i])) for i in indices]
        answers.update(zip(indices, _answers(cluster, account, asks), strict=True))
    histories: dict[tuple[int, str], StartHistory] = {}
    room = project_room(project=project)
    forecasts = []
    for index, option in enumerate(options):
        answer = answers[index]
        line = ""
        if room.quota is not None:
            request = spec_request(project=project, cluster=option.cluster, spec=option.spec)
            line = concurrency_verdict(request=request, quota=room.quota, held=room.held)
        if isinstance(answer, str) or answer.start is None:
            problem = answer if isinstance(answer, str) else f"Slurm: {answer.error}"
            forecasts.append(Forecast(option, None, None, None, problem, line))
            continue
        place = (option.cluster.pk, option.spec.partition)
        if place not in histories:
            histories[place] = start_history(cluster_id=place[0], partition=place[1], now=now)
        history = histories[place]
        predicted = max(0.0, (answer.start - now).total_seconds())
        expected = now + timedelta(seconds=history.correct(predicted))
        forecasts.append(Forecast(option, answer.start, expected, history, line=line))
    return forecasts


def _script(project: Project, option: Option) -> str:
    return script_preview(project=project, cluster=option.cluster, spec=option.spec)


def _answers(cluster: Cluster, account: ClusterAccount, asks: list[list[str]]) -> list[Any]:
    """Slurm's answer to each ask, from the cache or one command for those not in it."""
    keys = [_key(cluster, account, ask) for ask in asks]
    try:
        cached = cache.get_many(keys)
    except CACHE_DOWN:
        cached = {}
    missing = [i for i, key in enumerate(keys) if key not in cached]
    fresh: dict[str, TestOnly] = {}
    if missing:
        try:
            with pool.session(account_endpoint(account=account)) as connection:
                slurm = Slurm(connection, tools=cluster.slurm_tools)
                found = slurm.test_starts([asks[i] for i in missing])
        except ClusterError as exc:
            logger.warning("cannot ask cluster %s for start estimates: %s", cluster.name, exc)
            problem = f"{cluster.name} did not answer; the portal asks again at your next change"
            return [cached.get(key, problem) for key in keys]
        fresh = {keys[i]: answer for i, answer in zip(missing, found, strict=True)}
        with contextlib.suppress(*CACHE_DOWN):
            cache.set_many(fresh, timeout=ANSWER_SECONDS)
    return [cached.get(key) or fresh[key] for key in keys]


def _key(cluster: Cluster, account: ClusterAccount, ask: list[str]) -> str:
    text = "\n".join([str(cluster.pk), str(account.pk), *ask])
    return ANSWER_KEY.format(digest=hashlib.sha256(text.encode()).hexdigest()[:32])
