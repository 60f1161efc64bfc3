"""Every endpoint x every persona: only the allowed combinations succeed, nothing leaks.

Personas hold a bearer token each (the API's way in); `expired`, `revoked` and
`read` are the owner's tokens in those states. A job of another project
exists throughout; no response may mention it, its project or how many there are.
"""

import gzip
import io
import json
import re
import tarfile
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import CodeSnapshot, Job
from tests import factories
from tests.helpers import Tokens, bearer
from web import urls as web_urls

PERSONAS = ["owner", "member", "viewer", "outsider", "anonymous", "expired", "revoked", "read"]

OK, CREATED, ACCEPTED, FOUND = 200, 201, 202, 302
BAD, UNAUTH, FORBID, MISSING = 400, 401, 403, 404
# Refusals shared by every endpoint: no valid credentials.
NO_AUTH = {"anonymous": UNAUTH, "expired": UNAUTH, "revoked": UNAUTH}
# A read that members of any role may do; the outsider gets the answer a missing object gets.
READ = {"owner": OK, "member": OK, "viewer": OK, "outsider": MISSING, "read": OK, **NO_AUTH}
# A list: the outsider sees an empty one.
LIST = {**READ, "outsider": OK}


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # with {job} for the job's id, {sweep} for the sweep's
    params: dict[str, str | int] = field(default_factory=dict)
    body: dict[str, object] | None = None
    upload: bytes | None = None  # sent as the multipart file `archive`

    def __call__(self, client: Client, job: Job, sweep_id: int = 0) -> Any:
        path = self.path.format(job=job.pk, sweep=sweep_id)
        if self.method == "GET":
            return client.get(path, self.params)
        if self.method == "PATCH":
            return client.patch(path, json.dumps(self.body or {}), content_type="application/json")
        if self.upload is not None:
            return client.post(path, {"archive": SimpleUploadedFile("code.tar.gz", self.upload)})
        return client.post(path, json.dumps(self.body or {}), content_type="application/json")


def get(path: str, **params: str | int) -> Request:
    return Request("GET", path, params)


def post(path: str, body: dict[str, object] | None = None) -> Request:
    return Request("POST", path, body=body)


def patch(path: str, body: dict[str, object]) -> Request:
    return Request("PATCH", path, body=body)


ATTEMPT = "/api/v1/jobs/{job}/attempts/1"
CODE_SHA = "ab" * 32  # the project's snapshot (the `code_snapshot` fixture)


def _code_archive() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        info = tarfile.TarInfo("train.py")
        info.size = 1
        archive.addfile(info, io.BytesIO(b"\n"))
    return gzip.compress(raw.getvalue(), mtime=0)


