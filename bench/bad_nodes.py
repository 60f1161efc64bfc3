"""GPU-hours lost to bad nodes in a month, with the node health ledger against without it.

A simulated cluster of NODES nodes of 8 GPUs, a few of them bad: a job placed on one fails
with a GPU fault (ECC errors, a lost GPU) or hangs until the hang is detected, with the
node's own probability, part-way through its run. A month of mixed jobs arrives (1 to 8
whole nodes, an hour to a day each, checkpointing every CHECKPOINT minutes), and a rare
one-off fault strikes healthy nodes too. Both runs see the same jobs and the same draws;
the scheduler is first come, first served on the free nodes in name order, as Slurm's
default node order places them, and a failed job restarts from its last checkpoint
without the node it failed on (the restart's own exclusion, as today) in both.

With the ledger, each ended job's word on its nodes goes through the portal's own rules:
monitoring.nodes.score (the score, its decay by time and by healthy jobs, the verdict at
the settings' thresholds), clusters.avoidance.avoid_hours (periods that double) and
clusters.avoidance.avoidance_fit (never so many left out that a job cannot fit).
GPU-hours lost: the work since the last checkpoint and a restart's start-up, times the
job's GPUs, and for a hang the time until it is detected. No database, no cluster.
Run: `.venv/bin/python bench/bad_nodes.py [--quick]`.
"""

import heapq
import random
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import django

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK  # noqa: E402 - after the path is set

django.setup()  # the portal's rules read their settings (benchdb names the module)

from clusters.avoidance import avoid_hours, avoidance_fit  # noqa: E402
from monitoring.nodes.ledger import score_policy  # noqa: E402
from monitoring.nodes.score import BAD, Signal, node_score, verdict  # noqa: E402

SEED = 37
NODES = 16 if QUICK else 64
GPUS = 8
DAYS = 7 if QUICK else 30
# name -> (chance a job placed there fails, "fault" or "hang")
BAD_NODES = (
    {"n003": (0.7, "fault"), "n011": (0.4, "hang")}
    if QUICK
    else {"n003": (0.7, "fault"), "n017": (0.5, "fault"), "n042": (0.4, "hang")}
)
ONE_OFF = 0.002  # a healthy node's rare fault, per job placed there
USERS = 12 if QUICK else 40  # people submitting (a bad verdict needs two people's jobs)
SHAPES = ((1, 0.62), (2, 0.22), (4, 0.12), (8, 0.04))  # nodes, share of jobs
LOAD = 0.8  # node-hours asked per node-hour the cluster has
CHECKPOINT = 30.0  # minutes between checkpoints
STARTUP = 5.0  # minutes a restart spends before its first step
HANG_DETECTED = 20.0  # minutes from a hang to its detection and cancel
START = datetime(2026, 11, 1, tzinfo=UTC)


@dataclass
class Job:
    ident: int
    user: int
    nodes: int
    hours: float  # work left
    attempt: int = 1
    own_excluded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class End:
    """How a placed attempt ends: done, or a fault or hang on `culprit`."""

    how: str
    culprit: str
    started: float
    job: Job
    nodes: list[str]


@dataclass
class Result:
    lost: float = 0.0
    used: float = 0.0
    failures: int = 0
    on_bad: int = 0
    avoided_bad: set[str] = field(default_factory=set)
    avoided_healthy: set[str] = field(default_factory=set)
    kept: int = 0  # placements where the fit rule kept an avoided node in


def _names() -> list[str]:
    return [f"n{i:03d}" for i in range(NODES)]


def _arrivals(rng: random.Random) -> list[tuple[float, Job]]:
    sizes = [nodes for nodes, _ in SHAPES]
    weights = [share for _, share in SHAPES]
    mean_nodes = sum(s * w for s, w in SHAPES)
    mean_hours = 8.0
    rate = LOAD * NODES / (mean_nodes * mean_hours)  # jobs per hour
    jobs: list[tuple[float, Job]] = []
    at, ident = 0.0, 0
    while at < DAYS * 24:
        at += rng.expovariate(rate)
        hours = min(max(rng.lognormvariate(1.6, 0.9), 1.0), 24.0)
        ident += 1
        user = rng.randrange(USERS)
        jobs.append((at, Job(ident, user, rng.choices(sizes, weights)[0], hours)))
    return jobs


def _draw(job: Job, node: str) -> float:
    """The same chance for the same job, attempt and node in both runs."""
    return random.Random(f"{SEED}/{job.ident}/{job.attempt}/{node}").random()


