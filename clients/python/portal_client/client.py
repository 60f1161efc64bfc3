"""`Portal(url, token)`: the connection, and what is not one job's (projects, clusters, lists)."""

import os
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from portal_client.packing import DEFAULT_MAX_BYTES, pack
from portal_client.rules import rule_body

if TYPE_CHECKING:
    from portal_client.job import Job

DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)
# A session's run waits while the portal packs its directory on the cluster (two minutes at
# most there, jobs.code.cluster_dir.PACK_TIMEOUT), then stores and submits it.
SESSION_RUN_TIMEOUT = httpx.Timeout(180.0, connect=10.0)


class PortalError(Exception):
    """The portal refused a request; `errors` maps fields to what to change."""

    def __init__(self, status: int, message: str, errors: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or {}


def _error(response: httpx.Response) -> PortalError:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and set(body) == {"detail"}:
        return PortalError(response.status_code, str(body["detail"]))
    if isinstance(body, dict):
        # Field errors: name each field and what to change.
        parts = [
            f"{field}: {' '.join(map(str, m)) if isinstance(m, list) else m}"
            for field, m in body.items()
        ]
        return PortalError(response.status_code, "; ".join(parts), errors=body)
    return PortalError(response.status_code, f"HTTP {response.status_code}: {response.text[:200]}")


def _duration(value: timedelta | int | float | str) -> str:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, int | float):
        seconds = int(value)
        return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
    return value


