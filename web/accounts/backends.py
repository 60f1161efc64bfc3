"""The single sign-on backends Django asks at a log-in (AUTHENTICATION_BACKENDS).

Here, above `accounts`, `clusters` and `projects`, because a sign-in changes all three in
one transaction: the user and their identity (accounts), their certificate logins on the
clusters as their cluster user name (clusters), and the memberships their groups give
(projects).
"""

import logging
from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest

from accounts.selectors import cluster_username_for
from accounts.sso.claims import ExternalProfile, mapped_projects, memberships_wanted, staff_wanted
from accounts.sso.config import group_rules, ldap_enabled
from accounts.sso.directory import directory_authenticate, directory_config
from accounts.sso.oidc import PortalOIDCBackend
from accounts.sso.services import identity_sign_in
from clusters.provisioning import cluster_accounts_follow_name
from projects.memberships import memberships_follow_groups

logger = logging.getLogger(__name__)


@transaction.atomic
def sso_sign_in(profile: ExternalProfile) -> User | None:
    """The portal user of a provider's profile, with staff and memberships as its groups say
    and a certificate account under their cluster user name on each cluster that trusts the
    portal's CA; None for a user disabled in the portal."""
    rules = group_rules()
    user = identity_sign_in(profile=profile, staff=staff_wanted(profile.groups, rules.staff_group))
    if user is None:
        return None
    memberships_follow_groups(
        user=user,
        wanted=memberships_wanted(profile.groups, rules.projects),
        managed=mapped_projects(rules.projects),
    )
    cluster_accounts_follow_name(user=user, cluster_username=cluster_username_for(user))
    return user


class OIDCBackend(PortalOIDCBackend):
    """OpenID Connect (accounts.sso.oidc): the callback's code into a portal user."""

    def sign_in(self, profile: ExternalProfile) -> User | None:
        return sso_sign_in(profile)


class DirectoryBackend(ModelBackend):
    """LDAP (accounts.sso.directory): the log-in form's name and password, checked there."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        if not ldap_enabled() or not username or not password:
            return None
        profile = directory_authenticate(
            config=directory_config(), username=username, password=password
        )
        return None if profile is None else sso_sign_in(profile)
