"""The client is imported from its source folder, as `pip install -e clients/python` would.

The live stack (sandbox cluster, Celery worker, daphne) comes from tests/e2e; its
package-scoped fixtures stop when this package ends.
"""

import sys
from pathlib import Path

import pytest

from clusters.ssh import Connection
from tests.api.conftest import cluster, job, tokens, viewer  # noqa: F401
from tests.e2e.conftest import (  # noqa: F401
    alice,
    asgi_server,
    celery_worker,
    researcher,
    sandbox_cluster,
)

ROOT = Path(__file__).resolve().parents[2]
CLIENT_SRC = ROOT / "clients" / "python"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))


def upload_example(connection: Connection) -> str:
    """The example trainer in the user's home on the cluster, as a researcher would put it."""
    if connection.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    connection.run("mkdir -p -m 700 portal-examples")
    example = ROOT / "examples" / "ddp_train.py"
    connection.upload("portal-examples/ddp_train.py", example.read_bytes(), mode=0o600)
    return "portal-examples/ddp_train.py"
