from django.urls import URLPattern, path

from web.accounts import views

urlpatterns: list[URLPattern] = [
    path("tokens/", views.token_page, name="account-tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke_view, name="account-token-revoke"),
]
