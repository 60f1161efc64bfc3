"""Checks of a job spec against the cluster's partitions and the project's limits.

Each error names the field and what to change; the form shows them inline and
the API returns them as field errors.
"""

import re
from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from datetime import timedelta
from typing import Any

from django.conf import settings

from clusters.inventory import PartitionLimits
from jobs.code.fetch import git_ref_problem, git_url_problem
from jobs.enums import (
    DEFAULT_RESTART_ON,
    NEVER_RESTART,
    NOT_A_RESTART_REASON,
    RESTART_REASONS,
    FailureClass,
    Template,
)
from jobs.models import MAX_RESTARTS_LIMIT, CodeSnapshot, CodeSource, Job
from jobs.params import ParamValue, params_clean, params_for_spec, params_given
from jobs.patterns import validate_patterns
from projects.models import Project, Quota
from projects.quota import describe, limit_errors

_PARTITION = re.compile(r"^[A-Za-z0-9_.-]+$")
_NAME = re.compile(r"^[\w.+-][\w .+-]{0,127}$")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
_BRANCH = re.compile(r"^[^\x00-\x1f\x7f ~^:?*\[\\]{1,255}$")
MAX_COMMAND_CHARS = 65536
# Longer than any partition allows; keeps GPU-hours x time inside the ledger's columns.
MAX_TIME_LIMIT = timedelta(days=365)


