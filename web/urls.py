from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from web import views
from web.clusters.drain import node_drain_view
from web.jobs.page import job_page
from web.jobs.plan import job_preview
from web.metrics import metrics_view
from web.runs.views import compare_curves, compare_page, runs_table
from web.sweeps.views import sweep_list, sweep_new

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/<int:job_id>/", job_page, name="job-page"),
    # The submit form's preview: web.jobs.views.form_preview, with monitoring's plan.
    path("jobs/new/preview/", job_preview, name="job-preview"),
    path("jobs/", include("web.jobs.urls")),
    path("alerts/", include("web.alerts.urls")),
    path("clusters/<slug:cluster>/nodes/<str:node>/drain/", node_drain_view, name="node-drain"),
    path("clusters/", include("web.clusters.urls")),
    path("projects/<slug:slug>/", views.project_page, name="project-page"),
    path("projects/<slug:slug>/runs/", runs_table, name="project-runs"),
    path("projects/<slug:slug>/compare/", compare_page, name="project-compare"),
    path("projects/<slug:slug>/compare/curves", compare_curves, name="project-compare-curves"),
    path("projects/<slug:slug>/sweeps/", sweep_list, name="project-sweeps"),
    path("projects/<slug:slug>/sweeps/new/", sweep_new, name="sweep-new"),
    path("sweeps/", include("web.sweeps.urls")),
    path("healthz", views.healthz, name="healthz"),
    # Prometheus's scrape, with the metrics token (monitoring.prometheus.exposition).
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("web.api_urls")),
    path("account/", include("web.accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

handler404 = "web.views.not_found"

admin.site.site_header = "GPU portal administration"
admin.site.site_title = "GPU portal admin"
