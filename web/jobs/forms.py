"""The submit form: turns what the researcher typed into a JobSpec, or says what to change."""

import math
import re
from datetime import timedelta
from typing import Any

from django import forms
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef, Q, QuerySet

from clusters.examples import EXAMPLE_COMMAND
from clusters.models import Cluster, ClusterAccount
from clusters.slurm import parse_time_limit
from jobs.code.snapshots import code_inputs
from jobs.enums import DEFAULT_RESTART_ON, RESTART_REASONS, Template
from jobs.models import MAX_RESTARTS_LIMIT
from jobs.params import ParamValue, params_from_lines
from jobs.specs import MAX_TIME_LIMIT, JobSpec
from portal_lib.bounds import BIGINT_MAX, INT_MAX
from projects.access import clusters_for_project, submittable_projects
from projects.models import Project

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMbBtT]?)\s*$")
_SIZE_FACTORS = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
MAX_MODEL_PARAMS = 10**15  # 1000T: far past any model, well inside a bigint
TIME_FORMATS = (
    "minutes (90), hours:minutes:seconds (1:30:00) or days-hours:minutes:seconds (2-00:00:00)"
)
TIME_LIMIT_HELP = f"As Slurm writes it: {TIME_FORMATS}."
# The failure classes a restart may follow (the others would only fail again, or are
# handled without a restart).
RESTARTABLE = [(c.value, c.label) for c in RESTART_REASONS]


def usable_clusters(*, user: User) -> QuerySet[Cluster]:
    """Active clusters with an account the user's jobs can run under (their own or shared).

    An EXISTS, not a join: `accounts__user__isnull` on a join also matched a cluster with
    no account at all, which the form offered and the submission then refused.
    """
    runnable = ClusterAccount.objects.filter(cluster_id=OuterRef("pk")).filter(
        Q(user_id=user.pk) | Q(user__isnull=True)
    )
    return Cluster.objects.filter(is_active=True).filter(Exists(runnable)).order_by("name")


def project_clusters(*, user: User, project: Project) -> QuerySet[Cluster]:
    """The usable clusters (above) that the project's quota lets it run on."""
    return usable_clusters(user=user).filter(
        pk__in=clusters_for_project(project=project).values("pk")
    )


class TimeLimitField(forms.CharField):
    def to_python(self, value: Any) -> timedelta | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        try:
            limit = parse_time_limit(text)
        except ValueError:
            limit = None
        if limit is None:
            raise forms.ValidationError(
                f"{text[:40]!r} is not a time limit; write it as {TIME_FORMATS}."
            )
        if limit > MAX_TIME_LIMIT:
            raise forms.ValidationError(
                f"Give a time limit between 1 minute and {MAX_TIME_LIMIT.days} days."
            )
        return limit

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, timedelta):
            return format_time_limit(value)
        return value


class ModelSizeField(forms.CharField):
    """A parameter count: 125000000, 125M, 7B or 1.5T."""

    def to_python(self, value: Any) -> int | None:  # type: ignore[override]
        text = super().to_python(value)
        if not text:
            return None
        match = _SIZE.match(text.replace(",", "").replace("_", "")[:100])
        if match is None:
            raise forms.ValidationError(
                f"{text[:40]!r} is not a parameter count; write e.g. 7B, 125M or 350000000."
            )
        number, unit = match.groups()
        count = float(number) * _SIZE_FACTORS[unit.lower()]
        if not math.isfinite(count) or not 1 <= count <= MAX_MODEL_PARAMS:
            raise forms.ValidationError("Give between 1 and 1000T parameters, e.g. 7B.")
        return int(count)


class ParamsField(forms.CharField):
    """The run's settings as `key=value` lines (jobs.params)."""

    def to_python(self, value: Any) -> dict[str, ParamValue]:  # type: ignore[override]
        params, problems = params_from_lines(str(value or ""))
        if problems:
            raise forms.ValidationError(problems)
        return params

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            return "\n".join(f"{key}={json_text(item)}" for key, item in value.items())
        return value


def json_text(value: ParamValue) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def format_time_limit(limit: timedelta) -> str:
    seconds = int(limit.total_seconds())
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}" if days else text


HANG_SECONDS_MAX = 365 * 86400  # jobs.specs.MAX_TIME_LIMIT


def _number(label: str, minimum: int, maximum: int, initial: int | None, **extra: Any) -> Any:
    return forms.IntegerField(
        label=label,
        min_value=minimum,
        max_value=maximum,
        initial=initial,
        error_messages={
            "min_value": f"Ask for at least {minimum}.",
            "max_value": f"Ask for at most {maximum}.",
            "invalid": "Enter a whole number.",
        },
        **extra,
    )


# What partial_spec puts in a field that did not parse; that field shows its own error.
_NEUTRAL: dict[str, Any] = {
    "name": "job",
    "template": Template.COMMAND,
    "command": "true",
    "nodes": 1,
    "gpus_per_node": 0,
    "cpus_per_task": 1,
    "memory_mb": None,
    "time_limit": timedelta(minutes=1),
    "partition": "",
}


