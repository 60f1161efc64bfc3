"""One job: its state, log, metrics, and what can be done with it."""

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from portal_client.progress import Progress
from portal_client.rules import rule_body
from portal_client.sse import parse_events

if TYPE_CHECKING:
    from portal_client.client import Portal

FINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}
)
# A dropped stream is reopened this many times in a row before giving up.
MAX_RECONNECTS = 20


class Job:
    """A job as the portal last described it; `refresh()` reads it again."""

    def __init__(self, portal: "Portal", data: dict[str, Any]) -> None:
        self.portal = portal
        self.data = data

    def __repr__(self) -> str:
        return f"<Job {self.id} {self.name!r} {self.state}>"

    @property
    def id(self) -> int:
        return int(self.data["id"])

    @property
    def name(self) -> str:
        return str(self.data["name"])

    @property
    def state(self) -> str:
        return str(self.data["state"])

    @property
    def is_finished(self) -> bool:
        """Ended, and all it wrote read by the portal (its logs and metrics are whole)."""
        return self.state in FINAL_STATES and bool(self.data.get("output_complete", True))

    @property
    def attempt(self) -> int:
        """The number of the job's latest attempt."""
        return int(self.data.get("latest_attempt") or 1)

    def refresh(self) -> "Job":
        self.data = self.portal.get(f"jobs/{self.id}/")
        return self

    # --- actions ------------------------------------------------------------------------

    def cancel(self) -> "Job":
        """Cancel the job (its submitter or a project owner); returns it, refreshed."""
        self.data = self.portal.post(f"jobs/{self.id}/cancel/")
        return self

    def clone(self, **changes: Any) -> "Job":
        """Submit a copy, with any spec fields changed (e.g. nodes=4)."""
        return Job(self.portal, self.portal.post(f"jobs/{self.id}/clone/", changes))

    def resume(
        self, *, step: int | None = None, attempt: int | None = None, checkpoint: str = ""
    ) -> "Job":
        """Resume the ended job from one of its checkpoints (its step, or its attempt and
        name): its next attempt starts there. Returns the job, refreshed."""
        choice = _checkpoint_choice(step, attempt, checkpoint)
        self.data = self.portal.post(f"jobs/{self.id}/resume/", choice)
        return self

    def fork(
        self,
        *,
        step: int | None = None,
        attempt: int | None = None,
        checkpoint: str = "",
        **changes: Any,
    ) -> "Job":
        """Start a new job from one of this job's checkpoints, with any spec fields changed
        (e.g. command="python train.py --lr 3e-4", nodes=2, project="other")."""
        choice = _checkpoint_choice(step, attempt, checkpoint)
        return Job(self.portal, self.portal.post(f"jobs/{self.id}/fork/", {**changes, **choice}))

    # --- checkpoints and their retention rule (docs/checkpoints.md) ----------------------

    def checkpoints(self) -> dict[str, Any]:
        """The checkpoint index: `checkpoints` (step, size, metrics, `protected`, `rule_deletes`),
        the `rule` in effect and its `rule_scope`, `storage_bytes` and the `deletions` made."""
        result: dict[str, Any] = self.portal.get(f"jobs/{self.id}/checkpoints/")
        return result

    def checkpoint_preview(
        self,
        *,
        keep_last: int | None = None,
        keep_best: int | None = None,
        best_metric: str = "",
        best_mode: str = "min",
        older_than_days: float | None = None,
    ) -> dict[str, Any]:
        """What a rule with these values (none: the rule in effect) would delete: `delete`
        (ids), `delete_bytes`, `rule` (in words); nothing is deleted."""
        rule = rule_body(
            keep_last=keep_last, keep_best=keep_best, best_metric=best_metric,
            best_mode=best_mode, older_than_days=older_than_days,
        )  # fmt: skip
        # Any value given asks for a preview of that rule, the mode alone too: sent with others.
        given = {k: v for k, v in rule.items() if v not in (None, "") and k != "best_mode"}
        params = {**given, "best_mode": best_mode} if given else {}
        result: dict[str, Any] = self.portal.get(f"jobs/{self.id}/checkpoints/preview/", **params)
        return result

    def delete_checkpoints(self, ids: list[int]) -> list[dict[str, Any]]:
        """Delete these checkpoints (ids from `checkpoints()`) on the cluster: the job's
        submitter or a project owner. One record each, removed or why not."""
        answer = self.portal.post(f"jobs/{self.id}/checkpoints/delete/", {"ids": list(ids)})
        return list(answer["deletions"])

    def apply_checkpoint_rule(self) -> list[dict[str, Any]]:
        """Apply the rule in effect now; what it deleted."""
        return list(self.portal.post(f"jobs/{self.id}/checkpoints/apply/")["deletions"])

    def checkpoint_rule(self) -> dict[str, Any] | None:
        """The job's own rule (None: none; the rule in effect is in `checkpoints()`)."""
        rule: dict[str, Any] | None = self.portal.get(f"jobs/{self.id}/checkpoints/rule/")["rule"]
        return rule

    def set_checkpoint_rule(
        self,
        *,
        keep_last: int | None = None,
        keep_best: int | None = None,
        best_metric: str = "",
        best_mode: str = "min",
        older_than_days: float | None = None,
    ) -> dict[str, Any] | None:
        """Set the job's own rule (its submitter or a project owner); all empty clears it."""
        body = rule_body(
            keep_last=keep_last, keep_best=keep_best, best_metric=best_metric,
            best_mode=best_mode, older_than_days=older_than_days,
        )  # fmt: skip
        rule: dict[str, Any] | None = self.portal.post(f"jobs/{self.id}/checkpoints/rule/", body)[
            "rule"
        ]
        return rule

    @property
    def parent(self) -> int | None:
        """A fork's parent job id (its checkpoint: parent_step, data["parent_checkpoint"])."""
        parent = self.data.get("parent")
        return int(parent) if parent is not None else None

    @property
    def parent_step(self) -> int | None:
        step = self.data.get("parent_step")
        return int(step) if step is not None else None

    @property
    def note(self) -> str:
        return str(self.data.get("note") or "")

    @property
    def tags(self) -> list[str]:
        return list(self.data.get("tags") or [])

    @property
    def group(self) -> str:
        return str(self.data.get("group") or "")

    def annotate(
        self,
        *,
        note: str | None = None,
        tags: list[str] | None = None,
        group: str | None = None,
    ) -> "Job":
        """Write the run's note, tags (the whole set) or group; None leaves one as it is.

        Its submitter or a project owner may; a refused value raises PortalError naming it.
        """
        given = {"note": note, "tags": tags, "group": group}
        changes = {key: value for key, value in given.items() if value is not None}
        answer = self.portal.request("PATCH", f"jobs/{self.id}/notes/", json=changes).json()
        self.data.update({key: answer[key] for key in given})
        return self

    def wait(
        self, timeout: float | None = None, *, poll: float = 2.0, progress: bool | None = None
    ) -> "Job":
        """Wait until the job ends and its output is read, showing its state and step;
        TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        display = Progress(enabled=progress)
        try:
            while True:
                self.refresh()
                display.update(self.name, self.state, self._step(), self.data.get("total_steps"))
                if self.is_finished:
                    return self
                if deadline is not None and time.monotonic() >= deadline:
                    still = self.state if self.state not in FINAL_STATES else "reading output"
                    raise TimeoutError(f"job {self.id} is still {still} after {timeout} s")
                time.sleep(poll)
        finally:
            display.close()

    def _step(self) -> float | None:
        try:
            points = self.portal.get(
                f"jobs/{self.id}/attempts/{self.attempt}/series/loss", max_points=2
            )
        except Exception:  # no loss yet, or a transient error: no step shown
            return None
        return points["x"][-1] if points["x"] else None

    # --- what it did ---------------------------------------------------------------------

    def attempts(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.portal.get(f"jobs/{self.id}/attempts/")
        return result

    def events(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.portal.get(f"jobs/{self.id}/events/")
        return result

    def _attempt_path(self, attempt: int | None) -> str:
        return f"jobs/{self.id}/attempts/{attempt or self.attempt}"

    def logs(
        self,
        follow: bool = False,
        *,
        attempt: int | None = None,
        file: str = "stdout.log",
        offset: int = 0,
        lines: int | None = None,
    ) -> Any:
        """The log as text; with follow=True an iterator of new text until the job ends.

        `lines` gives only the last N lines (not with follow). A followed log survives
        dropped connections (it resumes from the last byte received) and goes on into
        the next attempt when the job is restarted.
        """
        if follow:
            if attempt is None:
                return self._follow_attempts(file, offset)
            return self._follow_log(attempt, file, offset)
        path = f"{self._attempt_path(attempt)}/log"
        if lines is not None:
            return self.portal.get(path, file=file, lines=lines)["text"]
        parts = []
        while True:
            piece = self.portal.get(path, file=file, offset=offset, limit=1024 * 1024)
            parts.append(piece["text"])
            if piece["end"] >= piece["size"] or piece["end"] == piece["offset"]:
                return "".join(parts)
            offset = piece["end"]

    def _follow_attempts(self, file: str, offset: int) -> Iterator[str]:
        # A restart is a new attempt with its own log: follow on into it.
        attempt = self.attempt
        while True:
            yield from self._follow_log(attempt, file, offset)
            self.refresh()
            if self.attempt <= attempt:
                return
            attempt, offset = self.attempt, 0

    def _follow_log(self, attempt: int | None, file: str, offset: int) -> Iterator[str]:
        path = f"{self._attempt_path(attempt)}/log/stream"
        last_id = str(offset)
        for event in self._stream(path, {"file": file}, last_id):
            if event.event == "log":
                yield event.data["text"]

    def follow_metrics(
        self, names: list[str] | None = None, *, attempt: int | None = None
    ) -> Iterator[dict[str, Any]]:
        """New metric points as they come ({"name", "x", "y"} each) until the attempt ends."""
        path = f"{self._attempt_path(attempt)}/metrics/stream"
        params = {"name": names} if names else {}
        for event in self._stream(path, params, None):
            if event.event == "points":
                for x, y in zip(event.data["x"], event.data["y"], strict=True):
                    yield {"name": event.data["name"], "x": x, "y": y}

    def _stream(self, path: str, params: dict[str, Any], last_id: str | None) -> Iterator[Any]:
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                with self.portal.http.stream(
                    "GET", path, params=params, headers=headers, timeout=httpx.Timeout(60.0)
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        from portal_client.client import _error

                        raise _error(response)
                    for event in parse_events(response.iter_lines()):
                        failures = 0
                        if event.id is not None:
                            last_id = event.id
                        if event.event == "end":
                            return
                        yield event
            except (httpx.TransportError, httpx.StreamError):
                failures += 1
                if failures > MAX_RECONNECTS:
                    raise
                time.sleep(min(0.5 * failures, 5.0))
            # The server ends a stream after a while; open it again from the last id.

    def metric_names(self, *, attempt: int | None = None) -> list[str]:
        result: list[str] = self.portal.get(f"{self._attempt_path(attempt)}/series")["names"]
        return result

    def metrics(
        self, name: str = "loss", *, attempt: int | None = None, max_points: int = 2000
    ) -> Any:
        """One series as rows {"step", name}: a pandas DataFrame if pandas is installed."""
        data = self.portal.get(
            # A name is what the job printed: one percent-encoded path segment.
            f"{self._attempt_path(attempt)}/series/{quote(name, safe='')}",
            max_points=max_points,
        )
        rows = [{"step": x, name: y} for x, y in zip(data["x"], data["y"], strict=True)]
        try:
            import pandas  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            return rows
        return pandas.DataFrame(rows, columns=["step", name])

    def gpus(self, *, attempt: int | None = None, max_points: int = 500) -> list[dict[str, Any]]:
        """GPU samples by node and GPU: [{"node", "index", "metrics": {name: {"x", "y"}}}]."""
        body = self.portal.get(f"{self._attempt_path(attempt)}/gpus", max_points=max_points)
        result: list[dict[str, Any]] = body["gpus"]
        return result


def _checkpoint_choice(step: int | None, attempt: int | None, checkpoint: str) -> dict[str, Any]:
    choice: dict[str, Any] = {"step": step, "attempt": attempt, "checkpoint": checkpoint}
    return {key: value for key, value in choice.items() if value not in (None, "")}
