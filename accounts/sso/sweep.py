"""The directory sweep: every portal user who signed in through LDAP, looked up again, and
those the directory no longer has (or who left LDAP_REQUIRED_GROUP) disabled.

Only LDAP identities: an OpenID provider answers questions about a person only with a token
of theirs, which the portal does not keep; those sessions are checked with the provider
instead (accounts.sso.refresh). The sweep is cheap: one LDAP search per page of identities
(and one for the required group's members), whatever the number of people.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ldap3 import Connection
from ldap3.utils.conv import escape_filter_chars

from accounts.models import ExternalIdentity
from accounts.sso.access import access_revoke_by_directory
from accounts.sso.directory import (
    DirectoryConfig,
    DirectoryError,
    directory_search,
    directory_searcher,
    first_value,
)

logger = logging.getLogger(__name__)

# What a group entry lists its members by (groupOfNames, groupOfUniqueNames, posixGroup):
# the same three LDAP_GROUP_FILTER's default matches at a sign-in.
MEMBER_DN_ATTRIBUTES = ("member", "uniqueMember")
MEMBER_UID_ATTRIBUTE = "memberUid"


@dataclass
class SweepReport:
    """What one sweep did: identities looked up, pages (one search each), users disabled."""

    checked: int = 0
    pages: int = 0
    disabled: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class GroupMembers:
    dns: frozenset[str]
    uids: frozenset[str]

    def has(self, dn: str, uid: str) -> bool:
        return dn.lower() in self.dns or uid in self.uids


def directory_sweep(*, config: DirectoryConfig, page_size: int) -> SweepReport:
    """Disable every active portal user whose LDAP identity the directory no longer has, or
    who is outside the required group; DirectoryError (nobody disabled by the page it
    stopped at) when the directory cannot be asked."""
    report = SweepReport()
    with directory_searcher(config) as searcher:
        members = _required_members(config, searcher) if config.required_group else None
        after = 0
        while True:
            page = list(
                ExternalIdentity.objects.filter(
                    issuer=config.issuer, pk__gt=after, user__is_active=True
                )
                .order_by("pk")
                .values_list("pk", "user_id", "subject")[:page_size]
            )
            if not page:
                break
            report.pages += 1
            report.checked += len(page)
            found = _people(config, searcher, [subject for _, _, subject in page])
            reasons: dict[int, str] = {}
            for _, user_id, subject in page:
                reason = _why_out(config, found.get(subject.lower()), members)
                if reason:
                    reasons[user_id] = reason
            if reasons:
                report.disabled += access_revoke_by_directory(reasons=reasons)
            after = page[-1][0]
            if len(page) < page_size:
                break
    logger.info(
        "directory sweep of %s: %d identities in %d pages, %d users disabled",
        config.issuer,
        report.checked,
        report.pages,
        len(report.disabled),
    )
    return report


def _why_out(
    config: DirectoryConfig, person: tuple[str, str] | None, members: GroupMembers | None
) -> str:
    """Why the person may not stay (a sentence for the audit trail); "" when they may."""
    if person is None:
        return f"no longer in the directory under {config.user_base} ({config.user_filter})"
    dn, uid = person
    if members is not None and not members.has(dn, uid):
        return f"{dn} is no longer in the group {config.required_group} (LDAP_REQUIRED_GROUP)"
    return ""


def _people(
    config: DirectoryConfig, searcher: Connection, subjects: Sequence[str]
) -> dict[str, tuple[str, str]]:
    """One search for a page's people: subject (lower case) -> (their dn, their uid)."""
    wanted = "".join(
        f"({config.subject_attribute}={escape_filter_chars(subject)})" for subject in subjects
    )
    entries = directory_search(
        searcher,
        config.user_base,
        f"(&{config.user_filter}(|{wanted}))",
        [config.subject_attribute, config.username_attribute],
    )
    people: dict[str, tuple[str, str]] = {}
    for entry in entries:
        subject = first_value(entry["attributes"], config.subject_attribute)
        if subject:
            people[subject.lower()] = (
                entry["dn"],
                first_value(entry["attributes"], config.username_attribute),
            )
    return people


def _required_members(config: DirectoryConfig, searcher: Connection) -> GroupMembers:
    """The required group's members, read once per sweep; DirectoryError when there is no
    such group (a misspelt name must not disable everyone)."""
    name = escape_filter_chars(config.required_group)
    entries = directory_search(
        searcher,
        config.group_base,
        f"(cn={name})",
        [*MEMBER_DN_ATTRIBUTES, MEMBER_UID_ATTRIBUTE],
    )
    if not entries:
        raise DirectoryError(
            f"LDAP_REQUIRED_GROUP {config.required_group!r}: no group of that cn under "
            f"{config.group_base}; nobody was disabled"
        )
    dns: set[str] = set()
    uids: set[str] = set()
    for entry in entries:
        attributes = entry["attributes"]
        for name_ in MEMBER_DN_ATTRIBUTES:
            dns.update(str(value).lower() for value in _values(attributes.get(name_)))
        uids.update(str(value) for value in _values(attributes.get(MEMBER_UID_ATTRIBUTE)))
    return GroupMembers(dns=frozenset(dns), uids=frozenset(uids))


def _values(value: object) -> list[object]:
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple) else [value]