SUBMIT = {
    "project": "vision",
    "cluster": "alps",
    "name": "matrix",
    "command": "python train.py",
    "partition": "gpu",
    "cpus_per_task": 1,
    "time_limit": "00:10:00",
}
SWEEP = {
    "project": "vision",
    "cluster": "alps",
    "name": "matrix sweep",
    "command": "python train.py --lr {lr}",
    "partition": "gpu",
    "time_limit": "00:10:00",
    "space": {"lr": [0.1, 0.01]},
    "sampler": "grid",
    "max_trials": 2,
}
# (name, request, expected status per persona); writes last, cancel at the very end.
MATRIX: list[tuple[str, Request, dict[str, int]]] = [
    ("projects", get("/api/v1/projects/"), LIST),
    ("project", get("/api/v1/projects/vision/"), READ),
    ("project goodput", get("/api/v1/projects/vision/goodput"), READ),
    ("project runs", get("/api/v1/projects/vision/runs/", sort="-loss_best"), READ),
    ("clusters", get("/api/v1/clusters/"), {**LIST, "outsider": FORBID}),
    ("jobs", get("/api/v1/jobs/"), LIST),
    ("jobs filtered", get("/api/v1/jobs/", project="vision", state="QUEUED"), LIST),
    ("job", get("/api/v1/jobs/{job}/"), READ),
    ("attempts", get("/api/v1/jobs/{job}/attempts/"), READ),
    ("events", get("/api/v1/jobs/{job}/events/"), READ),
    ("notes", get("/api/v1/jobs/{job}/notes/"), READ),
    ("log range", get(f"{ATTEMPT}/log", offset=0, limit=10), READ),
    ("log tail", get(f"{ATTEMPT}/log", lines=2), READ),
    ("log download", get(f"{ATTEMPT}/log/download"), READ),
    ("series names", get(f"{ATTEMPT}/series"), READ),
    ("series", get(f"{ATTEMPT}/series/loss", max_points=3), READ),
    ("series csv", get(f"{ATTEMPT}/series/loss", format="csv"), READ),
    ("gpus", get(f"{ATTEMPT}/gpus"), READ),
    ("failures", get("/api/v1/jobs/{job}/failures"), READ),
    ("code snapshot", get(f"/api/v1/projects/vision/code/{CODE_SHA}/"), READ),
    ("efficiency", get("/api/v1/jobs/{job}/efficiency"), READ),
    ("checkpoints", get("/api/v1/jobs/{job}/checkpoints/"), READ),
    ("checkpoint preview", get("/api/v1/jobs/{job}/checkpoints/preview/", keep_last=1), READ),
    ("checkpoint rule", get("/api/v1/jobs/{job}/checkpoints/rule/"), READ),
    ("project checkpoint rule", get("/api/v1/projects/vision/checkpoint-rule/"), READ),
    ("sweeps", get("/api/v1/sweeps/"), LIST),
    ("sweep", get("/api/v1/sweeps/{sweep}/"), READ),
    ("log stream", get(f"{ATTEMPT}/log/stream"), READ),
    ("metrics stream", get(f"{ATTEMPT}/metrics/stream"), READ),
    # A session's JupyterLab opens in its owner's browser session only: a token never does.
    ("session lab", get("/sessions/{job}/lab/api/status"), dict.fromkeys(PERSONAS, FOUND)),
    # Its notices are for JupyterLab's page, in the same browser session: no token reads them.
    ("session notices", get("/sessions/{job}/notice.json"), dict.fromkeys(PERSONAS, FORBID)),
    (
        "submit",
        post("/api/v1/jobs/", SUBMIT),
        {
            "owner": CREATED,
            "member": CREATED,
            "viewer": FORBID,
            # Not one of theirs: the same answer as a project that does not exist.
            "outsider": BAD,
            "read": FORBID,
            **NO_AUTH,
        },
    ),
    (
        # Asks Slurm as the caller (here an unreachable cluster: a problem per option).
        "expected starts",
        post("/api/v1/jobs/starts/", SUBMIT),
        {
            "owner": OK,
            "member": OK,
            "viewer": FORBID,
            "outsider": BAD,
            "read": FORBID,
            **NO_AUTH,
        },
    ),
    (
        "start a sweep",
        post("/api/v1/sweeps/", SWEEP),
        # As for a job: not one of theirs is answered as a project that does not exist.
        {
            **READ,
            "owner": CREATED,
            "member": CREATED,
            "viewer": FORBID,
            "outsider": BAD,
            "read": FORBID,
        },
    ),
    (
        # Adding code is for those who may submit; the outsider learns nothing of the project.
        "code upload",
        Request("POST", "/api/v1/projects/vision/code/", upload=_code_archive()),
        {**READ, "owner": CREATED, "member": CREATED, "viewer": FORBID, "read": FORBID},
    ),
    (
        "clone",
        post("/api/v1/jobs/{job}/clone/", {"name": "copy"}),
        {**READ, "owner": CREATED, "member": CREATED, "viewer": FORBID, "read": FORBID},
    ),
    (
        # As for cancel: the job's submitter or a project owner; this job has saved no
        # checkpoint yet, which only they are told.
        "resume from a checkpoint",
        post("/api/v1/jobs/{job}/resume/", {"step": 20}),
        {**READ, "owner": BAD, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        # Whoever may submit in the project; no checkpoint yet: nothing is forked.
        "fork from a checkpoint",
        post("/api/v1/jobs/{job}/fork/", {"step": 20, "command": "python train.py --lr 0.5"}),
        {**READ, "owner": BAD, "member": BAD, "viewer": FORBID, "read": FORBID},
    ),
    (
        # A session's owner only; this job is no session, so no one finds one here
        # (tests/sessions/test_session_run.py has the personas on a session).
        "run from a session",
        post("/api/v1/jobs/{job}/session-run/", {"command": "python train.py"}),
        {**READ, "owner": MISSING, "member": MISSING, "viewer": MISSING, "read": FORBID},
    ),
    (
        # A job's checkpoints and rule: its submitter (here the owner) or a project owner.
        "set checkpoint rule",
        post("/api/v1/jobs/{job}/checkpoints/rule/", {"keep_last": 2}),
        {**READ, "owner": OK, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        "apply checkpoint rule",
        post("/api/v1/jobs/{job}/checkpoints/apply/"),
        {**READ, "owner": OK, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        "delete checkpoints",
        post("/api/v1/jobs/{job}/checkpoints/delete/", {"ids": []}),
        {**READ, "owner": OK, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        # The project's rule and storage quota: its owners.
        "set project checkpoint rule",
        post("/api/v1/projects/vision/checkpoint-rule/", {"keep_last": 3, "quota_gib": 10}),
        {**READ, "owner": OK, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        # As for cancel: the job's submitter (here the owner) or a project owner.
        "annotate",
        patch("/api/v1/jobs/{job}/notes/", {"note": "the one", "tags": ["best"], "group": "g"}),
        {**READ, "owner": OK, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
    (
        # The job is the owner's: a member who did not submit it may not cancel it.
        "cancel",
        post("/api/v1/jobs/{job}/cancel/"),
        {**READ, "owner": ACCEPTED, "member": FORBID, "viewer": FORBID, "read": FORBID},
    ),
]

SECRETS = ("speech", "whisper-secret", "secret log", "samuel-stranger")


def _token(tokens: Tokens, persona: str) -> str | None:
    by_persona = {
        "owner": tokens.owner,
        "member": tokens.member,
        "viewer": tokens.viewer,
        "outsider": tokens.outsider,
        "anonymous": None,
        "expired": tokens.expired,
        "revoked": tokens.revoked,
        "read": tokens.owner_read,
    }
    return by_persona[persona]


def _body(response) -> str:
    if getattr(response, "streaming", False):
        # Streams of a live attempt never end: the first event tells enough.
        return ""
    return response.content.decode(errors="replace")


@pytest.fixture
def code_snapshot(settings, tmp_path, job: Job) -> CodeSnapshot:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    return CodeSnapshot.objects.create(
        project=job.project, sha256=CODE_SHA, size=1, unpacked_size=1, files=1, created_by=job.user
    )


@pytest.mark.parametrize("persona", PERSONAS)
def test_permission_matrix(
    persona: str, job: Job, other_job: Job, tokens: Tokens, code_snapshot: CodeSnapshot
) -> None:
    client = bearer(_token(tokens, persona))
    sweep = factories.sweep(job)
    wrong = []
    for name, request, expected in MATRIX:
        response = request(client, job, sweep.pk)
        status = response.status_code
        body = _body(response)
        if status != expected[persona]:
            wrong.append(f"{name}: {status} (expected {expected[persona]}) {body[:200]}")
        leaked = [secret for secret in SECRETS if secret in body]
        if leaked:
            wrong.append(f"{name}: leaks {leaked}")
        if persona == "outsider" and "vision" in body:
            wrong.append(f"{name}: shows the outsider the project {body[:200]}")
    assert not wrong, f"{persona}:\n" + "\n".join(wrong)


def test_outsider_lists_are_empty_not_counted(job: Job, other_job: Job, tokens: Tokens) -> None:
    client = bearer(tokens.outsider)
    assert client.get("/api/v1/projects/").json() == []
    # A cursor page has no count, so not even the number of jobs shows.
    assert client.get("/api/v1/jobs/").json() == {"next": None, "previous": None, "results": []}


def test_the_browser_session_reads_and_must_send_the_csrf_token(job: Job, owner) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert client.get("/api/v1/jobs/").status_code == OK
    refused = client.post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert refused.status_code == FORBID
    assert "CSRF" in refused.json()["detail"]


def _routes(patterns: list[Any], prefix: str) -> list[str]:
    routes = []
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if hasattr(pattern, "url_patterns"):
            routes += _routes(pattern.url_patterns, route)
        else:
            routes.append(route)
    return routes


def test_the_matrix_covers_every_api_route() -> None:
    """A new endpoint under /api/v1/ must join the matrix (or this fails)."""
    converters = {"int": r"\d+", "slug": r"[-\w]+", "path": r".+", "str": r"[^/]+"}
    tried = [request.path.format(job=1, sweep=1) for _, request, _ in MATRIX]
    missing = []
    for route in _routes(web_urls.api, "/api/v1/"):
        regex = re.sub(r"<(\w+):\w+>", lambda m: converters[m[1]], route)
        if not any(re.fullmatch(regex, path) for path in tried):
            missing.append(route)
    assert not missing, f"endpoints missing from the permission matrix: {missing}"
