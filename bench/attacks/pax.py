"""Hostile code archives (issue 33): another client's login latency on a real daphne while
an attacker uploads the pen test's pax archive, and one that passes the pre-scan but costs
a vulnerable tarfile (CVE-2024-6232) seconds, again and again; and, the naive way, what
the slow one holds a process that checks it itself (as daphne's did)."""

import io
import logging
import os
import statistics
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from benchdb import QUICK

from devtools.archives import finding_tar, slow_pax_tar
from devtools.servers import Daphne, running, server_env

SECONDS = 4.0 if QUICK else 20.0  # per phase, with and without the attacker
PERIOD = 0.2
# Eight headers each just under the 16 KiB limit: seconds of a vulnerable tarfile's time.
SLOW = slow_pax_tar(members=8, digits=4_000 if QUICK else 16_000)


def _phase(server: str, token: str, slug: str, attacking: bool) -> dict[str, Any]:
    """Another client's login page, fetched every PERIOD s for SECONDS, beside the attacker."""
    stop = threading.Event()
    uploads: list[int] = []

    def attack() -> None:
        with httpx.Client(timeout=300) as client:
            while not stop.is_set():
                for archive in (finding_tar(), SLOW):
                    answer = client.post(
                        f"{server}/api/v1/projects/{slug}/code/",
                        headers={"Authorization": f"Bearer {token}"},
                        files={"archive": ("code.tar", archive)},
                    )
                    uploads.append(answer.status_code)

    attacker = threading.Thread(target=attack)
    if attacking:
        attacker.start()
    latencies: list[float] = []
    try:
        with httpx.Client(timeout=300) as client:
            started = time.monotonic()
            while time.monotonic() - started < SECONDS:
                sent = time.monotonic()
                assert client.get(f"{server}/login/").status_code == 200
                latencies.append(time.monotonic() - sent)
                time.sleep(PERIOD)
    finally:
        stop.set()
        if attacking:
            attacker.join()
    latencies.sort()
    return {
        "kind": "pax archives uploaded" if attacking else "no attacker",
        "requests": len(latencies),
        "p50": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
        "max": latencies[-1],
        "uploads": len(uploads),
        "refused": sum(code == 400 for code in uploads),
    }


def _in_process() -> float:
    """Seconds the slow archive holds a process whose tarfile reads it (the GIL held)."""
    started = time.monotonic()
    with tarfile.open(fileobj=io.BytesIO(SLOW)) as archive:
        archive.getmembers()
    return time.monotonic() - started


def pax_case() -> None:
    """Run both phases on one daphne (Django set up) and print the table."""
    from django.conf import settings
    from django.contrib.auth.models import User

    from accounts.services import token_issue
    from projects.models import Membership, Project

    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    user, _ = User.objects.get_or_create(username="bench-pax-attacker")
    project, _ = Project.objects.get_or_create(slug="bench-pax", defaults={"name": "Pax"})
    Membership.objects.get_or_create(user=user, project=project)
    token = token_issue(user=user, name="bench", scope="submit").text
    with tempfile.TemporaryDirectory() as workdir:
        env = server_env(
            database_url=os.environ["DATABASE_URL"],
            redis_url=settings.REDIS_URL,
            tag="bench-hostile-pax",
            extra={"CODE_SNAPSHOT_DIR": f"{workdir}/code", "CODE_UPLOAD_RATE_LIMIT": "0"},
        )
        daphne = Daphne(env, Path(workdir))
        with running(daphne):
            rows = [_phase(daphne.url, token, project.slug, on) for on in (False, True)]
    print(f"\nanother client's login page every {PERIOD} s for {SECONDS:.0f} s, on daphne")
    header = ("attacker", "requests", "p50 s", "p95 s", "max s", "uploads", "refused")
    print(" | ".join(f"{h:>22}" if i == 0 else f"{h:>8}" for i, h in enumerate(header)))
    print("-" * 90)
    for row in rows:
        print(
            f"{row['kind']:>22} | {row['requests']:>8} | {row['p50']:>8.3f} | "
            f"{row['p95']:>8.3f} | {row['max']:>8.3f} | {row['uploads']:>8} | {row['refused']:>8}"
        )
    print(
        f"the naive way (the check in the web process): the slow archive held it "
        f"{_in_process():.2f} s, each request beside it as long"
    )
