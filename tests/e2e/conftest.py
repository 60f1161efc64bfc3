from collections.abc import Iterator

import pytest

from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.services import cluster_register_sandbox
from clusters.ssh import Connection


@pytest.fixture
def sandbox_cluster(db: None, sandbox_info) -> Cluster:
    return cluster_register_sandbox(info=sandbox_info)


def _connect(cluster: Cluster, username: str) -> Connection:
    account = ClusterAccount.objects.select_related("cluster").get(
        cluster=cluster, username=username
    )
    return Connection(account_endpoint(account=account))


@pytest.fixture
def alice(sandbox_cluster: Cluster) -> Iterator[Connection]:
    with _connect(sandbox_cluster, "alice") as connection:
        yield connection


@pytest.fixture
def bob(sandbox_cluster: Cluster) -> Iterator[Connection]:
    with _connect(sandbox_cluster, "bob") as connection:
        yield connection
