from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, Q

from clusters.certificates.logins import LoginChecks, account_login, login_checks, operator_login
from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Endpoint


def account_endpoint(*, account: ClusterAccount, checks: LoginChecks | None = None) -> Endpoint:
    """The SSH endpoint of a cluster account, checked now: a revoked user's is refused.

    Its login is a certificate signed at each new connection, the key the user installed,
    or the stored key (clusters.certificates.logins). Build it again for each use; a
    caller building many at once (a poll) passes one `login_checks` for them all.
    """
    cluster = account.cluster
    where = Endpoint(
        cluster_name=cluster.name,
        host=cluster.ssh_host,
        port=cluster.ssh_port,
        host_key=cluster.host_key,
        username=account.username,
    )
    if checks is None:
        checks = login_checks(accounts=[account])
    return account_login(account=account, endpoint=where, checks=checks)


def portal_endpoint(*, cluster: Cluster) -> Endpoint | None:
    """The portal's own login on the cluster (no job runs as it), if it has one: by a
    certificate where the cluster trusts the portal's CA, else the admin's stored key."""
    if not cluster.has_portal_account:
        return None
    where = Endpoint(
        cluster_name=cluster.name,
        host=cluster.ssh_host,
        port=cluster.ssh_port,
        host_key=cluster.host_key,
        username=cluster.portal_username,
    )
    return operator_login(cluster=cluster, endpoint=where)


def reader_endpoint(*, cluster: Cluster) -> Endpoint | None:
    """Who reads cluster-wide state: the portal account, else any account (tamperable).

    Without a portal account the shared account comes first, then the oldest personal
    one; `Cluster.trust_warning` says so on the cluster's pages.
    """
    endpoint = portal_endpoint(cluster=cluster)
    if endpoint is not None:
        return endpoint
    account = (
        ClusterAccount.objects.select_related("cluster")
        .filter(cluster=cluster)
        .order_by(F("user").asc(nulls_first=True), "id")
        .first()
    )
    return None if account is None else account_endpoint(account=account)


def account_for(*, user: AbstractBaseUser, cluster: Cluster) -> ClusterAccount | None:
    """The user's own account on the cluster, else the cluster's shared service account."""
    accounts = ClusterAccount.objects.select_related("cluster").filter(
        Q(user_id=user.pk) | Q(user__isnull=True), cluster=cluster
    )
    by_kind = {account.user_id is None: account for account in accounts}
    return by_kind.get(False) or by_kind.get(True)
