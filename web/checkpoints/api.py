"""A job's checkpoints over REST: the index, a rule's preview, deletion, applying the rule, and
the rules of a job and of a project (with its storage quota). Same rules as the page."""

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.access import job_for_viewer
from jobs.enums import Template
from jobs.models import Job
from monitoring.checkpoints.page import CheckpointPage, PageLine, checkpoint_page
from monitoring.checkpoints.retention import describe
from monitoring.checkpoints.services import (
    checkpoint_rule_save,
    checkpoints_delete,
    retention_apply,
)
from monitoring.checkpoints.storage import project_storage
from monitoring.models import BestMode, CheckpointDeletion, CheckpointRule
from projects.access import projects_visible_to
from projects.models import Project
from web.auth import request_user
from web.checkpoints.forms import (
    MAX_DAYS,
    MAX_KEEP,
    MAX_QUOTA_GIB,
    RuleForm,
    initial_of,
    transient_rule,
)

RULE_PARAMS = [
    OpenApiParameter(name, type=kind, required=False)
    for name, kind in (
        ("keep_last", int),
        ("keep_best", int),
        ("best_metric", str),
        ("best_mode", str),
        ("older_than_days", float),
    )
]


class RuleSerializer(serializers.Serializer[Any]):
    """A rule's values (what the schema shows; the page's RuleForm checks them for both)."""

    keep_last = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_KEEP
    )
    keep_best = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, max_value=MAX_KEEP
    )
    best_metric = serializers.CharField(required=False, allow_blank=True, max_length=200)
    best_mode = serializers.ChoiceField(choices=BestMode.choices, required=False)
    older_than_days = serializers.FloatField(
        required=False, allow_null=True, min_value=0.01, max_value=MAX_DAYS
    )


class ProjectRuleSerializer(RuleSerializer):
    template = serializers.ChoiceField(
        choices=[("", "all templates"), *Template.choices], required=False, allow_blank=True
    )
    quota_gib = serializers.FloatField(
        required=False, allow_null=True, min_value=0.001, max_value=MAX_QUOTA_GIB
    )


class DeleteSerializer(serializers.Serializer[Any]):
    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), max_length=1000
    )


def _job(request: Request, job_id: int) -> Job:
    job = job_for_viewer(user=request.user, job_id=job_id)
    if job is None:
        raise NotFound()
    return job


def _rule_fields(data: Any, *, project_scope: bool = False) -> dict[str, Any]:
    form = RuleForm(data, project_scope=project_scope)
    if not form.is_valid():
        raise ValidationError(
            {name: [str(e) for e in errors] for name, errors in form.errors.items()}
        )
    return form.rule_fields()


