"""A provider's claims (or a directory's attributes) into a portal profile: pure, no Django.

One rule for OpenID Connect and LDAP alike: who the person is (issuer and subject), the
cluster user name, and what their groups give them in the portal (projects, staff).
"""

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# A POSIX user name a cluster takes (useradd's default rule, 32 characters).
CLUSTER_USERNAME = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
# Project roles, strongest first: a person in two groups of one project gets the stronger.
ROLES = ("owner", "member", "viewer")


class MappingError(ValueError):
    """SSO_GROUP_PROJECTS cannot be read; the message says what to change."""


@dataclass(frozen=True)
class ProjectGrant:
    """What one group gives its members: a role in a project."""

    project: str  # the project's slug
    role: str


@dataclass(frozen=True)
class ExternalProfile:
    """One person as a provider describes them at a sign-in."""

    issuer: str
    subject: str
    username: str  # the name the provider shows, for the portal user's name
    cluster_username: str | None
    email: str = ""
    first_name: str = ""
    last_name: str = ""
    groups: frozenset[str] = frozenset()


def cluster_username_of(value: object) -> str | None:
    """The claim's value when a cluster would take it as a user name, else None."""
    if isinstance(value, str) and CLUSTER_USERNAME.fullmatch(value):
        return value
    return None


def groups_of(value: object) -> frozenset[str]:
    """A groups claim as names: a list of strings (Keycloak may prefix a path, `/team`)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple):
        return frozenset()
    return frozenset(item.lstrip("/") for item in value if isinstance(item, str) and item)


def _text(claims: Mapping[str, Any], name: str) -> str:
    value = claims.get(name)
    return value if isinstance(value, str) else ""


def profile_from_claims(
    claims: Mapping[str, Any], *, issuer: str, username_claim: str, groups_claim: str
) -> ExternalProfile:
    """An OpenID Connect user's profile from their ID token and userinfo claims."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise ValueError("the provider's claims have no subject (sub)")
    cluster_username = cluster_username_of(claims.get(username_claim))
    username = (
        cluster_username
        or _text(claims, "preferred_username")
        or _text(claims, "email").partition("@")[0]
        or subject
    )
    return ExternalProfile(
        issuer=issuer,
        subject=subject,
        username=username,
        cluster_username=cluster_username,
        email=_text(claims, "email"),
        first_name=_text(claims, "given_name"),
        last_name=_text(claims, "family_name"),
        groups=groups_of(claims.get(groups_claim)),
    )


def group_projects_parse(raw: str | Mapping[str, Any]) -> dict[str, tuple[ProjectGrant, ...]]:
    """SSO_GROUP_PROJECTS: a JSON object, group name -> {"project": slug, "role": role}
    (or a list of such objects). MappingError names the entry to fix."""
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise MappingError(f"SSO_GROUP_PROJECTS is not JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise MappingError(
            'SSO_GROUP_PROJECTS must be a JSON object: {"group": {"project": "slug", '
            '"role": "member"}}'
        )
    mapping: dict[str, tuple[ProjectGrant, ...]] = {}
    for group, entries in raw.items():
        items = entries if isinstance(entries, list) else [entries]
        grants = []
        for item in items:
            if not isinstance(item, Mapping) or not isinstance(item.get("project"), str):
                raise MappingError(
                    f'SSO_GROUP_PROJECTS["{group}"]: give {{"project": "<slug>", '
                    f'"role": "{ROLES[1]}"}}'
                )
            role = item.get("role", "member")
            if role not in ROLES:
                raise MappingError(
                    f'SSO_GROUP_PROJECTS["{group}"]: role "{role}" is not one of {", ".join(ROLES)}'
                )
            grants.append(ProjectGrant(project=item["project"], role=role))
        mapping[str(group)] = tuple(grants)
    return mapping


def memberships_wanted(
    groups: Iterable[str], mapping: Mapping[str, tuple[ProjectGrant, ...]]
) -> dict[str, str]:
    """Project slug -> role that the person's groups give them (the strongest of several)."""
    wanted: dict[str, str] = {}
    for group in groups:
        for grant in mapping.get(group, ()):
            held = wanted.get(grant.project)
            if held is None or ROLES.index(grant.role) < ROLES.index(held):
                wanted[grant.project] = grant.role
    return wanted


def mapped_projects(mapping: Mapping[str, tuple[ProjectGrant, ...]]) -> frozenset[str]:
    """The projects whose members the directory decides: every project the mapping names."""
    return frozenset(grant.project for grants in mapping.values() for grant in grants)


def staff_wanted(groups: Iterable[str], staff_group: str) -> bool | None:
    """Whether the person is staff by their groups; None when no staff group is set."""
    if not staff_group:
        return None
    return staff_group in set(groups)
