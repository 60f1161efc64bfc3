"""Slurm's pending reasons in plain words, with what the job's owner can do about each.

squeue's Reason field is a code (`Resources`, `AssocGrpGRES`), or, where slurmctld set a
description, that text instead (`ReqNodeNotAvail, UnavailableNodes:n1`, `launch failed
requeued held`). The meanings follow Slurm's "Job Reason Codes" page and squeue(1); the
limit families (AssocGrp*, AssocMax*, QOSGrp*, QOSMax*, QOSMin*, Max*PerAccount) are read
from the code's parts, so a limit code this table does not list still reads right. The
code itself is kept for the page's tooltip: it is what an administrator searches for.
"""

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SlurmReason:
    code: str  # what squeue printed, without its parentheses
    words: str  # what it means, in a sentence
    advice: str = ""  # what the job's owner can do, or "" where waiting is all

    @property
    def text(self) -> str:
        return f"{self.words} {self.advice}".strip()


_WAIT = "Nothing to do: it starts when they are free."
_FEWER = "A smaller job (fewer GPUs or nodes) or a shorter time limit may start sooner."
_NEVER = "It will not start as it is: cancel it and submit it again"
_ADMINS = "Ask the cluster's administrators"
_LIMIT_WAIT = "It starts when running jobs under the same limit end."

_CODES: dict[str, tuple[str, str]] = {
    "Resources": (
        "Waiting for resources: the GPUs, CPUs, memory or nodes it asked for are in use by "
        "other jobs.",
        f"It starts as they free up. {_FEWER}",
    ),
    "Priority": (
        "Waiting its turn: jobs with a higher priority are ahead of it in this partition.",
        "It moves up as they start. A shorter time limit lets Slurm fit it into a gap sooner "
        "(backfill).",
    ),
    "Dependency": ("Waiting for a job it depends on to finish.", ""),
    "DependencyNeverSatisfied": (
        "It depends on a job that ended in a way that never satisfies the dependency.",
        f"{_NEVER} without the dependency.",
    ),
    "BeginTime": ("Its earliest start time (--begin) has not come yet.", ""),
    "JobHeldUser": (
        "Held by its user or the account's coordinator: Slurm does not start it until it is "
        "released.",
        "Release it (scontrol release <job id>) or cancel it.",
    ),
    "JobHeldAdmin": (
        "Held by a cluster administrator.",
        f"{_ADMINS} why; only they can release it.",
    ),
    "JobHoldMaxRequeue": (
        "Held after being requeued as many times as the cluster allows.",
        f"{_ADMINS}, or cancel it and submit it again.",
    ),
    "ReqNodeNotAvail": (
        "A node it needs is not available: in use, reserved, down or drained.",
        "Nodes that are down or drained need an administrator; a job not pinned to them can "
        "start elsewhere.",
    ),
    "NodeDown": ("A node it needs is down.", f"{_ADMINS}; it starts when the node is back."),
    "PartitionDown": (
        "Its partition is down: no job starts there now.",
        "Submit to another partition, or wait for the partition to come back.",
    ),
    "PartitionInactive": (
        "Its partition is inactive and starts no jobs.",
        "Submit to another partition.",
    ),
    "PartitionTimeLimit": (
        "Its time limit is longer than its partition allows.",
        f"{_NEVER} with a shorter time limit.",
    ),
    "PartitionNodeLimit": (
        "It asks for more (or fewer) nodes than its partition allows, or the nodes it needs "
        "are down or drained.",
        f"{_NEVER} with a node count the partition allows.",
    ),
    "PartitionConfig": (
        "It breaks a limit of its partition.",
        f"{_NEVER} within the partition's limits.",
    ),
    "Reservation": ("Waiting for its advance reservation to begin.", ""),
    "ReservationDeleted": (
        "The reservation it asked for no longer exists.",
        f"{_NEVER} without the reservation.",
    ),
    "BadConstraints": (
        "No node can satisfy what it asked for (GPUs, memory or CPUs per node, or node features).",
        f"{_NEVER} with a request a node of the partition can hold.",
    ),
    "Constraints": ("No node with the features it asked for is free now.", ""),
    "Licenses": ("Waiting for a license.", ""),
    "JobArrayTaskLimit": ("Its array already runs as many tasks at once as its % allows.", ""),
    "MaxMemPerLimit": (
        "It asks for more memory per CPU or per node than the cluster allows.",
        f"{_NEVER} with less memory.",
    ),
    "QOSJobLimit": ("Its QOS has reached its limit on jobs.", _LIMIT_WAIT),
    "QOSResourceLimit": ("Its QOS has reached a limit on resources.", _LIMIT_WAIT),
    "QOSTimeLimit": ("Its QOS has reached its time limit.", ""),
    "AssociationJobLimit": (
        "The project's Slurm account has reached its limit on jobs.",
        _LIMIT_WAIT,
    ),
    "AssociationResourceLimit": (
        "The project's Slurm account has reached a limit on resources.",
        _LIMIT_WAIT,
    ),
    "AssociationTimeLimit": ("The project's Slurm account has reached its time limit.", ""),
    "InvalidAccount": (
        "Its Slurm account is not valid on this cluster.",
        f"{_ADMINS} to check the project's Slurm account.",
    ),
    "InvalidQOS": ("Its QOS is not valid.", f"{_ADMINS} to check the project's QOS."),
    "AccountNotAllowed": (
        "Its Slurm account may not use this partition.",
        "Submit to a partition the project may use.",
    ),
    "QOSNotAllowed": (
        "Its QOS may not be used with this account or partition.",
        f"{_ADMINS} which QOS the project may use.",
    ),
    "AccountingPolicy": ("A limit of the cluster's accounting policy holds it back.", ""),
    "QOSUsageThreshold": ("Its QOS's usage threshold has been reached.", ""),
    "Cleaning": ("Requeued, and still cleaning up after its previous run.", ""),
    "Prolog": ("Its prolog is still running on the nodes.", ""),
    "BurstBufferStageIn": ("Its burst buffer is being staged in.", ""),
    "BurstBufferResources": ("Waiting for burst buffer space.", ""),
    "SystemFailure": (
        "A failure of Slurm, a file system or the network holds it back.",
        f"{_ADMINS}.",
    ),
    "FedJobLock": ("Waiting for the federation's clusters to agree on where it runs.", ""),
    "DeadLine": (
        "It cannot finish before its deadline (--deadline).",
        f"{_NEVER} with a later deadline.",
    ),
    "SchedDefer": ("The cluster defers scheduling jobs that asked to start at once.", ""),
    "None": ("Not looked at yet in this scheduling pass.", ""),
}

