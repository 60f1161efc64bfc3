"""A run's note, tags and group over REST: GET and PATCH /api/v1/jobs/<id>/notes/.

Those who see the job read them (the job object carries them too); its submitter and the
project's owners change them through jobs.services.job_annotate, which checks the values.
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.access import job_for_viewer
from jobs.models import Job
from jobs.notes import GROUP_MAX, NOTE_MAX, TAG_MAX, TAGS_MAX
from jobs.services import job_annotate
from web.auth import request_user


class JobNotesSerializer(serializers.ModelSerializer[Job]):
    class Meta:
        model = Job
        fields = ["id", "note", "tags", "group"]
        read_only_fields = fields


class JobNotesChangeSerializer(serializers.Serializer[Any]):
    """What a PATCH may change; a field left out keeps its value. The limits are
    jobs.notes's, checked there so the page and the API answer alike."""

    note = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text=f"Free text, at most {NOTE_MAX:,} characters; empty clears it.",
    )
    tags = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text=f"The whole set (it replaces the old one): at most {TAGS_MAX} tags of at most "
        f"{TAG_MAX} letters, digits, '-', '_' and '.', stored lower-case.",
    )
    group = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text=f"One label (letters, digits, '-', '_', '.', at most {GROUP_MAX}) that runs "
        "compared together share, e.g. the seeds of one setting; empty: none.",
    )


class JobNotesView(APIView):
    def _job(self, request: Request, job_id: int) -> Job:
        # Missing and not-yours answer alike, as for the job itself.
        job = job_for_viewer(user=request.user, job_id=job_id)
        if job is None:
            raise NotFound()
        return job

    @extend_schema(operation_id="jobs_notes_retrieve", responses=JobNotesSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        """The run's note, tags and group."""
        return Response(JobNotesSerializer(self._job(request, job_id)).data)

    @extend_schema(
        operation_id="jobs_notes_update",
        request=JobNotesChangeSerializer,
        responses=JobNotesSerializer,
    )
    def patch(self, request: Request, job_id: int) -> Response:
        """Change the run's note, tags or group (its submitter or a project owner)."""
        job = self._job(request, job_id)
        changes = JobNotesChangeSerializer(data=request.data)
        changes.is_valid(raise_exception=True)
        job = job_annotate(job=job, user=request_user(request), **changes.validated_data)
        return Response(JobNotesSerializer(job).data)
