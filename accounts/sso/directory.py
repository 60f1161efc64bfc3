"""LDAP log-in: a user's password checked by binding as them, their attributes and groups read.

ldap3 directly, not django-python3-ldap (built on it): that backend makes and finds the
portal user by its user name (update_or_create on `username`), so a directory's `admin`
would become the portal's local `admin`, and it reads no groups. Here the directory is
asked three things (find the entry, bind as it, list its groups) and the portal user is
matched on the entry's own unchanging id (LDAP_SUBJECT_ATTRIBUTE), like an OpenID
provider's subject. Pure Python: nothing to build on a fresh machine.
"""

import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from ldap3 import Connection, Server
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars

from accounts.sso.claims import ExternalProfile, cluster_username_of

logger = logging.getLogger(__name__)

# Names of the attributes read besides the configured ones.
MAIL, GIVEN_NAME, SURNAME, GROUP_NAME = "mail", "givenName", "sn", "cn"


@dataclass(frozen=True)
class DirectoryConfig:
    url: str
    start_tls: bool
    bind_dn: str
    bind_password: str
    user_base: str
    user_filter: str
    username_attribute: str
    subject_attribute: str
    group_base: str
    group_filter: str
    timeout: float
    # A person outside this group (its cn) neither signs in nor stays active; "": anyone.
    required_group: str = ""

    @property
    def issuer(self) -> str:
        # The user base, not the server's address: a directory moved to another host
        # (or a replica) keeps its people.
        return f"ldap:{self.user_base}"


def directory_config() -> DirectoryConfig:
    return DirectoryConfig(
        url=settings.LDAP_SERVER_URL,
        start_tls=settings.LDAP_START_TLS,
        bind_dn=settings.LDAP_BIND_DN,
        bind_password=settings.LDAP_BIND_PASSWORD,
        user_base=settings.LDAP_USER_BASE,
        user_filter=settings.LDAP_USER_FILTER,
        username_attribute=settings.LDAP_USERNAME_ATTRIBUTE,
        subject_attribute=settings.LDAP_SUBJECT_ATTRIBUTE,
        group_base=settings.LDAP_GROUP_BASE or settings.LDAP_USER_BASE,
        group_filter=settings.LDAP_GROUP_FILTER,
        timeout=settings.LDAP_TIMEOUT,
        required_group=settings.LDAP_REQUIRED_GROUP,
    )


def _connection(config: DirectoryConfig, server: Server, dn: str, password: str) -> Connection:
    connection = Connection(
        server,
        user=dn or None,
        password=password or None,
        # Whole seconds: ldap3 packs it into a socket option as an integer.
        receive_timeout=max(1, math.ceil(config.timeout)),
        raise_exceptions=False,
    )
    connection.open()
    if config.start_tls:
        connection.start_tls()
    return connection


class DirectoryError(Exception):
    """The directory could not be asked (unreachable, the search account refused, a search
    failed); the message names the directory and the error."""


@contextmanager
def directory_searcher(config: DirectoryConfig) -> Iterator[Connection]:
    """A connection bound as the search account, unbound after; DirectoryError if it cannot."""
    server = Server(config.url, connect_timeout=config.timeout)
    try:
        searcher = _connection(config, server, config.bind_dn, config.bind_password)
    except LDAPException as exc:
        raise DirectoryError(f"{config.url}: {exc}") from exc
    try:
        if not searcher.bind():
            raise DirectoryError(
                f"{config.url} refused the search account {config.bind_dn!r}: "
                f"{searcher.result.get('description')}"
            )
        yield searcher
    finally:
        searcher.unbind()


