"""The test servers' daphne starts on another port when its own was taken before it bound
(devtools.servers.Daphne): a sandbox job's JupyterLab kernel took one, the port accepted,
and a test's browser talked to the kernel."""

import socket

import httpx
import pytest

from devtools.servers import Daphne, running
from tests.fixtures.servers import live_env


@pytest.mark.django_db(transaction=True)
def test_a_taken_port_is_left_to_its_holder_and_daphne_serves_on_another(tmp_path) -> None:
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        taken = stranger.getsockname()[1]
        daphne = Daphne(live_env(), tmp_path)
        daphne.port = taken  # as if the stranger bound it after free_port's probe
        daphne.args = daphne._args()
        daphne.argv[2:] = daphne.args
        with running(daphne):
            assert daphne.port != taken
            assert httpx.get(f"{daphne.url}/healthz", timeout=30).status_code == 200
        stranger.settimeout(0.1)
        with pytest.raises(TimeoutError):
            stranger.accept()  # nothing was sent its way
