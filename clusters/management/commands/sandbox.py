"""`manage.py sandbox up|down|status`: the local Slurm cluster behind a real sshd."""

from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from clusters import sandbox
from clusters.certificates.authorities import (
    authorities_publish,
    authority_create,
    authority_signing,
    sandbox_trust_path,
)
from clusters.examples import examples_install
from clusters.models import Authentication
from clusters.sandbox import second as second_cluster
from clusters.sandbox.config import SECOND
from clusters.services import SANDBOX_CLUSTER_NAME, cluster_register_sandbox

EXAMPLE_FILES = ("ddp_train.py",)


class Command(BaseCommand):
    help = "Start, stop or show the sandbox Slurm cluster (three GPU nodes, sshd on 2222)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["up", "down", "status"])
        parser.add_argument(
            "--no-register",
            action="store_true",
            help="Do not record the cluster and its accounts in the database.",
        )
        parser.add_argument(
            "--second",
            action="store_true",
            help=f"The second cluster ({SECOND.name}: nodes {', '.join(SECOND.nodes)}, sshd "
            f"on {SECOND.ssh_port}) beside the sandbox; `down` stops it in any case.",
        )
        parser.add_argument(
            "--certificates",
            action="store_true",
            help="The cluster trusts the portal's CA (made if missing): the users' accounts "
            "and the portal's operator account log in by its certificates, holding no "
            "private key.",
        )

    def handle(
        self,
        *args: Any,
        action: str,
        no_register: bool,
        second: bool,
        certificates: bool,
        **options: Any,
    ) -> None:
        state_dir = settings.SANDBOX_STATE_DIR
        try:
            if action == "up":
                info = second_cluster.up(state_dir) if second else sandbox.up(state_dir)
                if not no_register:
                    registered = SECOND.name if second else SANDBOX_CLUSTER_NAME
                    if certificates and authority_signing() is None:
                        authority_create()
                    # The login node trusts this portal's CAs (kept up to date by ssh_ca).
                    authorities_publish(path=sandbox_trust_path(second=second))
                    how = Authentication.CERTIFICATE if certificates else Authentication.STORED_KEY
                    cluster = cluster_register_sandbox(
                        info=info,
                        name=registered,
                        authentication=how,
                        operator_by_certificate=certificates,
                    )
                    self.stdout.write(
                        f"Registered cluster {cluster.name!r} "
                        f"(host key {cluster.host_key_fingerprint}) with accounts "
                        f"{', '.join(sorted(info.users))}."
                    )
                    # The demo users' jobs start in their homes: the README's example runs.
                    examples = settings.BASE_DIR / "examples"
                    files = {name: (examples / name).read_bytes() for name in EXAMPLE_FILES}
                    for user, where in examples_install(cluster=cluster, files=files).items():
                        self.stdout.write(f"Example trainer for {user}: {where}")
                self.stdout.write(self.style.SUCCESS(sandbox.status(state_dir, second=second)))
            elif action == "down":
                # The second cluster first: it runs only beside the sandbox.
                second_cluster.down(state_dir)
                if not second:
                    sandbox.down(state_dir)
                self.stdout.write("Second cluster stopped." if second else "Sandbox stopped.")
            else:
                self.stdout.write(sandbox.status(state_dir, second=second))
        except sandbox.SandboxError as exc:
            raise CommandError(str(exc)) from exc
