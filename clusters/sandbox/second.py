"""A second sandbox cluster: its own munged, slurmctld, nodes `b1` and `b2`, and login node.

It lives in a directory of the sandbox's state dir, on ports of its own
(`config.SECOND`); its tenants, their keys and the jobs' Python are the sandbox's, as a
site's clusters share accounts. Where the sandbox keeps accounting (`accounting_wanted`),
so does it: a slurmdbd of its own, authenticated by its own munged, with a database of
its own on the sandbox's MariaDB, its cluster registered there and the portal's account
a Slurm operator, as on the sandbox. Tests of more than one cluster bring it up and down
(tests/fixtures/sandbox.py), as does `manage.py sandbox up|down --second`.
"""

from __future__ import annotations

import logging
from pathlib import Path

from . import accounting as acct
from . import daemons as d
from .cluster import SandboxInfo, describe, prepare_host, start_stopped, stop_all, write_config
from .config import PORTAL_USER, Paths
from .system import SandboxError, tenant_keys

logger = logging.getLogger(__name__)


def up(state_dir: Path, timeout: float = 60) -> SandboxInfo:
    """Start (or reuse) the second cluster beside the sandbox of `state_dir`."""
    paths = Paths.second(state_dir)
    keys, portal_key = tenant_keys(paths)  # before anything starts: the sandbox made them
    prepare_host(paths)
    # The sandbox's MariaDB, which the sandbox's `up` started and its `down` stops.
    accounting = acct.accounting_wanted() and d.running_pid(d.mariadb(paths)) is not None
    if accounting:
        try:  # its slurmdbd before its slurmctld (re)starts
            acct.accounting_up(paths)
        except SandboxError as exc:
            logger.warning("the second cluster runs without accounting: %s", exc)
            accounting = False
    elif acct.accounting_wanted():
        logger.warning("the second cluster runs without accounting: the sandbox's MariaDB is down")
    everything = [x for x in d.daemons(paths) if x.name not in d.ACCOUNTING_DAEMONS]
    changed = write_config(paths, accounting)
    if accounting:
        # sacctmgr reads the new slurm.conf; a new slurmdbd first makes its tables.
        acct.ensure_cluster_registered(paths, timeout=90)
        acct.ensure_operator(paths, PORTAL_USER)
    elif d.stop(d.slurmdbd(paths)):
        logger.info("the second cluster's slurmdbd stopped: it runs without accounting")
    if changed - {paths.sshd_config}:
        # A test's cluster, without jobs of its own between tests: all of it restarts.
        for daemon in reversed(everything):
            d.stop(daemon)
    elif changed:  # sshd's config alone: re-read without dropping the sessions of others
        d.reload_sshd(next(x for x in everything if x.binary == "sshd"), paths)
    start_stopped(everything, paths)
    d.wait_idle(paths, timeout)
    return describe(paths, keys, portal_key, accounting)


def down(state_dir: Path, timeout: float = 30) -> list[str]:
    """Cancel its jobs and wait for their end (their processes outlive slurmd), then stop it
    (its slurmdbd too; the sandbox's MariaDB goes on)."""
    paths = Paths.second(state_dir)
    d.end_jobs(paths, timeout)
    return stop_all(paths)