@dataclass(frozen=True)
class JobSpec:
    name: str
    template: str
    command: str
    nodes: int
    gpus_per_node: int
    cpus_per_task: int
    memory_mb: int | None
    time_limit: timedelta
    partition: str
    setup: str = ""
    model_params: int | None = None
    total_steps: int | None = None
    metric_patterns: str = ""
    # The restart policy (jobs.restart): none by default.
    max_restarts: int = 0
    restart_on: tuple[str, ...] = DEFAULT_RESTART_ON
    exclude_failed_nodes: bool = False
    # Check every node before the command (jobs.preflight).
    preflight: bool = False
    # Hang detection (monitoring.hangs.rules); None: the portal's HANG_POLICY.
    hang_multiple: float | None = None
    hang_floor_seconds: int | None = None
    startup_window_seconds: int | None = None
    # The code the command runs in (jobs.code.snapshots) and where it came from: a snapshot with a
    # git checkout's commit, branch and diff, or a git URL and ref fetched before the
    # first attempt. A clone keeps the snapshot: the same bytes, stored once.
    code: CodeSnapshot | None = None
    code_commit: str = ""
    code_branch: str = ""
    code_diff: str = ""
    code_diff_truncated: bool = False
    code_git_url: str = ""
    code_git_ref: str = ""
    # Settings given at submit (jobs.params); the command's flags are added to them.
    params: dict[str, ParamValue] = dataclass_field(default_factory=dict)

    def job_fields(self) -> dict[str, Any]:
        """The Job model's fields this spec sets (the same names; params with the flags)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values["restart_on"] = list(self.restart_on)
        values["params"], values["param_sources"] = params_for_spec(
            command=self.command, given=self.params
        )
        return values


def preflight_asked(*, project: Project, spec: JobSpec) -> bool:
    """Whether a new job has a preflight (jobs.preflight): its own switch, or its project's
    for every job of more than one node (Project.preflight_multi_node)."""
    return spec.preflight or (project.preflight_multi_node and spec.nodes > 1)


def spec_from_job(job: Job) -> JobSpec:
    """The spec a job was submitted with: what "clone" starts from."""
    values = {f.name: getattr(job, f.name) for f in fields(JobSpec)}
    # Jobs submitted while the form offered it may name one; it never restarted anything.
    values["restart_on"] = tuple(c for c in job.restart_on or () if c not in NOT_A_RESTART_REASON)
    values["params"] = params_given(job.params or {}, job.param_sources or {})
    return JobSpec(**values)


CODE_FIELDS = (
    "code",
    "code_commit",
    "code_branch",
    "code_diff",
    "code_diff_truncated",
    "code_git_url",
    "code_git_ref",
)


def code_of(source: CodeSource) -> dict[str, Any]:
    """A job's (or sweep's) code fields, as a clone or a trial takes them: the same
    snapshot, never a new one."""
    return {name: getattr(source, name) for name in CODE_FIELDS}


def _text_errors(spec: JobSpec) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not _NAME.match(spec.name):
        errors["name"] = [
            "Name the job with letters, digits, spaces and '._+-' (at most 128 characters)."
        ]
    if not spec.command.strip():
        errors.setdefault("command", []).append("Enter the command to run.")
    for field in ("command", "setup", "name"):
        value = getattr(spec, field)
        if "\x00" in value:
            errors.setdefault(field, []).append("Remove the NUL character.")
        if len(value) > MAX_COMMAND_CHARS:
            errors.setdefault(field, []).append(f"Keep it under {MAX_COMMAND_CHARS} characters.")
    if spec.template == Template.JUPYTER and len(spec.command.strip().splitlines()) > 1:
        errors.setdefault("command", []).append(
            "For a JupyterLab session give one line, the program that starts it (e.g. "
            "jupyter lab); put preparation steps into the environment set-up."
        )
    elif spec.template != Template.COMMAND and len(spec.command.strip().splitlines()) > 1:
        errors.setdefault("command", []).append(
            "For a torchrun template give one line: the training script and its arguments "
            "(put preparation steps into the environment set-up)."
        )
    if spec.model_params is not None and spec.model_params < 1:
        errors.setdefault("model_params", []).append(
            "Give the model's parameter count as a positive number, e.g. 7000000000."
        )
    if spec.total_steps is not None and spec.total_steps < 1:
        errors.setdefault("total_steps", []).append("Give the last step as a positive number.")
    if problems := validate_patterns(spec.metric_patterns):
        errors["metric_patterns"] = problems
    errors.update(_restart_errors(spec))
    errors.update(_code_errors(spec))
    _, refused = params_clean(spec.params)
    if refused:
        errors["params"] = refused
    if spec.template not in Template.values:
        errors.setdefault("template", []).append(f"Choose one of: {', '.join(Template.values)}.")
    return errors


def _code_errors(spec: JobSpec) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    # A snapshot beside a git URL is one fetched from it (a clone of such a job): both stay.
    if spec.code_git_url and (problem := git_url_problem(spec.code_git_url)):
        errors.setdefault("code_git_url", []).append(problem)
    if spec.code_git_ref and (problem := git_ref_problem(spec.code_git_ref)):
        errors["code_git_ref"] = [problem]
    if spec.code_git_ref and not spec.code_git_url:
        errors["code_git_ref"] = ["A git ref needs the git URL it belongs to."]
    if spec.code_commit and not _COMMIT.match(spec.code_commit):
        errors["code_commit"] = ["Give the commit as its hexadecimal hash."]
    if spec.code_branch and not _BRANCH.match(spec.code_branch):
        errors["code_branch"] = ["Not a git branch name."]
    if "\x00" in spec.code_diff:
        errors["code_diff"] = ["Remove the NUL characters from the diff."]
    cap = settings.CODE_DIFF_MAX_BYTES
    if len(spec.code_diff.encode(errors="replace")) > cap:
        errors["code_diff"] = [f"Keep the diff under {cap} bytes (cut it and set truncated)."]
    return errors


def _restart_errors(spec: JobSpec) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not 0 <= spec.max_restarts <= MAX_RESTARTS_LIMIT:
        errors["max_restarts"] = [f"Allow between 0 and {MAX_RESTARTS_LIMIT} restarts."]
    unknown = [c for c in spec.restart_on if c not in FailureClass.values]
    if unknown:
        choices = ", ".join(RESTART_REASONS)
        errors.setdefault("restart_on", []).append(
            f"Unknown failure class {', '.join(map(repr, unknown))}; choose from {choices}."
        )
    for name, low in (
        ("hang_multiple", 1.0),
        ("hang_floor_seconds", 1),
        ("startup_window_seconds", 1),
    ):
        value = getattr(spec, name)
        if value is not None and not low <= value <= MAX_TIME_LIMIT.total_seconds():
            errors[name] = [f"Give at least {low} (or leave it blank for the portal's default)."]
    never = [FailureClass(c).label for c in spec.restart_on if c in NEVER_RESTART]
    if never:
        errors.setdefault("restart_on", []).append(
            f"{', '.join(never)} would fail again the same way and never restarts; remove it."
        )
    if FailureClass.PREFLIGHT in spec.restart_on:
        errors.setdefault("restart_on", []).append(
            f"{FailureClass.PREFLIGHT.label} is not a restart reason: the portal submits the "
            "job again without the node by itself, using up no restart; remove it."
        )
    return errors


def validate_spec(
    *,
    spec: JobSpec,
    partitions: dict[str, PartitionLimits],
    quota: Quota | None,
) -> dict[str, list[str]]:
    """Every problem with the spec, by field; empty when it can be submitted."""
    errors = _text_errors(spec)

    def add(field: str, message: str) -> None:
        errors.setdefault(field, []).append(message)

    if spec.nodes < 1:
        add("nodes", "Ask for at least one node.")
    if spec.template == Template.JUPYTER and spec.nodes > 1:
        add("nodes", "A JupyterLab session runs on one node; ask for 1.")
    if spec.cpus_per_task < 1:
        add("cpus_per_task", "Ask for at least one CPU per task.")
    if spec.time_limit <= timedelta(0):
        add("time_limit", "Give a positive time limit, e.g. 1:00:00.")
    if spec.time_limit > MAX_TIME_LIMIT:
        add("time_limit", f"Give a time limit of at most {describe(MAX_TIME_LIMIT)}.")

    partition, problem = _partition(spec, partitions)
    if problem:
        add("partition", problem)
    if partition is not None:
        if spec.nodes > partition.nodes:
            add(
                "nodes",
                f"Partition {partition.name} has {partition.nodes} nodes; "
                f"ask for at most {partition.nodes}.",
            )
        if spec.gpus_per_node > partition.gpus_per_node:
            add(
                "gpus_per_node",
                f"Nodes in partition {partition.name} have {partition.gpus_per_node} GPUs; "
                f"ask for at most {partition.gpus_per_node} per node.",
            )
        if spec.cpus_per_task > partition.cpus_per_node:
            add(
                "cpus_per_task",
                f"Nodes in partition {partition.name} have {partition.cpus_per_node} CPUs; "
                f"ask for at most {partition.cpus_per_node}.",
            )
        if spec.memory_mb and spec.memory_mb > partition.memory_mb_per_node:
            add(
                "memory_mb",
                f"Nodes in partition {partition.name} have {partition.memory_mb_per_node} MB; "
                f"ask for at most {partition.memory_mb_per_node}.",
            )
        if partition.max_time is not None and spec.time_limit > partition.max_time:
            add(
                "time_limit",
                f"Partition {partition.name} allows at most {describe(partition.max_time)}; "
                "shorten the time limit.",
            )

    if quota is not None:
        limits = limit_errors(
            gpus=spec.nodes * spec.gpus_per_node, time_limit=spec.time_limit, quota=quota
        )
        for field, messages in limits.items():
            for message in messages:
                add(field, message)
    return errors


def _partition(
    spec: JobSpec, partitions: dict[str, PartitionLimits]
) -> tuple[PartitionLimits | None, str]:
    """The partition the job will run in, or the error that names the choices."""
    if not spec.partition:
        return next((p for p in partitions.values() if p.is_default), None), ""
    if not _PARTITION.match(spec.partition):
        return None, "A partition name has only letters, digits, '_', '.' and '-'."
    if partitions and spec.partition not in partitions:
        return None, (
            f"This cluster has no partition {spec.partition!r}; choose one of "
            f"{', '.join(sorted(partitions))}."
        )
    return partitions.get(spec.partition), ""
