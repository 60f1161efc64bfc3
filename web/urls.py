"""Every URL of the portal in one map: the pages, then the REST API under /api/v1/.

URL names are what templates, tests and the Python client reverse; they never change
when a view moves.
"""

from django.contrib import admin
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from web import views
from web.accounts import sessions
from web.accounts import views as account_views
from web.alerts import views as alert_views
from web.attempts import api as attempt_api
from web.checkpoints import api as checkpoint_api
from web.checkpoints import views as checkpoint_views
from web.clusters import api as cluster_api
from web.clusters import views as cluster_views
from web.clusters.drain import node_drain_view
from web.clusters.nodes import cluster_nodes_page, node_clear_view, node_pin_view
from web.clusters.readiness import cluster_readiness_view
from web.goodput import api as goodput_api
from web.jobs import api as job_api
from web.jobs import code_api
from web.jobs import lineage as job_lineage
from web.jobs import views as job_views
from web.jobs.lineage_api import JobForkView, JobResumeView
from web.jobs.notes_api import JobNotesView
from web.jobs.page import job_page
from web.jobs.plan import job_preview
from web.jobs.starts import JobStartsView, job_starts
from web.keys import views as key_views
from web.live import streams
from web.metrics import metrics_view
from web.outbox import outbox_page
from web.overview.views import idle_policy_edit, overview_page
from web.projects import api as project_api
from web.runs import api as runs_api
from web.runs import views as runs_views
from web.sessions import run as session_run
from web.sessions.notice import session_notice_view
from web.sessions.views import session_lab
from web.sweeps import api as sweep_api
from web.sweeps import views as sweep_views

_ATTEMPT = "jobs/<int:job_id>/attempts/<int:number>"
_CKPT = "jobs/<int:job_id>/checkpoints"

