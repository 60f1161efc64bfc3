"""The single sign-on tests' OpenID provider (devtools/oidc_provider/provider.mjs), run here.

panva's oidc-provider (OpenID Certified) on Node.js, its people and groups read from a
directory (devtools.ldap_server), with one client: the portal at `portal_url`. Started on
a free loopback port and stopped when the block ends, whatever happens inside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devtools.ldap_server import Directory
from devtools.servers import Server, answers, free_port

FOLDER = Path(__file__).resolve().parent / "oidc_provider"
SCRIPT = FOLDER / "provider.mjs"
CLIENT_ID = "portal"
CLIENT_SECRET = "portal-client-secret-for-the-tests"  # noqa: S105 - a throwaway provider's
CALLBACK_PATH = "/sso/oidc/callback/"
LOGIN_PATH = "/login/"


# oidc-provider 9 and ldapts 8 run on Node.js 20 and later (Debian 12's own nodejs is 18).
NODE_MAJOR_MIN = 20


def provider_installed() -> bool:
    return shutil.which("node") is not None and (FOLDER / "node_modules" / "oidc-provider").exists()


def _check_node() -> None:
    version = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    major = int(version.lstrip("v").split(".")[0] or 0) if version else 0
    if major < NODE_MAJOR_MIN:
        raise RuntimeError(
            f"the tests' OpenID provider needs Node.js {NODE_MAJOR_MIN} or later; "
            f"`node --version` says {version or 'nothing'}"
        )


@dataclass(frozen=True)
class OpenIDProvider:
    issuer: str

    def settings(self) -> dict[str, str]:
        """The portal's OpenID Connect settings (portal/settings/sso.py) for this provider."""
        return {
            "OIDC_RP_CLIENT_ID": CLIENT_ID,
            "OIDC_RP_CLIENT_SECRET": CLIENT_SECRET,
            "OIDC_OP_ISSUER": self.issuer,
            "OIDC_OP_AUTHORIZATION_ENDPOINT": f"{self.issuer}/auth",
            "OIDC_OP_TOKEN_ENDPOINT": f"{self.issuer}/token",
            "OIDC_OP_USER_ENDPOINT": f"{self.issuer}/me",
            "OIDC_OP_JWKS_ENDPOINT": f"{self.issuer}/jwks",
            "OIDC_OP_END_SESSION_ENDPOINT": f"{self.issuer}/session/end",
            "OIDC_RP_SCOPES": "openid email profile groups",
        }


@contextmanager
def running_openid_provider(
    state: Path,
    *,
    directory: Directory,
    portal_url: str,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> Iterator[OpenIDProvider]:
    if not provider_installed():
        raise FileNotFoundError(f"node or {FOLDER}/node_modules is missing: run bin/dev install")
    _check_node()
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    config = state / "provider.json"
    config.write_text(
        json.dumps(
            {
                "port": port,
                "issuer": issuer,
                "client": {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": [f"{portal_url}{CALLBACK_PATH}"],
                    "post_logout_redirect_uris": [f"{portal_url}{LOGIN_PATH}"],
                },
                "ldap": {
                    "url": directory.url,
                    "bind_dn": directory.admin_dn,
                    "bind_password": directory.admin_password,
                    "user_base": directory.people,
                    "group_base": directory.groups,
                },
            }
        )
    )
    provider = Server(
        "provider",
        [],
        {**os.environ, **(env or {})},
        state,
        ready=lambda: answers(port),
        argv=["node", str(SCRIPT), str(config)],
        cwd=FOLDER,
    )
    provider.start(timeout)
    try:
        yield OpenIDProvider(issuer=issuer)
    finally:
        provider.stop()
