"""The REST API under /api/v1/: projects, clusters, jobs, and each attempt's data."""

from django.urls import URLPattern, URLResolver, include, path

from web.clusters import api as clusters_api
from web.jobs import api as jobs_api
from web.jobs import code_api
from web.projects import api as projects_api
from web.sweeps import api as sweeps_api

urlpatterns: list[URLPattern | URLResolver] = [
    path("projects/", projects_api.ProjectListView.as_view(), name="api-projects"),
    path("projects/<slug:slug>/", projects_api.ProjectDetailView.as_view(), name="api-project"),
    path("projects/<slug:slug>/code/", code_api.CodeUploadView.as_view(), name="api-code-upload"),
    path(
        "projects/<slug:slug>/code/<str:sha256>/",
        code_api.CodeDetailView.as_view(),
        name="api-code",
    ),
    path("clusters/", clusters_api.ClusterListView.as_view(), name="api-clusters"),
    path("jobs/", jobs_api.JobListCreateView.as_view(), name="api-jobs"),
    path("jobs/<int:job_id>/", jobs_api.JobDetailView.as_view(), name="api-job"),
    path("jobs/<int:job_id>/cancel/", jobs_api.JobCancelView.as_view(), name="api-job-cancel"),
    path("jobs/<int:job_id>/clone/", jobs_api.JobCloneView.as_view(), name="api-job-clone"),
    path(
        "jobs/<int:job_id>/attempts/", jobs_api.AttemptListView.as_view(), name="api-job-attempts"
    ),
    path("jobs/<int:job_id>/events/", jobs_api.JobEventListView.as_view(), name="api-job-events"),
    path("sweeps/", sweeps_api.SweepListCreateView.as_view(), name="api-sweeps"),
    path("sweeps/<int:sweep_id>/", sweeps_api.SweepDetailView.as_view(), name="api-sweep"),
    path("", include("web.attempts.urls")),
]
