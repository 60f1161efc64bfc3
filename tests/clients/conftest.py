"""The client is imported from its source folder, as `pip install -e clients/python` would."""

import sys
from pathlib import Path

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))

# The API tests' rows: a project with a job that has a log, a loss series and GPU samples.
from tests.api.conftest import cluster, job, tokens, viewer  # noqa: E402, F401

# The live stack: sandbox cluster, Celery worker, daphne (they stop when this package ends).
from tests.e2e.conftest import (  # noqa: E402, F401
    alice,
    asgi_server,
    celery_worker,
    researcher,
    sandbox_cluster,
)
