"""Preflight for multi-node jobs: a short check on each node before the user's command.

The batch script (`jobs.scripts`) runs `portal_preflight.py` once per node of the
allocation before any of the job's own code: the node's GPUs from nvidia-smi, then a small
all-reduce across the allocation, both under a timeout. The batch shell merges the nodes'
results into `preflight.json` and, when a node failed, ends the attempt with
`PREFLIGHT_EXIT` without running the set-up or the command. The portal then records the
faulty node, leaves it out of this job and submits the attempt again without it: not a
restart of the user's (no restart is used up), at most `PREFLIGHT_MAX_RESUBMITS` times.

What the portal believes of a result, since the job's own account could write it: only an
attempt that ended with the preflight's status is read (the script turns a command's own
exit with that status into 1), only nodes of the attempt's allocation as Slurm gave it can
be named, and in the node ledger a preflight counts as one person's word like any other
signal (one person's jobs alone never make a node bad).
"""

import json
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.slurm import Slurm, SlurmError
from clusters.slurm.hostlist import expand_nodes
from jobs.avoidance import own_exclusions
from jobs.enums import FailureClass
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.rundir import (
    EXIT_CODE_FILE,
    PREFLIGHT_DIR,
    PREFLIGHT_EXIT,
    PREFLIGHT_FILE,
    PREFLIGHT_LOG,
    PREFLIGHT_SCRIPT,
)
from jobs.services import attempt_start
from jobs.states import attempt_note
from portal_lib.rendezvous import preflight_port_shell

# The whole check on a node (its GPUs, then the all-reduce); srun is given a margin on top.
PREFLIGHT_TIMEOUT_S = 60
# What the portal reads of preflight.json at most (a few hundred bytes per node).
PREFLIGHT_MAX_BYTES = 256 * 1024
_REASON_CHARS = 200


def preflight_lines(job: Job) -> list[str]:
    """The batch script's preflight, before the set-up and command; [] if the job has none."""
    if not job.preflight:
        return []
    script = f'"$PORTAL_RUN_DIR/{PREFLIGHT_SCRIPT}"'
    out = f'"$PORTAL_RUN_DIR/{PREFLIGHT_DIR}"'
    timeout = PREFLIGHT_TIMEOUT_S
    return [
        "# --- preflight: each node checks its GPUs and joins a small all-reduce, before any",
        "# of the job's own code; a failing node ends the attempt here and the portal submits",
        "# it again without that node. python3 -I: the job's PYTHONPATH plays no part.",
        f"rm -rf -- {out} && mkdir -p -- {out}",
        f"timeout -k 5 {timeout + 15} srun --ntasks-per-node=1 --mem=0 --kill-on-bad-exit=0 \\",
        f"  /usr/bin/env PORTAL_PREFLIGHT_GPUS={job.gpus_per_node} python3 -I {script} \\",
        f'  check {out} "{preflight_port_shell()}" {timeout} \\',
        f'  >> "$PORTAL_RUN_DIR/{PREFLIGHT_LOG}" 2>&1',
        f"if ! python3 -I {script} merge {out} {timeout} \\",
        '    "$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd, -)" \\',
        f'    > "$PORTAL_RUN_DIR/{PREFLIGHT_FILE}"; then',
        f'  echo "portal: preflight found a faulty node ({PREFLIGHT_FILE}); the command did not'
        ' run" >&2',
        f'  printf "%s\\n" {PREFLIGHT_EXIT} > "$PORTAL_RUN_DIR/.{EXIT_CODE_FILE}.tmp"',
        f'  mv -f -- "$PORTAL_RUN_DIR/.{EXIT_CODE_FILE}.tmp" "$PORTAL_RUN_DIR/{EXIT_CODE_FILE}"',
        f"  exit {PREFLIGHT_EXIT}",
        "fi",
        'echo "portal: preflight passed on $SLURM_NNODES node(s)" >&2',
        "",
    ]


def preflight_exit_guard(job: Job) -> list[str]:
    """The command's own exit with the preflight's status becomes 1: only the preflight's
    failure ends an attempt with it."""
    if not job.preflight:
        return []
    return [f'[ "$portal_code" -eq {PREFLIGHT_EXIT} ] && portal_code=1']


# --- the result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class PreflightReport:
    """What the preflight found: faulty nodes with why, or why no node can be named."""

    faulty: dict[str, str]
    unnamed: str = ""  # the check failed but names no node of the allocation

    @property
    def summary(self) -> str:
        return "; ".join(f"{node}: {why}" for node, why in self.faulty.items())


def _reason(value: object) -> str:
    text = str(value or "")[:_REASON_CHARS]
    return "".join(c if c.isprintable() else " " for c in text).strip()


