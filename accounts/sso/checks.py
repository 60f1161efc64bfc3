"""`manage.py check` (and every start): a half-set single sign-on names what to set."""

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from accounts.sso.claims import MappingError
from accounts.sso.config import group_rules, ldap_enabled, ldap_missing, oidc_enabled, oidc_missing

HINT = "See docs/sso.md."
# OpenLDAP's default size limit for a search: a page of people must fit in one answer.
MAX_SWEEP_PAGE = 500


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
    errors += _revocation_errors()
    try:
        group_rules()
    except MappingError as exc:
        errors.append(Error(str(exc), hint=HINT, id="accounts.E003"))
    return errors


def _revocation_errors() -> list[CheckMessage]:
    """The re-check interval and the sweep's pace: numbers a typo must not turn off."""
    errors: list[CheckMessage] = []
    if settings.OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS <= 0:
        errors.append(
            Error(
                "OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS must be a positive number of seconds "
                "(900: a session is checked with the provider every 15 minutes).",
                hint=HINT,
                id="accounts.E004",
            )
        )
    if settings.LDAP_SWEEP_INTERVAL <= 0:
        errors.append(
            Error(
                "LDAP_SWEEP_INTERVAL must be a positive number of seconds (600: every 10 minutes).",
                hint=HINT,
                id="accounts.E005",
            )
        )
    if not 1 <= settings.LDAP_SWEEP_PAGE_SIZE <= MAX_SWEEP_PAGE:
        errors.append(
            Error(
                f"LDAP_SWEEP_PAGE_SIZE must be 1 to {MAX_SWEEP_PAGE} (people per directory "
                "search; 100 by default).",
                hint=HINT,
                id="accounts.E006",
            )
        )
    return errors
