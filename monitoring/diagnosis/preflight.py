"""An attempt its preflight ended (jobs.preflight): read its result, diagnose it, submit the
job again without the faulty nodes.

Registered before the failure watcher, which then finds the attempt diagnosed and leaves
it alone: a preflight failure is no restart of the user's. The node ledger's watcher
records each faulty node as a `preflight` signal, with the attempt as evidence.
"""

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from clusters.agent import AgentReply, FileRead, ListingRead
from clusters.slurm.hostlist import expand_nodes
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from jobs.preflight import (
    PREFLIGHT_MAX_BYTES,
    PREFLIGHT_TIMEOUT_S,
    PreflightReport,
    attempt_preflight_resubmit,
    preflight_report,
)
from jobs.rundir import PREFLIGHT_EXIT, PREFLIGHT_FILE, RunDir, file_key
from jobs.services import attempt_diagnosis_claim, attempt_diagnosis_store
from monitoring.diagnosis.diagnose import Diagnosis

logger = logging.getLogger(__name__)

# The preflight ends its attempt within its timeout and srun's margin of the start: an
# attempt running longer than this is past it, and its file is not read while it runs.
_WINDOW = timedelta(seconds=PREFLIGHT_TIMEOUT_S + 60)
# Pending too: a short preflight may end the attempt between two polls.
_LIVE = frozenset({State.PENDING, State.RUNNING, State.COMPLETING, State.UNKNOWN})
# The diagnosis's own key: the faulty nodes and why (the ledger blames each).
NODES_KEY = "preflight_nodes"


def _key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, PREFLIGHT_FILE)


def _ended_by_preflight(attempt: Attempt) -> bool:
    return (
        attempt.job.preflight
        and attempt.is_finished
        and attempt.diagnosed_at is None
        and attempt.exit_code == PREFLIGHT_EXIT
    )


def _wanted(attempt: Attempt, now: Any) -> bool:
    """Read while the preflight may still end the attempt, and once it ended by it: the
    attempt may end in the poll that reads its file, before the next one asks for it."""
    if not attempt.job.preflight or not attempt.run_dir or attempt.diagnosed_at is not None:
        return False
    if attempt.is_finished:
        return attempt.exit_code in (None, PREFLIGHT_EXIT)
    young = attempt.started_at is None or now - attempt.started_at < _WINDOW
    return attempt.state in _LIVE and young


def preflight_diagnosis(report: PreflightReport) -> dict[str, Any]:
    """The stored diagnosis: what the job page and the ledger read."""
    if report.faulty:
        found = Diagnosis(
            failure_class=FailureClass.PREFLIGHT,
            title="Preflight found a faulty node",
            explanation="Before the command started, the preflight found these nodes of the "
            "allocation faulty; the command did not run on this allocation.",
            fixes=("Nothing to change: the portal submits the job again without them.",),
            evidence=report.summary,
            node=next(iter(report.faulty)),
            exit_code=PREFLIGHT_EXIT,
        )
    else:
        found = Diagnosis(
            failure_class=FailureClass.PREFLIGHT,
            title="Preflight failed",
            explanation=f"The preflight failed before the command started: {report.unnamed}.",
            fixes=(f"Read {PREFLIGHT_FILE} and preflight.log in the run directory.",),
            exit_code=PREFLIGHT_EXIT,
        )
    return {**found.as_json(), NODES_KEY: dict(report.faulty)}


def preflight_nodes(diagnosis: dict[str, Any] | None) -> dict[str, str]:
    """The faulty nodes a stored preflight diagnosis names, and why."""
    nodes = (diagnosis or {}).get(NODES_KEY)
    if not isinstance(nodes, dict):
        return {}
    return {str(node): str(why) for node, why in nodes.items()}


def attempt_after_preflight(*, attempt: Attempt, text: str) -> None:
    """Diagnose an attempt its preflight ended (once) and submit its job again."""
    if not attempt_diagnosis_claim(attempt=attempt):
        return
    report = preflight_report(text, expand_nodes(attempt.node_list))
    attempt_diagnosis_store(
        attempt=attempt,
        failure_class=FailureClass.PREFLIGHT,
        diagnosis=preflight_diagnosis(report),
    )
    attempt_preflight_resubmit(attempt=attempt, report=report)


class PreflightWatcher:
    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        now = timezone.now()
        return [
            FileRead(
                key=_key(a),
                path=RunDir(a.run_dir).file(PREFLIGHT_FILE),
                limit=PREFLIGHT_MAX_BYTES,
            )
            for a in attempts
            if _wanted(a, now)
        ], []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        for attempt in attempts:
            chunk = reply.files.get(_key(attempt))
            if chunk is None or not _ended_by_preflight(attempt):
                continue
            text = chunk.data.decode("utf-8", "replace") if chunk.error is None else ""
            try:
                with transaction.atomic():
                    attempt_after_preflight(attempt=attempt, text=text)
            except Exception:  # one attempt's preflight must not stop the poll of the others
                logger.exception("preflight of attempt %s: not handled", attempt.pk)
        return set()
