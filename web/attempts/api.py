"""REST reads behind the live job page: log byte ranges and metric series.

Live WebSocket deltas are hints that can be lost; these endpoints are what a
page uses to fill any gap, so every range they describe can be re-read here.
"""

import io
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.ssh import SSHError
from jobs.access import attempt_for_viewer, job_for_viewer
from jobs.models import Attempt
from jobs.rundir import gpu_series
from monitoring.ingest.records import record_sources
from monitoring.job_page.facts import attempt_total_steps, mfu_terms
from monitoring.job_page.selectors import job_failures
from monitoring.logs.store import log_read, log_read_any, log_tail
from monitoring.reading.kinds import series_kind
from monitoring.series.read import series_names, series_read
from portal_lib.bounds import BIGINT_MAX, INT_MAX
from portal_lib.csv_cells import SafeCsvWriter
from web.attempts.links import series_url

DEFAULT_LOG_LIMIT = 64 * 1024
MAX_LOG_LIMIT = 1024 * 1024
DOWNLOAD_CHUNK_BYTES = 1024 * 1024
DEFAULT_MAX_POINTS = 2000
MAX_POINTS_CAP = 10_000
MAX_TAIL_LINES = 10_000


def _attempt_or_404(request: Request, job_id: int, number: int) -> Attempt:
    # Missing and not-yours answer alike, so job ids leak nothing.
    attempt = attempt_for_viewer(user=request.user, job_id=job_id, number=number)
    if attempt is None:
        raise NotFound()
    return attempt


def _log_file_field() -> serializers.RegexField:
    # A plain name: it keys a stored file, and never reaches a path or a shell.
    return serializers.RegexField(
        r"^[A-Za-z0-9_+-][A-Za-z0-9_.+-]*$",
        max_length=255,
        default="stdout.log",
        error_messages={"invalid": "Give a file name of the run directory, such as stdout.log."},
        help_text="A file of the attempt's run directory.",
    )


class LogRangeQuerySerializer(serializers.Serializer[Any]):
    file = _log_file_field()
    offset = serializers.IntegerField(
        min_value=-1,
        max_value=BIGINT_MAX,
        default=0,
        help_text="First byte to read; -1 reads the last `limit` bytes.",
    )
    limit = serializers.IntegerField(
        min_value=0, max_value=MAX_LOG_LIMIT, default=DEFAULT_LOG_LIMIT, help_text="Bytes at most."
    )
    lines = serializers.IntegerField(
        min_value=1,
        max_value=MAX_TAIL_LINES,
        required=False,
        help_text="The last N lines instead of a byte range (offset and limit are ignored).",
    )


class LogDownloadQuerySerializer(serializers.Serializer[Any]):
    file = _log_file_field()


class LogSliceSerializer(serializers.Serializer[Any]):
    offset = serializers.IntegerField(help_text="First byte returned.")
    end = serializers.IntegerField(help_text="One past the last byte returned.")
    size = serializers.IntegerField(help_text="All bytes known of the file so far.")
    first_offset = serializers.IntegerField(help_text="Lowest offset still stored here.")
    text = serializers.CharField(help_text="The bytes decoded as UTF-8, bad bytes replaced.")


class SeriesNamesSerializer(serializers.Serializer[Any]):
    names = serializers.ListField(child=serializers.CharField())
    urls = serializers.DictField(
        child=serializers.CharField(),
        help_text="By name: the series' URL, its name percent-encoded (none for `.` or `..`).",
    )
    sources = serializers.DictField(
        child=serializers.CharField(),
        help_text="By name, for a series a trainer's own record file gives: where it comes "
        "from (`from TensorBoard events`, `from metrics.csv`, `from trainer_state.json`).",
    )
    kinds = serializers.DictField(
        child=serializers.CharField(),
        help_text="By name, the chart it belongs on: loss, token_rate, sample_rate, step_rate, "
        "step_time, total (a running count), mfu, pace (one node's), gpu, other.",
    )
    total_steps = serializers.IntegerField(
        allow_null=True,
        help_text="The last step: the spec's, else what the log said; null: unknown.",
    )
    mfu = serializers.DictField(
        help_text="source: printed (as the trainer printed it), computed (a fraction; with "
        "peak_tflops, gpus, model_params) or missing (with what is missing)."
    )


