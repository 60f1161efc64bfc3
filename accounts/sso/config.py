"""The single sign-on settings, read when used (a test or a site may change them)."""

from dataclasses import dataclass

from django.conf import settings

from accounts.sso.claims import ProjectGrant, group_projects_parse

# What OpenID Connect needs before it is offered (mozilla-django-oidc's names).
OIDC_REQUIRED = (
    "OIDC_RP_CLIENT_ID",
    "OIDC_OP_ISSUER",
    "OIDC_OP_AUTHORIZATION_ENDPOINT",
    "OIDC_OP_TOKEN_ENDPOINT",
    "OIDC_OP_USER_ENDPOINT",
    "OIDC_OP_JWKS_ENDPOINT",
)
LDAP_REQUIRED = ("LDAP_SERVER_URL", "LDAP_USER_BASE")


def oidc_enabled() -> bool:
    """OpenID Connect is on once its client id is set (the checks name what else is missing)."""
    return bool(getattr(settings, "OIDC_RP_CLIENT_ID", ""))


def oidc_missing() -> list[str]:
    return [name for name in OIDC_REQUIRED if not getattr(settings, name, "")]


def ldap_enabled() -> bool:
    return bool(getattr(settings, "LDAP_SERVER_URL", ""))


def ldap_missing() -> list[str]:
    return [name for name in LDAP_REQUIRED if not getattr(settings, name, "")]


def site_name() -> str:
    return str(settings.SSO_SITE_NAME)


@dataclass(frozen=True)
class GroupRules:
    """What groups give in the portal: projects (with a role) and staff."""

    projects: dict[str, tuple[ProjectGrant, ...]]
    staff_group: str


def group_rules() -> GroupRules:
    """The group mapping; MappingError (a ValueError) when SSO_GROUP_PROJECTS is malformed."""
    return GroupRules(
        projects=group_projects_parse(settings.SSO_GROUP_PROJECTS),
        staff_group=str(settings.SSO_STAFF_GROUP),
    )
