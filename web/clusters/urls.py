from django.urls import path

from web.clusters import views

urlpatterns = [
    path("", views.cluster_list, name="cluster-list"),
    path("<slug:name>/", views.cluster_page, name="cluster-page"),
    path("<slug:name>/status.json", views.cluster_status_json, name="cluster-status"),
]
