"""The cluster accounts a person's single sign-on gives them: one on each cluster that trusts
the portal's CA, logging in by certificate as their cluster user name, holding no key.

Called at every sign-in (web.accounts.backends) with the name the provider gave; this
module knows only a user and a name, so `accounts` never has to import `clusters`.
"""

import logging

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from clusters.models import POSIX_USER_NAME, Authentication, Cluster, ClusterAccount

logger = logging.getLogger(__name__)


@transaction.atomic
def cluster_accounts_follow_name(
    *, user: AbstractBaseUser, cluster_username: str | None
) -> list[ClusterAccount]:
    """The user's certificate accounts, made or renamed to `cluster_username` on every active
    cluster that trusts the portal's CA; the accounts, by cluster name.

    None (the provider gave no name a cluster would take) makes and changes nothing. An
    account an admin set to another way in (an installed or a stored key) is theirs: it
    keeps its name and key, and is not among those returned.
    """
    if cluster_username is None:
        return []
    POSIX_USER_NAME(cluster_username)
    clusters = Cluster.objects.filter(is_active=True, trusts_portal_ca=True).order_by("name")
    held = {
        account.cluster_id: account
        for account in ClusterAccount.objects.select_for_update().filter(
            user_id=user.pk, cluster__in=clusters
        )
    }
    followed = []
    for cluster in clusters:
        account = held.get(cluster.pk)
        if account is None:
            account = ClusterAccount.objects.create(
                cluster=cluster,
                user_id=user.pk,
                username=cluster_username,
                authentication=Authentication.CERTIFICATE,
                private_key="",
            )
            logger.info("certificate account %s for %s", account, user)
        elif account.authentication != Authentication.CERTIFICATE:
            logger.info("%s keeps the admin's %s login", account, account.authentication)
            continue
        elif account.username != cluster_username:
            logger.info("%s is now %s on %s", user, cluster_username, cluster)
            account.username = cluster_username
            account.save(update_fields=["username", "updated_at"])
        account.cluster = cluster
        followed.append(account)
    return followed
