"""The example trainer in each personal account's home on a cluster, as a researcher would put it.

`make run` calls this for the sandbox (through `manage.py sandbox up`), so that the demo
users' jobs find `portal-examples/ddp_train.py` from their home directory, where job
commands start.
"""

import logging
import shlex

from clusters.errors import ClusterError
from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.ssh import pool

logger = logging.getLogger(__name__)

EXAMPLES_DIR = "portal-examples"
# The README's first job: the example trainer from the home directory, where commands start.
EXAMPLE_COMMAND = f"{EXAMPLES_DIR}/ddp_train.py --steps 200"


def examples_install(*, cluster: Cluster, files: dict[str, bytes]) -> dict[str, str]:
    """Upload `files` (name -> bytes) into ~/portal-examples of every personal account.

    Returns, by username, the directory written or why not; one account's failure
    does not stop the others.
    """
    done: dict[str, str] = {}
    accounts = ClusterAccount.objects.filter(cluster=cluster, user__isnull=False).select_related(
        "cluster"
    )
    for account in accounts.order_by("username"):
        try:
            with pool.session(account_endpoint(account=account)) as connection:
                made = connection.run(f"mkdir -p -m 700 {shlex.quote(EXAMPLES_DIR)}")
                if made.exit_status != 0:
                    raise ClusterError(
                        made.stderr.decode(errors="replace").strip()[:200], retryable=False
                    )
                for name, data in sorted(files.items()):
                    connection.upload(f"{EXAMPLES_DIR}/{name}", data, mode=0o600)
                done[account.username] = f"~/{EXAMPLES_DIR}"
        except ClusterError as exc:
            logger.warning("examples not installed for %s: %s", account.username, exc)
            done[account.username] = f"not installed: {exc}"
    return done