def directory_search(
    searcher: Connection, base: str, query: str, attributes: list[str]
) -> list[dict[str, Any]]:
    """The entries a search finds (dn and attributes); DirectoryError when it fails (a size
    limit included), never a short answer read as people gone."""
    try:
        searcher.search(base, query, attributes=attributes)
    except LDAPException as exc:
        raise DirectoryError(f"searching {base}: {exc}") from exc
    if searcher.result.get("result") != 0:
        raise DirectoryError(
            f"searching {base} failed: {searcher.result.get('description')} "
            f"{searcher.result.get('message') or ''}".strip()
        )
    return [e for e in searcher.response or [] if e.get("type") == "searchResEntry"]


def first_value(entry: dict[str, object], name: str) -> str:
    value = entry.get(name)
    if isinstance(value, list):
        value = value[0] if value else ""
    return value if isinstance(value, str) else ""


def directory_authenticate(
    *, config: DirectoryConfig, username: str, password: str
) -> ExternalProfile | None:
    """The profile of the directory user `username` whose password this is; None otherwise.

    None too when the directory cannot be reached (logged): the log-in form then says the
    name and password did not match, and the log says why.
    """
    if not username or not password:
        # An empty password is an anonymous bind, which a directory lets through.
        return None
    server = Server(config.url, connect_timeout=config.timeout)
    try:
        return _authenticate(config, server, username, password)
    except LDAPException as exc:
        logger.error("LDAP log-in of %r at %s failed: %s", username, config.url, exc)
        return None


def _authenticate(
    config: DirectoryConfig, server: Server, username: str, password: str
) -> ExternalProfile | None:
    searcher = _connection(config, server, config.bind_dn, config.bind_password)
    try:
        if not searcher.bind():
            logger.error(
                "LDAP search account %r refused at %s: %s",
                config.bind_dn,
                config.url,
                searcher.result.get("description"),
            )
            return None
        name = escape_filter_chars(username)
        wanted = [config.username_attribute, config.subject_attribute, MAIL, GIVEN_NAME, SURNAME]
        searcher.search(
            config.user_base,
            f"(&{config.user_filter}({config.username_attribute}={name}))",
            attributes=wanted,
            size_limit=2,
        )
        entries = [e for e in searcher.response or [] if e.get("type") == "searchResEntry"]
        if len(entries) != 1:
            return None  # nobody, or a name two entries share: neither signs in
        user_dn = entries[0]["dn"]
        attributes = entries[0]["attributes"]
        if not _password_matches(config, server, user_dn, password):
            return None
        groups = _groups(
            config, searcher, user_dn, first_value(attributes, config.username_attribute)
        )
    finally:
        searcher.unbind()
    if config.required_group and config.required_group not in groups:
        logger.info("LDAP log-in of %r refused: not in %s", username, config.required_group)
        return None
    subject = first_value(attributes, config.subject_attribute)
    if not subject:
        logger.error("%s has no %s: set LDAP_SUBJECT_ATTRIBUTE", user_dn, config.subject_attribute)
        return None
    cluster_name = cluster_username_of(first_value(attributes, config.username_attribute))
    return ExternalProfile(
        issuer=config.issuer,
        subject=subject,
        username=cluster_name or username,
        cluster_username=cluster_name,
        email=first_value(attributes, MAIL),
        first_name=first_value(attributes, GIVEN_NAME),
        last_name=first_value(attributes, SURNAME),
        groups=groups,
    )


def _password_matches(config: DirectoryConfig, server: Server, dn: str, password: str) -> bool:
    as_user = _connection(config, server, dn, password)
    try:
        return bool(as_user.bind())
    finally:
        as_user.unbind()


def _groups(
    config: DirectoryConfig, searcher: Connection, user_dn: str, username: str
) -> frozenset[str]:
    query = config.group_filter.format(
        user_dn=escape_filter_chars(user_dn), username=escape_filter_chars(username)
    )
    searcher.search(config.group_base, query, attributes=[GROUP_NAME])
    return frozenset(
        name
        for entry in searcher.response or []
        if entry.get("type") == "searchResEntry"
        and (name := first_value(entry["attributes"], GROUP_NAME))
    )
