"""`manage.py cluster add HOST ...` and `manage.py cluster check NAME`: onboarding a cluster.

`add` fetches the login node's host key and shows its fingerprint to confirm (or takes
--fingerprint), records the cluster and its operator account (clusters.onboarding's
`cluster_onboard`, as the admin's Clusters -> Add), then runs the readiness report;
`check` runs the report again. Both exit 1 when a check failed.
"""

import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.models import Cluster
from clusters.onboarding.checks import Check, summary
from clusters.onboarding.hostscan import (
    HostKeyError,
    host_key_confirm,
    host_key_fingerprint,
    host_key_scan,
)
from clusters.onboarding.probe import PROBE_WAIT
from clusters.onboarding.services import (
    NewCluster,
    OnboardingError,
    cluster_accounting_adopt,
    cluster_name_for,
    cluster_onboard,
    readiness_check_now,
)


class Command(BaseCommand):
    help = "Add a Slurm cluster (host key confirmed, then a readiness report) or check one again."

    def add_arguments(self, parser: ArgumentParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, parser_class=CommandParser)
        add = actions.add_parser("add", help="Record a cluster and check that it is ready.")
        add.add_argument("host", help="The login node's host name or address.")
        add.add_argument("--port", type=int, default=22, help="Its SSH port (default 22).")
        add.add_argument("--name", default="", help="The cluster's name (default: from HOST).")
        add.add_argument("--operator-user", default="", help="The portal's own login there.")
        add.add_argument(
            "--operator-key", type=Path, help="A file with that login's unencrypted private key."
        )
        add.add_argument(
            "--trusts-ca",
            action="store_true",
            help="The login nodes trust the portal's CA (TrustedUserCAKeys): the operator "
            "logs in by certificate, no --operator-key needed.",
        )
        add.add_argument("--base-run-dir", default="", help="Where run directories go (shared).")
        add.add_argument("--slurm-bin-dir", default="", help="Default: sbatch's directory there.")
        add.add_argument("--slurm-conf", default="", help="Default: $SLURM_CONF at login there.")
        confirm = add.add_mutually_exclusive_group()
        confirm.add_argument(
            "--fingerprint", default="", help="The SHA256 host key fingerprint the site gave you."
        )
        confirm.add_argument(
            "--yes", action="store_true", help="Accept the host key shown without asking."
        )
        add.add_argument("--wait", type=float, default=PROBE_WAIT, help="Seconds for test jobs.")
        check = actions.add_parser("check", help="Run a cluster's readiness report again.")
        check.add_argument("name", help="The cluster's name.")
        check.add_argument("--wait", type=float, default=PROBE_WAIT, help="Seconds for test jobs.")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            cluster = self._add(**options) if action == "add" else self._find(options["name"])
        except (HostKeyError, OnboardingError) as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Checking cluster {cluster.name}'s readiness (test jobs may queue):")
        report = readiness_check_now(cluster=cluster, wait=options["wait"], progress=self._print)
        if action == "add" and cluster_accounting_adopt(cluster=cluster, report=report):
            self.stdout.write("Slurm accounting answers: the cluster charges from sacct.")
        checks = [Check.from_json(data) for data in report.checks]
        if not report.passed:
            raise CommandError(summary(checks))
        self.stdout.write(self.style.SUCCESS(summary(checks)))

    def _print(self, check: Check) -> None:
        self.stdout.write(check.line())

    def _find(self, name: str) -> Cluster:
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"No cluster named {name!r} (known: {known}).")
        return cluster

    def _add(self, **options: Any) -> Cluster:
        host, port = options["host"], options["port"]
        host_key = host_key_scan(host, port)
        shown = host_key_fingerprint(host_key)
        self.stdout.write(f"{host} port {port} presented the host key {shown}.")
        if options["fingerprint"]:
            host_key_confirm(host_key, options["fingerprint"])
            self.stdout.write("It matches the fingerprint given.")
        elif not options["yes"]:
            self._ask(host)
        user, key = options["operator_user"], ""
        if options["operator_key"] is not None:
            try:
                key = options["operator_key"].read_text()
            except OSError as exc:
                raise CommandError(f"Cannot read the operator key: {exc}") from exc
        onboarded = cluster_onboard(
            new=NewCluster(
                host=host,
                port=port,
                host_key=host_key,
                name=options["name"] or cluster_name_for(host),
                base_run_dir=options["base_run_dir"],
                operator_user=user,
                operator_key=key,
                slurm_bin_dir=options["slurm_bin_dir"],
                slurm_conf=options["slurm_conf"],
                trusts_portal_ca=options["trusts_ca"],
            )
        )
        for note in onboarded.notes:
            self.stdout.write(note)
        cluster = onboarded.cluster
        self.stdout.write(
            f"Recorded cluster {cluster.name} ({cluster.ssh_host}:{cluster.ssh_port}, "
            f"{cluster.host_key_fingerprint}), portal account "
            f"{cluster.portal_username or '(none)'}"
            + (" (by certificate)" if cluster.trusts_portal_ca else "")
            + f", Slurm in {cluster.slurm_bin_dir}"
            + (f", SLURM_CONF={cluster.slurm_conf}" if cluster.slurm_conf else "")
            + f", run directories under {cluster.base_run_dir}."
        )
        return cluster

    def _ask(self, host: str) -> None:
        if not sys.stdin.isatty():
            raise CommandError(
                "Not confirmed, nothing recorded: compare the fingerprint with the one the site "
                "gives, then pass it with --fingerprint SHA256:... (or --yes to accept it)."
            )
        answer = input(f"Is this {host}'s host key, as the site told you? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            raise CommandError("Not confirmed: nothing was recorded.")
