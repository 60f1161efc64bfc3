"""Code snapshots over REST: upload an archive into a project, look one up by its hash.

A job then names the snapshot by hash (`code` in a submission). The client asks
for the hash first and uploads only bytes the project does not have.
"""

from typing import Any

from django.contrib.auth.models import User
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.code.retention import code_snapshot_delete
from jobs.code.snapshots import snapshot_for, snapshot_store
from jobs.code.upload_rate import code_upload_admit
from jobs.models import CodeSnapshot
from projects.access import projects_of_member
from projects.models import Project
from web.auth import request_user


class CodeSnapshotSerializer(serializers.ModelSerializer[CodeSnapshot]):
    class Meta:
        model = CodeSnapshot
        fields = ["sha256", "size", "unpacked_size", "files", "created_at"]
        read_only_fields = fields


class CodeUploadSerializer(serializers.Serializer[Any]):
    archive = serializers.FileField(
        help_text="A tar archive (.tar.gz, .tar.bz2, .tar.xz or .tar) of the code directory."
    )


def _project_or_404(request: Request, slug: str) -> Project:
    # Not yours and missing answer alike.
    project = projects_of_member(user=request.user).filter(slug=slug).first()
    if project is None:
        raise NotFound()
    return project


class CodeUploadView(APIView):
    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="code_upload",
        request={"multipart/form-data": CodeUploadSerializer},
        responses={201: CodeSnapshotSerializer, 200: CodeSnapshotSerializer},
    )
    def post(self, request: Request, slug: str) -> Response:
        """Store a code archive in the project (200 when it has those bytes already)."""
        project = _project_or_404(request, slug)
        upload = CodeUploadSerializer(data=request.data)
        upload.is_valid(raise_exception=True)
        user = request_user(request)
        code_upload_admit(user=user, project=project, size=upload.validated_data["archive"].size)
        snapshot, created = snapshot_store(
            user=user, project=project, chunks=upload.validated_data["archive"].chunks()
        )
        return Response(
            CodeSnapshotSerializer(snapshot).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class CodeDetailView(APIView):
    @extend_schema(operation_id="code_retrieve", responses=CodeSnapshotSerializer)
    def get(self, request: Request, slug: str, sha256: str) -> Response:
        """The project's snapshot with this SHA-256 (404 when it has none: upload it)."""
        project = _project_or_404(request, slug)
        snapshot = snapshot_for(user=request.user, project=project, sha256=sha256)
        if snapshot is None:
            raise NotFound()
        return Response(CodeSnapshotSerializer(snapshot).data)

    @extend_schema(operation_id="code_destroy", responses={204: None})
    def delete(self, request: Request, slug: str, sha256: str) -> Response:
        """Delete the project's snapshot now (409 while a job or a sweep uses it)."""
        project = _project_or_404(request, slug)
        snapshot = snapshot_for(user=request.user, project=project, sha256=sha256)
        if snapshot is None:
            raise NotFound()
        code_snapshot_delete(user=request_user(request), project=project, snapshot=snapshot)
        return Response(status=status.HTTP_204_NO_CONTENT)


def code_in_project(*, user: User, project: Project, sha256: str) -> CodeSnapshot:
    """The snapshot a submission names, in the job's project; a field error if none."""
    snapshot = snapshot_for(user=user, project=project, sha256=sha256)
    if snapshot is None:
        raise ValidationError(
            {"code": [f"Project {project.slug} has no code snapshot {sha256[:12]}; upload it."]}
        )
    return snapshot