class SeriesQuerySerializer(serializers.Serializer[Any]):
    x_from = serializers.FloatField(
        required=False, allow_null=True, default=None, help_text="Lowest x; none: from the start."
    )
    x_to = serializers.FloatField(
        required=False, allow_null=True, default=None, help_text="Highest x; none: to the end."
    )
    max_points = serializers.IntegerField(
        # Two: the first and the last point are always kept.
        min_value=2,
        # Bounded as an integer column; what is asked past the cap gets the cap.
        max_value=INT_MAX,
        default=DEFAULT_MAX_POINTS,
        help_text=f"Points at most, capped at {MAX_POINTS_CAP}.",
    )
    format = serializers.ChoiceField(
        choices=["json", "csv"], default="json", help_text="csv: one `x,y` row per point."
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        x_from, x_to = attrs["x_from"], attrs["x_to"]
        if x_from is not None and x_to is not None and x_from > x_to:
            raise serializers.ValidationError({"x_to": "Give an x_to at or above x_from."})
        return attrs


class SeriesPointsSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    x = serializers.ListField(child=serializers.FloatField())
    y = serializers.ListField(
        child=serializers.FloatField(allow_null=True),
        help_text="null where the value was NaN or infinite (a gap).",
    )
    nonfinite = serializers.ListField(
        child=serializers.FloatField(), help_text="The xs whose value was NaN or infinite."
    )
    total = serializers.IntegerField(help_text="Points stored in the requested x range.")
    downsampled = serializers.BooleanField()


def _query(serializer_class: type[serializers.Serializer[Any]], request: Request) -> dict[str, Any]:
    query = serializer_class(data=request.query_params)
    # A 400 whose body names each bad parameter.
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


class LogRangeView(APIView):
    @extend_schema(
        operation_id="attempt_log_range",
        parameters=[LogRangeQuerySerializer],
        responses=LogSliceSerializer,
    )
    def get(self, request: Request, job_id: int, number: int) -> Response:
        """A byte range of an attempt's log file, decoded as text."""
        attempt = _attempt_or_404(request, job_id, number)
        query = _query(LogRangeQuerySerializer, request)
        if "lines" in query:
            # Very long lines: the tail is its last MAX_TAIL_BYTES, at a line start if any.
            piece = log_tail(attempt_id=attempt.pk, file=query["file"], lines=query["lines"])
            return Response(LogSliceSerializer(piece).data)
        try:
            piece = log_read_any(
                attempt=attempt, file=query["file"], offset=query["offset"], limit=query["limit"]
            )
        except SSHError as exc:
            return Response({"detail": str(exc)}, status=503)
        return Response(LogSliceSerializer(piece).data)


async def _stored_bytes(attempt: Attempt, file: str, start: int, stop: int) -> AsyncIterator[bytes]:
    # Async so that daphne streams chunk by chunk instead of buffering the file.
    read = sync_to_async(log_read_any)
    offset = start
    while offset < stop:
        piece = await read(
            attempt=attempt,
            file=file,
            offset=offset,
            limit=min(DOWNLOAD_CHUNK_BYTES, stop - offset),
        )
        if not piece.data:
            return
        yield piece.data
        offset = piece.end


class LogDownloadView(APIView):
    @extend_schema(
        operation_id="attempt_log_download",
        parameters=[LogDownloadQuerySerializer],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                response=OpenApiTypes.BINARY, description="All bytes stored of the file."
            )
        },
    )
    def get(self, request: Request, job_id: int, number: int) -> StreamingHttpResponse:
        """All stored bytes of an attempt's log file, as an attachment."""
        attempt = _attempt_or_404(request, job_id, number)
        file = _query(LogDownloadQuerySerializer, request)["file"]
        # Stop at the size known now, so a growing log still ends the download.
        bounds = log_read(attempt_id=attempt.pk, file=file, offset=0, limit=0)
        response = StreamingHttpResponse(
            # Bytes trimmed here come from the cluster's copy first.
            _stored_bytes(attempt, file, 0, bounds.size),
            content_type="application/octet-stream",
            headers={
                "Content-Disposition": (
                    f'attachment; filename="job-{job_id}-attempt-{number}-{file}"'
                ),
            },
        )
        return response


class SeriesNamesView(APIView):
    @extend_schema(operation_id="attempt_series_names", responses=SeriesNamesSerializer)
    def get(self, request: Request, job_id: int, number: int) -> Response:
        """Names of the metric series recorded for an attempt, with the chart each goes on."""
        attempt = _attempt_or_404(request, job_id, number)
        names = series_names(attempt_id=attempt.pk)
        urls = {name: series_url(job_id=job_id, number=number, name=name) for name in names}
        return Response(
            {
                "names": names,
                "urls": {k: v for k, v in urls.items() if v},
                "kinds": {name: series_kind(name) for name in names},
                "sources": record_sources(attempt_id=attempt.pk),
                "total_steps": attempt_total_steps(job=attempt.job, attempt_id=attempt.pk),
                "mfu": mfu_terms(job=attempt.job, attempt_id=attempt.pk),
            }
        )


class SeriesView(APIView):
    @extend_schema(
        operation_id="attempt_series_read",
        parameters=[SeriesQuerySerializer],
        responses={
            (200, "application/json"): SeriesPointsSerializer,
            (200, "text/csv"): OpenApiResponse(
                response=OpenApiTypes.STR, description="With format=csv: a header, then x,y rows."
            ),
        },
    )
    def get(self, request: Request, job_id: int, number: int, name: str) -> HttpResponseBase:
        """One series, downsampled to at most `max_points` points."""
        attempt = _attempt_or_404(request, job_id, number)
        query = _query(SeriesQuerySerializer, request)
        data = series_read(
            attempt_id=attempt.pk,
            name=name,
            x_from=query["x_from"],
            x_to=query["x_to"],
            max_points=min(query["max_points"], MAX_POINTS_CAP),
        )
        xs, ys = data.with_gaps()  # y null where the value was NaN or infinite
        if query["format"] == "csv":
            return _csv(name, xs, ys)
        # Built directly: SeriesPointsSerializer documents it, but would convert up to
        # 20,000 floats one field call at a time.
        body = {
            "name": name,
            "x": xs,
            "y": ys,
            "nonfinite": data.nonfinite,
            "total": data.total,
            "downsampled": data.downsampled,
        }
        return Response(body)


