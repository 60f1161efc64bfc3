from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from clusters.drain import node_drain_view
from monitoring.metrics import metrics_view
from monitoring.plan_views import job_preview
from monitoring.runs_views import compare_curves, compare_page, runs_table
from monitoring.views import job_page
from portal import views
from sweeps.views import sweep_list, sweep_new

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/<int:job_id>/", job_page, name="job-page"),
    # The submit form's preview: jobs.views.form_preview, with monitoring's plan.
    path("jobs/new/preview/", job_preview, name="job-preview"),
    path("jobs/", include("jobs.urls")),
    path("alerts/", include("monitoring.alert_urls")),
    path("clusters/<slug:cluster>/nodes/<str:node>/drain/", node_drain_view, name="node-drain"),
    path("clusters/", include("jobs.cluster_urls")),
    path("projects/<slug:slug>/", views.project_page, name="project-page"),
    path("projects/<slug:slug>/runs/", runs_table, name="project-runs"),
    path("projects/<slug:slug>/compare/", compare_page, name="project-compare"),
    path("projects/<slug:slug>/compare/curves", compare_curves, name="project-compare-curves"),
    path("projects/<slug:slug>/sweeps/", sweep_list, name="project-sweeps"),
    path("projects/<slug:slug>/sweeps/new/", sweep_new, name="sweep-new"),
    path("sweeps/", include("sweeps.urls")),
    path("healthz", views.healthz, name="healthz"),
    # Prometheus's scrape, with the metrics token (monitoring.metrics).
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("portal.api_urls")),
    path("account/", include("accounts.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

handler404 = "portal.views.not_found"

admin.site.site_header = "GPU portal administration"
admin.site.site_title = "GPU portal admin"