def preflight_report(text: str, nodes: list[str]) -> PreflightReport:
    """Read preflight.json (bounded) for the attempt's `nodes`: GPU faults and nodes that did
    not answer are named first; the all-reduce's failure names the nodes it failed on only
    when others passed it. A node outside the allocation is never named."""
    try:
        data = json.loads(text[:PREFLIGHT_MAX_BYTES])
        results = data["nodes"]
        if not isinstance(results, dict):
            raise TypeError
    except (ValueError, KeyError, TypeError):
        return PreflightReport({}, unnamed="its result could not be read")
    faulty: dict[str, str] = {}
    collective: dict[str, str] = {}
    for node in nodes:
        result = results.get(node)
        if not isinstance(result, dict) or result.get("missing"):
            faulty[node] = "no answer from the node within the preflight's time"
            continue
        if result.get("ok") is True:
            continue
        gpu = result.get("gpu")
        gpu = gpu if isinstance(gpu, dict) else {}
        if gpu.get("ok") is not True:
            faulty[node] = _reason(gpu.get("reason")) or "GPU check failed"
        else:
            reduce = result.get("collective")
            why = reduce.get("reason") if isinstance(reduce, dict) else ""
            collective[node] = _reason(why) or "all-reduce failed"
    same = set(faulty.values())
    if len(nodes) > 1 and len(faulty) == len(nodes) and len(same) == 1:
        # Every node, the same words (no nvidia-smi on the PATH, say): the set-up, not the nodes.
        return PreflightReport({}, unnamed=f"every node failed the same way ({same.pop()})")
    if faulty:
        return PreflightReport(faulty)
    if collective and len(collective) < len(nodes):
        return PreflightReport(collective)
    if collective:
        first = next(iter(collective.values()))
        return PreflightReport({}, unnamed=f"the all-reduce failed on every node ({first})")
    return PreflightReport({}, unnamed="it passed on every node")


# --- what the portal does about it ---------------------------------------------------------


def _named(nodes: list[str]) -> str:
    return nodes[0] if len(nodes) == 1 else f"{', '.join(nodes[:-1])} and {nodes[-1]}"


def attempt_preflight_resubmit(*, attempt: Attempt, report: PreflightReport) -> Attempt | None:
    """Submit the job again without the nodes its preflight found faulty (idempotent: only
    the job's latest attempt is followed); the timeline says what was found and done."""
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=attempt.job_id)
        latest = Attempt.objects.filter(job=job).order_by("-number").first()
        if latest is None or latest.pk != attempt.pk or not attempt.is_finished:
            return None
        if not report.faulty:
            attempt_note(
                attempt=attempt,
                reason=f"Preflight failed: {report.unnamed}; no node can be named, so the "
                "job is not submitted again.",
            )
            return None
        nodes = list(report.faulty)
        found = f"Preflight found {_named(nodes)} faulty ({report.summary})"
        made = attempt.preflight_resubmits
        if made >= settings.PREFLIGHT_MAX_RESUBMITS:
            attempt_note(
                attempt=attempt,
                reason=f"{found}; not submitted again: {made} preflight resubmissions "
                f"already (PREFLIGHT_MAX_RESUBMITS).",
            )
            return None
        excluded = own_exclusions(attempt)
        excluded += [node for node in nodes if node not in excluded]
        try:
            new = attempt_start(
                job=job,
                number=attempt.number + 1,
                account=attempt.account,
                reason=f"{found}; resubmitted without {'it' if len(nodes) == 1 else 'them'} "
                f"(preflight resubmission {made + 1} of at most "
                f"{settings.PREFLIGHT_MAX_RESUBMITS}, not a restart).",
                resume_from=attempt.resume_from,
                excluded_nodes=",".join(excluded),
            )
        except JobError as exc:
            attempt_note(attempt=attempt, reason=f"{found}; not submitted again: {exc.message}")
            return None
        Attempt.objects.filter(pk=new.pk).update(preflight_resubmits=made + 1)
        new.preflight_resubmits = made + 1
        Job.objects.filter(pk=job.pk).update(state=new.state, updated_at=timezone.now())
    return new


def preflight_fit(*, attempt: Attempt, slurm: Slurm) -> None:
    """Before a preflight resubmission is handed to Slurm: refuse it, saying why, when the
    nodes left out leave its partition too few for the job (the fit rule)."""
    if attempt.number == 1 or not attempt.excluded_nodes:
        return
    previous = Attempt.objects.filter(job_id=attempt.job_id, number=attempt.number - 1)
    if not previous.filter(failure_class=FailureClass.PREFLIGHT).exists():
        return
    job = attempt.job
    try:
        partitions = slurm.partitions()
    except SlurmError:
        return  # Slurm itself refuses a job that cannot fit
    partition = next(
        (p for p in partitions if p.name == job.partition or (not job.partition and p.is_default)),
        None,
    )
    if partition is None:
        return
    members = expand_nodes(partition.nodes)
    out = [n for n in attempt.excluded_nodes.split(",") if n in members]
    if len(members) - len(out) >= job.nodes:
        return
    raise SlurmError(
        "preflight",
        f"leaving out {_named(out)} would leave partition {partition.name} "
        f"{len(members) - len(out)} of its {len(members)} nodes, and the job needs {job.nodes}: "
        "not submitted again.",
        retryable=False,
    )
