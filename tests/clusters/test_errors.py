"""One cluster error base with `retryable`, and the pool's one place that drops a broken link."""

import pytest

from clusters.agent import AgentError
from clusters.errors import ClusterError
from clusters.slurm import AccountingDisabled, SlurmError
from clusters.ssh import Endpoint, HostKeyMismatch, SSHError, _Pool


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (SSHError("Lost the connection", retryable=True), True),
        (SSHError("Refused the key", retryable=False), False),
        (HostKeyMismatch("The host key changed"), False),
        (AgentError("The agent answered garbage", retryable=True), True),
        (SlurmError("sbatch", "Socket timed out", retryable=True), True),
        (SlurmError("sbatch", "Invalid account", retryable=False), False),
        (AccountingDisabled("sacct", "Slurm accounting storage is disabled"), False),
    ],
)
def test_every_cluster_error_says_whether_retrying_can_help(
    error: ClusterError, retryable: bool
) -> None:
    assert isinstance(error, ClusterError)
    assert error.retryable is retryable
    with pytest.raises(ClusterError):
        raise error


class _FakeConnection:
    is_alive = True
    closed = False

    def close(self) -> None:
        self.closed = True


ENDPOINT = Endpoint(
    cluster_name="alps", host="login", port=22, host_key="", username="mia", private_key=""
)


@pytest.mark.parametrize(
    ("error", "discarded"),
    [
        (SSHError("Lost the connection", retryable=True), True),
        (AgentError("The agent timed out", retryable=True), True),
        (SSHError("Refused the key", retryable=False), False),
        (SlurmError("sbatch", "Socket timed out", retryable=True), False),  # the link is fine
    ],
)
def test_the_pool_discards_a_connection_only_after_a_retryable_ssh_failure(
    error: ClusterError, discarded: bool
) -> None:
    pool = _Pool()
    connection = _FakeConnection()
    pool._connections[ENDPOINT] = connection  # type: ignore[assignment]
    with pytest.raises(ClusterError), pool.session(ENDPOINT) as got:
        assert got is connection
        raise error
    assert (ENDPOINT not in pool._connections) is discarded
    assert connection.closed is discarded
