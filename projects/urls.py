from django.urls import path

from projects import views

urlpatterns = [
    path("<slug:slug>/", views.project_page, name="project-page"),
]
