"""`manage.py ssh_ca create|rotate|retire|public-keys`: the CA signing users' SSH certificates."""

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from clusters.certificates.authorities import (
    AuthorityError,
    authorities_publish,
    authorities_valid,
    authority_create,
    authority_retire,
    authority_rotate,
    sandbox_trust_path,
    trusted_lines,
)
from clusters.models import CertificateAuthority


class Command(BaseCommand):
    help = (
        "The portal's SSH certificate authority. create: the first CA. rotate: a second "
        "one, trusted beside the first (which signs until it is retired). retire [ID]: the "
        "older of two, or the one named. public-keys: the lines for sshd's TrustedUserCAKeys "
        "file (--write FILE writes them into FILE, keeping other portals' lines)."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("action", choices=["create", "rotate", "retire", "public-keys"])
        parser.add_argument("id", nargs="?", type=int, help="retire: the CA's id")
        parser.add_argument("--write", type=Path, metavar="FILE", help="public-keys: write FILE")

    def handle(self, *args: Any, action: str, id: int | None, write: Path | None, **_: Any) -> None:
        try:
            if action == "public-keys":
                if write is not None:
                    authorities_publish(path=write)
                    self.stderr.write(f"Wrote this portal's CA lines into {write}.")
                self.stdout.write("".join(f"{line}\n" for line in trusted_lines()), ending="")
                return
            if action == "create":
                authority = authority_create()
                self._say(authority, "created; it signs from now on")
            elif action == "rotate":
                authority = authority_rotate()
                self._say(authority, "created beside the current CA, which still signs")
                self.stdout.write(
                    "Add the new line of `ssh_ca public-keys` to every login node's "
                    "TrustedUserCAKeys file, then `ssh_ca retire` the older CA."
                )
            else:
                authority = authority_retire(authority_id=id)
                self._say(authority, "retired; it signs nothing more")
                signer = authorities_valid().first()
                self.stdout.write(
                    f"CA {signer.pk} signs now."
                    if signer
                    else "No CA is valid: certificate logins stop until `ssh_ca create`."
                )
        except AuthorityError as exc:
            raise CommandError(str(exc)) from exc
        self._refresh_sandbox()

    def _say(self, authority: CertificateAuthority, what: str) -> None:
        self.stdout.write(f"CA {authority.pk} ({authority.fingerprint}) {what}.")

    def _refresh_sandbox(self) -> None:
        # A local run's sandbox login node trusts this portal's CAs without a step more.
        for second in (False, True):
            path = sandbox_trust_path(second=second)
            if path.exists():
                authorities_publish(path=path)
                self.stdout.write(f"The sandbox's {path} lists this portal's valid CAs.")
