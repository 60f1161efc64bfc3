"""The ledger's watcher in the poll: each ended, diagnosed attempt's word on its nodes."""

import logging

from clusters.agent import AgentReply, FileRead, ListingRead
from jobs.models import Attempt
from monitoring.models import NodeEvent
from monitoring.nodes.ledger import attempt_nodes_record

logger = logging.getLogger(__name__)


class NodeLedgerWatcher:
    """After the failure watcher: it reads the diagnosis that watcher stored."""

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        return [], []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        ended = [a for a in attempts if a.is_finished and a.diagnosed_at is not None]
        if not ended:  # most polls: nothing ended, no query
            return set()
        recorded = set(
            NodeEvent.objects.filter(attempt__in=ended).values_list("attempt_id", flat=True)
        )
        for attempt in ended:
            if attempt.pk in recorded:
                continue
            try:
                attempt_nodes_record(attempt=attempt, cluster=attempt.job.cluster)
            except Exception:  # one attempt's ledger entry must not stop the poll
                logger.exception("node ledger entry of attempt %s failed", attempt.pk)
        return set()
