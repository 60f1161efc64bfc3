"""Fetching a job's code from a git URL and ref, once, into a stored snapshot.

The portal fetches (in the submission's Celery task, before the first attempt
is handed to Slurm) rather than the cluster: the fetched tree becomes a snapshot
stored by hash like an upload, so every restart and clone runs the very same
bytes even when the branch moves on, and login nodes need no internet access.
Since the portal's own network is reached, what it fetches is fenced in:
https only (no file://, ssh, local paths or credentials in the URL), a host
that resolves to public addresses only, pinned for git to the address checked
(no DNS rebinding) and no redirects; one shallow commit, under a time and a
size cap, with no system or user git config and no prompts.
"""

import ipaddress
import os
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import IO, TypeVar
from urllib.parse import urlsplit

from django.conf import settings

from jobs.errors import JobError
from portal_lib.addresses import is_public

_REF = re.compile(r"^[A-Za-z0-9._/+-]{1,255}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]{1,253}$")
GIT = "/usr/bin/git"
WATCH_SECONDS = 0.2
T = TypeVar("T")


def git_url_problem(url: str) -> str | None:
    """What is wrong with a git URL the portal would fetch; None when it may try."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return "Not a URL; give the repository's https address."
    local = settings.CODE_GIT_ALLOW_LOCAL and parts.scheme == "file"
    if parts.scheme != "https" and not local:
        return "Give an https:// URL (file://, ssh, git:// and local paths are not fetched)."
    if local:
        return None
    if parts.username or parts.password:
        return "Leave credentials out of the URL: the portal fetches public repositories."
    if not parts.hostname or not _HOST.match(parts.hostname) or (port is not None and port < 1):
        return "The URL needs a host name."
    if parts.query or parts.fragment:
        return "Leave the query and fragment (?, #) out of the git URL."
    return None


def git_ref_problem(ref: str) -> str | None:
    if not _REF.match(ref) or ref.startswith(("-", "/")) or ".." in ref or ref.endswith(".lock"):
        return "Give a branch, tag or commit hash (letters, digits and ._/+-)."
    return None


def _public_address(host: str, port: int) -> str:
    """The address git will use for `host`: every address it resolves to must be public."""
    try:
        found = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise JobError(f"The git host {host} cannot be resolved: {exc.strerror}.") from exc
    addresses = [str(info[4][0]) for info in found]
    for address in addresses:
        if not is_public(ipaddress.ip_address(address)):
            raise JobError(
                f"The git host {host} resolves to {address}, a private or local address; "
                "the portal fetches from public hosts only."
            )
    return addresses[0]


def _git_env(home: str) -> dict[str, str]:
    protocols = "https:file" if settings.CODE_GIT_ALLOW_LOCAL else "https"
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "/bin/false",
        "GIT_ALLOW_PROTOCOL": protocols,
        "LANG": "C",
    }


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # git renames as it goes
    return total


def _git(
    argv: list[str], *, cwd: Path, env: dict[str, str], deadline: float, stdout: IO[bytes]
) -> None:
    """Run git, killed past the deadline or once the scratch directory outgrows the cap."""
    cap = settings.CODE_GIT_MAX_BYTES
    with tempfile.TemporaryFile() as err:
        process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [GIT, *argv], cwd=cwd, env=env, stdout=stdout, stderr=err, stdin=subprocess.DEVNULL
        )
        try:
            while process.poll() is None:
                if time.monotonic() > deadline:
                    raise JobError(
                        f"Fetching the git repository took over {settings.CODE_GIT_TIMEOUT:.0f} "
                        "s; upload an archive of the code instead."
                    )
                if _size(cwd.parent) > cap:
                    raise JobError(
                        f"The git repository passes the cap of {cap // (1024 * 1024)} MiB; "
                        "upload an archive of the code instead."
                    )
                time.sleep(WATCH_SECONDS)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        if process.returncode != 0:
            err.seek(0)
            message = err.read().decode(errors="replace").strip()[-500:]
            raise JobError(f"git could not fetch the code: {message}")


def _pin(url: str) -> list[str]:
    """git options that make it reach the address checked here, and nothing else."""
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.hostname is None:
        return []  # file:// in the tests only (CODE_GIT_ALLOW_LOCAL)
    port = parts.port or 443
    address = _public_address(parts.hostname, port)
    shown = f"[{address}]" if ":" in address else address
    return ["-c", f"http.curloptResolve={parts.hostname}:{port}:{shown}"]


def git_fetch(*, url: str, ref: str, store: Callable[[Iterable[bytes]], T]) -> tuple[str, T]:
    """Fetch one commit of `url` at `ref` (blank: the default branch) and hand its tree,
    a tar archive, to `store`; the commit's hash and what `store` returned."""
    if problem := git_url_problem(url) or (ref and git_ref_problem(ref)):
        raise JobError(problem)
    deadline = time.monotonic() + settings.CODE_GIT_TIMEOUT
    with tempfile.TemporaryDirectory(prefix="portal-git-") as scratch:
        repo = Path(scratch) / "repo"
        repo.mkdir()
        env = _git_env(scratch)
        quiet = open(os.devnull, "wb")  # noqa: SIM115 - closed below
        try:
            run = partial(_git, cwd=repo, env=env, deadline=deadline, stdout=quiet)
            run(["init", "-q", "--bare", "."])
            options = [*_pin(url), "-c", "http.followRedirects=false"]
            options += ["-c", "transfer.fsckObjects=true"]
            run([*options, "fetch", "-q", "--depth=1", "--no-tags", "--", url, ref or "HEAD"])
        finally:
            quiet.close()
        with tempfile.TemporaryFile(dir=scratch) as out:
            _git(["rev-parse", "FETCH_HEAD"], cwd=repo, env=env, deadline=deadline, stdout=out)
            out.seek(0)
            commit = out.read().decode().strip()
        archive = Path(scratch) / "code.tar"
        with archive.open("wb") as handle:
            # The tree of one commit: the same bytes every time (git archive is deterministic).
            _git(
                ["archive", "--format=tar", commit],
                cwd=repo,
                env=env,
                deadline=deadline,
                stdout=handle,
            )
        with archive.open("rb") as handle:
            stored = store(iter(partial(handle.read, 1024 * 1024), b""))
    return commit, stored
