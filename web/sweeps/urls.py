from django.urls import path

from web.sweeps import views

urlpatterns = [
    path("<int:sweep_id>/", views.sweep_page, name="sweep-page"),
    path(
        "<int:sweep_id>/trials/<int:number>/stop/", views.trial_stop_view, name="sweep-trial-stop"
    ),
    path("<int:sweep_id>/<slug:action>/", views.sweep_action, name="sweep-action"),
]
