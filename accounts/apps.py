from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"

    def ready(self) -> None:
        # Registers the bearer-token scheme with drf-spectacular, and the single sign-on
        # settings' check.
        from accounts import schema  # noqa: F401
        from accounts.sso import checks  # noqa: F401
