"""`manage.py check` (and every start): a half-set single sign-on names what to set."""

from typing import Any

from django.core.checks import CheckMessage, Error, register

from accounts.sso.claims import MappingError
from accounts.sso.config import group_rules, ldap_enabled, ldap_missing, oidc_enabled, oidc_missing

HINT = "See docs/sso.md."


@register()
def sso_settings_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    errors: list[CheckMessage] = []
    if oidc_enabled() and (missing := oidc_missing()):
        errors.append(
            Error(
                f"OIDC_RP_CLIENT_ID is set, so OpenID Connect is on, but not {', '.join(missing)}: "
                "copy them from the provider's /.well-known/openid-configuration.",
                hint=HINT,
                id="accounts.E001",
            )
        )
    if ldap_enabled() and (missing := ldap_missing()):
        errors.append(
            Error(
                f"LDAP_SERVER_URL is set, so LDAP log-in is on, but not {', '.join(missing)}.",
                hint=HINT,
                id="accounts.E002",
            )
        )
    try:
        group_rules()
    except MappingError as exc:
        errors.append(Error(str(exc), hint=HINT, id="accounts.E003"))
    return errors
