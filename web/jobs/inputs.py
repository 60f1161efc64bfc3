"""What the jobs API reads from a request: a job spec, a submission, a clone's changes, filters.

Shapes and ranges only; the checks against the cluster, the quota and the project's
code are job_submit's (jobs.specs), shared with the form.
"""

from datetime import timedelta
from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import empty

from jobs.enums import DEFAULT_RESTART_ON, State, Template
from jobs.specs import MAX_TIME_LIMIT
from portal_lib.bounds import BIGINT_MAX, INT_MAX


class CodeInputSerializer(serializers.Serializer[Any]):
    """The code a submission brings: the job API's and the sweep API's."""

    # The code: a snapshot uploaded to the project (POST /projects/<slug>/code/) named by
    # its hash, with the git checkout it came from; or a git URL and ref to fetch.
    code = serializers.RegexField(
        r"^[0-9a-f]{64}$",
        required=False,
        allow_null=True,
        default=None,
        help_text="SHA-256 of a code snapshot of the project; the command runs in it.",
    )
    code_commit = serializers.CharField(required=False, allow_blank=True, default="")
    code_branch = serializers.CharField(required=False, allow_blank=True, default="")
    code_diff = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False
    )
    code_diff_truncated = serializers.BooleanField(required=False, default=False)
    code_git_url = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="https URL of a git repository."
    )
    code_git_ref = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="Branch, tag or commit."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("code") and attrs.get("code_git_url"):
            raise ValidationError(
                {"code_git_url": ["Give either a code snapshot or a git URL, not both."]}
            )
        return attrs


class SpecSerializer(CodeInputSerializer):
    """What a job asks for; the checks against the cluster and quota are job_submit's."""

    name = serializers.CharField(max_length=128)
    template = serializers.ChoiceField(choices=Template.choices, default=Template.COMMAND)
    command = serializers.CharField(trim_whitespace=False)
    nodes = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    gpus_per_node = serializers.IntegerField(min_value=0, max_value=64, default=1)
    cpus_per_task = serializers.IntegerField(min_value=1, max_value=1024, default=4)
    memory_mb = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, default=None
    )
    time_limit = serializers.DurationField(
        default=timedelta(hours=1),
        min_value=timedelta(seconds=1),
        max_value=MAX_TIME_LIMIT,
        help_text="[DD ]HH:MM:SS, or seconds; e.g. 02:00:00. At most 365 days.",
    )
    partition = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    setup = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False
    )
    model_params = serializers.IntegerField(
        min_value=1, max_value=BIGINT_MAX, required=False, allow_null=True, default=None
    )
    total_steps = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, default=None
    )
    metric_patterns = serializers.CharField(required=False, allow_blank=True, default="")
    # The restart policy; what may be restarted is checked with the rest of the spec.
    max_restarts = serializers.IntegerField(
        min_value=0, max_value=INT_MAX, default=0, help_text="Restarts after a failure."
    )
    restart_on = serializers.ListField(
        child=serializers.CharField(max_length=32),
        max_length=32,
        default=lambda: list(DEFAULT_RESTART_ON),
        help_text="Failure classes that restart the job from its latest checkpoint.",
    )
    exclude_failed_nodes = serializers.BooleanField(
        default=False, help_text="Keep a restart off the nodes the failure was on."
    )
    preflight = serializers.BooleanField(
        default=False, help_text="Check every node (GPUs, a small all-reduce) before the command."
    )

    hang_multiple = serializers.FloatField(
        required=False, allow_null=True, default=None, help_text="Hung after N step intervals."
    )
    hang_floor_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, max_value=INT_MAX
    )
    startup_window_seconds = serializers.IntegerField(
        required=False, allow_null=True, default=None, max_value=INT_MAX
    )

    params = serializers.DictField(
        required=False,
        default=dict,
        help_text="The run's settings, {name: number | bool | text}; the command's "
        "--key value flags are added to them.",
    )

    def validate_restart_on(self, value: list[str]) -> tuple[str, ...]:
        return tuple(value)


class JobCreateSerializer(SpecSerializer):
    project = serializers.SlugField(help_text="The project's slug (one of yours).")
    cluster = serializers.SlugField(help_text="The cluster's name.")


class JobCloneSerializer(SpecSerializer):
    """Any spec field to change in the copy; the rest is the original's."""

    def get_fields(self) -> dict[str, serializers.Field[Any, Any, Any, Any]]:
        fields = super().get_fields()
        for field in fields.values():
            field.required = False
            field.default = empty
        return fields


class JobFilterSerializer(serializers.Serializer[Any]):
    project = serializers.SlugField(required=False, help_text="Only this project's jobs.")
    cluster = serializers.SlugField(required=False, help_text="Only jobs on this cluster.")
    state = serializers.ChoiceField(choices=State.choices, required=False)
    mine = serializers.BooleanField(required=False, default=False, help_text="Only my jobs.")
