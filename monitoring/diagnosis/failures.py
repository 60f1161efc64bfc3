"""After an attempt ends: list its checkpoints, diagnose it once its log is read, restart it.

Registered with the poller as a file watcher, after the log watcher: in the
same transaction as the poll that read the attempt's last bytes, the log tail
is complete, so the diagnosis sees what the job printed last.
"""

import logging

from django.db import transaction

from clusters.agent import AgentReply, FileRead, ListingRead
from clusters.slurm.hostlist import expand_nodes
from jobs.models import Attempt
from jobs.restart import attempt_restart
from jobs.rundir import STDOUT_FILE, file_key
from jobs.services import attempt_diagnosis_claim, attempt_diagnosis_store
from monitoring.checkpoints.chosen import restart_point
from monitoring.checkpoints.registry import checkpoints_ingest, listing_requests
from monitoring.diagnosis.diagnose import TAIL_BYTES, Diagnosis, diagnose
from monitoring.diagnosis.hang import hang_diagnosis
from monitoring.logs.store import log_read

logger = logging.getLogger(__name__)


def node_of_attempt(host: str, nodes: list[str]) -> str:
    """The Slurm node of the attempt a log's host name is (`gpu07.cluster` is `gpu07`), or ''.

    Only a node of the attempt can be excluded: torchrun and the kernel name hosts.
    """
    if host in nodes:
        return host
    short = host.split(".", 1)[0]
    return short if short and short in nodes else ""


def _log_tail(attempt: Attempt) -> str:
    # Stored bytes only: a finished attempt's log was read to its end before this runs.
    return log_read(attempt_id=attempt.pk, file=STDOUT_FILE, offset=-1, limit=TAIL_BYTES).text


def attempt_diagnose(*, attempt: Attempt) -> Diagnosis | None:
    """Diagnose an ended attempt once (claimed atomically) and store the result."""
    if not attempt_diagnosis_claim(attempt=attempt):
        return None
    found = hang_diagnosis(attempt=attempt) or diagnose(
        state=attempt.state,
        exit_code=attempt.exit_code,
        log_tail=_log_tail(attempt),
        node_list=expand_nodes(attempt.node_list),
    )
    if found is not None:
        attempt_diagnosis_store(
            attempt=attempt, failure_class=found.failure_class, diagnosis=found.as_json()
        )
    return found


def attempt_after_failure(*, attempt: Attempt) -> None:
    """Diagnose, then restart from the attempt's latest checkpoint if the policy says so."""
    found = attempt_diagnose(attempt=attempt)
    if found is None:
        return
    resume_from, resume_step = restart_point(attempt=attempt)
    failed_node = node_of_attempt(found.node, expand_nodes(attempt.node_list))
    attempt_restart(
        attempt=attempt,
        failure_class=found.failure_class,
        resume_from=resume_from,
        resume_step=resume_step,
        failed_node=failed_node,
    )


class FailureWatcher:
    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        return [], listing_requests(attempts)

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        checkpoints_ingest(attempts, reply)
        for attempt in attempts:
            if not attempt.is_finished or attempt.diagnosed_at is not None:
                continue
            chunk = reply.files.get(file_key(attempt.uuid, STDOUT_FILE))
            if chunk is not None and chunk.more:
                continue  # the log is not read to its end yet: diagnose on a later poll
            try:
                with transaction.atomic():
                    attempt_after_failure(attempt=attempt)
            except Exception:  # a bug here must not stop the poll of every other job
                logger.exception("diagnosis or restart of attempt %s failed", attempt.pk)
        return set()