class Portal:
    """The portal at `url`, used with a personal token (from /account/tokens/).

    Without arguments, `PORTAL_URL` and `PORTAL_TOKEN` from the environment.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: httpx.Timeout | float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        url = url or os.environ.get("PORTAL_URL")
        token = token or os.environ.get("PORTAL_TOKEN")
        if not url or not token:
            raise ValueError("Give the portal's URL and a token (or set PORTAL_URL, PORTAL_TOKEN).")
        self.url = url.rstrip("/")
        self.http = httpx.Client(
            base_url=f"{self.url}/api/v1/",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"Portal({self.url!r})"

    def __enter__(self) -> "Portal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # --- HTTP ----------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, path.lstrip("/"), **kwargs)
        if response.status_code >= 400:
            raise _error(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v is not None}
        return self.request("GET", path, params=clean).json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("POST", path, json=body or {}).json()

    # --- what the portal offers ----------------------------------------------------

    def projects(self) -> list[dict[str, Any]]:
        """Your projects, your role in each and this period's GPU-hour usage."""
        result: list[dict[str, Any]] = self.get("projects/")
        return result

    def clusters(self) -> list[dict[str, Any]]:
        """Clusters taking jobs, their partitions and free GPUs."""
        result: list[dict[str, Any]] = self.get("clusters/")
        return result

    # --- a project's checkpoint rules (docs/checkpoints.md) ----------------------------

    def checkpoint_rule(self, project: str, *, template: str = "") -> dict[str, Any]:
        """The project's rule (`template`: for its jobs of that template), its checkpoint
        storage (`storage_bytes`, `quota_bytes`, `quota_state`) and the bytes of each job."""
        path = f"projects/{quote(project, safe='')}/checkpoint-rule/"
        result: dict[str, Any] = self.get(path, template=template or None)
        return result

    def set_checkpoint_rule(
        self,
        project: str,
        *,
        template: str = "",
        keep_last: int | None = None,
        keep_best: int | None = None,
        best_metric: str = "",
        best_mode: str = "min",
        older_than_days: float | None = None,
        quota_gib: float | None = None,
    ) -> dict[str, Any]:
        """Set the project's rule (project owners), with `template` for its jobs of that
        template; `quota_gib` on the project-wide one only. All empty clears it. Answers as
        `checkpoint_rule`."""
        body = rule_body(
            keep_last=keep_last, keep_best=keep_best, best_metric=best_metric,
            best_mode=best_mode, older_than_days=older_than_days,
        )  # fmt: skip
        body.update(template=template, quota_gib=quota_gib)
        result: dict[str, Any] = self.post(
            f"projects/{quote(project, safe='')}/checkpoint-rule/", body
        )
        return result

    # --- jobs ------------------------------------------------------------------------

    def job(self, job_id: int) -> "Job":
        from portal_client.job import Job

        return Job(self, self.get(f"jobs/{int(job_id)}/"))

    def jobs(
        self,
        *,
        project: str | None = None,
        cluster: str | None = None,
        state: str | None = None,
        mine: bool = False,
        limit: int | None = None,
    ) -> Iterator["Job"]:
        """Jobs of your projects, newest first, fetched a page at a time as you iterate."""
        from portal_client.job import Job

        params: dict[str, Any] = {"project": project, "cluster": cluster, "state": state}
        if mine:
            params["mine"] = "true"
        for row in self._rows(self.get("jobs/", **params), limit):
            yield Job(self, row)

    def runs(
        self,
        project: str,
        *,
        columns: list[str] | None = None,
        sort: str | None = None,
        filters: list[str] | None = None,
        size: int | None = None,
        limit: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The project's runs table, one dict per run ({"id": ..., column: value}), fetched a
        page (`size`, at most 200) at a time as you iterate.

        The page's parameters: `columns` (name, user, state, created, loss_last, loss_best,
        eval_best, throughput, mfu, gpu_hours, duration, p.<setting>; default the page's),
        `sort` ("-loss_best", "p.lr"), `filters` (["loss_best<2.5", "p.lr=0.001",
        "name~llama"]). `pandas.DataFrame(portal.runs("vision"))` makes it a table.
        """
        params = {
            "cols": ",".join(columns) if columns else None,
            "sort": sort,
            "f": list(filters) if filters else None,
            "size": size,
        }
        yield from self._rows(self.get(f"projects/{quote(project)}/runs/", **params), limit)

    def _rows(self, page: dict[str, Any], limit: int | None) -> Iterator[dict[str, Any]]:
        """The rows of a page and of every `next` page after it, at most `limit`."""
        count = 0
        while True:
            for row in page["results"]:
                if limit is not None and count >= limit:
                    return
                count += 1
                yield row
            if not page["next"]:
                return
            page = self.request("GET", page["next"]).json()

    def submit(
        self,
        *,
        project: str,
        cluster: str,
        name: str,
        command: str,
        template: str = "command",
        nodes: int = 1,
        gpus_per_node: int = 1,
        time_limit: timedelta | int | float | str = 3600,
        code: str | os.PathLike[str] | None = None,
        code_max_bytes: int = DEFAULT_MAX_BYTES,
        params: dict[str, Any] | None = None,
        **spec: Any,
    ) -> "Job":
        """Submit a job: the portal checks it like its form does (PortalError says what to fix).

        `code="."` packs that directory (what .gitignore keeps, at most `code_max_bytes`),
        uploads it unless the project has it already, and runs the command inside it; from
        a git checkout the job records its commit, branch and uncommitted diff. `params`
        are the run's settings ({"lr": 3e-4, "seed": 1}: numbers, booleans, text), shown
        and searchable in the project's runs table beside the command's `--key value`
        flags. More spec fields as keywords: cpus_per_task, memory_mb, partition, setup,
        model_params, total_steps, metric_patterns, code_git_url and code_git_ref (the
        portal fetches).
        """
        from portal_client.job import Job

        if code is not None:
            spec.update(self.upload_code(project, code, max_bytes=code_max_bytes))
        if params:
            spec["params"] = params
        body = _job_body(project, cluster, name, command, template, nodes, gpus_per_node)
        return Job(self, self.post("jobs/", {**body, "time_limit": _duration(time_limit), **spec}))

    def session_run(
        self,
        session: int,
        *,
        command: str,
        project: str | None = None,
        time_limit: timedelta | int | float | str | None = None,
        params: dict[str, Any] | None = None,
        **spec: Any,
    ) -> "Job":
        """Submit a training job from your running JupyterLab session `session` (its id): its
        working directory, packed on the cluster now (what .gitignore keeps, as `code="."`
        packs), runs `command` there with the session's environment and resources.

        `project` is a slug of yours (the session's if not given); the run's cluster is the
        session's. Any other spec field as a keyword changes the run's: name, nodes,
        gpus_per_node, time_limit, setup, partition, total_steps, metric_patterns. `params`
        as in submit.
        """
        from portal_client.job import Job

        body: dict[str, Any] = {"command": command, **spec}
        if project is not None:
            body["project"] = project
        if time_limit is not None:
            body["time_limit"] = _duration(time_limit)
        if params:
            body["params"] = params
        path = f"jobs/{int(session)}/session-run/"
        return Job(self, self.request("POST", path, json=body, timeout=SESSION_RUN_TIMEOUT).json())

    def expected_starts(
        self,
        *,
        project: str,
        cluster: str,
        name: str,
        command: str,
        template: str = "command",
        nodes: int = 1,
        gpus_per_node: int = 1,
        time_limit: timedelta | int | float | str = 3600,
        **spec: Any,
    ) -> list[dict[str, Any]]:
        """When this job, and a few alternatives (another cluster or partition, fewer GPUs, a
        shorter time limit), would start; nothing is submitted. One dict per option: its
        `label`, `expected` ("now", "in 12 min") and `expected_at` (ISO time, None with a
        `problem`), Slurm's own answer `slurm` and the `basis` of the correction.
        """
        body = _job_body(project, cluster, name, command, template, nodes, gpus_per_node)
        answer = self.post("jobs/starts/", {**body, "time_limit": _duration(time_limit), **spec})
        return list(answer["options"])

    def sweep(
        self,
        *,
        project: str,
        cluster: str,
        name: str,
        command: str,
        space: dict[str, Any],
        max_trials: int,
        time_limit: timedelta | int | float | str = 3600,
        code: str | os.PathLike[str] | None = None,
        code_max_bytes: int = DEFAULT_MAX_BYTES,
        **options: Any,
    ) -> dict[str, Any]:
        """Start a sweep: `command` with `{lr}` where each setting of `space` goes, e.g.
        space={"lr": {"type": "float", "low": 1e-4, "high": 0.1, "log": True}}.

        `code="."` as in submit: every trial's job runs that one snapshot. More options as
        keywords: sampler, pruner, metric, direction, max_concurrent, first_trials, nodes,
        gpus_per_node, partition, setup, code_git_url and code_git_ref. Returns the sweep
        as the API answers it (its id, state and trials).
        """
        if code is not None:
            options.update(self.upload_code(project, code, max_bytes=code_max_bytes))
        body = {
            "project": project,
            "cluster": cluster,
            "name": name,
            "command": command,
            "space": space,
            "max_trials": max_trials,
            "time_limit": _duration(time_limit),
            **options,
        }
        sweep: dict[str, Any] = self.post("sweeps/", body)
        return sweep

    def upload_code(
        self, project: str, directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> dict[str, Any]:
        """Pack `directory` and store it in the project, once; the submission fields naming it."""
        packed = pack(directory, max_bytes=max_bytes)
        path = f"projects/{quote(project, safe='')}/code/"
        known = self.http.get(f"{path}{packed.sha256}/")
        if known.status_code == 404:
            files = {"archive": ("code.tar.gz", packed.data, "application/gzip")}
            self.request("POST", path, files=files)
        elif known.status_code >= 400:
            raise _error(known)
        fields: dict[str, Any] = {"code": packed.sha256}
        if packed.git is not None:
            fields.update(
                code_commit=packed.git.commit,
                code_branch=packed.git.branch,
                code_diff=packed.git.diff,
                code_diff_truncated=packed.git.diff_truncated,
            )
        return fields


def _job_body(
    project: str,
    cluster: str,
    name: str,
    command: str,
    template: str,
    nodes: int,
    gpus_per_node: int,
) -> dict[str, Any]:
    return {
        "project": project,
        "cluster": cluster,
        "name": name,
        "command": command,
        "template": template,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
    }