class CodeInputs(forms.Form):
    """The code a submission brings: an archive, a git URL and ref, or (a clone) the
    original job's snapshot. The job form's and the sweep form's."""

    code_archive = forms.FileField(
        label="Code archive",
        required=False,
        help_text="A .tar.gz of your code directory: unpacked into the run directory, where "
        "the set-up and command then start.",
    )
    code_git_url = forms.CharField(
        label="or a git URL", required=False, max_length=1024, help_text="https:// only."
    )
    code_git_ref = forms.CharField(
        label="Branch, tag or commit", required=False, max_length=255, help_text="Blank: default."
    )
    # A job id; bounded, so that a forged 30-digit value is a form error, not a 500.
    code_from = forms.IntegerField(
        required=False, min_value=1, max_value=BIGINT_MAX, widget=forms.HiddenInput
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("code_archive") and (data.get("code_git_url") or "").strip():
            self.add_error("code_git_url", "Give either a code archive or a git URL, not both.")
        return data

    def typed_git(self) -> dict[str, Any]:
        """The git URL and ref typed in (call after is_valid())."""
        data = self.cleaned_data
        return {
            "code_git_url": data.get("code_git_url", "").strip(),
            "code_git_ref": data.get("code_git_ref", "").strip(),
        }

    def code_fields(self, *, user: User, project: Project) -> dict[str, Any]:
        """The code fields (call after is_valid()): an uploaded archive (stored once), else
        the original job's snapshot unless a git URL was typed, else that URL and ref."""
        data = self.cleaned_data
        code = code_inputs(
            user=user,
            project=project,
            archive=data.get("code_archive"),
            code_from=None if data.get("code_git_url") else data.get("code_from"),
        )
        return code if code is not None else self.typed_git()


class JobForm(CodeInputs):
    name = forms.CharField(
        max_length=128, initial="train", widget=forms.TextInput(attrs={"autofocus": True})
    )
    project = forms.ModelChoiceField(queryset=Project.objects.none(), empty_label=None)
    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.none(), empty_label=None, to_field_name="name"
    )
    partition = forms.CharField(required=False, max_length=64, help_text="Blank: the default.")
    template = forms.ChoiceField(choices=Template.choices, initial=Template.COMMAND)
    nodes = _number("Nodes", 1, 1024, 1)
    gpus_per_node = _number("GPUs per node", 0, 64, 1)
    cpus_per_task = _number("CPUs per node", 1, 1024, 4)
    memory_mb = _number(
        "Memory per node (MB)", 1, 100_000_000, None, required=False, help_text="Blank: default."
    )
    time_limit = TimeLimitField(initial="1:00:00", help_text=TIME_LIMIT_HELP)
    setup = forms.CharField(
        label="Environment set-up",
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text="Shell lines run first: module load, conda activate, ...",
    )
    command = forms.CharField(
        # The DDP template offers the README's example trainer (static/js/job-example.js).
        widget=forms.Textarea(
            attrs={"rows": 3, "spellcheck": "false", "data-example": EXAMPLE_COMMAND}
        ),
        help_text="Command: shell lines. Torchrun templates: the script (a path in your code, "
        "or from your home directory on the cluster without code) and its arguments. "
        "JupyterLab session: the program that starts it, e.g. jupyter lab.",
        error_messages={"required": "Enter the command to run."},
    )
    model_params = ModelSizeField(
        label="Model size (parameters)",
        required=False,
        help_text="For MFU: e.g. 7B or 125M.",
    )
    total_steps = _number("Last step", 1, INT_MAX, None, required=False, help_text="For the ETA.")
    metric_patterns = forms.CharField(
        label="Extra metric patterns",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text="One regular expression a line, named groups: acc=(?P<acc>[0-9.]+)",
    )
    params = ParamsField(
        label="Settings",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        help_text="key=value a line (lr=0.001); the command's --key value flags are added.",
    )
    max_restarts = _number(
        "Restarts",
        0,
        MAX_RESTARTS_LIMIT,
        0,
        required=False,
        help_text="After a failure a retry can fix, start again from the latest checkpoint "
        "this many times; 0 or blank: never.",
    )
    restart_on = forms.MultipleChoiceField(
        label="Restart after",
        choices=RESTARTABLE,
        required=False,
        initial=[str(c) for c in DEFAULT_RESTART_ON],
        widget=forms.CheckboxSelectMultiple,
        help_text="CUDA out of memory, missing modules or files and cancellation never restart.",
    )
    exclude_failed_nodes = forms.BooleanField(
        label="Restart without the node that failed",
        required=False,
        help_text="sbatch --exclude the failed node on the next attempt.",
    )
    preflight = forms.BooleanField(
        label="Check every node before the command",
        required=False,
        help_text="GPUs and a small all-reduce; a faulty node is left out and the job "
        "resubmitted. A project may turn it on for all its multi-node jobs.",
    )
    # Hang detection (monitoring.hangs.rules); blank: the portal's defaults.
    hang_multiple = forms.FloatField(
        label="Hung after (step intervals)",
        min_value=1.0,
        max_value=1e6,
        required=False,
        help_text="No step on any rank for this many times the recent step interval.",
    )
    hang_floor_seconds = _number(
        "Never hung before (seconds)", 1, HANG_SECONDS_MAX, None, required=False
    )
    startup_window_seconds = _number(
        "First step within (seconds)", 1, HANG_SECONDS_MAX, None, required=False
    )

    def __init__(self, *args: Any, user: User, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        project_field = self.fields["project"]
        cluster_field = self.fields["cluster"]
        assert isinstance(project_field, forms.ModelChoiceField)  # noqa: S101 - declared above
        assert isinstance(cluster_field, forms.ModelChoiceField)  # noqa: S101 - declared above
        project_field.queryset = submittable_projects(user=user)
        cluster_field.queryset = usable_clusters(user=user)
        project_field.error_messages["invalid_choice"] = (
            "Choose one of your projects where you may submit."
        )
        cluster_field.error_messages["invalid_choice"] = "Choose a cluster you have an account on."

    def spec(self, code: dict[str, Any] | None = None) -> JobSpec:
        """The spec from cleaned data (call after is_valid()); `code`: the code fields, resolved
        by the view (an uploaded snapshot, or the clone's), else the git URL typed in."""
        data = self.cleaned_data
        if code is None:
            code = self.typed_git()
        return JobSpec(
            name=data["name"].strip(),
            template=data["template"],
            command=_lines(data["command"]),
            nodes=data["nodes"],
            gpus_per_node=data["gpus_per_node"],
            cpus_per_task=data["cpus_per_task"],
            memory_mb=data.get("memory_mb"),
            time_limit=data["time_limit"],
            partition=data.get("partition", "").strip(),
            setup=_lines(data.get("setup", "")),
            model_params=data.get("model_params"),
            total_steps=data.get("total_steps"),
            metric_patterns=_lines(data.get("metric_patterns", "")),
            params=data.get("params") or {},
            **_restart_policy(data),
            **code,
        )

    def partial_spec(self) -> JobSpec:
        """A spec from the fields that parsed, neutral values elsewhere (call after is_valid()).

        The preview checks it against the cluster, so that a partition or quota problem
        shows while another field is still empty.
        """
        data = {**_NEUTRAL, **self.cleaned_data}
        return JobSpec(
            name=data["name"],
            template=data["template"],
            command=data["command"],
            nodes=data["nodes"],
            gpus_per_node=data["gpus_per_node"],
            cpus_per_task=data["cpus_per_task"],
            memory_mb=data["memory_mb"],
            time_limit=data["time_limit"],
            partition=(data["partition"] or "").strip(),
            **_restart_policy(data),
        )


def _lines(text: str) -> str:
    """A textarea's text with the newlines a browser sends (CRLF) as the shell wants them."""
    return text.replace("\r\n", "\n")


def _restart_policy(data: dict[str, Any]) -> dict[str, Any]:
    """The spec's restart fields from cleaned data, in the order the choices list them."""
    chosen = set(data.get("restart_on") or ())
    return {
        "max_restarts": data.get("max_restarts") or 0,
        "restart_on": tuple(value for value, _ in RESTARTABLE if value in chosen),
        "exclude_failed_nodes": bool(data.get("exclude_failed_nodes")),
        "preflight": bool(data.get("preflight")),
        "hang_multiple": data.get("hang_multiple"),
        "hang_floor_seconds": data.get("hang_floor_seconds"),
        "startup_window_seconds": data.get("startup_window_seconds"),
    }


def initial_from_spec(spec: JobSpec) -> dict[str, Any]:
    """Form initial values from a spec: what "clone" fills in."""
    return {
        "name": spec.name,
        "template": spec.template,
        "command": spec.command,
        "nodes": spec.nodes,
        "gpus_per_node": spec.gpus_per_node,
        "cpus_per_task": spec.cpus_per_task,
        "memory_mb": spec.memory_mb,
        "time_limit": format_time_limit(spec.time_limit),
        "partition": spec.partition,
        "setup": spec.setup,
        "model_params": spec.model_params,
        "total_steps": spec.total_steps,
        "metric_patterns": spec.metric_patterns,
        "params": spec.params,
        "max_restarts": spec.max_restarts,
        "restart_on": list(spec.restart_on),
        "exclude_failed_nodes": spec.exclude_failed_nodes,
        "preflight": spec.preflight,
        "hang_multiple": spec.hang_multiple,
        "hang_floor_seconds": spec.hang_floor_seconds,
        "startup_window_seconds": spec.startup_window_seconds,
    }
