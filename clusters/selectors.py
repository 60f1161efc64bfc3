from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Endpoint


def account_endpoint(*, account: ClusterAccount) -> Endpoint:
    """The SSH endpoint of a cluster account (decrypts its private key)."""
    cluster = account.cluster
    return Endpoint(
        cluster_name=cluster.name,
        host=cluster.ssh_host,
        port=cluster.ssh_port,
        host_key=cluster.host_key,
        username=account.username,
        private_key=account.private_key,
    )


def account_for(*, user: AbstractBaseUser, cluster: Cluster) -> ClusterAccount | None:
    """The user's own account on the cluster, else the cluster's shared service account."""
    accounts = ClusterAccount.objects.select_related("cluster").filter(
        Q(user_id=user.pk) | Q(user__isnull=True), cluster=cluster
    )
    by_kind = {account.user_id is None: account for account in accounts}
    return by_kind.get(False) or by_kind.get(True)