class Ledger:
    """The portal's bookkeeping in memory: events per node, healthy jobs, periods."""

    def __init__(self) -> None:
        self.policy = score_policy()
        self.signals: dict[str, list[Signal]] = defaultdict(list)
        self.users: dict[str, set[int]] = defaultdict(set)
        self.healthy: dict[str, int] = defaultdict(int)
        self.periods: dict[str, list[tuple[float, float]]] = defaultdict(list)

    def avoided(self, now: float) -> dict[str, str]:
        return {n: "bad" for n, ps in self.periods.items() if ps and ps[-1][1] > now}

    def blame(self, node: str, now: float, weight: float, user: int) -> None:
        at = START + timedelta(hours=now)
        self.signals[node].append(Signal(weight, at, self.healthy[node]))
        self.users[node].add(user)
        score = node_score(
            self.signals[node], now=at, healthy_jobs=self.healthy[node], policy=self.policy
        )
        judged = verdict(score, self.policy, users=len(self.users[node]))
        if judged == BAD and node not in self.avoided(now):
            recent = [p for p in self.periods[node] if p[0] >= now - 30 * 24]
            self.periods[node].append((now, now + avoid_hours(len(recent))))

    def ran_well(self, nodes: list[str]) -> None:
        for node in nodes:
            self.healthy[node] += 1


def simulate(with_ledger: bool) -> Result:
    rng = random.Random(SEED)
    names = _names()
    free = set(names)
    ledger = Ledger()
    result = Result()
    weights = {"fault": 1.0, "hang": 0.7}  # the settings' defaults for the two signals
    events: list[tuple[float, int, Job | End]] = []
    order = 0
    for at, job in _arrivals(rng):
        order += 1
        events.append((at, order, job))
    heapq.heapify(events)
    queue: list[Job] = []

    def place(now: float) -> None:
        nonlocal order
        waiting = []
        avoided = ledger.avoided(now) if with_ledger else {}
        for job in queue:
            fit = avoidance_fit(
                own=job.own_excluded,
                avoided=avoided,
                nodes_needed=job.nodes,
                partition="gpu",
                partition_nodes=names,
            )
            candidates = sorted(free - set(fit.excluded))
            if len(candidates) < job.nodes:
                waiting.append(job)
                continue
            result.kept += bool(fit.kept_note)
            chosen = candidates[: job.nodes]
            free.difference_update(chosen)
            ends, end = now + job.hours, End("done", "", now, job, chosen)
            for node in chosen:
                chance, mode = BAD_NODES.get(node, (ONE_OFF, "fault"))
                if _draw(job, node) < chance:
                    at = now + job.hours * (0.05 + 0.6 * _draw(job, node + "/when"))
                    at += HANG_DETECTED / 60 if mode == "hang" else 0.0
                    if at < ends:
                        ends, end = at, End(mode, node, now, job, chosen)
            order += 1
            heapq.heappush(events, (ends, order, end))
        queue[:] = waiting

    while events:
        now, _, event = heapq.heappop(events)
        if isinstance(event, Job):
            if now <= DAYS * 24:
                queue.append(event)
                place(now)
            continue
        free.update(event.nodes)
        job, ran = event.job, now - event.started
        result.used += ran * job.nodes * GPUS
        if event.how == "done":
            ledger.ran_well(event.nodes)
        else:
            result.failures += 1
            result.on_bad += event.culprit in BAD_NODES
            kept = (ran // (CHECKPOINT / 60)) * (CHECKPOINT / 60)
            if event.how == "hang":  # the steps stopped when it hung, not when it was seen
                kept = min(kept, max(ran - HANG_DETECTED / 60, 0.0))
            lost = ran - kept + (STARTUP / 60 if job.attempt > 1 else 0.0)
            result.lost += lost * job.nodes * GPUS
            if with_ledger:
                ledger.blame(event.culprit, now, weights[event.how], job.user)
            own = [*job.own_excluded, event.culprit]
            left = job.hours - kept
            queue.append(Job(job.ident, job.user, job.nodes, left, job.attempt + 1, own))
        place(now)
    for node, periods in ledger.periods.items():
        if periods:
            (result.avoided_bad if node in BAD_NODES else result.avoided_healthy).add(node)
    return result


def main() -> None:
    without, with_ledger = simulate(False), simulate(True)
    print(
        f"{NODES} nodes x {GPUS} GPUs, {DAYS} days, bad: "
        + ", ".join(f"{n} ({p:.0%} {m})" for n, (p, m) in BAD_NODES.items())
    )
    print(f"{'':<34} | {'without ledger':>15} | {'with ledger':>15}")
    print("-" * 70)
    rows = [
        ("GPU-hours lost", f"{without.lost:,.0f}", f"{with_ledger.lost:,.0f}"),
        (
            "share of GPU-hours used",
            f"{without.lost / without.used:.2%}",
            f"{with_ledger.lost / with_ledger.used:.2%}",
        ),
        ("failed attempts", str(without.failures), str(with_ledger.failures)),
        ("  of them on a bad node", str(without.on_bad), str(with_ledger.on_bad)),
        ("bad nodes avoided", "-", f"{len(with_ledger.avoided_bad)} of {len(BAD_NODES)}"),
        ("healthy nodes avoided (false)", "-", str(len(with_ledger.avoided_healthy))),
        ("placements kept an avoided node", "-", str(with_ledger.kept)),
    ]
    for title, a, b in rows:
        print(f"{title:<34} | {a:>15} | {b:>15}")
    saved = without.lost - with_ledger.lost
    print("-" * 70)
    print(f"{'saved by the ledger':<34} | {saved:>15,.0f} GPU-hours")


if __name__ == "__main__":
    main()