api: list[URLPattern | URLResolver] = [
    path("projects/", project_api.ProjectListView.as_view(), name="api-projects"),
    path("projects/<slug:slug>/", project_api.ProjectDetailView.as_view(), name="api-project"),
    path("projects/<slug:slug>/code/", code_api.CodeUploadView.as_view(), name="api-code-upload"),
    path(
        "projects/<slug:slug>/code/<str:sha256>/",
        code_api.CodeDetailView.as_view(),
        name="api-code",
    ),
    path("clusters/", cluster_api.ClusterListView.as_view(), name="api-clusters"),
    path("jobs/", job_api.JobListCreateView.as_view(), name="api-jobs"),
    path("jobs/starts/", JobStartsView.as_view(), name="api-job-starts"),
    path("jobs/<int:job_id>/", job_api.JobDetailView.as_view(), name="api-job"),
    path("jobs/<int:job_id>/cancel/", job_api.JobCancelView.as_view(), name="api-job-cancel"),
    path("jobs/<int:job_id>/clone/", job_api.JobCloneView.as_view(), name="api-job-clone"),
    path("jobs/<int:job_id>/attempts/", job_api.AttemptListView.as_view(), name="api-job-attempts"),
    path("jobs/<int:job_id>/events/", job_api.JobEventListView.as_view(), name="api-job-events"),
    path("jobs/<int:job_id>/notes/", JobNotesView.as_view(), name="api-job-notes"),
    # A job's checkpoints: the index, a rule's preview, deletion, the rules (docs/checkpoints.md).
    path(f"{_CKPT}/", checkpoint_api.JobCheckpointsView.as_view(), name="api-job-checkpoints"),
    path(
        f"{_CKPT}/preview/",
        checkpoint_api.JobCheckpointPreviewView.as_view(),
        name="api-job-checkpoints-preview",
    ),
    path(
        f"{_CKPT}/delete/",
        checkpoint_api.JobCheckpointDeleteView.as_view(),
        name="api-job-checkpoints-delete",
    ),
    path(
        f"{_CKPT}/apply/",
        checkpoint_api.JobCheckpointApplyView.as_view(),
        name="api-job-checkpoints-apply",
    ),
    path(
        f"{_CKPT}/rule/",
        checkpoint_api.JobCheckpointRuleView.as_view(),
        name="api-job-checkpoints-rule",
    ),
    path(
        "projects/<slug:slug>/checkpoint-rule/",
        checkpoint_api.ProjectCheckpointRuleView.as_view(),
        name="api-project-checkpoint-rule",
    ),
    path("jobs/<int:job_id>/resume/", JobResumeView.as_view(), name="api-job-resume"),
    path("jobs/<int:job_id>/fork/", JobForkView.as_view(), name="api-job-fork"),
    path(
        "jobs/<int:job_id>/session-run/",
        session_run.SessionRunView.as_view(),
        name="api-session-run",
    ),
    path("sweeps/", sweep_api.SweepListCreateView.as_view(), name="api-sweeps"),
    path("sweeps/<int:sweep_id>/", sweep_api.SweepDetailView.as_view(), name="api-sweep"),
    # One attempt's data: log bytes by range, series, GPU samples, and their live streams.
    path(f"{_ATTEMPT}/log", attempt_api.LogRangeView.as_view(), name="attempt-log"),
    path(
        f"{_ATTEMPT}/log/download",
        attempt_api.LogDownloadView.as_view(),
        name="attempt-log-download",
    ),
    path(f"{_ATTEMPT}/log/stream", streams.log_stream, name="attempt-log-stream"),
    path(f"{_ATTEMPT}/metrics/stream", streams.metric_stream, name="attempt-metrics-stream"),
    path(f"{_ATTEMPT}/gpus", attempt_api.GpuSamplesView.as_view(), name="attempt-gpus"),
    path(f"{_ATTEMPT}/series", attempt_api.SeriesNamesView.as_view(), name="attempt-series-names"),
    path(f"{_ATTEMPT}/series/<path:name>", attempt_api.SeriesView.as_view(), name="attempt-series"),
    path("jobs/<int:job_id>/failures", attempt_api.JobFailuresView.as_view(), name="job-failures"),
    path(
        "jobs/<int:job_id>/efficiency",
        goodput_api.JobEfficiencyView.as_view(),
        name="job-efficiency",
    ),
    path(
        "projects/<slug:slug>/goodput",
        goodput_api.ProjectGoodputView.as_view(),
        name="project-goodput",
    ),
    path("projects/<slug:slug>/runs/", runs_api.ProjectRunsView.as_view(), name="api-project-runs"),
]

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.home, name="home"),
    path("login/", sessions.LoginPage.as_view(), name="login"),
    path("logout/", sessions.LogoutPage.as_view(), name="logout"),
    # Single sign-on through an OpenID provider (docs/sso.md); 404 until configured.
    path("sso/oidc/start/", sessions.OIDCStart.as_view(), name="oidc_authentication_init"),
    path(
        "sso/oidc/callback/",
        sessions.OIDCCallback.as_view(),
        name="oidc_authentication_callback",
    ),
    path("healthz", views.healthz, name="healthz"),
    # Jobs: the list, the submit form and its live preview (with a plan), a job's page.
    path("jobs/", job_views.job_list, name="job-list"),
    path("jobs/new/", job_views.job_new, name="job-new"),
    path("jobs/new/preview/", job_preview, name="job-preview"),
    path("jobs/new/starts/", job_starts, name="job-starts"),
    path("jobs/cancel/", job_views.jobs_cancel, name="jobs-cancel"),
    path("jobs/states/", job_views.job_states, name="job-states"),
    path("jobs/<int:job_id>/", job_page, name="job-page"),
    path("jobs/<int:job_id>/cancel/", job_views.job_cancel_view, name="job-cancel"),
    path(f"{_CKPT}/", checkpoint_views.checkpoints_page, name="job-checkpoints"),
    path(f"{_CKPT}/rule/", checkpoint_views.checkpoints_rule, name="job-checkpoints-rule"),
    path(
        f"{_CKPT}/delete/", checkpoint_views.checkpoints_delete_view, name="job-checkpoints-delete"
    ),
    path(f"{_CKPT}/apply/", checkpoint_views.checkpoints_apply, name="job-checkpoints-apply"),
    path("jobs/<int:job_id>/resume/", job_lineage.job_resume_view, name="job-resume"),
    path("jobs/<int:job_id>/fork/", job_lineage.job_fork_view, name="job-fork"),
    # A session's JupyterLab, proxied to the cluster (its base URL: jobs.interactive).
    path("sessions/<int:job_id>/lab/", session_lab, name="session-lab"),
    path("sessions/<int:job_id>/lab/<path:rest>", session_lab, name="session-lab-path"),
    path("sessions/<int:job_id>/run/", session_run.session_run_view, name="session-run"),
    path("sessions/<int:job_id>/notice.json", session_notice_view, name="session-notice"),
    path("mail/", outbox_page, name="outbox"),
    # Alerts and their rules.
    path("alerts/", alert_views.alerts_page, name="alerts"),
    path("alerts/read/", alert_views.alerts_read, name="alerts-read"),
    path("alerts/unread.json", alert_views.alerts_unread, name="alerts-unread"),
    path("alerts/rules/", alert_views.alert_rules_page, name="alert-rules"),
    path(
        "alerts/rules/<int:rule_id>/delete/",
        alert_views.alert_rule_delete,
        name="alert-rule-delete",
    ),
    # Clusters: the list, one cluster's partitions, nodes and queue, draining a node.
    path("clusters/", cluster_views.cluster_list, name="cluster-list"),
    path("clusters/<slug:name>/", cluster_views.cluster_page, name="cluster-page"),
    path(
        "clusters/<slug:name>/status.json",
        cluster_views.cluster_status_json,
        name="cluster-status",
    ),
    path("clusters/<slug:cluster>/nodes/<str:node>/drain/", node_drain_view, name="node-drain"),
    # The node health ledger's page (staff): avoid a node until cleared, or put it back.
    path("clusters/<slug:name>/nodes/", cluster_nodes_page, name="cluster-nodes"),
    path("clusters/<slug:cluster>/nodes/avoid/", node_pin_view, name="node-avoid-pin-named"),
    path("clusters/<slug:cluster>/nodes/<str:node>/avoid/", node_pin_view, name="node-avoid-pin"),
    path(
        "clusters/<slug:cluster>/nodes/<str:node>/clear/", node_clear_view, name="node-avoid-clear"
    ),
    path("clusters/<slug:name>/readiness/", cluster_readiness_view, name="cluster-readiness"),
    # A project: its page, runs table, compare view and sweeps.
    path("projects/<slug:slug>/", views.project_page, name="project-page"),
    path(
        "projects/<slug:slug>/checkpoint-rule/",
        checkpoint_views.project_checkpoint_rule,
        name="project-checkpoint-rule",
    ),
    path("projects/<slug:slug>/runs/", runs_views.runs_table, name="project-runs"),
    path("projects/<slug:slug>/compare/", runs_views.compare_page, name="project-compare"),
    path(
        "projects/<slug:slug>/compare/curves",
        runs_views.compare_curves,
        name="project-compare-curves",
    ),
    path("projects/<slug:slug>/sweeps/", sweep_views.sweep_list, name="project-sweeps"),
    path("projects/<slug:slug>/sweeps/new/", sweep_views.sweep_new, name="sweep-new"),
    path("sweeps/<int:sweep_id>/", sweep_views.sweep_page, name="sweep-page"),
    path(
        "sweeps/<int:sweep_id>/trials/<int:number>/stop/",
        sweep_views.trial_stop_view,
        name="sweep-trial-stop",
    ),
    path("sweeps/<int:sweep_id>/<slug:action>/", sweep_views.sweep_action, name="sweep-action"),
    # The staff overview: budgets' pace, the week's goodput and waste, idle policies in place.
    path("overview/", overview_page, name="staff-overview"),
    path("overview/<slug:slug>/idle-policy/", idle_policy_edit, name="overview-idle-policy"),
    # The user's personal API tokens.
    path("account/tokens/", account_views.token_page, name="account-tokens"),
    path(
        "account/tokens/<int:token_id>/revoke/",
        account_views.token_revoke_view,
        name="account-token-revoke",
    ),
    # The user's cluster logins, and the self-service key for a cluster that trusts no CA.
    path("account/cluster-logins/", key_views.login_list, name="login-list"),
    path("account/cluster-logins/<slug:cluster>/", key_views.login_key, name="login-key"),
    # Prometheus's scrape, with the metrics token.
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api)),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

handler404 = "web.views.not_found"

admin.site.site_header = "GPU portal administration"
admin.site.site_title = "GPU portal admin"