def _csv(name: str, xs: list[float], ys: list[float | None]) -> HttpResponse:
    out = io.StringIO()
    writer = SafeCsvWriter(out, lineterminator="\n")
    writer.writerow(["x", name])
    writer.writerows(zip(xs, ys, strict=True))
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return HttpResponse(
        out.getvalue(),
        content_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="{safe}.csv"'},
    )


class GpuQuerySerializer(serializers.Serializer[Any]):
    max_points = serializers.IntegerField(
        min_value=2,
        max_value=MAX_POINTS_CAP,
        default=500,
        help_text="Points at most per GPU and metric.",
    )


class PointsSerializer(serializers.Serializer[Any]):
    x = serializers.ListField(child=serializers.FloatField(), help_text="Unix seconds.")
    y = serializers.ListField(child=serializers.FloatField())


class GpuSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    index = serializers.IntegerField()
    metrics = serializers.DictField(
        child=PointsSerializer(), help_text="By metric: utilization, memory_used, ..."
    )


class GpusSerializer(serializers.Serializer[Any]):
    gpus = GpuSerializer(many=True)


class GpuSamplesView(APIView):
    @extend_schema(
        operation_id="attempt_gpu_samples",
        parameters=[GpuQuerySerializer],
        responses=GpusSerializer,
    )
    def get(self, request: Request, job_id: int, number: int) -> Response:
        """The GPU samples of every node of an attempt, by GPU and metric, downsampled."""
        attempt = _attempt_or_404(request, job_id, number)
        max_points = _query(GpuQuerySerializer, request)["max_points"]
        gpus: dict[tuple[str, int], dict[str, dict[str, list[float]]]] = {}
        for name in series_names(attempt_id=attempt.pk):
            gpu = gpu_series(name)
            if gpu is None:
                continue
            data = series_read(attempt_id=attempt.pk, name=name, max_points=max_points)
            gpus.setdefault((gpu.node, gpu.index), {})[gpu.metric] = {"x": data.xs, "y": data.ys}
        body = [
            {"node": node, "index": index, "metrics": metrics}
            for (node, index), metrics in sorted(gpus.items())
        ]
        return Response({"gpus": body})


class DiagnosisSerializer(serializers.Serializer[Any]):
    failure_class = serializers.CharField()
    title = serializers.CharField()
    explanation = serializers.CharField()
    fixes = serializers.ListField(child=serializers.CharField(), help_text="What to try.")
    evidence = serializers.CharField(help_text="The log line that gave it away.")
    rank = serializers.IntegerField(allow_null=True)
    node = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)


class AttemptDiagnosisSerializer(serializers.Serializer[Any]):
    attempt = serializers.IntegerField()
    state = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    node_list = serializers.CharField()
    resume_from = serializers.CharField()
    excluded_nodes = serializers.ListField(child=serializers.CharField())
    failure_class = serializers.CharField()
    diagnosis = DiagnosisSerializer()


class CheckpointSerializer(serializers.Serializer[Any]):
    attempt = serializers.IntegerField()
    name = serializers.CharField()
    step = serializers.IntegerField(allow_null=True)
    size = serializers.IntegerField()
    modified_at = serializers.DateTimeField()
    complete = serializers.BooleanField()
    path = serializers.CharField()
    resume = serializers.BooleanField(help_text="The one a restart would resume from.")


class StragglerSerializer(serializers.Serializer[Any]):
    kind = serializers.ChoiceField(choices=["step_rate", "gpu_utilization", "gpu_hot"])
    node = serializers.CharField()
    gpu = serializers.IntegerField(allow_null=True)
    value = serializers.FloatField()
    reference = serializers.FloatField()
    message = serializers.CharField()


class JobFailuresSerializer(serializers.Serializer[Any]):
    diagnoses = AttemptDiagnosisSerializer(many=True)
    checkpoints = CheckpointSerializer(many=True)
    resume_from = serializers.CharField(help_text="Where a restart would resume; empty: none.")
    stragglers = StragglerSerializer(many=True)
    hangs = serializers.ListField(
        child=serializers.DictField(), help_text="monitoring.hangs.selectors"
    )
    avoided_nodes = serializers.ListField(
        child=serializers.DictField(), help_text="monitoring.job_page.selectors.job_failures"
    )
    attempt = serializers.IntegerField(allow_null=True, help_text="The latest attempt.")


class JobFailuresView(APIView):
    @extend_schema(operation_id="job_failures", responses=JobFailuresSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        """Why each ended attempt failed (with fixes), the checkpoints, and live stragglers."""
        job = job_for_viewer(user=request.user, job_id=job_id)
        if job is None:
            raise NotFound()
        return Response(JobFailuresSerializer(job_failures(job=job)).data)