# Descriptions slurmctld puts in place of the code (squeue prints them as the reason).
_DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "launch failed requeued held": (
        "Slurm could not launch it on its node, put it back in the queue and held it.",
        "Release it (scontrol release <job id>) to try again; if it fails again, tell the "
        "cluster's administrators about the node.",
    ),
    "nodes required for job are down, drained or reserved for jobs in higher priority partitions": (
        "The nodes it could use are down, drained, or kept for jobs of higher priority partitions.",
        "It starts when they come back or free up.",
    ),
}

# What a limit code is a limit on, by how the code's rest begins: (prefix, noun, unit).
_RESOURCES = (
    ("GRES", "GPUs (or other generic resources)", "GPU"),
    ("Cpu", "CPUs", "CPU"),
    ("CPU", "CPUs", "CPU"),
    ("Mem", "memory", "memory"),
    ("Node", "nodes", "node"),
    ("SubmitJob", "jobs running or pending", "job"),
    ("Job", "running jobs", "job"),
    ("Wall", "wall time", "wall"),
    ("Billing", "billing units", "billing"),
    ("License", "licenses", "license"),
    ("BB", "burst buffer", "burst buffer"),
    ("Energy", "energy", "energy"),
)
_LIMIT = re.compile(r"^(AssocGrp|AssocMax|QOSGrp|QOSMax|QOSMin|Max)(\w*?)(PerAccount)?$")
# Per-user limits whose codes do not say PerUser.
_PER_USER = frozenset({"AssocMaxJobsLimit", "AssocMaxSubmitJobLimit"})


def _resource(rest: str) -> tuple[str, str]:
    """The resource's noun, and what of it the limit counts."""
    for prefix, noun, unit in _RESOURCES:
        if rest.startswith(prefix):
            if "RunMinutes" in rest:
                return noun, f"{unit}-minutes booked by running jobs"
            if "Minutes" in rest:
                return noun, f"{unit}-minutes"
            return noun, noun
    return "resources", "resources"


def _limit(code: str) -> tuple[str, str] | None:
    match = _LIMIT.match(code)
    if match is None:
        return None
    family, rest, per_account = match.groups()
    noun, counted = _resource(rest)
    holder = "the QOS" if family.startswith("QOS") else "the project's Slurm account"
    if family == "Max" and per_account:
        return (f"The account's share of {counted} on its QOS is used up.", _LIMIT_WAIT)
    if family in ("AssocGrp", "QOSGrp"):
        return (f"{holder[0].upper()}{holder[1:]} has reached its limit on {counted}.", _LIMIT_WAIT)
    if family == "QOSMin":
        return (f"It asks for fewer {noun} than the QOS requires.", f"{_NEVER} with more.")
    if "PerUser" in rest or code in _PER_USER:
        return (f"Its user has reached {holder}'s per-user limit on {counted}.", _LIMIT_WAIT)
    if family in ("AssocMax", "QOSMax") and ("PerJob" in rest or "PerNode" in rest):
        scope = "per node" if "PerNode" in rest else "for one job"
        return (f"It asks for more {counted} {scope} than {holder} allows.", f"{_NEVER} with less.")
    return None


def explain_reason(raw: str) -> SlurmReason:
    """The reason squeue printed (with or without its parentheses), in plain words."""
    text = raw.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    code, _, detail = (part.strip() for part in text.partition(","))
    found = _CODES.get(code) or _DESCRIPTIONS.get(text.lower()) or _limit(code)
    if found is None:
        return SlurmReason(code=text, words=f"Slurm says: {text}." if text else "")
    words, advice = found
    if detail and code in _CODES:
        nodes = detail.removeprefix("UnavailableNodes:")
        words += f" Unavailable nodes: {nodes}." if nodes != detail else f" ({detail})"
    return SlurmReason(code=text, words=words, advice=advice)
