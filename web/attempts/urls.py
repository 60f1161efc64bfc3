"""REST and live-stream endpoints of one attempt's data, under /api/v1/."""

from django.urls import URLPattern, path

from web.attempts import api
from web.goodput import api as api_goodput
from web.live import streams
from web.runs import api as api_runs

_ATTEMPT = "jobs/<int:job_id>/attempts/<int:number>"

urlpatterns: list[URLPattern] = [
    path(f"{_ATTEMPT}/log", api.LogRangeView.as_view(), name="attempt-log"),
    path(f"{_ATTEMPT}/log/download", api.LogDownloadView.as_view(), name="attempt-log-download"),
    path(f"{_ATTEMPT}/log/stream", streams.log_stream, name="attempt-log-stream"),
    path(f"{_ATTEMPT}/metrics/stream", streams.metric_stream, name="attempt-metrics-stream"),
    path(f"{_ATTEMPT}/gpus", api.GpuSamplesView.as_view(), name="attempt-gpus"),
    path(f"{_ATTEMPT}/series", api.SeriesNamesView.as_view(), name="attempt-series-names"),
    path(f"{_ATTEMPT}/series/<path:name>", api.SeriesView.as_view(), name="attempt-series"),
    path("jobs/<int:job_id>/failures", api.JobFailuresView.as_view(), name="job-failures"),
    path(
        "jobs/<int:job_id>/efficiency",
        api_goodput.JobEfficiencyView.as_view(),
        name="job-efficiency",
    ),
    path(
        "projects/<slug:slug>/goodput",
        api_goodput.ProjectGoodputView.as_view(),
        name="project-goodput",
    ),
    path("projects/<slug:slug>/runs/", api_runs.ProjectRunsView.as_view(), name="api-project-runs"),
]
