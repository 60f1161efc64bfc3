from django.urls import path

from web.jobs import views

urlpatterns = [
    path("", views.job_list, name="job-list"),
    path("new/", views.job_new, name="job-new"),
    path("cancel/", views.jobs_cancel, name="jobs-cancel"),
    path("states/", views.job_states, name="job-states"),
    path("<int:job_id>/cancel/", views.job_cancel_view, name="job-cancel"),
]
