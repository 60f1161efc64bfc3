from clusters.models import ClusterAccount
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