def rule_json(rule: CheckpointRule | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    values = initial_of(rule)
    return {
        **{k: v for k, v in values.items() if k != "quota_gib"},
        "quota_bytes": rule.quota_bytes,
        "template": rule.template,
        "job": rule.job_id,
        "text": describe(rule),
    }


def _line_json(line: PageLine) -> dict[str, Any]:
    r = line.row
    return {
        "id": r.id,
        "attempt": r.attempt,
        "name": r.name,
        "path": r.path,
        "step": r.step,
        "modified_at": r.modified_at.isoformat(),
        "size": r.size,
        "size_exact": r.size_exact,
        "is_dir": r.is_dir,
        "complete": r.complete,
        "link": r.link,
        "metrics": r.metrics,
        "resume": r.resume,
        "protected": r.protected,
        "rule_deletes": bool(line.verdict and line.verdict.delete),
        "rule_says": line.verdict.why if line.verdict else "",
    }


def _deletion_json(d: CheckpointDeletion) -> dict[str, Any]:
    return {
        "name": d.name,
        "path": d.path,
        "step": d.step,
        "size": d.size,
        "metrics": d.metrics,
        "reason": d.reason,
        "removed": d.removed,
        "error": d.error,
        "at": d.at.isoformat(),
    }


def _page_json(page: CheckpointPage) -> dict[str, Any]:
    return {
        "storage_bytes": page.storage,
        "rule": rule_json(page.rule),
        "rule_scope": page.scope,
        "checkpoints": [_line_json(line) for line in page.lines],
        "deletions": [_deletion_json(d) for d in page.deletions],
    }


class JobCheckpointsView(APIView):
    @extend_schema(operation_id="jobs_checkpoints_list", responses=dict)
    def get(self, request: Request, job_id: int) -> Response:
        """Every checkpoint of the job with its step, size and metrics, the rule in effect
        and what it would delete, and the deletions recorded."""
        return Response(_page_json(checkpoint_page(job=_job(request, job_id))))


class JobCheckpointPreviewView(APIView):
    @extend_schema(operation_id="jobs_checkpoints_preview", parameters=RULE_PARAMS, responses=dict)
    def get(self, request: Request, job_id: int) -> Response:
        """What a rule with these values (none given: the rule in effect) would delete; nothing
        is deleted."""
        job = _job(request, job_id)
        given = any(request.query_params.get(p.name) for p in RULE_PARAMS)
        preview = transient_rule(_rule_fields(request.query_params)) if given else None
        page = checkpoint_page(job=job, preview=preview)
        return Response(
            {
                "rule": page.description,
                "delete": [r.id for r in page.doomed],
                "delete_bytes": page.doomed_bytes,
                "checkpoints": [_line_json(line) for line in page.lines],
            }
        )


class JobCheckpointDeleteView(APIView):
    @extend_schema(operation_id="jobs_checkpoints_delete", request=DeleteSerializer, responses=dict)
    def post(self, request: Request, job_id: int) -> Response:
        """Delete these checkpoints on the cluster (the job's submitter or a project owner)."""
        job = _job(request, job_id)
        body = DeleteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = request_user(request)
        done = checkpoints_delete(
            job=job,
            ids=body.validated_data["ids"],
            reason=f"deleted by {user.get_username()}",
            user=user,
        )
        return Response({"deletions": [_deletion_json(d) for d in done]})


class JobCheckpointApplyView(APIView):
    @extend_schema(operation_id="jobs_checkpoints_apply", request=None, responses=dict)
    def post(self, request: Request, job_id: int) -> Response:
        """Apply the rule in effect now (the job's submitter or a project owner)."""
        job = _job(request, job_id)
        user = request_user(request)
        done = retention_apply(job=job, why=f"applied by {user.get_username()}", user=user)
        return Response({"deletions": [_deletion_json(d) for d in done]})


class JobCheckpointRuleView(APIView):
    @extend_schema(operation_id="jobs_checkpoints_rule_retrieve", responses=dict)
    def get(self, request: Request, job_id: int) -> Response:
        """The job's own rule (null: none; the rule in effect is in the index)."""
        job = _job(request, job_id)
        rule = CheckpointRule.objects.filter(job=job).first()
        return Response({"rule": rule_json(rule)})

    @extend_schema(operation_id="jobs_checkpoints_rule_set", request=RuleSerializer, responses=dict)
    def post(self, request: Request, job_id: int) -> Response:
        """Set the job's own rule; all values empty clears it."""
        job = _job(request, job_id)
        fields = _rule_fields(request.data)
        fields.pop("quota_bytes")
        rule = checkpoint_rule_save(
            user=request_user(request), project=job.project, job=job, **fields
        )
        return Response({"rule": rule_json(rule)})


class ProjectCheckpointRuleView(APIView):
    def _project(self, request: Request, slug: str) -> Project:
        project = projects_visible_to(user=request.user).filter(slug=slug).first()
        if project is None:
            raise NotFound()
        return project

    def _answer(self, project: Project, template: str) -> Response:
        rule = CheckpointRule.objects.filter(
            project=project, job__isnull=True, template=template
        ).first()
        storage = project_storage(project=project)
        return Response(
            {
                "rule": rule_json(rule),
                "storage_bytes": storage.used,
                "quota_bytes": storage.quota,
                "quota_state": storage.state,
                "jobs": [{"job": job.pk, "bytes": size} for job, size in storage.by_job],
            }
        )

    @extend_schema(operation_id="projects_checkpoint_rule_retrieve", responses=dict)
    def get(self, request: Request, slug: str) -> Response:
        """The project's rule (`template`: for its jobs of one template), its checkpoint storage
        by job and its quota."""
        template = request.query_params.get("template", "")
        if template and template not in Template.values:
            raise ValidationError({"template": [f"One of {', '.join(Template.values)}."]})
        return self._answer(self._project(request, slug), template)

    @extend_schema(
        operation_id="projects_checkpoint_rule_set", request=ProjectRuleSerializer, responses=dict
    )
    def post(self, request: Request, slug: str) -> Response:
        """Set the project's rule (with `template`: for its jobs of that template) and, on the
        project-wide one, its storage quota (`quota_gib`). Project owners only."""
        project = self._project(request, slug)
        data = request.data if isinstance(request.data, dict) else {}
        template = str(data.get("template", ""))
        if template and template not in Template.values:
            raise ValidationError({"template": [f"One of {', '.join(Template.values)}."]})
        fields = _rule_fields(data, project_scope=not template)
        checkpoint_rule_save(
            user=request_user(request), project=project, template=template, **fields
        )
        return self._answer(project, template)
